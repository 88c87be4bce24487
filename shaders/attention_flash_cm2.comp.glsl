#version 450
// attention_flash_cm2 (span_attention_flash_cm2, FISH_VK_FLASH_CM=2): span_attention_flash_cm
// (attention_flash_cm.comp.glsl) with one workgroup barrier a key tile instead of four; same
// push constants, dispatch and result (causal, per-query [begin, pos] window, head h reading KV
// head h / n_rot).
//
// One workgroup = one head x BQ = NSG x CM consecutive query tokens (grid x = heads, y =
// ceil(rows / BQ)); NSG subgroups of SG lanes, subgroup s owning query rows s CM .. s CM + CM - 1
// and everything computed for them, so only the K/V staging is shared:
//   - Q goes through shared memory once into HD / CK coopmat A fragments kept in registers;
//   - K and V tiles of KT keys are double-buffered: every thread loads tile t + 1 from the cache
//     into registers before tile t's math and stores it to the other buffer after; one barrier;
//   - per tile a subgroup (subgroup-scope sync only) computes S = Q K^T into its CM x KT slice of
//     s_s, runs the online softmax with all its lanes (LPR = SG / CM lanes a row, row max and sum
//     through subgroupShuffleXor; one lane a row, CM / SG rows a lane where SG < CM), writes P
//     (f16) to its rows of p_s and accumulates O += P V in HD / CN coopmat accumulators;
//   - the running max m moves only when a row's tile max exceeds it by more than kSlack (P =
//     exp(S - m) <= e^8 < f16's 65504), so O is rescaled by exp(m_old - m_new) only in the few
//     tiles where some row's max jumps, and then in registers: row_of, an accumulator holding
//     each element's row, picks the row's correction (s_s);
//   - a subgroup skips the math of tiles outside its rows' windows, but every subgroup runs the
//     subgroup syncs (lavapipe mishandles subgroup barriers only some subgroups reach).
// s_s rows are KT / 4 + 1 vec4: S, then the row's correction (x) and final sum l (y); the padding
// also spreads the softmax lanes' vec4 reads over the banks. The output row is O / l,
// through s_s.
// CM x CN x CK: the device's f16 -> f32 subgroup shape (coopmat.h); HD, NSG and KT are
// specialisation constants that engine/vulkan/flash_cm.h picks to fit the shared memory (its
// variant 2: BQ <= 4 KT so Q fits the K/V buffers; KT a multiple of 4 LPR).
// Rounding: Q and P to f16 (K and V are f16 in the cache), products and sums in f32.
// CPU reference: attention_one_query_ref (kernels/ops.h); tests/vulkan/vulkan_span_ops_test.cpp.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "flash_cm_head.glsl"

const uint BQ = NSG * CM;                    // query rows of the workgroup
const uint LD = HD + 8u;                     // kv_s row stride (f16): pads banks
const uint LD4 = LD / 4u;                    // ... in f16vec4
const uint TILE4 = KT * LD4;                 // f16vec4 of one K or V tile
const uint LS4 = KT / 4u + 1u;               // s_s row stride (vec4): S, then correction and sum
const uint SS = CM * LS4;                    // vec4 of a subgroup's slice of s_s
const uint LP = KT + 8u;                     // p_s row stride (f16)
const uint LP4 = LP / 4u;                    // ... in f16vec4
const uint NB = HD / CN;                     // O accumulators (CN-column blocks)
const uint NQ = HD / CK;                     // Q fragments
const uint OPB = (CM * CN) / SG;             // values of a CM x CN block a lane writes out
const uint HD4 = HD / 4u;                    // f16vec4 of a K or V row
const uint NPF = (KT * HD4 + WG - 1u) / WG;  // f16vec4 of K (and of V) a thread stages a tile
const uint LPR = (SG + CM - 1u) / CM;        // lanes a softmax row (1 where SG < CM)
const uint RS = SG / LPR;                    // rows a softmax pass covers
const uint RPL = (CM + SG - 1u) / SG;        // softmax rows a lane (1 where SG >= CM)
const uint C4 = KT / (4u * LPR);             // groups of 4 keys a softmax lane handles
const float kSlack = 8.0;                    // the running max lags the true one by at most this

shared f16vec4 kv_s[4u * TILE4];  // buffers b = 0, 1: K at 2 b TILE4, V after; Q before the loop
shared vec4 s_s[NSG * SS];        // f32 in vec4: the softmax reads four keys at once
shared f16vec4 p_s[BQ * LP4];

#define ACC coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>

// Words (K lo, K hi, V lo, V hi: four f16 each) of staged element e (key e / HD4, values
// 4 (e % HD4) ..) of the tile at key `tile` with nk keys; zero past them.
uvec4 kv_words(uint tile, uint nk, uint g, uint e) {
  const uint key = e / HD4, d4 = e % HD4;
  if (e >= KT * HD4 || key >= nk) return uvec4(0u);
  const uint src = (tile + key) * pc.kv_stride + g * (HD / 2u) + 2u * d4;
  return uvec4(kv[pc.kv_k + src], kv[pc.kv_k + src + 1u], kv[pc.kv_v + src],
               kv[pc.kv_v + src + 1u]);
}

