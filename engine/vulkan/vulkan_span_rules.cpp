// The span's attention split rules (vulkan_span.h): how many KV splits a dispatch of the
// one-pass, streamed and fused decode attention kernels takes, and where the streamed kernel
// fits. Pure functions of the shapes and the knobs, tested without a device.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/vulkan/vulkan_span.h"
#include "fish_vk_span.h"

namespace fish::vk {

uint32_t attention_splits(int forced, uint32_t n_head, uint32_t n_tok, uint32_t len_max,
                          uint32_t parts_cap) {
  const uint64_t rows = uint64_t(n_head) * n_tok;  // one-pass workgroups
  if (forced == 0 || rows == 0) return 0;
  const uint64_t fit = std::min<uint64_t>(FISH_SPAN_ATTN_MAX_SPLIT, parts_cap / rows);
  if (forced > 0) return uint32_t(std::min<uint64_t>(uint64_t(forced), fit));
  if (rows >= FISH_SPAN_ATTN_TARGET_WG) return 0;
  // Enough workgroups to fill the GPU, and at long contexts enough that no split walks more than
  // kAttnSplitKeys keys serially (one workgroup streams its keys at a few GB/s).
  const uint64_t want = std::max((FISH_SPAN_ATTN_TARGET_WG + rows - 1) / rows,
                                 (uint64_t(len_max) + kAttnSplitKeys - 1) / kAttnSplitKeys);
  const uint64_t s = std::min({want, uint64_t(len_max / FISH_SPAN_ATTN_TILE), fit});
  return s >= 2 ? uint32_t(s) : 0;
}

uint32_t attention_stream_splits(int forced, uint32_t n_head, uint32_t n_kv, uint32_t len_max,
                                 uint32_t parts_cap) {
  const uint64_t fit =
      std::min<uint64_t>(FISH_SPAN_ATTN_MAX_SPLIT, parts_cap / std::max<uint32_t>(1, n_head));
  auto ceil_div = [](uint64_t a, uint64_t b) { return (a + b - 1) / b; };
  // The grid-filling term stops at splits of about min_keys keys: FISH_SPAN_STREAM_MIN_KEYS,
  // growing as sqrt(8 len) past 512 keys (128 at 2048, 256 at 8192): each workgroup's fixed work
  // (the queries' RoPE, the merge, its partials) wants more keys behind it as the range grows.
  const uint64_t min_keys = std::max<uint64_t>(
      FISH_SPAN_STREAM_MIN_KEYS, uint64_t(std::ceil(std::sqrt(8.0 * double(len_max)))));
  const uint64_t fill = std::min(ceil_div(FISH_SPAN_ATTN_TARGET_WG, std::max<uint32_t>(1, n_kv)),
                                 ceil_div(len_max, min_keys));
  const uint64_t want = forced >= 0
                            ? uint64_t(forced)
                            : std::max(ceil_div(len_max, FISH_SPAN_STREAM_SPLIT_KEYS), fill);
  return uint32_t(std::max<uint64_t>(1, std::min(want, fit)));
}

bool attention_stream_fits(uint32_t head_dim, uint32_t group, uint32_t subgroup_min,
                           uint32_t subgroup_max) {
  return head_dim % 64 == 0 && head_dim <= FISH_SPAN_MAX_HEAD && group >= 1 &&
         group * (head_dim / 64) <= FISH_SPAN_STREAM_ROWS && subgroup_min >= 8 &&
         subgroup_min % 8 == 0 && subgroup_max <= FISH_SPAN_STREAM_WG &&
         FISH_SPAN_STREAM_WG % subgroup_max == 0;
}

uint32_t attention_decode_splits(int forced, uint32_t n_head, uint32_t n_tok, uint32_t len_max,
                                 uint32_t parts_cap) {
  const uint64_t rows = std::max<uint64_t>(1, uint64_t(n_head) * n_tok);
  const uint64_t fit = std::min<uint64_t>(FISH_SPAN_ATTN_MAX_SPLIT, parts_cap / rows);
  uint64_t want = 1;
  if (forced > 0)
    want = uint64_t(forced);
  else if (forced < 0 && len_max > FISH_SPAN_DEC_ONE_WG_KEYS)
    want = (uint64_t(len_max) + FISH_SPAN_DEC_SPLIT_KEYS - 1) / FISH_SPAN_DEC_SPLIT_KEYS;
  return uint32_t(std::max<uint64_t>(1, std::min(want, fit)));
}

}  // namespace fish::vk
