#version 450
// attention_short (span_attention_short): one decode token's attention at a short context, with
// RoPE and the KV store fused in, built for latency: a decode step's attention is a chain of
// dependent steps on a few hundred keys, so the kernel is one dispatch of one workgroup a query
// head (grid n_head), none of which waits on another. Workgroup h (KV head g = h / group):
//   1. rotates its query head and its KV head's key from the unrotated q|k|v row in ARENA (a_off:
//      n_head query heads of n floats, then n_kv key heads, then n_kv value heads; span_rope.glsl)
//      into shared memory, the key and value rounded to f16 as the cache holds them; the first
//      workgroup of each group (h % group == 0) also stores them to the KV at position pos0
//      (kv_k / kv_v, kv_stride words a position, two halves a word). Keys before pos0 come from
//      the KV, pos0's own from shared memory: no workgroup reads what another writes.
//   2. scores every key of [begin, pos0] (begin: the sliding window's first position), one key a
//      thread, up to KB of a key's uvec4 K loads issued before its dot product (uvec4 loads where
//      the KV's words are 16-byte aligned), into shared memory;
//   3. the workgroup max and the sum of exp(s - max) (subgroup reductions + one shared slot a
//      subgroup);
//   4. the output: thread (key group kg, dims 4c .. 4c + 3) sums weight x V over keys kg, kg + KG,
//      ... (KG = WG / (n / 4) key groups; VB keys' V loads in flight in every batch, the last
//      included, so a thread's keys take ceil(keys / VB) round trips), the key groups are summed
//      through shared memory and the row is normalised into ARENA c_off + h n.
// PREV (span_attention_short_prev, _prev_q8; FISH_VK_ATTN_SHORT_PREV): the V pass's first batch of
// VB keys a thread is loaded right after the first barrier, before the scoring pass, so its
// round trip runs under the K loads' instead of after the softmax (one dependent round trip
// fewer at up to VB x KG keys: 128 at head_dim 128); the same values summed in the same order.
// Q8 (span_attention_short_q8): also the output row's q8_1 copy (q8_block.glsl, K = n_head n) for
// an idot wo matvec. WIDE (span_attention_short_wide, _wide_q8): FISH_SPAN_SHORT_WIDE_WG threads
// instead of FISH_SPAN_SHORT_WG, so the scoring pass takes up to that many keys at once and the V
// pass has 4x the key groups (at 640 keys of head_dim 128: 20 keys a thread instead of 80), for
// ranges past kAttnShortKeys (FISH_VK_ATTN_SHORT=1). Four workgroup barriers (five with Q8)
// whatever the context, where span_rope_kv + span_attention_split + span_attention_combine take
// three dispatches and barriers, and span_attention_decode one workgroup a KV head walking all of
// its keys.
// Needs n a multiple of 4 (of 32 for Q8) and <= FISH_SPAN_MAX_HEAD, pos0 + 1 - begin <=
// FISH_SPAN_SHORT_KEYS, one token (rows = 1), subgroups of >= 4 lanes. CPU reference: rope_ref,
// then attention_one_query_ref (kernels/ops.h), the KV's f16 rounding.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "fish_vk_span.h"
#include "span_common.glsl"
#include "span_rope.glsl"
#include "kv_f16.glsl"
#ifdef WIDE  // span_attention_short_wide: 4x the threads, 4x the key groups of the V pass
#define WG FISH_SPAN_SHORT_WIDE_WG
#else
#define WG FISH_SPAN_SHORT_WG
#endif
#define HD FISH_SPAN_MAX_HEAD
// K loads a scoring thread issues before their math: a whole head_dim-128 key (16 uvec4) at
// once on the 256-thread kernel; 8 on the wide one, whose threads have a quarter the registers.
#if WG > 256
#define KB 8u
#else
#define KB 16u
#endif
// V loads a thread of the output pass issues before their math: 16 keys' vec4s (64 registers)
// on the 256-thread kernel, so a key group's keys at a head_dim-128 GQA head of up to 256 keys
// (8 key groups, 32 keys a thread) take two round trips instead of four; 8 on the wide one.
#if WG > 256
#define VB 8u
#else
#define VB 16u
#endif
#define MAX_SG (WG / 4)  // subgroups of >= 4 lanes (the span checks)
layout(local_size_x = WG) in;
layout(std430, binding = FISH_SPAN_KV) readonly buffer KvBuf4 { uvec4 kv4[]; };

