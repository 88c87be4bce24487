#version 450
// attention: out_h = sum_p softmax_p(scale q_h . k_p) v_p over positions [begin, pos], causal
// (pos = pos0 + t), begin = pos - window + 1 with a sliding window; grouped-query heads: query
// head h reads KV head h / n_rot (n_rot holds the group size here).
// q: head h of token t at a_off + t a_stride + h n (ARENA); out likewise at c_off / c_stride;
// K/V: f16 pairs in KV (kv_store.comp.glsl), KV head g at word g n / 2 of a position.
// One workgroup = one head x one token (grid x = heads, y = tokens), FISH_SPAN_ATTN_WG threads.
// Latency-bound at decode (few workgroups), so keys go in tiles of tk = FISH_SPAN_ATTN_TILE (16
// when a padded row of head_dim > 128 would not fit): all threads load the tile's K and V rows
// into shared memory at once (consecutive words, every load issued before the first use, the
// next tile's while this one is computed), then
// TPK threads score each key from shared memory, and an online softmax in f32 (running max and
// sum, as flash attention) rescales the output; thread i owns output dims i and i + WG.
// Works for any context length. CPU reference: attention_one_query_ref (kernels/ops.h).
// SPLIT (span_attention_split, flash-decoding for short query batches): grid z = pc.split KV
// splits; split s of a row walks positions [begin + s kps, begin + (s + 1) kps) up to pos, kps =
// ceil(len / split) with len the last token's range (the longest), and writes its partial
// (m: running max, l: sum of exp, acc[n]: unnormalised output) at ARENA b_off + ((t heads + h)
// split + s)(n + 2); an empty range writes m = -1e30, l = 0, acc = 0. COMBINE
// (span_attention_combine): one workgroup = one head x one token (grid as the one-pass kernel)
// merges its row's partials exactly (log-sum-exp): M = max m_s, out = sum e^(m_s - M) acc_s /
// sum e^(m_s - M) l_s, in split order (deterministic). Two passes rather than a last-workgroup
// atomic: no cross-workgroup memory ordering (not guaranteed without the Vulkan memory model)
// and no counter state; the cost is one small dispatch and barrier per layer
// (span_attention_stream_last, FISH_VK_ATTN_STREAM=2, takes the atomic's way for the A/B).
// Q8 (span_attention_q8, span_attention_combine_q8): the output row is also written as q8_1
// (fish_vk_q8.h, K = heads x n, at ARENA float q8_off) for an integer-dot wo matvec, quant_q8_1's
// rule on the f32 values written (d = amax / 127, q = round(c / d), s = d sum q): the head's n
// values (a multiple of 32: whole blocks) through shared memory, one thread a block, so the span
// needs no quant_q8_1 dispatch and barrier for wo. Needs rows <= FISH_Q8_MAX_TOK.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#include "fish_vk_span.h"
#include "span_common.glsl"
#define WG FISH_SPAN_ATTN_WG
layout(local_size_x = WG) in;

// ARENA float of a partial: row (token t, head h) of heads, split s of splits, n + 2 floats each.
uint partial_at(uint t, uint h, uint s, uint n) {
  return pc.b_off + ((t * gl_NumWorkGroups.x + h) * pc.split + s) * (n + 2u);
}

#ifdef Q8
#include "fish_vk_q8.h"
layout(std430, binding = FISH_SPAN_ARENA) writeonly buffer ArenaBufU { uint arenau[]; };
shared float o_s[FISH_SPAN_MAX_HEAD];
#define Q8_SRC o_s
#include "q8_block.glsl"
// Head h of token t's output (dims tid: o0, tid + WG: o1) into the row's q8_1 copy; every
// invocation of the workgroup calls it (a barrier).
void q8_head(uint t, uint h, uint n, uint tid, float o0, float o1) {
  if (tid < n) o_s[tid] = o0;
  if (tid + WG < n) o_s[tid + WG] = o1;
  barrier();
  if (tid < n / 32u) q8_block(gl_NumWorkGroups.x * n, t, h * (n / 32u) + tid, 32u * tid);
}
#endif

#ifdef COMBINE
void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint n = pc.n, d0 = tid, d1 = tid + WG;
  float m = -1.0e30;
  for (uint s = 0u; s < pc.split; ++s) m = max(m, arena[partial_at(t, h, s, n)]);
  float l = 0.0, acc0 = 0.0, acc1 = 0.0;
  for (uint s = 0u; s < pc.split; ++s) {
    const uint p = partial_at(t, h, s, n);
    const float e = exp(arena[p] - m);
    l += e * arena[p + 1u];
    if (d0 < n) acc0 += e * arena[p + 2u + d0];
    if (d1 < n) acc1 += e * arena[p + 2u + d1];
  }
  const uint oc = pc.c_off + t * pc.c_stride + h * n;
  if (d0 < n) arena[oc + d0] = acc0 / l;
  if (d1 < n) arena[oc + d1] = acc1 / l;
