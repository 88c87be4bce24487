#version 450
// quant_q8_1: f32 activations -> the q8_1 layout of fish_vk_q8.h (FISH_Q8_*), the input of
// matvec_idot_<type>. Bindings (fish_vk_layout.h): X vec4[] n_tok rows of x_stride f32 (read), Y
// the q8_1 buffer (written from its binding's start); W is not read (any buffer may be bound).
// Push constants: MatmulPush's n_in (K, a multiple of 32), n_tok (<= FISH_MATVEC_MAX_TOK),
// x_stride. Grid: ceil(n_tok * K / 4 / FISH_Q8_WG) workgroups of FISH_Q8_WG threads, thread i
// rounds vec4 i % (K / 4) of token i / (K / 4) (q8_1_store.glsl: a block = 8 lanes; subgroups of
// >= 8 lanes, which matvec_kernel requires for idot). CPU reference: the same rule in
// tests/vulkan/vulkan_matvec_idot_test.cpp (whose bound is this rounding: |x - d q| <= d / 2).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_clustered : require

#include "fish_vk_layout.h"

layout(local_size_x = FISH_Q8_WG) in;
layout(std430, binding = FISH_BINDING_X) readonly buffer XBuf { vec4 x[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer QBuf { uint qw[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer QBufF { float qf[]; };

#define Q8_WORDS qw
#define Q8_FLOATS qf
#define Q8_BASE 0u
#include "q8_1_store.glsl"

void main() {
  const uint n4 = pc.n_in / 4u, g = gl_GlobalInvocationID.x;
  if (g >= pc.n_tok * n4) return;  // whole blocks: n4 is a multiple of 8
  const uint t = g / n4, i = g % n4;
  q8_store(pc.n_in, t, i, x[(t * pc.x_stride) / 4u + i]);
}
