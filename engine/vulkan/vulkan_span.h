// The Vulkan LayerSpan (engine/layer_span.h): a span's device buffers, descriptor sets built once
// at creation, and the one command buffer per forward (seed 000 "Span execution").
//
// Device memory (all counted against the backend's budget): ARENA (x for max_tok tokens + the
// per-chunk work rows: xn, q|k|v, att, tmp, gate|up for a chunk: FISH_SPAN_CHUNK tokens, or
// FISH_SPAN_CHUNK_CM where prefill matmuls run on cooperative matrices, at most max_tok),
// PARAMS (norm weights, biases, RoPE cos/sin for [0, n_ctx)), KV (per layer K then V, kv_capacity
// positions of kv_dim f16), and a host-visible x staging buffer. The span runs on the backend's
// device layer (vk_context.h: allocator, pipelines, submission, the device mutex) over weights the
// backend uploaded (DeviceWeight); knobs come from the context's options (FISH_VK_MATVEC,
// FISH_VK_ATTN_SPLIT, FISH_VK_ATTN_DECODE, FISH_GPU_PROFILE).
#pragma once

#include <volk.h>

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/layer_span.h"
#include "engine/vulkan/device_weight.h"
#include "engine/vulkan/vk_context.h"
#include "fish_vk_span.h"

