// The context line of a results file: what was measured where (format "fish-results/1"): the
// binary's commit, dirty flag and diff digest, build type and flags, compiler (all baked in at
// build time, base/build_info.h), every FISH_* knob that is set (base/env_knobs.h), CPU model
// and features, GPU, driver and Vulkan version, OS, host, plus the stream-read bandwidth measured
// in the same run. The C++ version of scripts/context.sh, so every run records it without a shell.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/experiment.h"

namespace fish {

struct RunIdentity {
  std::string run_id;  // 16 hex digits, random per invocation
  int64_t n_cells = 0;
  int shard_index = 0, shard_count = 1;
};

// A fresh random run id (16 hex digits).
std::string new_run_id();

// Every key of the context line except stream_GBps (the caller measures it). The commit is the
// binary's ("unknown" for a build outside git, dirty then null); "env" maps each set FISH_* knob
// to its value; GPU facts from `vulkaninfo --summary`, else `nvidia-smi` (null when neither
// reports one).
nlohmann::json run_context(const Experiment& e, const RunIdentity& id);

}  // namespace fish
