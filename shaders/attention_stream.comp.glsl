#version 450
// attention_stream (span_attention_stream): one decode token's attention with RoPE and the KV
// store fused in, built to stream the KV at the memory's rate (flash-decoding). Workgroup (KV
// head g, split z) of grid n_kv x 1 x split serves the ROWS = group query heads of g:
//   1. rotates their queries and g's key from the unrotated q|k|v row in ARENA (a_off: n_head query
//      heads of HD floats, then n_kv key heads, then n_kv value heads; span_rope.glsl) into shared
//      memory, the key and value rounded to f16 as the cache holds them; split 0 also stores them
//      to the KV at position pos0 (kv_k / kv_v, kv_stride words a position, two halves a word).
//      Keys before pos0 come from the KV, pos0's own from shared memory: no workgroup reads what
//      another writes.
//   2. streams its split's keys with no barrier: a team of LPK = 8 consecutive lanes takes a key,
//      each lane 8 dims (one uvec4 of K and one of V) of every 64-dim chunk; a team issues U keys'
//      K and V loads (U x CH = 4 uvec4 of each, CH = HD / 64) before their math, scores them
//      against the queries held in registers (the team's partial dots summed by three
//      subgroupShuffleXor steps), and keeps its own online softmax (m, l and the weighted V sum of
//      its dims) per row. Keys of a pass: team t takes base + u NT + t (NT = WG / LPK teams), so a
//      subgroup's loads cover consecutive keys.
//   3. merges its teams: each team's m and l through shared memory, every lane rescales its sums
//      to the workgroup's max, teams of a subgroup add through subgroupShuffleXor, subgroups
//      through shared memory, a row at a time.
// split 1 writes the normalised row at c_off + h HD (h = g ROWS + r); split >= 2 writes split z's
// partials as span_attention_split does (m, l, acc at b_off + (h split + z)(HD + 2); an empty
// range m = -1e30, l = 0) for span_attention_combine. The range [begin, pos0] (begin: the sliding
// window's first position) is cut into split ranges of ceil(len / split) keys as
// span_attention_decode cuts it. Q8 (span_attention_stream_q8, split 1): also the output row's q8_1
// copy (q8_block.glsl, K = n_head HD) for an idot wo. LAST (span_attention_stream_last, _last_q8;
// FISH_VK_ATTN_STREAM=2): with split >= 2 the last of g's workgroups to finish (an arrival counter
// at ARENA word w_off1 + g, zero before the dispatch and reset by that workgroup) merges the
// splits' partials into the normalised rows (and their q8_1 copy) itself, as span_attention_combine
// would in a second dispatch; partials are written and read through a coherent view.
// Specialised by HD (head_dim = pc.n: 64, 128, 192 or 256), ROWS (the group) and PIPE (the key
// loop's loads one pass ahead, FISH_VK_ATTN_STREAM_PIPE) with ROWS HD / 64 <= FISH_SPAN_STREAM_ROWS (a lane's queries and sums in registers: 16 floats each a row and
// chunk); needs subgroups of a multiple of 8 lanes and the KV's words 16-byte aligned (kv_k, kv_v,
// kv_stride multiples of 4): attention_stream_fits (vulkan_span.h), run_span_ops. CPU reference:
// rope_ref, then attention_one_query_ref (kernels/ops.h), the KV's f16 rounding.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "fish_vk_span.h"
#include "span_common.glsl"
#include "span_rope.glsl"
#include "kv_f16.glsl"
#define WG FISH_SPAN_STREAM_WG
#define LPK 8          // lanes a key (a team)
#define NT (WG / LPK)  // teams of a workgroup
#define MAX_ROWS FISH_SPAN_STREAM_ROWS  // ROWS CH <= MAX_ROWS: the register arrays' bound
#define MAX_NS (WG / LPK)  // subgroups of a workgroup (subgroups of >= LPK lanes)
#define NEG -1.0e30
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint HD = 128;  // head_dim, a multiple of 64
layout(constant_id = 1) const uint ROWS = 4;  // query heads a KV head
// PIPE 1 (FISH_VK_ATTN_STREAM_PIPE): a team issues the next pass's K and V loads before this
// pass's math (registers for two passes), so the key loop keeps loads in flight throughout
// instead of waiting a memory round trip each pass; 0: load, then use, pass by pass.
layout(constant_id = 2) const uint PIPE = 0;
const uint CH = HD / 64u;                     // 64-dim chunks a key
const uint U = 4u / CH;                       // keys a team loads before their math (U CH = 4)
layout(std430, binding = FISH_SPAN_KV) readonly buffer KvBuf4 { uvec4 kv4[]; };

