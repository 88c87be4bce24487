#version 450
// attention_flash_cm (span_attention_flash_cm): span_attention_flash (attention_flash.comp.glsl)
// on cooperative matrices (VK_KHR_cooperative_matrix, f16 x f16 -> f32), same push constants and
// result: out_h = sum_p softmax_p(scale q_h . k_p) v_p over [begin, pos] per query (causal,
// sliding window), head h reading KV head h / n_rot (n_rot = query heads per KV head).
//
// One workgroup = one head x BQ = NSG x CM consecutive query tokens (grid x = heads, y =
// ceil(rows / BQ)); NSG subgroups of SG lanes, subgroup s owning query rows s CM .. s CM + CM - 1.
// Keys in tiles of KT from the first query's begin to the last query's pos, per tile:
//   1. the workgroup stages the tile's K and V rows (f16, HD + 8 values a row) in shared memory;
//   2. S = Q K^T: each subgroup multiplies its CM x HD Q block (f16 in shared, staged once) by
//      K^T into KT / CN accumulators (f32) and stores them to its CM x KT slice of s_s;
//   3. online softmax per query row in f32 (one lane a row): scale, mask to [begin, pos],
//      running max m and sum l (sums of the unrounded exponentials), P = exp(S - m) as f16 into
//      p_s, the correction exp(m_old - m_new) into c_s;
//   4. O = c O + P V: per CN-column block of the head dims the subgroup multiplies P (CM x KT) by
//      V's block into one accumulator, stores it to its CM x CN slice of s_s (reused: S is read),
//      and each lane updates the O values it owns (CM CN / SG of the block, in registers).
// The output row is O / l. CM x CN x CK: the device's f16 -> f32 subgroup shape (coopmat.h;
// 16x16x16 on NVIDIA, 8x8x8 on lavapipe); HD (the head dimension), NSG and KT are
// specialisation constants that engine/vulkan/flash_cm.h picks to fit the shared memory.
// Rounding: Q and P to f16 (K and V are f16 in the cache), products and sums in f32.
// CPU reference: attention_one_query_ref (kernels/ops.h); tests/vulkan/vulkan_span_ops_test.cpp.
#extension GL_GOOGLE_include_directive : require
#include "flash_cm_head.glsl"

const uint BQ = NSG * CM;         // query rows of the workgroup
const uint LD = HD + 8u;          // q_s, k_s, v_s row stride (f16): pads banks
const uint LD4 = LD / 4u;         // ... in f16vec4
const uint LP = KT + 8u;          // p_s row stride (f16)
const uint LP4 = LP / 4u;         // ... in f16vec4
const uint SS = CM * KT;          // floats of a subgroup's slice of s_s (>= CM x CN)
const uint OPB = (CM * CN) / SG;  // O values a lane owns per CN-column block
const uint NB = HD / CN;          // CN-column blocks of O
const uint HD4 = HD / 4u;

shared f16vec4 q_s[BQ * LD4];
shared f16vec4 k_s[KT * LD4];
shared f16vec4 v_s[KT * LD4];
shared float s_s[NSG * SS];
shared f16vec4 p_s[BQ * LP4];
shared float m_s[BQ], l_s[BQ], c_s[BQ];

#define ACC coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>