shared float q_s[HD];  // the rotated query; the Q8 epilogue's output row
shared float k_s[HD], v_s[HD];             // pos0's key (rotated) and value, f16-rounded
shared float p_s[FISH_SPAN_SHORT_KEYS];    // scores, then weights
shared float max_s[MAX_SG], sum_s[MAX_SG];  // a slot a subgroup
shared vec4 o_s[WG];                       // key groups' partial outputs

#ifdef Q8
#include "fish_vk_q8.h"
layout(std430, binding = FISH_SPAN_ARENA) writeonly buffer ArenaBufU { uint arenau[]; };
#define Q8_SRC q_s
#include "q8_block.glsl"
#endif

// The workgroup's reduction of v through slots (max or sum): every thread gets the result.
float wg_reduce(float v, bool is_max) {
  const float s = is_max ? subgroupMax(v) : subgroupAdd(v);
  if (subgroupElect()) {
    if (is_max)
      max_s[gl_SubgroupID] = s;
    else
      sum_s[gl_SubgroupID] = s;
  }
  barrier();
  float r = is_max ? -3.0e38 : 0.0;
  for (uint i = 0u; i < gl_NumSubgroups; ++i) r = is_max ? max(r, max_s[i]) : r + sum_s[i];
  return r;
}

// Words w, w + 1 (4 values) of V at position p < pos0 of KV head g as floats.
vec4 v_quad(uint p, uint base) {
  const uint at = pc.kv_v + p * pc.kv_stride + base;
  return vec4(unpackHalf2x16(kv[at]), unpackHalf2x16(kv[at + 1u]));
}

