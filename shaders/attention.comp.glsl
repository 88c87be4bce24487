#version 450
// attention: out_h = sum_p softmax_p(scale q_h . k_p) v_p over positions [begin, pos], causal
// (pos = pos0 + t), begin = pos - window + 1 with a sliding window; grouped-query heads: query
// head h reads KV head h / n_rot (n_rot holds the group size here).
// q: head h of token t at a_off + t a_stride + h n (ARENA); out likewise at c_off / c_stride;
// K/V: f16 pairs in KV (kv_store.comp.glsl), KV head g at word g n / 2 of a position.
// One workgroup = one head x one token (grid x = heads, y = tokens), FISH_SPAN_ATTN_WG threads.
// Keys in tiles of WG: thread i scores key tile + i, then an online softmax in f32 (running max
// and sum, as flash attention), and thread i accumulates output dims i and i + WG over the tile.
// Works for any context length. CPU reference: attention_one_query_ref (kernels/ops.h).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "fish_vk_span.h"
#include "span_common.glsl"
layout(local_size_x = FISH_SPAN_ATTN_WG) in;

shared float q_s[FISH_SPAN_MAX_HEAD];
shared float p_s[FISH_SPAN_ATTN_WG];
shared float red[FISH_SPAN_ATTN_WG];

// Max (is_max) or sum over the workgroup; every thread gets the result.
float wg_reduce(float v, bool is_max) {
  v = is_max ? subgroupMax(v) : subgroupAdd(v);
  if (subgroupElect()) red[gl_SubgroupID] = v;
  barrier();
  float r = red[0];
  for (uint g = 1u; g < gl_NumSubgroups; ++g) r = is_max ? max(r, red[g]) : r + red[g];
  barrier();  // red is reused by the next call
  return r;
}

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint n = pc.n, g = h / pc.n_rot;
  const uint qa = pc.a_off + t * pc.a_stride + h * n;
  for (uint d = tid; d < n; d += FISH_SPAN_ATTN_WG) q_s[d] = arena[qa + d];
  barrier();
  const uint pos = pc.pos0 + t;
  const uint begin = (pc.window > 0u && pos + 1u > pc.window) ? pos + 1u - pc.window : 0u;
  const uint head_w = g * (n / 2u);
  float m = -1.0e30, l = 0.0;
  float acc0 = 0.0, acc1 = 0.0;
  const uint d0 = tid, d1 = tid + FISH_SPAN_ATTN_WG;
  for (uint tile = begin; tile <= pos; tile += FISH_SPAN_ATTN_WG) {
    const uint p = tile + tid;
    float s = -1.0e30;
    if (p <= pos) {
      const uint kb = pc.kv_k + p * pc.kv_stride + head_w;
      float dot_qk = 0.0;
      for (uint j = 0u; j < n / 2u; ++j) {
        const vec2 k2 = unpackHalf2x16(kv[kb + j]);
        dot_qk += q_s[2u * j] * k2.x + q_s[2u * j + 1u] * k2.y;
      }
      s = pc.scale * dot_qk;
    }
    const float m_new = max(m, wg_reduce(s, true));
    const float e = p <= pos ? exp(s - m_new) : 0.0;
    const float corr = exp(m - m_new);
    l = l * corr + wg_reduce(e, false);
    p_s[tid] = e;
    barrier();
    acc0 *= corr;
    acc1 *= corr;
    const uint n_keys = min(uint(FISH_SPAN_ATTN_WG), pos + 1u - tile);
    for (uint j = 0u; j < n_keys; ++j) {
      const uint vb = pc.kv_v + (tile + j) * pc.kv_stride + head_w;
      const float pj = p_s[j];
      if (d0 < n) acc0 += pj * unpackHalf2x16(kv[vb + d0 / 2u])[d0 & 1u];
      if (d1 < n) acc1 += pj * unpackHalf2x16(kv[vb + d1 / 2u])[d1 & 1u];
    }
    m = m_new;
    barrier();  // p_s is rewritten by the next tile
  }
  const uint oc = pc.c_off + t * pc.c_stride + h * n;
  if (d0 < n) arena[oc + d0] = acc0 / l;
  if (d1 < n) arena[oc + d1] = acc1 / l;
}