shared float q_s[MAX_ROWS * FISH_SPAN_MAX_HEAD];  // rotated queries; the Q8 epilogue's outputs
shared float kc_s[FISH_SPAN_MAX_HEAD], vc_s[FISH_SPAN_MAX_HEAD];  // position pos0's K and V
shared float red_s[MAX_NS * FISH_SPAN_MAX_HEAD];  // a row's per-subgroup sums
shared float ml_s[2 * NT * MAX_ROWS];             // every team's m and l per row

#ifdef LAST
layout(std430, binding = FISH_SPAN_ARENA) coherent buffer ArenaC { float arenac[]; };
layout(std430, binding = FISH_SPAN_ARENA) coherent buffer ArenaCU { uint arenacu[]; };
#define PART arenac  // the partials: other workgroups of the dispatch read them
shared bool last_wg;
shared float ms_s[FISH_SPAN_ATTN_MAX_SPLIT], ls_s[FISH_SPAN_ATTN_MAX_SPLIT];
#else
#define PART arena
#endif

#ifdef Q8
#include "fish_vk_q8.h"
layout(std430, binding = FISH_SPAN_ARENA) writeonly buffer ArenaBufU { uint arenau[]; };
#define Q8_SRC q_s
#include "q8_block.glsl"
#endif

vec4 lo4(uvec4 w) { return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
vec4 hi4(uvec4 w) { return vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)); }

void main() {
  const uint g = gl_WorkGroupID.x, sp = gl_WorkGroupID.z, tid = gl_LocalInvocationID.x;
  const uint rw = HD / 2u, n_kv = gl_NumWorkGroups.x, n_head = n_kv * ROWS;
  const uint k_off = n_head * HD, v_off = k_off + n_kv * HD;  // in the token's q|k|v row
  for (uint e = tid; e < ROWS * HD; e += WG)
    q_s[e] = rope_value(pc.a_off + (g * ROWS + e / HD) * HD, e % HD, pc.pos0);
  for (uint d = tid; d < HD; d += WG) {
    kc_s[d] = f16_round(rope_value(pc.a_off + k_off + g * HD, d, pc.pos0));
    vc_s[d] = f16_round(arena[pc.a_off + v_off + g * HD + d]);
  }
  barrier();
  if (sp == 0u)
    for (uint w = tid; w < rw; w += WG) {
      const uint dst = pc.pos0 * pc.kv_stride + g * rw + w;
      kv[pc.kv_k + dst] = packHalf2x16(vec2(kc_s[2u * w], kc_s[2u * w + 1u]));
      kv[pc.kv_v + dst] = packHalf2x16(vec2(vc_s[2u * w], vc_s[2u * w + 1u]));
    }

  // Lane `lane` of team `team` owns dims c 64 + lane 8 .. + 7 of every chunk c.
  const uint lane = gl_SubgroupInvocationID % LPK;
  const uint team = (gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID) / LPK;
  vec4 qv[MAX_ROWS * 2];  // the scaled queries' dims this lane owns
  vec4 acc[MAX_ROWS * 2];
  float m[MAX_ROWS], l[MAX_ROWS];
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    m[r] = NEG;
    l[r] = 0.0;
    [[unroll]] for (uint c = 0u; c < CH; ++c) {
      const uint d = r * HD + c * 64u + lane * 8u, i = (r * CH + c) * 2u;
      qv[i] = pc.scale * vec4(q_s[d], q_s[d + 1u], q_s[d + 2u], q_s[d + 3u]);
      qv[i + 1u] = pc.scale * vec4(q_s[d + 4u], q_s[d + 5u], q_s[d + 6u], q_s[d + 7u]);
      acc[i] = vec4(0.0);
      acc[i + 1u] = vec4(0.0);
    }
  }

  const uint lo = window_begin(pc.pos0), len = pc.pos0 + 1u - lo;
  const uint kps = (len + pc.split - 1u) / pc.split;
  const uint first = min(lo + sp * kps, pc.pos0 + 1u), end = min(first + kps, pc.pos0 + 1u);
  const uint kend = min(end, pc.pos0);  // keys [first, kend) come from the KV
  const uint head4 = (g * rw) / 4u + lane, stride4 = pc.kv_stride / 4u;
  const uint kb4 = pc.kv_k / 4u + head4, vb4 = pc.kv_v / 4u + head4;
  // Pass `base`'s K and V words of this lane (keys past kend read as 0, masked below).
