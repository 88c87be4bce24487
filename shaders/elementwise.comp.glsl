#version 450
// Element-wise span ops on rows of n floats, one invocation per value; grid x = values / WG,
// grid y = tokens. Variants by define:
//   OP_ADD     C[t][i] = A[t][i] + B[t][i]            (residual add; CPU add())
//   OP_BIAS    A[t][i] += params[w_off0 + i]          (qwen2 q/k/v bias; CPU add())
//   OP_SWIGLU  A[t][i] = silu(A[t][i]) * B[t][i]      (CPU silu_mul_ref)
//   OP_GEGLU   A[t][i] = gelu_tanh(A[t][i]) * B[t][i] (CPU gelu_tanh_mul_ref)
// Row t of X is at x_off + t x_stride (ARENA floats).
// Q8 (span_swiglu_q8 / span_geglu_q8, with OP_SWIGLU / OP_GEGLU): one invocation per vec4 (grid
// x = n / 4 / WG), and the product row is also written as q8_1 (fish_vk_q8.h, K = n, at ARENA
// float q8_off) for the integer-dot down matvec, quant_q8_1's rule on the f32 values this op
// writes (q8_1_store.glsl: a 32-value block's 8 vec4s are 8 consecutive lanes of one subgroup),
// so the span needs no quant_q8_1 dispatch and barrier for that input. Needs n a multiple of 32,
// a_off / b_off / strides multiples of 4, rows <= FISH_Q8_MAX_TOK.
#extension GL_GOOGLE_include_directive : require
#include "fish_vk_span.h"
#include "span_common.glsl"
layout(local_size_x = FISH_SPAN_WG) in;

float act(float g) {
#if defined(OP_SWIGLU)
  return g / (1.0 + exp(-g));
#elif defined(OP_GEGLU)
  // tanh of a clamped argument: some drivers compute tanh via exp and return NaN for |v| > ~44.
  const float v = clamp(0.79788456080286535588 * g * (1.0 + 0.044715 * g * g), -15.0, 15.0);
  return 0.5 * g * (1.0 + tanh(v));
#else
  return g;
#endif
}

#ifdef Q8
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_clustered : require
#include "fish_vk_q8.h"
layout(std430, binding = FISH_SPAN_ARENA) buffer ArenaBuf4 { vec4 arena4[]; };
layout(std430, binding = FISH_SPAN_ARENA) writeonly buffer ArenaBufU { uint arenau[]; };
#define Q8_WORDS arenau
#define Q8_FLOATS arena
#define Q8_BASE pc.q8_off
#include "q8_1_store.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
  if (i >= pc.n / 4u) return;  // whole blocks: n / 4 is a multiple of 8, as is the workgroup
  const uint a = (pc.a_off + t * pc.a_stride) / 4u + i;
  const vec4 g = arena4[a], u = arena4[(pc.b_off + t * pc.b_stride) / 4u + i];
  const vec4 o = vec4(act(g.x), act(g.y), act(g.z), act(g.w)) * u;
  arena4[a] = o;
  q8_store(pc.n, t, i, o);
}
#else
void main() {
  const uint i = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
  if (i >= pc.n) return;
  const uint a = pc.a_off + t * pc.a_stride + i;
#if defined(OP_ADD)
  arena[pc.c_off + t * pc.c_stride + i] = arena[a] + arena[pc.b_off + t * pc.b_stride + i];
#elif defined(OP_BIAS)
  arena[a] += params[pc.w_off0 + i];
#elif defined(OP_SWIGLU) || defined(OP_GEGLU)
  arena[a] = act(arena[a]) * arena[pc.b_off + t * pc.b_stride + i];
#else
#error "elementwise.comp.glsl: define OP_ADD, OP_BIAS, OP_SWIGLU or OP_GEGLU"
#endif
}
#endif  // Q8
