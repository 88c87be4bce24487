#version 450
// attention_flash (span_attention_flash): the prefill form of attention.comp.glsl, same push
// constants and result (out_h = sum_p softmax_p(scale q_h . k_p) v_p over [begin, pos], causal,
// sliding window, grouped-query heads: head h reads KV head h / n_rot). One workgroup = one head
// x FISH_SPAN_FLASH_TOK consecutive query tokens (grid x = heads, y = ceil(rows / that)), so
// each K/V tile is loaded once for all of them instead of once per token (the one-pass kernel
// walks every key per token). Keys in tiles of FISH_SPAN_FLASH_KEYS: the workgroup stages a
// tile's K and V rows (f16 pairs, rows padded to n / 2 + 1 words) in shared memory; thread
// (query i = tid / KEYS, key j = tid % KEYS) scores one pair, masked to -inf outside the
// query's [begin, pos]; then each thread, owning dims tid % KEYS + KEYS d of query tid / KEYS,
// runs the online softmax (running max and sum in f32) over the tile's scores and rescales its
// accumulators. The workgroup walks keys from the first query's begin to the last query's pos.
// CPU reference: attention_one_query_ref (kernels/ops.h); tests/vulkan/vulkan_span_ops_test.cpp.
#extension GL_GOOGLE_include_directive : require
#include "fish_vk_span.h"
#include "span_common.glsl"
#define QT FISH_SPAN_FLASH_TOK
#define KT FISH_SPAN_FLASH_KEYS
#define WG (QT * KT)
#define RS_MAX (FISH_SPAN_MAX_HEAD / 2 + 1)
#define DPT (FISH_SPAN_MAX_HEAD / KT)  // output dims per thread at the largest head
layout(local_size_x = WG) in;

shared float q_s[QT * FISH_SPAN_MAX_HEAD];
shared uint k_s[KT * RS_MAX];
shared uint v_s[KT * RS_MAX];
shared float s_s[QT * KT];

void main() {
  const uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint t0 = gl_WorkGroupID.y * QT;
  const uint n = pc.n, g = h / pc.n_rot, rw = n / 2u, rs = rw + 1u;
  const uint head_w = g * rw;
  const uint n_q = min(uint(QT), pc.rows - t0);  // valid queries of this tile
  for (uint e = tid; e < QT * n; e += WG) {
    const uint i = e / n, d = e % n;
    q_s[e] = i < n_q ? arena[pc.a_off + (t0 + i) * pc.a_stride + h * n + d] : 0.0;
  }
  // This thread: scores query qi x key kj; accumulates dims kj + KT k of query qi.
  const uint qi = tid / KT, kj = tid % KT;
  const uint pos = pc.pos0 + t0 + qi;
  const uint begin = window_begin(pos);
  const uint pos_first = pc.pos0 + t0, pos_last = pc.pos0 + t0 + n_q - 1u;
  const uint first = window_begin(pos_first);
  const uint end = pos_last + 1u;
  float m = -1.0e30, l = 0.0;
  float acc[DPT];
  for (uint k = 0u; k < DPT; ++k) acc[k] = 0.0;
  for (uint tile = first; tile < end; tile += KT) {
    const uint nk = min(uint(KT), end - tile);
    for (uint e = tid; e < KT * rw; e += WG) {
      const uint key = e / rw, w = e % rw;
      const uint src = (tile + key) * pc.kv_stride + head_w + w;
      k_s[key * rs + w] = key < nk ? kv[pc.kv_k + src] : 0u;
      v_s[key * rs + w] = key < nk ? kv[pc.kv_v + src] : 0u;
    }
    barrier();
    {
      const uint p = tile + kj;
      float s = uintBitsToFloat(0xff800000u);  // -inf
      if (kj < nk && qi < n_q && p <= pos && p >= begin) {
        float dot_qk = 0.0;
        for (uint w = 0u; w < rw; ++w) {
          const vec2 k2 = unpackHalf2x16(k_s[kj * rs + w]);
          dot_qk += q_s[qi * n + 2u * w] * k2.x + q_s[qi * n + 2u * w + 1u] * k2.y;
        }
        s = pc.scale * dot_qk;
      }
      s_s[qi * KT + kj] = s;
    }
    barrier();
    float m_new = m;
    for (uint j = 0u; j < KT; ++j) m_new = max(m_new, s_s[qi * KT + j]);
    const float corr = exp(m - m_new);
    l *= corr;
    for (uint k = 0u; k < DPT; ++k) acc[k] *= corr;
    for (uint j = 0u; j < nk; ++j) {
      const float e = exp(s_s[qi * KT + j] - m_new);
      l += e;
      for (uint k = 0u; k < DPT; ++k) {
        const uint d = kj + KT * k;
        if (d < n) acc[k] += e * unpackHalf2x16(v_s[j * rs + d / 2u])[d & 1u];
      }
    }
    m = m_new;
    barrier();  // k_s, v_s, s_s are rewritten by the next tile
  }
  if (qi < n_q) {
    const uint oc = pc.c_off + (t0 + qi) * pc.c_stride + h * n;
    for (uint k = 0u; k < DPT; ++k) {
      const uint d = kj + KT * k;
      if (d < n) arena[oc + d] = acc[k] / l;
    }
  }
}
