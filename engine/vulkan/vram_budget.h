// The device-memory rules of the seed ("Budgets and knobs") as plain arithmetic, so they are
// testable without a device of a given size:
//   free     = heap budget - heap usage (VK_EXT_memory_budget), else 80% of the heap minus
//              FISH's own allocations (fallback_free);
//   ceiling  = FISH_VRAM_BUDGET_MB, else 85% of free when the device opens (FISH's own bytes:
//              weights + scratch + span buffers);
//   headroom = max(256 MB, 10% of the heap): an allocation leaving less free is refused (below
//              ~64 MB free, WDDM demoted weights to system memory and kernels halved in speed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fish::vk {

struct VramBudget {
  uint64_t heap_bytes = 0;
  uint64_t ceiling_bytes = 0;
  uint64_t headroom_bytes = 0;
  bool ceiling_from_env = false;  // FISH_VRAM_BUDGET_MB set the ceiling
  bool ceiling_from_run = false;  // a run's ceiling (under(): the experiment's vram_budget_mb)

  static VramBudget at_open(uint64_t heap_bytes, uint64_t free_bytes,
                            std::optional<uint64_t> env_budget_bytes);
  // These rules under a run's own ceiling (UploadOptions::budget_bytes, fish run's
  // vram_budget_mb): run_bytes, capped by FISH_VRAM_BUDGET_MB when that is set (the environment
  // emulates the card and keeps overriding); nullopt: these rules as they are. A value: the
  // budget is never changed, each allocation asks under the ceiling its caller passes.
  VramBudget under(std::optional<uint64_t> run_bytes) const;
  // Free bytes without VK_EXT_memory_budget.
  static uint64_t fallback_free(uint64_t heap_bytes, uint64_t own_bytes);

  // Why allocating `bytes` more is refused with `own_bytes` resident and `free_bytes` free on the
  // device; empty when it is allowed. The message gives MB asked, resident, and the limit hit.
  std::string refusal(uint64_t bytes, uint64_t own_bytes, uint64_t free_bytes) const;
  // The largest allocation refusal() allows now.
  uint64_t allocatable(uint64_t own_bytes, uint64_t free_bytes) const;
};

}  // namespace fish::vk
