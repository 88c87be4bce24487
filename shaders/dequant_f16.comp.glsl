#version 450
// dequant_f16_<type>: weight rows of a quantised type -> the same rows as f16 (K values, 2K
// bytes apart, from the Y binding's start): the W operand of matmul_cm2_f16, matmul_cm_f16 or
// matmul_f16 for a prefill matmul under FISH_VK_PREFILL_F16 (engine/vulkan/device_weight.h
// prefill_f16), which then decodes nothing in its K loop. Values are dequant.glsl's dequant8
// (the tiled kernel's, against quant/<type>.cpp's dequantize_row_<type> in the matmul tests),
// rounded to f16 as to_f16 rounds activations (f16vec4(x)).
// Bindings (fish_vk_layout.h): W uint[] packed rows (row_bytes apart, read); X not read (any
// buffer may be bound); Y f16 rows (written). Push constants: MatmulPush's n_in (K, a multiple of
// 32), n_out (rows), row_bytes. Grid: any 1-D count of 256-thread workgroups (dequant_groups),
// the threads striding over the n_out x K / 8 units; unit g is values 8 (g % (K / 8)) .. + 7 of
// row g / (K / 8), two f16vec4 at h[2g], so neighbouring threads read neighbouring bytes of a
// row and write neighbouring 16-byte words.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require

#include "fish_vk_layout.h"

layout(local_size_x = 256) in;
layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf { uint w[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer HBuf { f16vec4 h[]; };

#include "dequant.glsl"

void main() {
  const uint units = pc.n_in / 8u, items = pc.n_out * units;
  for (uint g = gl_GlobalInvocationID.x; g < items; g += gl_NumWorkGroups.x * 256u) {
    const uint r = g / units;
    vec4 a, b;
    dequant8(r * pc.row_bytes, g - r * units, a, b);
    h[2u * g] = f16vec4(a);
    h[2u * g + 1u] = f16vec4(b);
  }
}
