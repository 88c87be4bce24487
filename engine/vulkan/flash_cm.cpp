// The cooperative-matrix flash-attention tile (flash_cm.h).
#include "engine/vulkan/flash_cm.h"

#include "engine/vulkan/vk_context.h"
#include "fish_vk_span.h"

namespace fish::vk {

uint32_t FlashCmTile::shared_bytes() const {
  const uint32_t q = queries(), ld = head_dim + 8;  // as the shaders' LD, LP, LS
  if (variant == 2) return 2 * (4 * keys * ld + q * (keys + 8)) + 4 * q * (keys + 4);
  return 2 * (q * ld + 2 * keys * ld + q * (keys + 8)) + 4 * (q * keys + 3 * q);
}

std::vector<uint32_t> FlashCmTile::constants() const {
  return {threads(), subgroup, cm, cn, ck, head_dim, subgroups, keys, threads()};
}

std::optional<FlashCmTile> flash_cm_tile(uint32_t m, uint32_t n, uint32_t k, uint32_t subgroup,
                                         uint32_t max_shared, uint32_t max_threads,
                                         uint32_t head_dim, uint32_t variant) {
  if (m == 0 || n == 0 || k == 0 || subgroup == 0 || head_dim == 0 ||
      head_dim > FISH_SPAN_MAX_HEAD || head_dim % n != 0 || head_dim % k != 0 ||
      head_dim % 4 != 0 || (m * n) % subgroup != 0)
    return std::nullopt;
  if (variant == 2 && subgroup % m != 0 && m % subgroup != 0) return std::nullopt;
  const uint32_t row_lanes = (subgroup + m - 1) / m;  // variant 2's lanes a softmax row
  const struct {
    uint32_t subgroups, keys;
  } candidates[] = {{4, 32}, {4, 16}, {2, 32}, {2, 16}, {1, 16}, {4, 8}, {2, 8}, {1, 8}};
  for (const auto& c : candidates) {
    if (variant != 2 && c.keys < 16) break;  // variant 1's list ends at 1 x 16
    if (c.keys % n != 0 || c.keys % k != 0) continue;
    if (variant == 2 && (c.keys % (4 * row_lanes) != 0 || c.subgroups * m > 4 * c.keys)) continue;
    const FlashCmTile t{subgroup, m, n, k, head_dim, c.subgroups, c.keys, variant};
    if (t.shared_bytes() <= max_shared && t.threads() <= max_threads) return t;
  }
  return std::nullopt;
}

std::optional<FlashCmTile> pick_flash_cm_tile(const VkContext& ctx, uint32_t head_dim,
                                              uint32_t variant) {
  const DeviceFeatures& f = ctx.features();
  if (ctx.options().flash_cm == 0 || !f.coopmat) return std::nullopt;
  auto tile = [&](uint32_t v) {
    return flash_cm_tile(f.coopmat_m, f.coopmat_n, f.coopmat_k, f.subgroup_size, f.max_shared_bytes,
                         ctx.limits().maxComputeWorkGroupInvocations, head_dim, v);
  };
  std::optional<FlashCmTile> t = tile(variant);
  if (!t && variant == 2) t = tile(1);  // no variant-2 tile on this shape: variant 1's
  return t;
}

PipelineSpec flash_cm_spec(const VkContext& ctx, const FlashCmTile& t) {
  PipelineSpec s;
  s.module = t.module();
  s.constants = t.constants();
  // The shader counts on threads() / subgroup subgroups: where the size may vary, require it.
  const DeviceFeatures& f = ctx.features();
  if (f.subgroup_size_control && f.subgroup_min != f.subgroup_max) s.subgroup_size = t.subgroup;
  return s;
}

}  // namespace fish::vk
