// Exit codes of the `fish` CLI (documented in docs/commands.md and `fish --help`).
#pragma once

namespace fish {

enum ExitCode : int {
  kExitOk = 0,           // success
  kExitUsage = 1,        // usage error or bad input (file, model, experiment)
  kExitCellsFailed = 2,  // a sweep finished but some cells failed (error rows written)
  kExitGateFailed = 3,   // the regression gate found a regression
};

}  // namespace fish
