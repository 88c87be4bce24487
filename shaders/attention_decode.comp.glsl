#version 450
// attention_decode (span_attention_decode): attention of a short query batch (decode, a
// speculative verify) with RoPE and the KV store fused in, so a decode layer runs one dispatch
// and barrier for all three. One workgroup = KV head g x every token of the dispatch x KV split
// z (grid n_kv x 1 x split); its R = group x rows query rows (row r: token r / group, query head
// g group + r % group) share each K/V load. It rotates its queries and its tokens' keys from the
// unrotated q|k|v rows in ARENA (token t at a_off + t a_stride: n_kv group query heads of n
// floats, then n_kv key heads, then n_kv value heads; span_rope.glsl) into shared memory,
// rounding keys and values to f16 as the cache holds them; split 0 also writes them to the KV at
// position pos0 + t (kv_k / kv_v, kv_stride words a position, two halves a word). Keys before
// pos0 come from the KV, the dispatch's own from shared memory: no workgroup reads what another
// writes. Keys go in passes of FISH_SPAN_DEC_KEYS: two threads score a key for every row (K read
// straight from the KV, all of a thread's loads issued before use), a workgroup max per row
// (subgroupMax + shared) moves the running max m, the weights exp(s - m) go to shared memory, and
// thread (key group kg, word pair wp) accumulates every row's four dims of words 2wp, 2wp + 1 over
// keys kg, kg + KG, ... (KG = WG / ceil(n / 4); 8 keys' V loads in flight): three barriers a
// pass where the tiled kernel takes three a 32-key tile.
// Causal per row, and windowed: token t sees [begin_t, pos0 + t]. SPLIT (split >= 2): split s
// walks [lo + s kps, lo + (s + 1) kps) of [lo, pos0 + rows) (lo: token 0's begin, kps = the
// range / split rounded up) and writes its partials as span_attention_split (m, l, acc at b_off +
// ((t n_head + h) split + s)(n + 2); empty: m = -1e30, l = 0) for span_attention_combine; split
// 1 writes the normalised output at c_off + t c_stride + h n. Q8 (span_attention_decode_q8,
// split 1): also the output row's q8_1 copy (q8_block.glsl, K = n_head n) for an idot wo.
// Needs n even <= FISH_SPAN_MAX_HEAD, R <= FISH_SPAN_DEC_ROWS, rows <= FISH_SPAN_DEC_TOK,
// subgroups of >= 4 lanes (a key's two scoring threads sum through subgroupShuffleXor: lavapipe's
// clustered add of 2 lanes gave wrong sums). CPU reference: rope_ref, then attention_one_query_ref (kernels/ops.h).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "fish_vk_span.h"
#include "span_common.glsl"
#include "span_rope.glsl"
#include "kv_f16.glsl"
#define WG FISH_SPAN_DEC_WG
#define KEYS FISH_SPAN_DEC_KEYS
#define ROWS FISH_SPAN_DEC_ROWS
#define HD FISH_SPAN_MAX_HEAD
#define TPK 2  // threads scoring one key, each half of its words (KEYS = WG / TPK)
#if KEYS * TPK != WG
#error "two scoring threads a key"
#endif
#define MAX_SG (WG / 4)  // subgroups of >= 4 lanes (the span checks)
#define NEG -1.0e30
#if ROWS * KEYS < 4 * WG
#error "e_s holds a row's key-group accumulators: KG x 4 ceil(n / 4) <= 4 WG floats"
#endif
layout(local_size_x = WG) in;
layout(std430, binding = FISH_SPAN_KV) readonly buffer KvBuf4 { uvec4 kv4[]; };

shared float q_s[ROWS * HD];  // rotated queries, row r at r n; the Q8 epilogue's outputs
shared float e_s[ROWS * KEYS];  // a pass's weights, row r at r KEYS; the final reduction
shared float kc_s[FISH_SPAN_DEC_TOK * HD], vc_s[FISH_SPAN_DEC_TOK * HD];  // this batch's K, V
shared float red_s[ROWS * MAX_SG];  // per-subgroup maxima / sums of each row
shared float ml_s[2 * ROWS];        // each row's final m and l

#ifdef Q8
#include "fish_vk_q8.h"
layout(std430, binding = FISH_SPAN_ARENA) writeonly buffer ArenaBufU { uint arenau[]; };
#define Q8_SRC q_s
#include "q8_block.glsl"
#endif

// Words wa, wa + 1 (zero when !has_b) of V at position p of KV head g (this batch's from shared
// memory).
vec4 v_pair(uint p, uint g, uint rw, uint wa, bool has_b) {
  if (p < pc.pos0) {
    const uint at = pc.kv_v + p * pc.kv_stride + g * rw + wa;
    return vec4(unpackHalf2x16(kv[at]), has_b ? unpackHalf2x16(kv[at + 1u]) : vec2(0.0));
  }
  const uint c = (p - pc.pos0) * pc.n + 2u * wa;
  return vec4(vc_s[c], vc_s[c + 1u], has_b ? vc_s[c + 2u] : 0.0, has_b ? vc_s[c + 3u] : 0.0);
}

