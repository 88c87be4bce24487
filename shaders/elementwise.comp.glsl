#version 450
// Element-wise span ops on rows of n floats, one invocation per value; grid x = values / WG,
// grid y = tokens. Variants by define:
//   OP_ADD     C[t][i] = A[t][i] + B[t][i]            (residual add; CPU add())
//   OP_BIAS    A[t][i] += params[w_off0 + i]          (qwen2 q/k/v bias; CPU add())
//   OP_SWIGLU  A[t][i] = silu(A[t][i]) * B[t][i]      (CPU silu_mul_ref)
//   OP_GEGLU   A[t][i] = gelu_tanh(A[t][i]) * B[t][i] (CPU gelu_tanh_mul_ref)
// Row t of X is at x_off + t x_stride (ARENA floats).
#extension GL_GOOGLE_include_directive : require
#include "fish_vk_span.h"
#include "span_common.glsl"
layout(local_size_x = FISH_SPAN_WG) in;

void main() {
  const uint i = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
  if (i >= pc.n) return;
  const uint a = pc.a_off + t * pc.a_stride + i;
#if defined(OP_ADD)
  arena[pc.c_off + t * pc.c_stride + i] = arena[a] + arena[pc.b_off + t * pc.b_stride + i];
#elif defined(OP_BIAS)
  arena[a] += params[pc.w_off0 + i];
#else
  const float g = arena[a], u = arena[pc.b_off + t * pc.b_stride + i];
#if defined(OP_SWIGLU)
  arena[a] = g / (1.0 + exp(-g)) * u;
#elif defined(OP_GEGLU)
  // tanh of a clamped argument: some drivers compute tanh via exp and return NaN for |v| > ~44.
  const float v = clamp(0.79788456080286535588 * g * (1.0 + 0.044715 * g * g), -15.0, 15.0);
  arena[a] = 0.5 * g * (1.0 + tanh(v)) * u;
#else
#error "elementwise.comp.glsl: define OP_ADD, OP_BIAS, OP_SWIGLU or OP_GEGLU"
#endif
#endif
}