void main() {
  const uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint sg = tid / SG, lane = tid % SG;
  const uint t0 = gl_WorkGroupID.y * BQ;
  const uint g = h / pc.n_rot, rw = HD / 2u;
  const uint n_q = min(BQ, pc.rows - t0);  // valid queries of this tile
  for (uint e = tid; e < BQ * HD4; e += WG) {
    const uint i = e / HD4, d4 = e % HD4;
    vec4 q = vec4(0.0);
    if (i < n_q) {
      const uint a = pc.a_off + (t0 + i) * pc.a_stride + h * HD + 4u * d4;
      q = vec4(arena[a], arena[a + 1u], arena[a + 2u], arena[a + 3u]);
    }
    q_s[i * LD4 + d4] = f16vec4(q);
  }
  for (uint i = tid; i < BQ; i += WG) {
    m_s[i] = -1.0e30;  // finite: exp(m - m_new) stays 0 / 1, never NaN, before the first key
    l_s[i] = 0.0;
  }
  const uint pos_first = pc.pos0 + t0, pos_last = pc.pos0 + t0 + n_q - 1u;
  const uint first = window_begin(pos_first);
  const uint end = pos_last + 1u;
  float o[NB * OPB];
  [[unroll]] for (uint k = 0u; k < NB * OPB; ++k) o[k] = 0.0;
  const uint row0 = sg * CM;  // the subgroup's first query row in the tile
  for (uint tile = first; tile < end; tile += KT) {
    const uint nk = min(KT, end - tile);
    // 1. K and V rows (two words = four f16 a thread and step), zero past the tile's keys.
    for (uint e = tid; e < KT * HD4; e += WG) {
      const uint key = e / HD4, d4 = e % HD4;
      uvec2 kw = uvec2(0u), vw = uvec2(0u);
      if (key < nk) {
        const uint src = (tile + key) * pc.kv_stride + g * rw + 2u * d4;
        kw = uvec2(kv[pc.kv_k + src], kv[pc.kv_k + src + 1u]);
        vw = uvec2(kv[pc.kv_v + src], kv[pc.kv_v + src + 1u]);
      }
      k_s[key * LD4 + d4] = f16vec4(unpackHalf2x16(kw.x), unpackHalf2x16(kw.y));
      v_s[key * LD4 + d4] = f16vec4(unpackHalf2x16(vw.x), unpackHalf2x16(vw.y));
    }
    barrier();
    // 2. S = Q K^T for the subgroup's rows: K^T (HD x KT) read column-major from k_s.
    {
      ACC s[KT / CN];
      [[unroll]] for (uint j = 0u; j < KT / CN; ++j) s[j] = ACC(0.0);
      [[unroll]] for (uint kk = 0u; kk < HD; kk += CK) {
        coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> a;
        coopMatLoad(a, q_s, row0 * LD4 + kk / 4u, LD4, gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint j = 0u; j < KT / CN; ++j) {
          coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b;
          coopMatLoad(b, k_s, j * CN * LD4 + kk / 4u, LD4, gl_CooperativeMatrixLayoutColumnMajor);
          s[j] = coopMatMulAdd(a, b, s[j]);
        }
      }
      [[unroll]] for (uint j = 0u; j < KT / CN; ++j) {
        coopMatStore(s[j], s_s, sg * SS + j * CN, KT, gl_CooperativeMatrixLayoutRowMajor);
      }
    }
    barrier();
    // 3. Online softmax, one lane a row.
    for (uint r = lane; r < CM; r += SG) {
      const uint i = row0 + r;
      const uint pos = pc.pos0 + t0 + i;
      const uint begin = window_begin(pos);
      const float m_old = m_s[i];
      float m_new = m_old;
      for (uint j = 0u; j < nk; ++j) {
        const uint p = tile + j;
        if (i < n_q && p <= pos && p >= begin)
          m_new = max(m_new, pc.scale * s_s[sg * SS + r * KT + j]);
      }
      float sum = 0.0;
      for (uint j4 = 0u; j4 < KT / 4u; ++j4) {
        vec4 pv = vec4(0.0);
        for (uint c = 0u; c < 4u; ++c) {
          const uint j = 4u * j4 + c, p = tile + j;
          if (j < nk && i < n_q && p <= pos && p >= begin)
            pv[c] = exp(pc.scale * s_s[sg * SS + r * KT + j] - m_new);
        }
        sum += pv.x + pv.y + pv.z + pv.w;
        p_s[i * LP4 + j4] = f16vec4(pv);
      }
      const float corr = exp(m_old - m_new);
      m_s[i] = m_new;
      l_s[i] = l_s[i] * corr + sum;
      c_s[i] = corr;
    }
    barrier();
    // 4. O = corr O + P V, one CN-column block of the head dims at a time.
    {
      coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> pa[KT / CK];
      [[unroll]] for (uint kk = 0u; kk < KT / CK; ++kk) {
        coopMatLoad(pa[kk], p_s, row0 * LP4 + kk * CK / 4u, LP4,
                    gl_CooperativeMatrixLayoutRowMajor);
      }
      [[unroll]] for (uint nb = 0u; nb < NB; ++nb) {
        ACC pv = ACC(0.0);
        [[unroll]] for (uint kk = 0u; kk < KT / CK; ++kk) {
          coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b;
          coopMatLoad(b, v_s, kk * CK * LD4 + nb * CN / 4u, LD4,
                      gl_CooperativeMatrixLayoutRowMajor);
          pv = coopMatMulAdd(pa[kk], b, pv);
        }
        coopMatStore(pv, s_s, sg * SS, CN, gl_CooperativeMatrixLayoutRowMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (uint k = 0u; k < OPB; ++k) {
          const uint e = lane + SG * k;
          o[nb * OPB + k] = o[nb * OPB + k] * c_s[row0 + e / CN] + s_s[sg * SS + e];
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();  // the slice is rewritten by the next block
      }
    }
    barrier();  // k_s, v_s, p_s, s_s are rewritten by the next tile
  }
  [[unroll]] for (uint nb = 0u; nb < NB; ++nb) {
    [[unroll]] for (uint k = 0u; k < OPB; ++k) {
      const uint e = lane + SG * k, i = row0 + e / CN;
      if (i < n_q)
        arena[pc.c_off + (t0 + i) * pc.c_stride + h * HD + nb * CN + e % CN] =
            o[nb * OPB + k] / l_s[i];
    }
  }
}