// Workgroup reduction of v per row (max or sum) through red_s; every thread gets the result.
// Callers separate two calls with a barrier (red_s is rewritten).
void row_reduce(inout float v[ROWS], uint R, bool is_max) {
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    if (r >= R) break;
    const float s = is_max ? subgroupMax(v[r]) : subgroupAdd(v[r]);
    if (subgroupElect()) red_s[r * MAX_SG + gl_SubgroupID] = s;
  }
  barrier();
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    if (r >= R) break;
    float s = is_max ? NEG : 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; ++i)
      s = is_max ? max(s, red_s[r * MAX_SG + i]) : s + red_s[r * MAX_SG + i];
    v[r] = s;
  }
}

void main() {
  const uint g = gl_WorkGroupID.x, sp = gl_WorkGroupID.z, tid = gl_LocalInvocationID.x;
  const uint n = pc.n, rw = n / 2u, G = pc.group, T = pc.rows, R = G * T;
  const uint n_kv = gl_NumWorkGroups.x, n_head = n_kv * G;
  const uint k_off = n_head * n, v_off = k_off + n_kv * n;  // in a token's q|k|v row
  // Queries and this batch's K / V rows of head g, rotated and rounded, into shared memory.
  for (uint e = tid; e < R * n; e += WG) {
    const uint r = e / n, d = e % n, t = r / G;
    q_s[e] = rope_value(pc.a_off + t * pc.a_stride + (g * G + r % G) * n, d, pc.pos0 + t);
  }
  for (uint e = tid; e < T * n; e += WG) {
    const uint t = e / n, d = e % n, row = pc.a_off + t * pc.a_stride;
    kc_s[e] = f16_round(rope_value(row + k_off + g * n, d, pc.pos0 + t));
    vc_s[e] = f16_round(arena[row + v_off + g * n + d]);
  }
  barrier();
  if (sp == 0u)
    for (uint e = tid; e < T * rw; e += WG) {
      const uint t = e / rw, w = e % rw, c = t * n + 2u * w;
      const uint dst = (pc.pos0 + t) * pc.kv_stride + g * rw + w;
      kv[pc.kv_k + dst] = packHalf2x16(vec2(kc_s[c], kc_s[c + 1u]));
      kv[pc.kv_v + dst] = packHalf2x16(vec2(vc_s[c], vc_s[c + 1u]));
    }

  const uint last = pc.pos0 + T - 1u, lo = window_begin(pc.pos0);
  const uint kps = (last + 1u - lo + pc.split - 1u) / pc.split;
  const uint first = min(lo + sp * kps, last + 1u), end = min(first + kps, last + 1u);
  // Scoring: key j = tid / TPK of a pass, its words [w0, w0 + rw / 2) (the last thread of a key
  // takes the odd word of an odd rw); uvec4 loads where every such range is 16-byte aligned.
  const uint j = tid / TPK, part = tid % TPK;
  const uint w0 = part * (rw / TPK), w1 = part == TPK - 1u ? rw : w0 + rw / TPK;
  const bool vec4_k = ((pc.kv_k | pc.kv_stride | (rw / TPK)) & 3u) == 0u && rw % TPK == 0u;
  // Output: thread (kg, wp) owns words wa = 2 wp, wa + 1 of every row for keys kg, kg + KG, ...
  const uint TPR = (rw + 1u) / 2u, KG = WG / TPR, kg = tid / TPR, wa = 2u * (tid % TPR);
  const bool has_b = wa + 1u < rw;
  float m[ROWS], l[ROWS];
  vec4 acc[ROWS];
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    m[r] = NEG;
    l[r] = 0.0;
    acc[r] = vec4(0.0);
  }
  for (uint base = first; base < end; base += KEYS) {
    const uint nk = min(uint(KEYS), end - base), p = base + j;
    float s[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) s[r] = 0.0;
    if (j < nk && p < pc.pos0 && vec4_k) {
      const uint src4 = (pc.kv_k + p * pc.kv_stride + g * rw + w0) / 4u, n4 = (w1 - w0) / 4u;
      for (uint c0 = 0u; c0 < n4; c0 += 8u) {  // 8 loads in flight, then their math
        uvec4 kr[8];
        [[unroll]] for (uint i = 0u; i < 8u; ++i) kr[i] = c0 + i < n4 ? kv4[src4 + c0 + i] : uvec4(0u);
        [[unroll]] for (uint i = 0u; i < 8u; ++i) {
          if (c0 + i >= n4) break;
          const vec4 k0 = vec4(unpackHalf2x16(kr[i].x), unpackHalf2x16(kr[i].y));
          const vec4 k1 = vec4(unpackHalf2x16(kr[i].z), unpackHalf2x16(kr[i].w));
          const uint d = 2u * w0 + 8u * (c0 + i);
          [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
            if (r >= R) break;
            const uint q = r * n + d;
            s[r] += dot(vec4(q_s[q], q_s[q + 1u], q_s[q + 2u], q_s[q + 3u]), k0) +
                    dot(vec4(q_s[q + 4u], q_s[q + 5u], q_s[q + 6u], q_s[q + 7u]), k1);
          }
        }
      }
    } else if (j < nk && p < pc.pos0) {
      for (uint x = w0; x < w1; ++x) {
        const vec2 k2 = unpackHalf2x16(kv[pc.kv_k + p * pc.kv_stride + g * rw + x]);
        [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
          if (r >= R) break;
          s[r] += q_s[r * n + 2u * x] * k2.x + q_s[r * n + 2u * x + 1u] * k2.y;
        }
      }
    } else if (j < nk) {
      const uint c = (p - pc.pos0) * n;
      for (uint d = 2u * w0; d < 2u * w1; ++d) {
        [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
          if (r >= R) break;
          s[r] += q_s[r * n + d] * kc_s[c + d];
        }
      }
    }
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
      s[r] += subgroupShuffleXor(s[r], 1u);
      const uint pos = pc.pos0 + r / G;
      s[r] = j < nk && r < R && p >= window_begin(pos) && p <= pos ? pc.scale * s[r] : NEG;
    }
    float mx[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) mx[r] = s[r];
    row_reduce(mx, R, true);
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
      if (r >= R) break;
      const float m_new = max(m[r], mx[r]), corr = exp(m[r] - m_new);
      m[r] = m_new;
      const float e = s[r] > 0.5 * NEG ? exp(s[r] - m_new) : 0.0;
      if (part == 0u) {  // one weight a key (its threads hold the same score)
        l[r] = l[r] * corr + e;
        e_s[r * KEYS + j] = e;
      } else {
        l[r] *= corr;
      }
      acc[r] *= corr;
    }
    barrier();  // e_s written; red_s read
    if (kg < KG) {
      uint k = kg;
      for (; k + 7u * KG < nk; k += 8u * KG) {  // 8 keys' V loads in flight, then their math
        vec4 v[8];
        [[unroll]] for (uint i = 0u; i < 8u; ++i) v[i] = v_pair(base + k + i * KG, g, rw, wa, has_b);
        [[unroll]] for (uint i = 0u; i < 8u; ++i)
          [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
            if (r >= R) break;
            acc[r] += e_s[r * KEYS + k + i * KG] * v[i];
          }
      }
      for (; k < nk; k += KG) {
        const vec4 v = v_pair(base + k, g, rw, wa, has_b);
        [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
          if (r >= R) break;
          acc[r] += e_s[r * KEYS + k] * v;
        }
      }
    }
    barrier();  // e_s is rewritten by the next pass
  }
  row_reduce(l, R, false);
  if (tid == 0u)
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
      ml_s[2u * r] = m[r];
      ml_s[2u * r + 1u] = l[r];
    }
  // The key groups' accumulators summed through e_s a row at a time (KG x 4 TPR <= 4 WG floats;
  // thread (kg, wp)'s dims at kg 4 TPR + 2 wa, so dim d of group k is at k 4 TPR + d).
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    if (r >= R) break;
    if (kg < KG) {
      const uint at = kg * 4u * TPR + 2u * wa;
      e_s[at] = acc[r].x;
      e_s[at + 1u] = acc[r].y;
      e_s[at + 2u] = acc[r].z;
      e_s[at + 3u] = acc[r].w;
    }
    barrier();
    const uint t = r / G, h = g * G + r % G;
    for (uint d = tid; d < n; d += WG) {
      float o = 0.0;
      for (uint k = 0u; k < KG; ++k) o += e_s[k * 4u * TPR + d];
      if (pc.split >= 2u) {
        const uint pa = pc.b_off + ((t * n_head + h) * pc.split + sp) * (n + 2u);
        if (d == 0u) {
          arena[pa] = ml_s[2u * r];
          arena[pa + 1u] = ml_s[2u * r + 1u];
        }
        arena[pa + 2u + d] = o;
      } else {
        o /= ml_s[2u * r + 1u];
        arena[pc.c_off + t * pc.c_stride + h * n + d] = o;
#ifdef Q8
        q_s[r * n + d] = o;
#endif
      }
    }
    barrier();  // e_s is rewritten for the next row
  }
#ifdef Q8
  // The row's q8_1 copy: one thread a 32-value block of R n / 32 (n a multiple of 32).
  if (pc.split < 2u && tid < R * n / 32u) {
    const uint r = tid / (n / 32u), b = tid % (n / 32u), t = r / G, h = g * G + r % G;
    q8_block(n_head * n, t, h * (n / 32u) + b, r * n + 32u * b);
  }
#endif
}
