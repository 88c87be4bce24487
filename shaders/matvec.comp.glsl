#version 450
// matvec_<type>: y[t][r] = sum_k W[r][k] x[t][k] for n_tok <= FISH_MATVEC_MAX_TOK (decode).
// Bindings (fish_vk_layout.h): W uint[] packed rows (row_bytes apart), X vec4[] n_tok rows of
// x_stride f32, Y float[] n_tok rows of y_stride from y_offset.
// One workgroup = FISH_MATVEC_ROWS rows x all tokens, FISH_MATVEC_WG threads; thread i takes
// 8-value units i, i + WG, ... of each row, so a subgroup reads consecutive words of a row
// (coalesced) and each x unit is loaded once for all rows; a unit is decoded once (codes and
// block scale/offset, dequant.glsl) and applied to every token as
// scale * dot(q, x) + offset * sum(x). Partial sums: subgroupAdd, then one
// shared slot per subgroup. Rows past n_out are clamped to the last row (no bounds checks in
// the loop) and not stored. Grid: groups_x x ceil(n_groups / groups_x) (65535 limit per dim).
// CPU reference: dequantize_row_<type>, then a double dot (tests/vulkan/vulkan_matmul_test.cpp).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "fish_vk_layout.h"

layout(local_size_x = FISH_MATVEC_WG) in;
layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf { uint w[]; };
layout(std430, binding = FISH_BINDING_X) readonly buffer XBuf { vec4 x[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer YBuf { float y[]; };

#include "dequant.glsl"

#define NACC (FISH_MATVEC_ROWS * FISH_MATVEC_MAX_TOK)
shared float partial[NACC][FISH_MATVEC_WG];  // [row * MAX_TOK + tok][subgroup]

void main() {
  const uint group = gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x;
  if (group >= pc.n_groups) return;  // whole workgroup: no barrier is skipped by a part of it
  const uint row0 = group * FISH_MATVEC_ROWS;
  uint rb[FISH_MATVEC_ROWS];
  for (uint r = 0u; r < FISH_MATVEC_ROWS; ++r)
    rb[r] = min(row0 + r, pc.n_out - 1u) * pc.row_bytes;

  float acc[NACC];
  for (uint i = 0u; i < NACC; ++i) acc[i] = 0.0;
  const uint n_units = pc.n_in >> 3u;
  for (uint u = gl_LocalInvocationID.x; u < n_units; u += FISH_MATVEC_WG) {
    vec4 xa[FISH_MATVEC_MAX_TOK], xb[FISH_MATVEC_MAX_TOK];
    float xs[FISH_MATVEC_MAX_TOK];  // sum of the unit's 8 x values: the offset term
    for (uint t = 0u; t < FISH_MATVEC_MAX_TOK; ++t) {
      if (t < pc.n_tok) {
        const uint xi = (t * pc.x_stride + 8u * u) >> 2u;
        xa[t] = x[xi];
        xb[t] = x[xi + 1u];
        xs[t] = dot(xa[t] + xb[t], vec4(1.0));
      }
    }
    for (uint r = 0u; r < FISH_MATVEC_ROWS; ++r) {
      const Unit wu = load_unit(rb[r], u);  // decoded once, used for every token
      for (uint t = 0u; t < FISH_MATVEC_MAX_TOK; ++t) {
        if (t < pc.n_tok)
          acc[r * FISH_MATVEC_MAX_TOK + t] +=
              wu.scale * (dot(wu.qa, xa[t]) + dot(wu.qb, xb[t])) + wu.offset * xs[t];
      }
    }
  }

  for (uint i = 0u; i < NACC; ++i) {
    const float s = subgroupAdd(acc[i]);
    if (subgroupElect()) partial[i][gl_SubgroupID] = s;
  }
  barrier();
  const uint i = gl_LocalInvocationID.x;
  if (i < NACC) {
    const uint r = row0 + i / FISH_MATVEC_MAX_TOK;
    const uint t = i % FISH_MATVEC_MAX_TOK;
    if (r < pc.n_out && t < pc.n_tok) {
      float s = 0.0;
      for (uint g = 0u; g < gl_NumSubgroups; ++g) s += partial[i][g];
      y[pc.y_offset + t * pc.y_stride + r] = s;
    }
  }
}
