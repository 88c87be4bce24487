// The context line of a results file: what was measured where (format "fish-results/1"): commit
// and dirty flag, build type and flags, compiler, CPU model and features, GPU, driver and Vulkan
// version, OS, host, plus the stream-read bandwidth measured in the same run. The C++ version of
// scripts/context.sh, so every run records it without a shell.
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

// Every key of the context line except stream_GBps (the caller measures it). The commit comes
// from env FISH_COMMIT, else `git rev-parse HEAD` in the working directory ("unknown" outside a
// checkout, dirty then null); GPU facts from `vulkaninfo --summary`, else `nvidia-smi` (null
// when neither reports one).
nlohmann::json run_context(const Experiment& e, const RunIdentity& id);

}  // namespace fish
