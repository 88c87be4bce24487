// Layout shared by the layer-span code (engine/vulkan/vulkan_span.cpp) and the span-op shaders
// (rmsnorm, elementwise, rope_kv, attention*, argmax .comp.glsl): bindings and one push-constant
// block whose fields each shader reads as documented in its first comment.
// Valid C++ and GLSL 450: only #defines and the one push-constant block below.
#ifndef FISH_VK_SPAN_H
#define FISH_VK_SPAN_H

// Descriptor set 0 of every span op: ARENA float[] (activations, offsets in floats), PARAMS
// float[] (norm weights, biases, RoPE cos/sin tables), KV uint[] (f16 K/V, two values a word).
#define FISH_SPAN_ARENA 0
#define FISH_SPAN_PARAMS 1
#define FISH_SPAN_KV 2

#define FISH_SPAN_WG 256           // elementwise, rope_kv workgroup size
#define FISH_SPAN_NORM_WG 512      // rmsnorm of a whole row (n_embd): one workgroup = one row
#define FISH_SPAN_HEAD_NORM_WG 64  // span_head_rmsnorm (per-head q/k norm): one row = one head
#define FISH_SPAN_NORM_CACHE 4     // rmsnorm: vec4s per thread held in registers between passes
#define FISH_SPAN_ATTN_WG 128      // attention: one workgroup = one head x one token
#define FISH_SPAN_MAX_HEAD 256     // attention: head_dim <= 2 x FISH_SPAN_ATTN_WG
#define FISH_SPAN_ATTN_TILE 32     // attention: keys per shared-memory tile (16 at head_dim > 128)
// Split-K attention (span_attention_split + span_attention_combine, attention.comp.glsl): a
// query row's positions in up to FISH_SPAN_ATTN_MAX_SPLIT splits, one workgroup each, each
// writing a partial of head_dim + 2 floats (m, l, acc[head_dim]) to ARENA. The span's partial
// scratch holds n_head x FISH_SPAN_ATTN_SPLIT_TOK x FISH_SPAN_ATTN_MAX_SPLIT partials (more
// tokens get fewer splits). Auto rule (attention_splits, vulkan_span.h): aim for
// FISH_SPAN_ATTN_TARGET_WG workgroups (~2 per SM of a 132-SM H200) when heads x tokens are fewer.
#define FISH_SPAN_ATTN_MAX_SPLIT 64
#define FISH_SPAN_ATTN_SPLIT_TOK 4
#define FISH_SPAN_ATTN_TARGET_WG 256
// Prefill attention (span_attention_flash, attention_flash.comp.glsl): one workgroup = one head x
// FISH_SPAN_FLASH_TOK query tokens sharing each FISH_SPAN_FLASH_KEYS-key tile of K/V; used for
// dispatches of at least FISH_SPAN_FLASH_MIN_TOK tokens that run in one pass (no split-K).
#define FISH_SPAN_FLASH_TOK 8
#define FISH_SPAN_FLASH_KEYS 16
#define FISH_SPAN_FLASH_MIN_TOK 16
// Short-batch attention with RoPE and the KV store fused (span_attention_decode,
// attention_decode.comp.glsl): one workgroup = one KV head x all tokens of the dispatch (its
// group x tokens query rows <= FISH_SPAN_DEC_ROWS, tokens <= FISH_SPAN_DEC_TOK) x one KV split;
// FISH_SPAN_DEC_WG threads score FISH_SPAN_DEC_KEYS keys a pass (two threads a key). Auto splits
// (attention_decode_splits, vulkan_span.h): none up to FISH_SPAN_DEC_ONE_WG_KEYS keys, beyond
// that one split per FISH_SPAN_DEC_SPLIT_KEYS keys (the split-K combine merges them).
#define FISH_SPAN_DEC_WG 512
#define FISH_SPAN_DEC_KEYS 256
#define FISH_SPAN_DEC_ROWS 8
#define FISH_SPAN_DEC_TOK 4
#define FISH_SPAN_DEC_ONE_WG_KEYS 512
#define FISH_SPAN_DEC_SPLIT_KEYS 256
// span_attention_short (attention_short.comp.glsl): one decode token attending at most
// FISH_SPAN_SHORT_KEYS keys, RoPE and the KV store fused, one workgroup of FISH_SPAN_SHORT_WG
// invocations a query head (the short-context rule: attention_short_applies, vulkan_span.h).
#define FISH_SPAN_SHORT_WG 256
#define FISH_SPAN_SHORT_WIDE_WG 1024  // span_attention_short_wide: ranges past kAttnShortKeys
#define FISH_SPAN_SHORT_KEYS 1024
// span_attention_stream (attention_stream.comp.glsl): one decode token's attention streamed by
// teams of 8 lanes a key, one workgroup of FISH_SPAN_STREAM_WG invocations a KV head x KV split,
// group x head_dim / 64 <= FISH_SPAN_STREAM_ROWS; auto splits (attention_stream_splits,
// vulkan_span.h): at least one per FISH_SPAN_STREAM_SPLIT_KEYS keys, and towards
// FISH_SPAN_ATTN_TARGET_WG workgroups down to splits of about max(FISH_SPAN_STREAM_MIN_KEYS,
// sqrt(8 keys)) keys.
#define FISH_SPAN_STREAM_WG 128
#define FISH_SPAN_STREAM_ROWS 8
#define FISH_SPAN_STREAM_SPLIT_KEYS 256
#define FISH_SPAN_STREAM_MIN_KEYS 64
#define FISH_SPAN_ARGMAX_WG 512      // span_argmax (argmax.comp.glsl): threads a workgroup
#define FISH_SPAN_ARGMAX_SLICE 4096  // ... logits a workgroup of its first pass (8 a thread)
#define FISH_SPAN_CHUNK 64           // tokens per chunk: work buffers hold this many rows
#define FISH_SPAN_CHUNK_CM 512       // ... where prefill matmuls run on cooperative matrices