#define LOAD_PASS(kd, vd, b0)                                                                    \
  [[unroll]] for (uint u = 0u; u < U; ++u) {                                                     \
    const uint p = (b0) + u * NT + team, at = p * stride4;                                       \
    [[unroll]] for (uint c = 0u; c < CH; ++c) {                                                  \
      kd[u * CH + c] = p < kend ? kv4[kb4 + at + c * 8u] : uvec4(0u);                            \
      vd[u * CH + c] = p < kend ? kv4[vb4 + at + c * 8u] : uvec4(0u);                            \
    }                                                                                            \
  }
  uvec4 kn[4], vn[4];  // PIPE: the next pass's words, loaded while this pass's are used
  if (PIPE != 0u && first < kend) LOAD_PASS(kn, vn, first)
  for (uint base = first; base < kend; base += NT * U) {  // uniform: every team, every pass
    uvec4 kr[4], vr[4];
    if (PIPE != 0u) {
      kr = kn;
      vr = vn;
      if (base + NT * U < kend) LOAD_PASS(kn, vn, base + NT * U)
    } else {
      LOAD_PASS(kr, vr, base)
    }
    float s[4 * MAX_ROWS];  // key u, row r at u MAX_ROWS + r
    [[unroll]] for (uint u = 0u; u < U; ++u) {
      [[unroll]] for (uint r = 0u; r < ROWS; ++r) s[u * MAX_ROWS + r] = 0.0;
      [[unroll]] for (uint c = 0u; c < CH; ++c) {
        const vec4 k0 = lo4(kr[u * CH + c]), k1 = hi4(kr[u * CH + c]);
        [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
          const uint i = (r * CH + c) * 2u;
          s[u * MAX_ROWS + r] += dot(qv[i], k0) + dot(qv[i + 1u], k1);
        }
      }
    }
    [[unroll]] for (uint o = 1u; o < LPK; o <<= 1u)
      [[unroll]] for (uint u = 0u; u < U; ++u)
        [[unroll]] for (uint r = 0u; r < ROWS; ++r)
          s[u * MAX_ROWS + r] += subgroupShuffleXor(s[u * MAX_ROWS + r], o);
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
      float mx = NEG;
      [[unroll]] for (uint u = 0u; u < U; ++u) {
        if (base + u * NT + team >= kend) s[u * MAX_ROWS + r] = NEG;
        mx = max(mx, s[u * MAX_ROWS + r]);
      }
      const float m_new = max(m[r], mx), corr = exp(m[r] - m_new);
      m[r] = m_new;
      l[r] *= corr;
      [[unroll]] for (uint c = 0u; c < CH; ++c) {
        const uint i = (r * CH + c) * 2u;
        acc[i] *= corr;
        acc[i + 1u] *= corr;
      }
      [[unroll]] for (uint u = 0u; u < U; ++u) {
        const float e = s[u * MAX_ROWS + r] > 0.5 * NEG ? exp(s[u * MAX_ROWS + r] - m_new) : 0.0;
        l[r] += e;
        [[unroll]] for (uint c = 0u; c < CH; ++c) {
          const uint i = (r * CH + c) * 2u;
          acc[i] += e * lo4(vr[u * CH + c]);
          acc[i + 1u] += e * hi4(vr[u * CH + c]);
        }
      }
    }
  }
  if (first <= pc.pos0 && pc.pos0 < end) {  // pos0's own key (uniform): team 0 takes it
    float s[MAX_ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
      s[r] = 0.0;
      [[unroll]] for (uint c = 0u; c < CH; ++c) {
        const uint d = c * 64u + lane * 8u, i = (r * CH + c) * 2u;
        s[r] += dot(qv[i], vec4(kc_s[d], kc_s[d + 1u], kc_s[d + 2u], kc_s[d + 3u])) +
                dot(qv[i + 1u], vec4(kc_s[d + 4u], kc_s[d + 5u], kc_s[d + 6u], kc_s[d + 7u]));
      }
    }
    [[unroll]] for (uint o = 1u; o < LPK; o <<= 1u)
      [[unroll]] for (uint r = 0u; r < ROWS; ++r) s[r] += subgroupShuffleXor(s[r], o);
    if (team == 0u)
      [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
        const float m_new = max(m[r], s[r]), corr = exp(m[r] - m_new), e = exp(s[r] - m_new);
        m[r] = m_new;
        l[r] = l[r] * corr + e;
        [[unroll]] for (uint c = 0u; c < CH; ++c) {
          const uint d = c * 64u + lane * 8u, i = (r * CH + c) * 2u;
          acc[i] = acc[i] * corr + e * vec4(vc_s[d], vc_s[d + 1u], vc_s[d + 2u], vc_s[d + 3u]);
          acc[i + 1u] = acc[i + 1u] * corr +
                        e * vec4(vc_s[d + 4u], vc_s[d + 5u], vc_s[d + 6u], vc_s[d + 7u]);
        }
      }
  }

  // The teams merged: the workgroup's max M and sum L per row from every team's m and l.
  if (lane == 0u)
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
      ml_s[2u * (team * MAX_ROWS + r)] = m[r];
      ml_s[2u * (team * MAX_ROWS + r) + 1u] = l[r];
    }
  barrier();
  const uint ns = gl_NumSubgroups;
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    float M = NEG, L = 0.0;
    for (uint t = 0u; t < NT; ++t) M = max(M, ml_s[2u * (t * MAX_ROWS + r)]);
    for (uint t = 0u; t < NT; ++t)
      L += ml_s[2u * (t * MAX_ROWS + r) + 1u] * exp(ml_s[2u * (t * MAX_ROWS + r)] - M);
    const float f = exp(m[r] - M);
    [[unroll]] for (uint c = 0u; c < CH; ++c)
      [[unroll]] for (uint hh = 0u; hh < 2u; ++hh) {
        vec4 a = f * acc[(r * CH + c) * 2u + hh];
        for (uint o = LPK; o < gl_SubgroupSize; o <<= 1u) a += subgroupShuffleXor(a, o);
        if (gl_SubgroupInvocationID < LPK) {
          const uint at = gl_SubgroupID * FISH_SPAN_MAX_HEAD + c * 64u + lane * 8u + hh * 4u;
          red_s[at] = a.x;
          red_s[at + 1u] = a.y;
          red_s[at + 2u] = a.z;
          red_s[at + 3u] = a.w;
        }
      }
    barrier();
    const uint h = g * ROWS + r;
    for (uint d = tid; d < HD; d += WG) {
      float o = 0.0;
      for (uint i = 0u; i < ns; ++i) o += red_s[i * FISH_SPAN_MAX_HEAD + d];
      if (pc.split >= 2u) {
        const uint pa = pc.b_off + (h * pc.split + sp) * (HD + 2u);
        if (d == 0u) {
          PART[pa] = M;
          PART[pa + 1u] = L;
        }
        PART[pa + 2u + d] = o;
      } else {
        o /= L;
        arena[pc.c_off + h * HD + d] = o;
#ifdef Q8
        q_s[r * HD + d] = o;
#endif
      }
    }
    barrier();  // red_s is rewritten for the next row
  }
