// The non-experiment inputs of `fish report`: google-benchmark JSON files (scripts/run_bench.sh
// writes them with the measurement context embedded) and command-run folders (results/runs/NAME/:
// a context.txt of key=value lines plus captured command outputs).
#pragma once

#include <string>

#include "base/result.h"

namespace fish {

// "### <file stem>", a context line (commit, build, compiler, cpu, gpu, os, date) and one table
// row per benchmark: repetitions, median time [min, max], CV (population), bytes/s and every
// numeric user counter (medians over repetitions), in the order the benchmarks ran; errored
// benchmarks are listed below the table. Errors: unreadable file, not JSON, no "benchmarks".
Result<std::string> render_gbench_section(const std::string& path);

// "### <folder name>", the context line from context.txt, the `fish ...` stats lines and
// `Elapsed` lines of every *.txt in name order (context.txt and machine.txt excepted), then every
// *.md but README.md in name order as it is (result tables written by scripts).
// Errors: not a readable folder.
Result<std::string> render_command_runs_section(const std::string& dir);

}  // namespace fish