#ifdef Q8
  q8_head(t, h, n, tid, acc0 / l, acc1 / l);
#endif
}
#else
#define TPK (WG / FISH_SPAN_ATTN_TILE)  // threads per key when scoring
// Shared words per K (and per V) tile: rows padded to n / 2 + 1 words (no bank conflicts
// between keys), a multiple of WG so the staging loop has a constant trip count.
#define ROUNDS ((FISH_SPAN_ATTN_TILE * (FISH_SPAN_MAX_HEAD / 4 + 1) + WG - 1) / WG)
#define CAP (ROUNDS * WG)

shared float q_s[FISH_SPAN_MAX_HEAD];
shared uint k_s[CAP];
shared uint v_s[CAP];
shared float part[WG];                  // partial q.k of each scoring thread
shared float p_s[FISH_SPAN_ATTN_TILE];  // the tile's scores

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

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint n = pc.n, g = h / pc.n_rot, rw = n / 2u, rs = rw + 1u;
  const uint tk = min(uint(FISH_SPAN_ATTN_TILE), uint(CAP) / rs);
  const uint qa = pc.a_off + t * pc.a_stride + h * n;
  for (uint d = tid; d < n; d += WG) q_s[d] = arena[qa + d];
  const uint pos = pc.pos0 + t;
  const uint begin = window_begin(pos);
  const uint head_w = g * rw;
  float m = -1.0e30, l = 0.0;
  float acc0 = 0.0, acc1 = 0.0;
  const uint d0 = tid, d1 = tid + WG;
#ifdef SPLIT
  const uint last = pc.pos0 + pc.rows - 1u;  // the last token has the longest range
  const uint len = pc.window > 0u ? min(pc.window, last + 1u) : last + 1u;
  const uint kps = (len + pc.split - 1u) / pc.split, sp = gl_WorkGroupID.z;
  const uint first = min(begin + sp * kps, pos + 1u), end = min(first + kps, pos + 1u);
#else
  const uint first = begin, end = pos + 1u;
#endif
  const uint kk = tid / TPK, part_i = tid % TPK;  // scoring: key kk, words part_i, + TPK, ...
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
    float dot_qk = 0.0;
    if (kk < nk)
      for (uint w = part_i; w < rw; w += TPK) {
        const vec2 k2 = unpackHalf2x16(k_s[kk * rs + w]);
        dot_qk += q_s[2u * w] * k2.x + q_s[2u * w + 1u] * k2.y;
      }
    part[tid] = dot_qk;
    barrier();
    if (tid < nk) {
      float s = 0.0;
      for (uint i = 0u; i < TPK; ++i) s += part[tid * TPK + i];
      p_s[tid] = pc.scale * s;
    }
    barrier();
    float m_new = m;
    for (uint j = 0u; j < nk; ++j) m_new = max(m_new, p_s[j]);
    const float corr = exp(m - m_new);
    l *= corr;
    acc0 *= corr;
    acc1 *= corr;
    for (uint j = 0u; j < nk; ++j) {
      const float e = exp(p_s[j] - m_new);
      l += e;
      if (d0 < n) acc0 += e * unpackHalf2x16(v_s[j * rs + d0 / 2u])[d0 & 1u];
      if (d1 < n) acc1 += e * unpackHalf2x16(v_s[j * rs + d1 / 2u])[d1 & 1u];
    }
    m = m_new;
    barrier();  // k_s, v_s, part, p_s are rewritten by the next tile
  }
#ifdef SPLIT
  const uint p = partial_at(t, h, sp, n);
  if (tid == 0u) {
    arena[p] = m;
    arena[p + 1u] = l;
  }
  if (d0 < n) arena[p + 2u + d0] = acc0;
  if (d1 < n) arena[p + 2u + d1] = acc1;
#else
  const uint oc = pc.c_off + t * pc.c_stride + h * n;
  if (d0 < n) arena[oc + d0] = acc0 / l;
  if (d1 < n) arena[oc + d1] = acc1 / l;
#ifdef Q8
  q8_head(t, h, n, tid, acc0 / l, acc1 / l);
#endif
#endif
}
#endif  // COMBINE