#ifdef LAST
  if (pc.split >= 2u) {  // the last of g's workgroups merges the partials
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u) last_wg = atomicAdd(arenacu[pc.w_off1 + g], 1u) == pc.split - 1u;
    barrier();
    if (!last_wg) return;
    memoryBarrierBuffer();
    if (tid == 0u) arenacu[pc.w_off1 + g] = 0u;
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
      const uint h = g * ROWS + r, pa0 = pc.b_off + h * pc.split * (HD + 2u);
      for (uint s = tid; s < pc.split; s += WG) {
        ms_s[s] = arenac[pa0 + s * (HD + 2u)];
        ls_s[s] = arenac[pa0 + s * (HD + 2u) + 1u];
      }
      barrier();
      float M = NEG, L = 0.0;
      for (uint s = 0u; s < pc.split; ++s) M = max(M, ms_s[s]);
      for (uint s = 0u; s < pc.split; ++s) L += ls_s[s] * exp(ms_s[s] - M);
      for (uint d = tid; d < HD; d += WG) {
        float o = 0.0;
        for (uint s = 0u; s < pc.split; ++s)
          o += arenac[pa0 + s * (HD + 2u) + 2u + d] * exp(ms_s[s] - M);
        o /= L;
        arena[pc.c_off + h * HD + d] = o;
#ifdef Q8
        q_s[r * HD + d] = o;
#endif
      }
      barrier();  // ms_s, ls_s are rewritten for the next row
    }
#ifdef Q8
    if (tid < ROWS * HD / 32u) {
      const uint r = tid / (HD / 32u), b = tid % (HD / 32u), h = g * ROWS + r;
      q8_block(n_head * HD, 0u, h * (HD / 32u) + b, r * HD + 32u * b);
    }
#endif
    return;
  }
#endif
#ifdef Q8
  // The row's q8_1 copy: one thread a 32-value block of ROWS HD / 32.
  if (pc.split < 2u && tid < ROWS * HD / 32u) {
    const uint r = tid / (HD / 32u), b = tid % (HD / 32u), h = g * ROWS + r;
    q8_block(n_head * HD, 0u, h * (HD / 32u) + b, r * HD + 32u * b);
  }
#endif
}
