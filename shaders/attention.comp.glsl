#version 450
// attention: out_h = sum_p softmax_p(scale q_h . k_p) v_p over positions [begin, pos], causal
// (pos = pos0 + t), begin = pos - window + 1 with a sliding window; grouped-query heads: query
// head h reads KV head h / g, g = n_rot (the group size here).
// q: head h of token t at a_off + t a_stride + h n (ARENA); out likewise at c_off / c_stride;
// K/V: f16 pairs in KV (kv_store.comp.glsl), KV head k at word k n / 2 of a position.
// One workgroup = up to GM = FISH_SPAN_ATTN_MAX_GROUP query heads of one KV head x one token
// (grid x = n_kv ceil(g / GM): KV head x / ceil(g / GM) serves its query heads from h0 = kv g +
// (x % ceil(g / GM)) GM, gs = min(GM, the rest) of them; y = tokens), FISH_SPAN_ATTN_WG threads,
// so a GQA group's K/V is read from memory once rather than once per query head.
// Latency-bound at decode (few workgroups), so keys go in tiles of tk = FISH_SPAN_ATTN_TILE (16
// when a padded row of head_dim > 128 would not fit): all threads load the tile's K and V rows
// into shared memory at once (consecutive words, every load issued before the first use, the
// next tile's while this one is computed); then the gs tk (head, key) scores, tpp = WG / (gs tk)
// threads each (>= 1) from shared memory; each score's threads find the head's new running max
// and write its weight e^(score - max); an online softmax in f32 (running max and sum, as flash
// attention) rescales the output; thread i owns output dims i and i + WG of every served head.
// Works for any context length. CPU reference: attention_one_query_ref (kernels/ops.h).
// SPLIT (span_attention_split, flash-decoding for short query batches): grid z = pc.split KV
// splits; split s of a row walks positions [begin + s kps, begin + (s + 1) kps) up to pos, kps =
// ceil(len / split) with len the last token's range (the longest), and writes its partial
// (m: running max, l: sum of exp, acc[n]: unnormalised output) at ARENA b_off + ((t heads + h)
// split + s)(n + 2); an empty range writes m = -1e30, l = 0, acc = 0. SPLIT_ONE_HEAD
// (span_attention_split_h1): the same with GM = 1, one query head per workgroup as before the
// grouping (the A/B reference of BM_VulkanDecodeAttention). COMBINE
// (span_attention_combine): one workgroup = one query head x one token (grid x = n_head, y =
// tokens) merges its row's partials exactly (log-sum-exp): M = max m_s, out = sum e^(m_s - M)
// acc_s / sum e^(m_s - M) l_s, in split order (deterministic). Two passes rather than a
// last-workgroup atomic: no cross-workgroup memory ordering (not guaranteed without the Vulkan
// memory model) and no counter state; the cost is one small dispatch and barrier per layer.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#include "fish_vk_span.h"
#include "span_common.glsl"
#define WG FISH_SPAN_ATTN_WG
layout(local_size_x = WG) in;

// ARENA float of a partial: row (token t, head h) of heads, split s of splits, n + 2 floats each.
uint partial_at(uint t, uint h, uint heads, uint s, uint n) {
  return pc.b_off + ((t * heads + h) * pc.split + s) * (n + 2u);
}

#ifdef COMBINE
void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint n = pc.n, d0 = tid, d1 = tid + WG;
  float m = -1.0e30;
  for (uint s = 0u; s < pc.split; ++s) m = max(m, arena[partial_at(t, h, gl_NumWorkGroups.x, s, n)]);
  float l = 0.0, acc0 = 0.0, acc1 = 0.0;
  for (uint s = 0u; s < pc.split; ++s) {
    const uint p = partial_at(t, h, gl_NumWorkGroups.x, s, n);
    const float e = exp(arena[p] - m);
    l += e * arena[p + 1u];
    if (d0 < n) acc0 += e * arena[p + 2u + d0];
    if (d1 < n) acc1 += e * arena[p + 2u + d1];
  }
  const uint oc = pc.c_off + t * pc.c_stride + h * n;
  if (d0 < n) arena[oc + d0] = acc0 / l;
  if (d1 < n) arena[oc + d1] = acc1 / l;
}
#else
#ifdef SPLIT_ONE_HEAD
#define SPLIT
#define GM 1
#else
#define GM FISH_SPAN_ATTN_MAX_GROUP
#endif
#define TK FISH_SPAN_ATTN_TILE
// Shared words per K (and per V) tile: rows padded to n / 2 + 1 words (no bank conflicts
// between keys), a multiple of WG so the staging loop has a constant trip count.
#define ROUNDS ((TK * (FISH_SPAN_MAX_HEAD / 4 + 1) + WG - 1) / WG)
#define CAP (ROUNDS * WG)
#define PAIRS (GM * TK)                    // (head, key) scores of a tile, at most
#define NPART (PAIRS > WG ? PAIRS : WG)  // partial dots: pairs x tpp <= max(WG, pairs)

