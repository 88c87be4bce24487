// Host memory a session needs, and the host memory this process can get, compared before the
// session allocates anything: a configuration that cannot fit is refused with what it needs and
// what there is, instead of ending the process with std::bad_alloc:
//   "session: n_ctx 1048576 needs 45.1 GiB of host memory (KV 45.0 GiB, attention scores
//    36.0 MiB, work buffers 11.2 MiB), have 19.8 GiB (MemAvailable) (hint: a smaller n_ctx ...)"
// The device side has its own budget: a GPU placement reserves the span's KV + arena under the
// backend's ceiling before it places a layer (engine/gpu_placement.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace fish {

// What a session allocates on the host, in bytes.
struct SessionMemory {
  uint64_t kv = 0;       // K and V of every layer (a span that fails falls back to host KV)
  uint64_t scores = 0;   // attention scratch: n_ctx floats per head or per thread's query group
  uint64_t buffers = 0;  // per-token work buffers x n_batch, activations, logits, RoPE tables
  uint64_t int4 = 0;     // w4a8 / w4a16 packed copies of the weights (0 on other paths)
  uint64_t x16 = 0;      // x16 copies a deferred repack makes for this session (ModelLoadOptions)
  uint64_t total() const { return kv + scores + buffers + int4 + x16; }
};

// The host memory available to this process: the smallest of MemAvailable (/proc/meminfo), the
// cgroup's memory.max - memory.current, RLIMIT_AS - the address space in use, and
// FISH_RAM_BUDGET_MB; `source` names the one that binds ("MemAvailable", "FISH_RAM_BUDGET_MB",
// ...). Errors: FISH_RAM_BUDGET_MB is not a positive integer.
struct HostMemory {
  uint64_t bytes = 0;
  std::string source;
};
Result<HostMemory> host_memory_available();

// "45.1 GiB", "36.0 MiB", "512 B".
std::string bytes_text(uint64_t n);

// Success when `need` fits in `have`; else the error above, `what` naming the configuration
// ("n_ctx 1048576, n_batch 256") and `hint` what to change.
Status check_host_memory(const SessionMemory& need, const HostMemory& have, std::string_view what,
                         std::string_view hint);

// The MemAvailable line of /proc/meminfo text, in bytes (nullopt when absent). For tests.
std::optional<uint64_t> parse_mem_available(std::string_view meminfo);

}  // namespace fish
