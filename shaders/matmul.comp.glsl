#version 450
// matmul_<type>: tiled y[t][r] = sum_k W[r][k] x[t][k] for prefill (any n_tok).
// Bindings (fish_vk_layout.h): W uint[] packed rows (row_bytes apart), X vec4[] n_tok rows of
// x_stride f32, Y float[] n_tok rows of y_stride from y_offset.
// One workgroup = FISH_TILE_ROWS rows x FISH_TILE_TOK tokens, FISH_TILE_WG = 256 threads, each
// accumulating 4 rows x 4 tokens (rows tid%16 + 16i, tokens tid/16 + 16j) over K steps of
// FISH_TILE_K: per step every thread dequantises one 8-value unit of W and loads two vec4 of x
// into shared memory. Grid: ceil(n_out / 64) x ceil(n_tok / 64); edge rows/tokens are clamped
// on load, skipped on store. Plain f32 FMA tile (no cooperative matrix yet).
// CPU reference: dequantize_row_<type>, then a double dot (tests/vulkan/vulkan_matmul_test.cpp).
#extension GL_GOOGLE_include_directive : require

#include "fish_vk_layout.h"

layout(local_size_x = FISH_TILE_WG) in;
layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf { uint w[]; };
layout(std430, binding = FISH_BINDING_X) readonly buffer XBuf { vec4 x[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer YBuf { float y[]; };

#include "dequant.glsl"

shared float ws[FISH_TILE_K][FISH_TILE_ROWS];  // W tile, k-major
shared float xs[FISH_TILE_K][FISH_TILE_TOK];   // x tile, k-major

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint row0 = gl_WorkGroupID.x * FISH_TILE_ROWS;
  const uint tok0 = gl_WorkGroupID.y * FISH_TILE_TOK;
  const uint tr = tid % 16u, tt = tid / 16u;

  // This thread's W unit: row lr of the tile, unit lu (0..3) of each 32-value K step.
  const uint lr = tid >> 2u, lu = tid & 3u;
  const uint w_row_byte = min(row0 + lr, pc.n_out - 1u) * pc.row_bytes;
  // This thread's two x vec4: token lt[m], quad lq[m] (0..7) of the K step.
  uint x_base[2], lt[2], lq[2];
  for (uint m = 0u; m < 2u; ++m) {
    const uint idx = tid + FISH_TILE_WG * m;
    lt[m] = idx >> 3u;
    lq[m] = idx & 7u;
    x_base[m] = (min(tok0 + lt[m], pc.n_tok - 1u) * pc.x_stride) >> 2u;
  }

  float acc[4][4];
  for (uint i = 0u; i < 4u; ++i)
    for (uint j = 0u; j < 4u; ++j) acc[i][j] = 0.0;

  const uint n_steps = pc.n_in / FISH_TILE_K;
  for (uint kb = 0u; kb < n_steps; ++kb) {
    vec4 a, b;
    dequant8(w_row_byte, kb * 4u + lu, a, b);
    for (uint e = 0u; e < 4u; ++e) {
      ws[8u * lu + e][lr] = a[e];
      ws[8u * lu + 4u + e][lr] = b[e];
    }
    for (uint m = 0u; m < 2u; ++m) {
      const vec4 v = x[x_base[m] + kb * (FISH_TILE_K / 4u) + lq[m]];
      for (uint e = 0u; e < 4u; ++e) xs[4u * lq[m] + e][lt[m]] = v[e];
    }
    barrier();
    for (uint k = 0u; k < FISH_TILE_K; ++k) {
      float wv[4], xv[4];
      for (uint i = 0u; i < 4u; ++i) wv[i] = ws[k][tr + 16u * i];
      for (uint j = 0u; j < 4u; ++j) xv[j] = xs[k][tt + 16u * j];
      for (uint i = 0u; i < 4u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i][j] = fma(wv[i], xv[j], acc[i][j]);
    }
    barrier();
  }

  for (uint i = 0u; i < 4u; ++i) {
    const uint r = row0 + tr + 16u * i;
    for (uint j = 0u; j < 4u; ++j) {
      const uint t = tok0 + tt + 16u * j;
      if (r < pc.n_out && t < pc.n_tok) y[pc.y_offset + t * pc.y_stride + r] = acc[i][j];
    }
  }
}