shared float q_s[GM * FISH_SPAN_MAX_HEAD];  // served head j's query at j n
shared uint k_s[CAP];
shared uint v_s[CAP];
shared float part[NPART];  // pair i's tpp partial q.k at i tpp..
shared float p_s[PAIRS];   // pair i = (head j, key) at j tk + key: e^(score - new max)
shared float mn_s[GM];     // this tile's new running max per served head
shared float m_s[GM];      // the running max before this tile

// Loads keys [tile, tile + nk) of K and V (zeros past nk), WG consecutive words a round.
void fetch(uint tile, uint nk, uint head_w, uint rw, out uint kr[ROUNDS], out uint vr[ROUNDS]) {
  [[unroll]] for (uint r = 0u; r < ROUNDS; ++r) {
    const uint e = gl_LocalInvocationID.x + r * WG;
    const uint key = e / rw, w = e % rw;
    const uint src = (tile + key) * pc.kv_stride + head_w + w;
    kr[r] = key < nk ? kv[pc.kv_k + src] : 0u;
    vr[r] = key < nk ? kv[pc.kv_v + src] : 0u;
  }
}

// Score of pair i of a tile: scale x the sum of its tpp partial dots (the same order everywhere).
float score(uint i, uint tpp) {
  float s = 0.0;
  for (uint p = 0u; p < tpp; ++p) s += part[i * tpp + p];
  return pc.scale * s;
}

