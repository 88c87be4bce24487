// Running another program and capturing what it prints: the harness's peer engines
// (harness/peer_llama.h runs llama-bench this way). POSIX fork/exec, no shell: arguments are
// passed as given, nothing is interpreted.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace fish {

struct ProcessResult {
  std::string out, err;   // everything the program wrote to stdout / stderr (each capped)
  int exit_code = -1;     // when it exited normally; else -1
  int term_signal = 0;    // the signal that ended it (0: it exited)
  bool timed_out = false; // killed (SIGKILL) after the timeout
  double wall_s = 0;
  bool ok() const { return exit_code == 0 && term_signal == 0 && !timed_out; }
  // "exited with status 1", "killed by signal 11 (SIGSEGV)", "timed out after 30 s".
  std::string how_it_ended() const;
};

// Runs argv[0] (a path: no PATH search) with argv[1..], stdin from /dev/null, and waits at most
// timeout_s seconds (then SIGKILL). Each stream keeps its first max_bytes bytes. Errors: an empty
// argv, a program that does not exist, is not a regular file or cannot be executed (naming the
// path and errno's text), or a failing fork/pipe.
Result<ProcessResult> run_process(const std::vector<std::string>& argv, double timeout_s,
                                  size_t max_bytes = size_t(64) << 20);

}  // namespace fish
