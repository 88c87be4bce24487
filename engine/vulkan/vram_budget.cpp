// Device-memory budget arithmetic (vram_budget.h).
#include "engine/vulkan/vram_budget.h"

#include <algorithm>

#include <fmt/format.h>

namespace fish::vk {
namespace {
constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr uint64_t kMinHeadroom = 256 * kMiB;
double mb(uint64_t b) {
  return double(b) / double(kMiB);
}
}  // namespace

VramBudget VramBudget::at_open(uint64_t heap_bytes, uint64_t free_bytes,
                               std::optional<uint64_t> env_budget_bytes) {
  VramBudget b;
  b.heap_bytes = heap_bytes;
  b.headroom_bytes = std::max<uint64_t>(kMinHeadroom, heap_bytes / 10);
  b.ceiling_from_env = env_budget_bytes.has_value();
  b.ceiling_bytes = env_budget_bytes ? *env_budget_bytes : free_bytes / 100 * 85;
  return b;
}

VramBudget VramBudget::under(std::optional<uint64_t> run_bytes) const {
  VramBudget b = *this;
  b.ceiling_from_run = run_bytes.has_value() && (!ceiling_from_env || *run_bytes < ceiling_bytes);
  if (b.ceiling_from_run) b.ceiling_bytes = *run_bytes;
  return b;
}

uint64_t VramBudget::fallback_free(uint64_t heap_bytes, uint64_t own_bytes) {
  const uint64_t usable = heap_bytes / 10 * 8;
  return usable > own_bytes ? usable - own_bytes : 0;
}

std::string VramBudget::refusal(uint64_t bytes, uint64_t own_bytes, uint64_t free_bytes) const {
  if (own_bytes + bytes > ceiling_bytes)
    return fmt::format("{:.1f} MB asked, {:.1f} MB resident, budget {:.1f} MB ({})", mb(bytes),
                       mb(own_bytes), mb(ceiling_bytes),
                       ceiling_from_run   ? "vram_budget_mb"
                       : ceiling_from_env ? "FISH_VRAM_BUDGET_MB"
                                          : "85% of free at open");
  if (free_bytes < bytes + headroom_bytes)
    return fmt::format(
        "{:.1f} MB asked would leave {:.1f} MB free, below the headroom of {:.1f} MB "
        "(max(256 MB, 10% of the heap))",
        mb(bytes), mb(free_bytes > bytes ? free_bytes - bytes : 0), mb(headroom_bytes));
  return {};
}

uint64_t VramBudget::allocatable(uint64_t own_bytes, uint64_t free_bytes) const {
  const uint64_t under_ceiling = ceiling_bytes > own_bytes ? ceiling_bytes - own_bytes : 0;
  const uint64_t above_headroom = free_bytes > headroom_bytes ? free_bytes - headroom_bytes : 0;
  return std::min(under_ceiling, above_headroom);
}

}  // namespace fish::vk