void main() {
  const uint t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint n = pc.n, g = pc.n_rot, rw = n / 2u, rs = rw + 1u;
  const uint n_sub = (g + GM - 1u) / GM;  // workgroups per KV head
  const uint kvh = gl_WorkGroupID.x / n_sub;
  const uint h0 = kvh * g + (gl_WorkGroupID.x % n_sub) * GM;
  const uint gs = min(uint(GM), kvh * g + g - h0);  // served query heads h0 .. h0 + gs - 1
  const uint tk = min(uint(TK), uint(CAP) / rs);
  const uint pairs = gs * tk, tpp = max(1u, WG / pairs), pair_step = WG / tpp;
  const uint qa = pc.a_off + t * pc.a_stride + h0 * n;
  for (uint i = tid; i < gs * n; i += WG) q_s[i] = arena[qa + i];
  if (tid < GM) m_s[tid] = -1.0e30;
  const uint pos = pc.pos0 + t;
  const uint begin = (pc.window > 0u && pos + 1u > pc.window) ? pos + 1u - pc.window : 0u;
  const uint head_w = kvh * rw;
  float m[GM], l[GM], acc0[GM], acc1[GM];
  [[unroll]] for (uint j = 0u; j < GM; ++j) {
    m[j] = -1.0e30;
    l[j] = 0.0;
    acc0[j] = 0.0;
    acc1[j] = 0.0;
  }
  const uint d0 = tid, d1 = tid + WG;
#ifdef SPLIT
  const uint last = pc.pos0 + pc.rows - 1u;  // the last token has the longest range
  const uint len = pc.window > 0u ? min(pc.window, last + 1u) : last + 1u;
  const uint kps = (len + pc.split - 1u) / pc.split, sp = gl_WorkGroupID.z;
  const uint first = min(begin + sp * kps, pos + 1u), end = min(first + kps, pos + 1u);
#else
  const uint first = begin, end = pos + 1u;
#endif
  // Staging: element e = key e / rw, word e % rw of a tile; the next tile's loads are issued
  // before this tile's compute, so only the first tile waits on global memory.
  uint kr[ROUNDS], vr[ROUNDS];
  if (first < end) fetch(first, min(tk, end - first), head_w, rw, kr, vr);
  for (uint tile = first; tile < end; tile += tk) {
    const uint nk = min(tk, end - tile);
    [[unroll]] for (uint r = 0u; r < ROUNDS; ++r) {
      const uint e = tid + r * WG;
      const uint key = e / rw, w = e % rw;
      if (key < tk) {
        k_s[key * rs + w] = kr[r];
        v_s[key * rs + w] = vr[r];
      }
    }
    if (tile + tk < end) fetch(tile + tk, min(tk, end - tile - tk), head_w, rw, kr, vr);
    barrier();
    // Partial dots: pair i = (head i / tk, key i % tk), words part_i, + tpp, ... (a warp's
    // lanes take consecutive keys of one head: padded K rows, a broadcast q).
    if (tid < pair_step * tpp)
      for (uint i = tid / tpp; i < pairs; i += pair_step) {
        const uint j = i / tk, key = i % tk, part_i = tid % tpp;
        float dot_qk = 0.0;
        if (key < nk)
          for (uint w = part_i; w < rw; w += tpp) {
            const vec2 k2 = unpackHalf2x16(k_s[key * rs + w]);
            dot_qk += q_s[j * n + 2u * w] * k2.x + q_s[j * n + 2u * w + 1u] * k2.y;
          }
        part[i * tpp + part_i] = dot_qk;
      }
    barrier();
    // Weights: each pair's thread takes its head's new max over the tile's nk scores.
    for (uint i = tid; i < pairs; i += WG) {
      const uint j = i / tk, key = i % tk;
      float m_new = m_s[j];
      for (uint k = 0u; k < nk; ++k) m_new = max(m_new, score(j * tk + k, tpp));
      p_s[i] = key < nk ? exp(score(i, tpp) - m_new) : 0.0;
      if (key == 0u) mn_s[j] = m_new;
    }
    barrier();
    [[unroll]] for (uint j = 0u; j < GM; ++j)
      if (j < gs) {
        const float m_new = mn_s[j], corr = exp(m[j] - m_new);
        m[j] = m_new;
        l[j] *= corr;
        acc0[j] *= corr;
        acc1[j] *= corr;
      }
    for (uint key = 0u; key < nk; ++key) {
      const float v0 = d0 < n ? unpackHalf2x16(v_s[key * rs + d0 / 2u])[d0 & 1u] : 0.0;
      const float v1 = d1 < n ? unpackHalf2x16(v_s[key * rs + d1 / 2u])[d1 & 1u] : 0.0;
      [[unroll]] for (uint j = 0u; j < GM; ++j)
        if (j < gs) {
          const float e = p_s[j * tk + key];
          l[j] += e;
          acc0[j] += e * v0;
          acc1[j] += e * v1;
        }
    }
    if (tid < gs) m_s[tid] = mn_s[tid];
    barrier();  // k_s, v_s, part, p_s, mn_s are rewritten by the next tile, m_s read
  }
#ifdef SPLIT
  const uint heads = gl_NumWorkGroups.x / n_sub * g;
  [[unroll]] for (uint j = 0u; j < GM; ++j)
    if (j < gs) {
      const uint p = partial_at(t, h0 + j, heads, sp, n);
      if (tid == 0u) {
        arena[p] = m[j];
        arena[p + 1u] = l[j];
      }
      if (d0 < n) arena[p + 2u + d0] = acc0[j];
      if (d1 < n) arena[p + 2u + d1] = acc1[j];
    }
#else
  [[unroll]] for (uint j = 0u; j < GM; ++j)
    if (j < gs) {
      const uint oc = pc.c_off + t * pc.c_stride + (h0 + j) * n;
      if (d0 < n) arena[oc + d0] = acc0[j] / l[j];
      if (d1 < n) arena[oc + d1] = acc1[j] / l[j];
    }
#endif
}
#endif  // COMBINE
