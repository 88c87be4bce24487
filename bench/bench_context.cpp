// Linked into every fish_*_bench executable: the google-benchmark JSON context names the
// binary's own provenance (base/build_info.h), so scripts/run_bench.sh need not ask git or the
// build folder: commit (commit_label), build (type and flags), compiler.
#include <benchmark/benchmark.h>

#include <string>

#include "base/build_info.h"

namespace {

// Runs before main (benchmark_main's); AddCustomContext only fills a map.
const bool kContextAdded = [] {
  const fish::BuildInfo& b = fish::build_info();
  benchmark::AddCustomContext("commit", fish::commit_label());
  benchmark::AddCustomContext("build",
                              std::string(b.build_type) + " " + std::string(b.build_flags));
  benchmark::AddCustomContext("compiler", std::string(b.compiler));
  return true;
}();

}  // namespace
