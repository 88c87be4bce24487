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
// xs[BN][BK] (B = x^T, column-major) as f16vec4 from registers (global -> registers ->
// shared), barrier, then each subgroup runs BK / CK multiply-adds per accumulator. PREFETCH = 1
// issues the next step's global loads right after the barrier, before this step's
// multiply-adds (their latency hidden under them, at the cost of live registers); 0 after the
// second barrier. K tails (n_in % BK != 0) are zero-filled. Edge rows/tokens are clamped on load;
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
layout(constant_id = 10) const uint PREFETCH = 0;  // 1: next K step's loads before this one's MMAs

layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf { uint w[]; };
layout(std430, binding = FISH_BINDING_X) readonly buffer XBuf { vec4 x[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer YBuf { float y[]; };

#include "dequant.glsl"

const uint LDS = BK + 8u;         // shared row stride (f16): pads banks, keeps 16-byte rows
const uint LDS4 = LDS / 4u;       // ... in f16vec4
const uint TM = WM / CM;          // accumulators per subgroup, rows
const uint TN = WN / CN;          // ... tokens
const uint SG_COLS = BN / WN;     // subgroups along tokens
const uint N_SG = (BM / WM) * SG_COLS;
const uint W_UNITS = BM * (BK / 8u);            // 8-value W units per K step
const uint X_QUADS = BN * (BK / 4u);            // x vec4 per K step
const uint WPT = (W_UNITS + WG - 1u) / WG;      // ... per thread
const uint XPT = (X_QUADS + WG - 1u) / WG;

shared f16vec4 ws[BM * LDS4];
shared f16vec4 xs[BN * LDS4];
shared float cs[N_SG * CM * CN];  // each subgroup's staging tile for the store

// A K step's operands staged in registers between the global loads and the shared stores.
f16vec4 wr[2u * WPT];
f16vec4 xr[XPT];

uint g_row0, g_tok0, g_units, g_x_row;

void load_step(uint k0) {
  const uint tid = gl_LocalInvocationID.x;
  for (uint j = 0u; j < WPT; ++j) {
    const uint i = tid + j * WG;
    const uint lr = i / (BK / 8u), u = k0 / 8u + i % (BK / 8u);
    vec4 a = vec4(0.0), b = vec4(0.0);
    if (i < W_UNITS && u < g_units)
      dequant8(min(g_row0 + lr, pc.n_out - 1u) * pc.row_bytes, u, a, b);
    wr[2u * j] = f16vec4(a);
    wr[2u * j + 1u] = f16vec4(b);
  }
  for (uint j = 0u; j < XPT; ++j) {
    const uint i = tid + j * WG;
    const uint lt = i / (BK / 4u), q = k0 / 4u + i % (BK / 4u);
    vec4 v = vec4(0.0);
    if (i < X_QUADS && q < pc.n_in / 4u) v = x[min(g_tok0 + lt, pc.n_tok - 1u) * g_x_row + q];
    xr[j] = f16vec4(v);
  }
}

void store_step() {
  const uint tid = gl_LocalInvocationID.x;
  for (uint j = 0u; j < WPT; ++j) {
    const uint i = tid + j * WG;
    if (i < W_UNITS) {
      const uint o = (i / (BK / 8u)) * LDS4 + 2u * (i % (BK / 8u));
      ws[o] = wr[2u * j];
      ws[o + 1u] = wr[2u * j + 1u];
    }
  }
  for (uint j = 0u; j < XPT; ++j) {
    const uint i = tid + j * WG;
    if (i < X_QUADS) xs[(i / (BK / 4u)) * LDS4 + i % (BK / 4u)] = xr[j];
  }
}

void main() {
  g_row0 = gl_WorkGroupID.x * BM;
  g_tok0 = gl_WorkGroupID.y * BN;
  g_units = pc.n_in / 8u;          // 8-value units of a row
  g_x_row = pc.x_stride >> 2u;     // vec4 per x row
  const uint row0 = g_row0, tok0 = g_tok0;
  const uint sg = gl_SubgroupID;
  const uint sg_row = (sg / SG_COLS) * WM;  // this subgroup's block within the tile
  const uint sg_tok = (sg % SG_COLS) * WN;

  coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc[TM * TN];
  for (uint i = 0u; i < TM * TN; ++i)
    acc[i] = coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);

  load_step(0u);
  for (uint k0 = 0u; k0 < pc.n_in; k0 += BK) {
    store_step();
    barrier();
    const bool more = k0 + BK < pc.n_in;
    if (PREFETCH != 0u && more) load_step(k0 + BK);  // global latency under the MMAs
    // Offsets and strides in f16vec4 (the arrays' element): 4 f16 each.
    for (uint kk = 0u; kk < BK; kk += CK) {
      coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> bm[TN];
      for (uint j = 0u; j < TN; ++j)
        coopMatLoad(bm[j], xs, (sg_tok + j * CN) * LDS4 + kk / 4u, LDS4,
                    gl_CooperativeMatrixLayoutColumnMajor);
      for (uint i = 0u; i < TM; ++i) {
        coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> am;
        coopMatLoad(am, ws, (sg_row + i * CM) * LDS4 + kk / 4u, LDS4,
                    gl_CooperativeMatrixLayoutRowMajor);
        for (uint j = 0u; j < TN; ++j) acc[i * TN + j] = coopMatMulAdd(am, bm[j], acc[i * TN + j]);
      }
    }
    barrier();
    if (PREFETCH == 0u && more) load_step(k0 + BK);
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
