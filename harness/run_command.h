// `fish run EXP.json [--dry-run] [--resume] [--out DIR] [--shard i/N] [--help-fields]`: runs an
// experiment's cells (harness/experiment.h) and writes one results row per cell and path
// (harness/results_writer.h), then the CSV / Markdown renderings.
//
// Per cell, every path listed in measure.paths gets one row: "ok" with its metrics, "error" with
// the reason (model missing, an isa the CPU lacks, n_prompt + n_gen beyond n_ctx, a quality
// failure, ...; the sweep goes on and the exit code is 2 at the end), or "skipped" for a path this
// build cannot run (gpu without a Vulkan backend). --resume skips (cell, path) pairs whose latest
// row is ok or error (--retry-errors: ok only), and skipped ones while the path is unavailable.
// The exit code is 2 while any (cell, path) of the run's shard has an error as its latest row.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "harness/experiment.h"

namespace fish {

struct Shard {
  int index = 0;
  int count = 1;
};

// The shard this process runs: `flag` ("i/N", 0 <= i < N) when given; else from the scheduler's
// environment: SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN (0 when unset) of
// SLURM_ARRAY_TASK_COUNT, or JOB_COMPLETION_INDEX (Kubernetes indexed jobs) of FISH_SHARD_COUNT;
// else 0/1. A shard runs the cells with index % N == i. `env` reads a variable (nullptr: unset).
Result<Shard> resolve_shard(std::string_view flag,
                            const std::function<const char*(const char*)>& env);

struct RunOptions {
  std::string experiment_path;
  bool dry_run = false;
  bool resume = false;
  bool retry_errors = false;             // with resume: error rows are not finished
  std::string out_dir;                   // empty: the experiment's output.dir
  std::string shard;                     // "i/N" or empty
  int64_t max_cells = kDefaultMaxCells;  // a larger cross product is refused at planning
};

// Runs (or with dry_run lists) the experiment; returns the process exit code (harness/
// exit_codes.h). Progress and messages go to stderr, the dry-run listing to stdout.
int run_experiment(const RunOptions& o);

}  // namespace fish