void main() {
  const uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint n = pc.n, rw = n / 2u, G = pc.group;
  const uint n_head = gl_NumWorkGroups.x, n_kv = n_head / G, g = h / G;
  const uint row = pc.a_off, k_off = n_head * n, v_off = k_off + n_kv * n;
  const uint pos0 = pc.pos0;
  for (uint d = tid; d < n; d += WG) {
    q_s[d] = rope_value(row + h * n, d, pos0);
    k_s[d] = f16_round(rope_value(row + k_off + g * n, d, pos0));
    v_s[d] = f16_round(arena[row + v_off + g * n + d]);
  }
  barrier();
  if (h % G == 0u)
    for (uint w = tid; w < rw; w += WG) {
      const uint dst = pos0 * pc.kv_stride + g * rw + w;
      kv[pc.kv_k + dst] = packHalf2x16(vec2(k_s[2u * w], k_s[2u * w + 1u]));
      kv[pc.kv_v + dst] = packHalf2x16(vec2(v_s[2u * w], v_s[2u * w + 1u]));
    }

  // Scores of keys lo .. pos0, one a thread.
  const uint lo = window_begin(pos0), len = pos0 + 1u - lo;
  // The output pass's mapping (below): thread (kg, c), dims 4c .. 4c + 3, keys kg, kg + KG, ...
  const uint quads = n / 4u, KG = WG / quads, kg = tid / quads, c = tid % quads;
  const uint base = g * rw + 2u * c;
#ifdef PREV
  vec4 v0[VB];  // its first batch, in flight under the scoring pass
  [[unroll]] for (uint i = 0u; i < VB; ++i) {
    const uint p = lo + kg + i * KG;
    v0[i] = kg < KG && p < pos0 ? v_quad(p, base) : vec4(0.0);
  }
#endif
  const bool vec4_k = ((pc.kv_k | pc.kv_stride | rw) & 3u) == 0u;
  float mx = -3.0e38;
  for (uint j = tid; j < len; j += WG) {
    const uint p = lo + j;
    float s = 0.0;
    if (p == pos0) {
      for (uint d = 0u; d < n; ++d) s += q_s[d] * k_s[d];
    } else if (vec4_k) {
      const uint src4 = (pc.kv_k + p * pc.kv_stride + g * rw) / 4u, n4 = rw / 4u;
      for (uint c0 = 0u; c0 < n4; c0 += KB) {  // KB loads in flight, then their math
        uvec4 kr[KB];
        [[unroll]] for (uint i = 0u; i < KB; ++i)
          kr[i] = c0 + i < n4 ? kv4[src4 + c0 + i] : uvec4(0u);
        [[unroll]] for (uint i = 0u; i < KB; ++i) {
          if (c0 + i >= n4) break;
          const uint d = 8u * (c0 + i);
          s += dot(vec4(q_s[d], q_s[d + 1u], q_s[d + 2u], q_s[d + 3u]),
                   vec4(unpackHalf2x16(kr[i].x), unpackHalf2x16(kr[i].y))) +
               dot(vec4(q_s[d + 4u], q_s[d + 5u], q_s[d + 6u], q_s[d + 7u]),
                   vec4(unpackHalf2x16(kr[i].z), unpackHalf2x16(kr[i].w)));
        }
      }
    } else {
      const uint src = pc.kv_k + p * pc.kv_stride + g * rw;
      for (uint w = 0u; w < rw; ++w) {
        const vec2 k2 = unpackHalf2x16(kv[src + w]);
        s += q_s[2u * w] * k2.x + q_s[2u * w + 1u] * k2.y;
      }
    }
    s *= pc.scale;
    p_s[j] = s;
    mx = max(mx, s);
  }
  const float m = wg_reduce(mx, true);
  float l = 0.0;
  for (uint j = tid; j < len; j += WG) {
    const float e = exp(p_s[j] - m);
    p_s[j] = e;
    l += e;
  }
  l = wg_reduce(l, false);  // its barrier also publishes p_s's weights

  // Output: thread (kg, c) sums weight x V of dims 4c .. 4c + 3 over keys kg, kg + KG, ...
  vec4 acc = vec4(0.0);
  if (kg < KG) {
    const vec4 v_own = vec4(v_s[4u * c], v_s[4u * c + 1u], v_s[4u * c + 2u], v_s[4u * c + 3u]);
    // VB keys' V loads in flight, then their math, the last batch too: keys past the range read
    // pos0's V from shared memory and are not added (each thread adds the same keys in the same
    // order as a remainder loop would, with fewer round trips).
    for (uint j = kg; j < len; j += VB * KG) {
      vec4 v[VB];
      [[unroll]] for (uint i = 0u; i < VB; ++i) {
        const uint p = lo + j + i * KG;
#ifdef PREV
        if (j == kg) {
          v[i] = p < pos0 ? v0[i] : v_own;
          continue;
        }
#endif
        v[i] = p < pos0 ? v_quad(p, base) : v_own;
      }
      [[unroll]] for (uint i = 0u; i < VB; ++i)
        if (j + i * KG < len) acc += p_s[j + i * KG] * v[i];
    }
  }
  o_s[tid] = acc;
  barrier();
  if (tid < quads) {
    vec4 o = vec4(0.0);
    for (uint k = 0u; k < KG; ++k) o += o_s[k * quads + tid];
    o /= l;
    const uint at = pc.c_off + h * n + 4u * tid;
    arena[at] = o.x;
    arena[at + 1u] = o.y;
    arena[at + 2u] = o.z;
    arena[at + 3u] = o.w;
#ifdef Q8
    q_s[4u * tid] = o.x;
    q_s[4u * tid + 1u] = o.y;
    q_s[4u * tid + 2u] = o.z;
    q_s[4u * tid + 3u] = o.w;
#endif
  }
#ifdef Q8
  barrier();
  // The row's q8_1 copy: one thread a 32-value block (n a multiple of 32).
  if (tid < n / 32u) q8_block(n_head * n, 0u, h * (n / 32u) + tid, 32u * tid);
#endif
}
