// The exception boundaries of the CLI: the `fish` command (main) and each cell of `fish run`.
//
// Engine code reports untrusted input as Result errors; what still throws is the C++ runtime
// (std::bad_alloc when memory runs out past the estimate, std::length_error, a library's
// exception). At a boundary the exception becomes a message: main prints it and exits 1; a
// cell writes an error row per path it had left and the sweep goes on (the exit code is 2, and
// --resume --retry-errors runs the cell again).
#pragma once

#include <string>

namespace fish {

// Inside a catch block: what was thrown, as one line for a message or an error row:
//   "out of memory (std::bad_alloc) (hint: a smaller n_ctx or n_batch, or FISH_RAM_BUDGET_MB ...)"
//   "unexpected exception (std::runtime_error): <what()>"
// Precondition: called while an exception is being handled.
std::string describe_current_exception();

}  // namespace fish