namespace fish::vk {

// KV splits of one attention dispatch (n_tok query tokens x n_head heads, the longest query's
// position range len_max keys) for split-K attention; 0 selects the one-pass kernel.
// Auto (forced < 0): 0 when n_head x n_tok >= FISH_SPAN_ATTN_TARGET_WG (prefill chunks fill the
// grid already), else S = min(max(ceil(TARGET / (n_head n_tok)), ceil(len_max / kAttnSplitKeys)),
// len_max / FISH_SPAN_ATTN_TILE (a split gets at least one full key tile),
// FISH_SPAN_ATTN_MAX_SPLIT, the scratch's share parts_cap / (n_head n_tok)), and 0 unless S >= 2.
// Forced N >= 1: min(N, MAX_SPLIT, that share) even where splits come out empty (testing, A/B
// runs); 0 when no split fits.
inline constexpr uint32_t kAttnSplitKeys = 256;  // auto rule: keys one split walks, at most
uint32_t attention_splits(int forced, uint32_t n_head, uint32_t n_tok, uint32_t len_max,
                          uint32_t parts_cap);

// KV splits of span_attention_decode (one workgroup per KV head x split; the dispatch's query
// tokens n_tok x n_head heads, the longest range len_max keys), >= 1; 1: no combine pass. Auto
// (forced < 0): 1 up to FISH_SPAN_DEC_ONE_WG_KEYS keys (a workgroup walks them in two passes
// faster than a second dispatch and barrier run), else ceil(len_max / FISH_SPAN_DEC_SPLIT_KEYS).
// Forced N >= 1: N (FISH_VK_ATTN_SPLIT; 0: 1). Both capped by FISH_SPAN_ATTN_MAX_SPLIT and the
// scratch's share parts_cap / (n_head n_tok), never below 1.
uint32_t attention_decode_splits(int forced, uint32_t n_head, uint32_t n_tok, uint32_t len_max,
                                 uint32_t parts_cap);
// KV splits of span_attention_stream (one workgroup per KV head x split; one decode token of
// n_head query heads on n_kv KV heads attending len_max keys), >= 1; 1: no merge. Forced N >= 1
// (FISH_VK_ATTN_SPLIT; 0: 1); auto: ceil(len_max / FISH_SPAN_STREAM_SPLIT_KEYS), or more, up to
// the splits that give n_kv x splits = FISH_SPAN_ATTN_TARGET_WG workgroups, but no more than
// ceil(len_max / max(FISH_SPAN_STREAM_MIN_KEYS, sqrt(8 len_max))): splits of about that many keys
// at least where the grid term decides (8B heads: 2 / 8 / 16 / 32 splits
// at 128 / 512 / 2048 / 8192 keys); both capped by FISH_SPAN_ATTN_MAX_SPLIT and the scratch's
// share parts_cap / n_head. Measured on an H100 (results/runs/h100-splits-4c61d4e, 8B decode
// tok/s, 4 repetitions, same call): after 2048 positions 16 splits 269.0 [268.2, 269.2], 8 265.4,
// 32 (the earlier rule's) 259.2; after 8192 32 splits 240.3, 16 236.7, 8 211.6; after 512 the 8
// splits 284.4 against 280.5 with 4 (the 1B 844.9 against 855.3).
uint32_t attention_stream_splits(int forced, uint32_t n_head, uint32_t n_kv, uint32_t len_max,
                                 uint32_t parts_cap);
// Whether span_attention_stream takes heads of head_dim with `group` query heads a KV head on a
// device whose subgroups have subgroup_min..subgroup_max lanes: head_dim a multiple of 64 up to
// FISH_SPAN_MAX_HEAD, group x head_dim / 64 <= FISH_SPAN_STREAM_ROWS (a lane's queries and sums
// stay in registers), subgroups of a multiple of 8 lanes that divide FISH_SPAN_STREAM_WG.
bool attention_stream_fits(uint32_t head_dim, uint32_t group, uint32_t subgroup_min,
                           uint32_t subgroup_max);
// FISH_VK_ATTN_STREAM's rule for a dispatch of n_tok tokens (where attention_stream_fits):
// mode 1 / 2 every decode token (n_tok 1); auto (-1) a decode token that span_attention_short
// does not take (short_applies: past kAttnShortKeys keys under FISH_VK_ATTN_SHORT=auto) unless
// FISH_VK_ATTN_DECODE=1 forces the other fused kernel; 0 never. On an H100
// (results/runs/h100-stream-d5082b3, binary d5082b3, synthetic Q4_K_M, tok/s, same calls): after
// 512 / 2048 / 8192 positions the 8B decoded 285.3 / 262.5 / 241.9 with it against 255.4 / 224.4
// / 175.2 with the split-K and fused kernels, the 1B 865.1 against 717.6 after 512; from an
// empty cache (tg128, <= 153 keys) it lost to span_attention_short (8B 291.7 vs 300.0, 1B 893.7
// vs 938.9), and merging the splits in the kernel (mode 2) lost to the combine dispatch
// everywhere (8B 246.9 / 228.9 after 2048 / 8192).
inline bool attention_stream_applies(int mode, int attn_decode, uint32_t n_tok,
                                     bool short_applies) {
  if (n_tok != 1 || mode == 0) return false;
  return mode >= 1 || (!short_applies && attn_decode != 1);
}
// FISH_VK_ATTN_DECODE=auto: short batches attending at least this many keys run
// span_attention_decode, shorter ones span_rope_kv + split-K. BM_VulkanDecodeAttention on an
// H100 (llama-8b heads, us a layer, results/runs/h100-session-b351385): fused 83 / 87 / 59 / 110
// against 24 / 50 / 168 / 510 at 128 / 512 / 2048 / 8192 keys; the crossover lies between 512
// and 2048.
inline constexpr uint32_t kAttnDecodeMinKeys = 1024;
// FISH_VK_ATTN_DECODE's choice for a batch attending len_max keys (mode -1 auto, 0, 1), where the
// kernel applies at all.
inline bool attention_decode_fused(int mode, uint32_t len_max) {
  return mode == 1 || (mode < 0 && len_max >= kAttnDecodeMinKeys);
}

// FISH_VK_ATTN_SHORT's rule: a dispatch of n_tok tokens whose longest range is len_max keys runs
// span_attention_short (attention_short.comp.glsl) when it is one decode token, FISH_VK_ATTN_DECODE
// does not force the other fused kernel (attn_decode 1), and the range is at most kAttnShortKeys
// (mode -1, auto) or FISH_SPAN_SHORT_KEYS (mode 1, the kernel's capacity); mode 0 never. Its
// workgroup walks the keys' V in one pass of 8 key groups, so its time grows with the range where
// split-K's does not: on an H100 (results/runs/h100-session-232ddba) the 8B's decode steps ran
// 25.0 -> 16.4 us a layer with it at 25-153 keys (profiled), but its peer_gpu row after a
// 512-token prompt (513-640 keys) fell to 224.6 tok/s from the split-K path's 246.2 of the
// session before. 256 lies between; the crossover is not measured yet. Past 256 keys mode 1 runs
// span_attention_short_wide (4x the threads and key groups; not yet measured on a GPU).
inline constexpr uint32_t kAttnShortKeys = 256;
inline bool attention_short_applies(int mode, int attn_decode, uint32_t n_tok, uint32_t len_max) {
  const uint32_t cap = mode == 1 ? uint32_t(FISH_SPAN_SHORT_KEYS) : kAttnShortKeys;
  return mode != 0 && attn_decode != 1 && n_tok == 1 && len_max <= cap;
}

// Errors: as ComputeBackend::span_create. The caller holds ctx.mutex(); `weights` (the
// backend's, by handle) must outlive the span.
Result<std::unique_ptr<LayerSpan>> create_vulkan_span(
    VkContext& ctx, const SpanDesc& desc, const std::map<WeightHandle, DeviceWeight>& weights);

// One dispatch of a span op: module name ("span_rmsnorm", ...), push constants, grid.
struct SpanDispatch {
  std::string name;
  SpanPush pc{};
  uint32_t gx = 1, gy = 1, gz = 1;
};

// The dispatches in order with a compute barrier between consecutive ones, the whole list reps
// times, over device-local copies of ARENA, PARAMS and KV (uploaded before, arena and kv read
// back after; on an error nothing is read back). Returns the device seconds of the dispatches
// (timestamps; the host's time of the submit where the queue has none). For the op tests (each
// shader against its CPU reference) and the attention benchmark. The caller holds ctx.mutex().
// Errors: unknown op, reps < 1, budget, a device error (vk_context.h: the context is then lost).
Result<double> run_span_ops(VkContext& ctx, std::span<const SpanDispatch> dispatches, int reps,
                            std::vector<float>& arena, const std::vector<float>& params,
                            std::vector<uint32_t>& kv);

}  // namespace fish::vk