void put_kv(uint b, uint e, uvec4 w) {
  if (e >= KT * HD4) return;
  const uint at = 2u * b * TILE4 + (e / HD4) * LD4 + e % HD4;
  kv_s[at] = f16vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
  kv_s[at + TILE4] = f16vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
}

void subgroup_sync() {
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}

void main() {
  const uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint sg = tid / SG, lane = tid % SG;
  const uint t0 = gl_WorkGroupID.y * BQ;
  const uint g = h / pc.n_rot;
  const uint n_q = min(BQ, pc.rows - t0);  // valid queries of this tile
  const uint row0 = sg * CM;               // the subgroup's first query row in the tile
  const uint sbase = sg * SS;
  // The subgroup's Q rows (f16, zero past n_q) through its rows of kv_s into registers.
  for (uint e = lane; e < CM * HD4; e += SG) {
    const uint i = row0 + e / HD4, d4 = e % HD4;
    const uint a = pc.a_off + (t0 + min(i, n_q - 1u)) * pc.a_stride + h * HD + 4u * d4;
    const vec4 q = vec4(arena[a], arena[a + 1u], arena[a + 2u], arena[a + 3u]);
    kv_s[i * LD4 + d4] = f16vec4(i < n_q ? q : vec4(0.0));
  }
  subgroup_sync();
  coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> qa[NQ];
  [[unroll]] for (uint kk = 0u; kk < NQ; ++kk) {
    coopMatLoad(qa[kk], kv_s, row0 * LD4 + kk * CK / 4u, LD4, gl_CooperativeMatrixLayoutRowMajor);
  }
  barrier();  // kv_s takes the K/V tiles from here
  const uint first = window_begin(pc.pos0 + t0), end = pc.pos0 + t0 + n_q;
  // The subgroup's keys: from its first row's begin to its last valid row's pos (none: n_q <=
  // row0).
  const uint sg_rows = n_q > row0 ? min(CM, n_q - row0) : 0u;
  const uint sg_first = window_begin(pc.pos0 + t0 + row0);
  const uint sg_end = pc.pos0 + t0 + row0 + sg_rows;
  // row_of: each accumulator element's row (the element mapping is the same for every matrix of
  // a type), so O's rows scale in registers with no barrier.
  for (uint e = lane; e < SS; e += SG) s_s[sbase + e] = vec4(float(e / LS4));
  subgroup_sync();
  ACC row_of;
  coopMatLoad(row_of, s_s, sbase, LS4, gl_CooperativeMatrixLayoutRowMajor);
  subgroup_sync();
  ACC o[NB];
  [[unroll]] for (uint nb = 0u; nb < NB; ++nb) o[nb] = ACC(0.0);
  float m[RPL], l[RPL];
  [[unroll]] for (uint rr = 0u; rr < RPL; ++rr) {
    m[rr] = -1.0e30;  // finite: exp(m - m_new) stays 0 / 1, never NaN, before the first key
    l[rr] = 0.0;
  }
  const uint r_lane = lane % RS, sub = lane / RS;  // softmax row (of a pass) and part of it
  uvec4 pf[NPF];
  [[unroll]] for (uint s = 0u; s < NPF; ++s) {
    pf[s] = kv_words(first, min(KT, end - first), g, tid + WG * s);
  }
  [[unroll]] for (uint s = 0u; s < NPF; ++s) put_kv(0u, tid + WG * s, pf[s]);
  barrier();
  uint buf = 0u;
  for (uint tile = first; tile < end; tile += KT, buf ^= 1u) {
    const uint nk = min(KT, end - tile), next = tile + KT;
    if (next < end) {  // the next tile's loads overlap this tile's math
      [[unroll]] for (uint s = 0u; s < NPF; ++s) {
        pf[s] = kv_words(next, min(KT, end - next), g, tid + WG * s);
      }
    }
    // The subgroup's math (subgroup-uniform act) between subgroup syncs that every subgroup runs:
    // lavapipe mishandles subgroup barriers that only some subgroups of a workgroup reach.
    const bool act = sg_rows > 0u && tile < sg_end && tile + nk > sg_first;
    const uint kb = 2u * buf * TILE4, vb = kb + TILE4;
    if (act) {  // S = Q K^T (K^T: HD x KT, column-major in kv_s)
      ACC s[KT / CN];
      [[unroll]] for (uint j = 0u; j < KT / CN; ++j) s[j] = ACC(0.0);
      [[unroll]] for (uint kk = 0u; kk < NQ; ++kk) {
        [[unroll]] for (uint j = 0u; j < KT / CN; ++j) {
          coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b;
          coopMatLoad(b, kv_s, kb + j * CN * LD4 + kk * CK / 4u, LD4,
                      gl_CooperativeMatrixLayoutColumnMajor);
          s[j] = coopMatMulAdd(qa[kk], b, s[j]);
        }
      }
      [[unroll]] for (uint j = 0u; j < KT / CN; ++j) {
        coopMatStore(s[j], s_s, sbase + j * CN / 4u, LS4, gl_CooperativeMatrixLayoutRowMajor);
      }
    }
    subgroup_sync();
    bool rescale = false;
    if (act) {  // online softmax: LPR lanes a row, keys 4 (sub + LPR c) .. + 3 for c < C4
      [[unroll]] for (uint rr = 0u; rr < RPL; ++rr) {
        const uint r = rr * RS + r_lane, i = row0 + r;
        const uint pos = pc.pos0 + t0 + i, begin = window_begin(pos);
        const uint srow = sbase + r * LS4;
        vec4 sv[C4];  // scaled scores, -1e30 where masked
        float mx = -1.0e30;
        [[unroll]] for (uint c = 0u; c < C4; ++c) {
          const uint j4 = sub + LPR * c;
          sv[c] = pc.scale * s_s[srow + j4];
          [[unroll]] for (uint q = 0u; q < 4u; ++q) {
            const uint j = 4u * j4 + q, p = tile + j;
            if (i >= n_q || j >= nk || p > pos || p < begin) sv[c][q] = -1.0e30;
            mx = max(mx, sv[c][q]);
          }
        }
        for (uint x = LPR / 2u; x > 0u; x /= 2u) mx = max(mx, subgroupShuffleXor(mx, RS * x));
        const float m_old = m[rr], m_new = mx > m_old + kSlack ? mx : m_old;
        float sum = 0.0;
        [[unroll]] for (uint c = 0u; c < C4; ++c) {
          // Masked keys (-1e30) give 0, also in a row with no key yet (m_new = -1e30).
          const vec4 pv = mix(vec4(0.0), exp(sv[c] - m_new), greaterThan(sv[c], vec4(-1.0e29)));
          sum += pv.x + pv.y + pv.z + pv.w;
          p_s[i * LP4 + sub + LPR * c] = f16vec4(pv);
        }
        for (uint x = LPR / 2u; x > 0u; x /= 2u) sum += subgroupShuffleXor(sum, RS * x);
        const float corr = exp(m_old - m_new);
        rescale = rescale || (corr != 1.0 && l[rr] > 0.0);  // O's row is 0 while l is
        l[rr] = l[rr] * corr + sum;
        m[rr] = m_new;
        if (sub == 0u) s_s[srow + KT / 4u].x = corr;  // past S: no lane reads it this phase
      }
    }
    subgroup_sync();
    if (act) {
      if (subgroupAny(rescale)) {  // O *= the row's correction, element by element
        [[unroll]] for (uint nb = 0u; nb < NB; ++nb) {
          for (int x = 0; x < o[nb].length(); ++x)
            o[nb][x] *= s_s[sbase + uint(row_of[x]) * LS4 + KT / 4u].x;
        }
      }
      // O += P V (V: KT x HD, row-major in kv_s).
      coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> pa[KT / CK];
      [[unroll]] for (uint kk = 0u; kk < KT / CK; ++kk) {
        coopMatLoad(pa[kk], p_s, row0 * LP4 + kk * CK / 4u, LP4,
                    gl_CooperativeMatrixLayoutRowMajor);
      }
      [[unroll]] for (uint nb = 0u; nb < NB; ++nb) {
        [[unroll]] for (uint kk = 0u; kk < KT / CK; ++kk) {
          coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b;
          coopMatLoad(b, kv_s, vb + kk * CK * LD4 + nb * CN / 4u, LD4,
                      gl_CooperativeMatrixLayoutRowMajor);
          o[nb] = coopMatMulAdd(pa[kk], b, o[nb]);
        }
      }
    }
    if (next < end) {
      [[unroll]] for (uint s = 0u; s < NPF; ++s) put_kv(buf ^ 1u, tid + WG * s, pf[s]);
    }
    barrier();  // the next tile's K/V are in place; s_s and p_s are free again
  }
  // out = O / l, through s_s.
  [[unroll]] for (uint rr = 0u; rr < RPL; ++rr) {
    if (sub == 0u) s_s[sbase + (rr * RS + r_lane) * LS4 + KT / 4u].y = l[rr];
  }
  [[unroll]] for (uint nb = 0u; nb < NB; ++nb) {
    coopMatStore(o[nb], s_s, sbase, LS4, gl_CooperativeMatrixLayoutRowMajor);
    subgroup_sync();
    [[unroll]] for (uint k = 0u; k < OPB; ++k) {
      const uint e = lane + SG * k, r = e / CN, i = row0 + r;
      if (i < n_q)
        arena[pc.c_off + (t0 + i) * pc.c_stride + h * HD + nb * CN + e % CN] =
            s_s[sbase + r * LS4 + (e % CN) / 4u][e % 4u] / s_s[sbase + r * LS4 + KT / 4u].y;
    }
    subgroup_sync();
  }
}
