#version 450
// to_f16: f32 activations -> f16 rows, the B operand of matmul_cm2_<type> (which loads it as a
// plain f16 tensor, as the peer engines' workgroup-scope kernels do, instead of decoding every
// f32 element through a callback). Bindings (fish_vk_layout.h): X vec4[] n_tok rows of x_stride
// f32 (read); Y n_tok rows of y_stride f16 (written as two f16vec4 a thread, from the binding's
// start); W is not read (any buffer may be bound). Push constants: MatmulPush's n_in (K),
// n_tok, x_stride, y_stride (a multiple of 8: rows 16-byte aligned). Values K .. y_stride of a
// row are written 0. Grid: up to ceil(n_tok * y_stride / 8 / 256) workgroups of 256 threads
// (half_groups: at most the device's maxComputeWorkGroupCount[0], the threads striding by the
// grid over the rest); item i converts the 8 values of uvec4 i % (y_stride / 8) of token
// i / (y_stride / 8). The rounding is the cooperative-matrix kernels' own (f16vec4(x): round to
// nearest even, overflow to inf).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require

#include "fish_vk_layout.h"

layout(local_size_x = 256) in;
layout(std430, binding = FISH_BINDING_X) readonly buffer XBuf { vec4 x[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer HBuf { f16vec4 h[]; };

void main() {
  const uint n8 = pc.y_stride / 8u, items = pc.n_tok * n8;
  for (uint g = gl_GlobalInvocationID.x; g < items; g += gl_NumWorkGroups.x * 256u) {
    const uint t = g / n8, i = g % n8;
    const uint k = 8u * i;  // first value of this item's eight
    // x_stride is a multiple of 4 and K of FISH_K_ALIGN (32) where the matmul runs: vec4 loads.
    const uint base = (t * pc.x_stride + k) / 4u;
    const vec4 a = k < pc.n_in ? x[base] : vec4(0.0);
    const vec4 b = k + 4u < pc.n_in ? x[base + 1u] : vec4(0.0);
    h[2u * g] = f16vec4(a);
    h[2u * g + 1u] = f16vec4(b);
  }
}
