#version 450
// matmul_cm_<type>: y[t][r] = sum_k W[r][k] x[t][k] on cooperative matrices (prefill, n_tok >=
// FISH_CM_MIN_TOK), the tensor-core counterpart of matmul.comp.glsl with the same bindings and
// push constants (fish_vk_layout.h). Weights are dequantised (dequant.glsl) into a shared f16
// tile, activations converted to f16 into another, the products accumulate in f32
// coopmat<float, M x N> (VK_KHR_cooperative_matrix; the shape is the device's, e.g. 16x16x16 on
// NVIDIA, 8x8x8 on lavapipe).
//
// Specialisation constants (engine/vulkan/coopmat.h, CoopmatTile): the workgroup is
// (BM / WM) x (BN / WN) subgroups of SG lanes; a workgroup computes a BM-row x BN-token tile,
// each subgroup a WM x WN block of it as (WM / CM) x (WN / CN) accumulators. K advances by BK
// (a multiple of 32 and of CK): per step the workgroup fills ws[BM][BK] (A, row-major) and
// xs[BN][BK] (B = x^T, column-major), barrier, then each subgroup runs BK / CK multiply-adds per
// accumulator. K tails (n_in % BK != 0) are zero-filled. Edge rows/tokens are clamped on load;
// results go through a per-subgroup f32 staging tile in shared memory and are stored with
// bounds checks (any n_out, n_tok, y_stride, y_offset).
// CPU reference: dequantize_row_<type>, then a double dot (tests/vulkan/vulkan_coopmat_test.cpp).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#include "fish_vk_layout.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 32;
layout(constant_id = 4) const uint CM = 16;
layout(constant_id = 5) const uint CN = 16;
layout(constant_id = 6) const uint CK = 16;
layout(constant_id = 7) const uint WM = 32;
layout(constant_id = 8) const uint WN = 32;
layout(constant_id = 9) const uint WG = 128;  // = local_size_x (constant 0), for loop bounds

layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf { uint w[]; };
layout(std430, binding = FISH_BINDING_X) readonly buffer XBuf { vec4 x[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer YBuf { float y[]; };

#include "dequant.glsl"

const uint LDS = BK + 8u;         // shared row stride (f16): pads banks, keeps 16-byte rows
const uint TM = WM / CM;          // accumulators per subgroup, rows
const uint TN = WN / CN;          // ... tokens
const uint SG_COLS = BN / WN;     // subgroups along tokens
const uint N_SG = (BM / WM) * SG_COLS;

shared float16_t ws[BM * LDS];
shared float16_t xs[BN * LDS];
shared float cs[N_SG * CM * CN];  // each subgroup's staging tile for the store

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint row0 = gl_WorkGroupID.x * BM;
  const uint tok0 = gl_WorkGroupID.y * BN;
  const uint sg = gl_SubgroupID;
  const uint sg_row = (sg / SG_COLS) * WM;  // this subgroup's block within the tile
  const uint sg_tok = (sg % SG_COLS) * WN;
  const uint units = pc.n_in / 8u;          // 8-value units of a row
  const uint x_row = pc.x_stride >> 2u;     // vec4 per x row

  coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc[TM * TN];
  for (uint i = 0u; i < TM * TN; ++i)
    acc[i] = coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);

  for (uint k0 = 0u; k0 < pc.n_in; k0 += BK) {
    // W: BM rows x BK / 8 units, dequantised to f16.
    for (uint i = tid; i < BM * (BK / 8u); i += WG) {
      const uint lr = i / (BK / 8u), lu = i % (BK / 8u);
      const uint u = k0 / 8u + lu;
      vec4 a = vec4(0.0), b = vec4(0.0);
      if (u < units) dequant8(min(row0 + lr, pc.n_out - 1u) * pc.row_bytes, u, a, b);
      const uint o = lr * LDS + 8u * lu;
      for (uint e = 0u; e < 4u; ++e) {
        ws[o + e] = float16_t(a[e]);
        ws[o + 4u + e] = float16_t(b[e]);
      }
    }
    // x: BN tokens x BK / 4 vec4, to f16.
    for (uint i = tid; i < BN * (BK / 4u); i += WG) {
      const uint lt = i / (BK / 4u), lq = i % (BK / 4u);
      const uint q = k0 / 4u + lq;
      const vec4 v =
          q < pc.n_in / 4u ? x[min(tok0 + lt, pc.n_tok - 1u) * x_row + q] : vec4(0.0);
      const uint o = lt * LDS + 4u * lq;
      for (uint e = 0u; e < 4u; ++e) xs[o + e] = float16_t(v[e]);
    }
    barrier();
    for (uint kk = 0u; kk < BK; kk += CK) {
      coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> bm[TN];
      for (uint j = 0u; j < TN; ++j)
        coopMatLoad(bm[j], xs, (sg_tok + j * CN) * LDS + kk, LDS,
                    gl_CooperativeMatrixLayoutColumnMajor);
      for (uint i = 0u; i < TM; ++i) {
        coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> am;
        coopMatLoad(am, ws, (sg_row + i * CM) * LDS + kk, LDS,
                    gl_CooperativeMatrixLayoutRowMajor);
        for (uint j = 0u; j < TN; ++j) acc[i * TN + j] = coopMatMulAdd(am, bm[j], acc[i * TN + j]);
      }
    }
    barrier();
  }

  // Store: accumulator (i, j) is rows sg_row + i CM.., tokens sg_tok + j CN..; staged column-major
  // (element (r, t) at t CM + r) so consecutive lanes write consecutive rows of y.
  const uint lane = gl_SubgroupInvocationID, n_lanes = gl_SubgroupSize;
  const uint stage = sg * CM * CN;
  for (uint i = 0u; i < TM; ++i) {
    for (uint j = 0u; j < TN; ++j) {
      coopMatStore(acc[i * TN + j], cs, stage, CM, gl_CooperativeMatrixLayoutColumnMajor);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint e = lane; e < CM * CN; e += n_lanes) {
        const uint r = row0 + sg_row + i * CM + e % CM;
        const uint t = tok0 + sg_tok + j * CN + e / CM;
        if (r < pc.n_out && t < pc.n_tok) y[pc.y_offset + t * pc.y_stride + r] = cs[stage + e];
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
    }
  }
}