// clang-format off
#ifdef __cplusplus
#include <cstdint>
namespace fish::vk {
struct SpanPush {
#define FISH_U32 uint32_t
#else
layout(push_constant) uniform SpanPush {
#define FISH_U32 uint
#endif
  FISH_U32 n;             // values per row (head_dim for per-head ops)
  FISH_U32 rows;          // tokens in this dispatch
  FISH_U32 rows_per_tok;  // rows (heads) per token
  FISH_U32 split;         // rmsnorm: rows j < split use w_off0, the others w_off1; attention
                          // split-K: KV splits per query row (grid z)
  FISH_U32 a_off, a_stride;  // operand A in ARENA: floats to row 0, floats between tokens
  FISH_U32 b_off, b_stride;  // operand B in ARENA (attention split-K: b_off = the partials)
  FISH_U32 c_off, c_stride;  // output C in ARENA
  FISH_U32 w_off0, w_off1;   // PARAMS floats (weights, bias, RoPE table); w_off1 of
                             // span_attention_stream_last: ARENA word of its arrival counters
  FISH_U32 pos0;          // position of token 0
  FISH_U32 n_rot;         // rope: rotated dims per head; attention: query heads per KV head
                          // (span_attention_decode: rotated dims, the group in `group`)
  FISH_U32 kv_k, kv_v;    // KV words to position 0 of this layer's K / V
  FISH_U32 kv_stride;     // KV words between positions (kv_dim / 2)
  FISH_U32 window;        // attention: sliding window (0: none)
  FISH_U32 flags;         // rope: 1 = NeoX pairs
  float eps;              // rmsnorm epsilon
  float scale;            // attention: q.k multiplier
  FISH_U32 q8_off;        // span_*rmsnorm_q8: ARENA floats to the q8_1 copy of C (fish_vk_q8.h)
  FISH_U32 group;         // span_attention_decode: query heads per KV head (the other attention
                          // kernels read it from n_rot)
#ifdef __cplusplus
};
static_assert(sizeof(SpanPush) == 92, "push constants: 23 x 4 bytes");
}  // namespace fish::vk
#else
} pc;
#endif
#undef FISH_U32
// clang-format on

#endif  // FISH_VK_SPAN_H
