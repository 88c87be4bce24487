#version 450
// quant_q8_1: f32 activations -> the q8_1 layout of fish_vk_layout.h (FISH_Q8_*), the input of
// matvec_idot_<type>. Bindings (fish_vk_layout.h): X vec4[] n_tok rows of x_stride f32 (read), Y
// the q8_1 buffer (written from its binding's start); W is not read (any buffer may be bound).
// Push constants: MatmulPush's n_in (K, a multiple of 32), n_tok (<= FISH_MATVEC_MAX_TOK),
// x_stride. Grid: ceil(n_tok * K / 32 / FISH_Q8_WG) workgroups of FISH_Q8_WG threads, thread i
// quantises block i % (K / 32) of token i / (K / 32): d = amax / 127, q = round(x / d) (0 codes
// and d = 0 for an all-zero block), s = d * sum q. CPU reference: the same rule in
// tests/vulkan/vulkan_matvec_idot_test.cpp (whose bound is this rounding: |x - d q| <= d / 2).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "fish_vk_layout.h"

layout(local_size_x = FISH_Q8_WG) in;
layout(std430, binding = FISH_BINDING_X) readonly buffer XBuf { vec4 x[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer QBuf { uint q[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer QBufDs { vec2 ds[]; };

void main() {
  const uint nb = pc.n_in / 32u;
  const uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n_tok * nb) return;
  const uint t = i / nb, b = i % nb;
  vec4 v[8];
  float amax = 0.0;
  [[unroll]] for (uint j = 0u; j < 8u; ++j) {
    v[j] = x[(t * pc.x_stride + 32u * b) / 4u + j];
    const vec4 a = abs(v[j]);
    amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
  }
  const float d = amax / 127.0;
  const float id = amax > 0.0 ? 127.0 / amax : 0.0;
  const uint code_word = (FISH_Q8_CODES(pc.n_in) + t * pc.n_in + 32u * b) / 4u;
  int sum = 0;
  [[unroll]] for (uint j = 0u; j < 8u; ++j) {
    const ivec4 c = clamp(ivec4(round(v[j] * id)), ivec4(-127), ivec4(127));
    sum += c.x + c.y + c.z + c.w;
    q[code_word + j] = uint(c.x & 255) | (uint(c.y & 255) << 8u) | (uint(c.z & 255) << 16u) |
                       (uint(c.w & 255) << 24u);
  }
  ds[t * FISH_Q8_DS_STRIDE(pc.n_in) + b] = vec2(d, d * float(sum));
}
