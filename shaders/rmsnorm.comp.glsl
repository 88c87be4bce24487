#version 450
// rmsnorm: C[row] = A[row] / sqrt(mean(A[row]^2) + eps) * w, rows of n floats; also the
// per-head q/k norm (rows_per_tok heads per token, heads j < split weighted by w_off0, the
// rest by w_off1) and gemma3's post-attention / post-FFN norms (in place: C == A).
// Row r: token t = r / rows_per_tok, head j = r % rows_per_tok, A at a_off + t a_stride + j n.
// FUSE_ADD (span_add_rmsnorm): first A[row] += B[row] (the residual add, B at b_off + t b_stride),
// then the norm of the sum: one dispatch and one barrier fewer per residual.
// One workgroup = one row: FISH_SPAN_NORM_WG threads (span_rmsnorm, span_add_rmsnorm, a whole
// n_embd row), or FISH_SPAN_HEAD_NORM_WG with HEAD_NORM (span_head_rmsnorm, a 64..256-float
// head). The op is latency-bound for one token: when n and every row offset are multiples of 4
// the row is read as vec4s, each thread's first FISH_SPAN_NORM_CACHE vec4s all loaded before
// use and kept in registers for the scaling pass; otherwise scalar loads (the same result).
// Sum of squares in f32 (subgroupAdd + shared). CPU reference: rmsnorm() in kernels/ops.h
// (GGUF already folds gemma's 1 + w into w).
// Q8 (span_rmsnorm_q8) / Q8_ADD (span_add_rmsnorm_q8, with FUSE_ADD): the row (token r, one row a
// token) is also written as q8_1 (fish_vk_q8.h, K = n, at ARENA float q8_off) for the integer-dot
// matvecs that read it, quant_q8_1's rule (d = amax / 127, q = round(c / d)) on the f32 C this
// op writes: the 8 vec4s of a 32-value block are 8 consecutive threads of one subgroup (clustered
// max / add; subgroups of >= 8 lanes), so the span needs no quant_q8_1 dispatch for this input.
// Needs the vec4 path (n a multiple of 32, offsets of 4) and n_tok <= FISH_Q8_MAX_TOK rows.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifdef Q8_ADD
#define Q8
#define FUSE_ADD
#endif
#ifdef Q8
#extension GL_KHR_shader_subgroup_clustered : require
#endif
#include "fish_vk_q8.h"
#include "fish_vk_span.h"
#include "span_common.glsl"
// vec4 views of the same ARENA / PARAMS bindings (indices in vec4s).
layout(std430, binding = FISH_SPAN_ARENA) buffer ArenaBuf4 { vec4 arena4[]; };
layout(std430, binding = FISH_SPAN_PARAMS) readonly buffer ParamsBuf4 { vec4 params4[]; };
#ifdef HEAD_NORM
#define WG FISH_SPAN_HEAD_NORM_WG
#else
#define WG FISH_SPAN_NORM_WG
#endif
#define NC FISH_SPAN_NORM_CACHE
layout(local_size_x = WG) in;
shared float partial[WG];
#ifdef Q8
layout(std430, binding = FISH_SPAN_ARENA) writeonly buffer ArenaBufU { uint arenau[]; };
#define Q8_WORDS arenau
#define Q8_FLOATS arena
#define Q8_BASE pc.q8_off
#include "q8_1_store.glsl"
#endif

// Sum over the workgroup; every thread gets the result.
float wg_sum(float v) {
  v = subgroupAdd(v);
  if (subgroupElect()) partial[gl_SubgroupID] = v;
  barrier();
  float tot = 0.0;
  for (uint g = 0u; g < gl_NumSubgroups; ++g) tot += partial[g];
  return tot;
}

void main() {
  const uint r = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint t = r / pc.rows_per_tok, j = r % pc.rows_per_tok;
  const uint a = pc.a_off + t * pc.a_stride + j * pc.n;
  const uint c = pc.c_off + t * pc.c_stride + j * pc.n;
  const uint wo = j < pc.split ? pc.w_off0 : pc.w_off1;
#ifdef FUSE_ADD
  const uint b = pc.b_off + t * pc.b_stride;
#else
  const uint b = 0u;
#endif
  // Each invocation re-reads / overwrites only the elements it read: no barrier between passes.
  if (((pc.n | a | b | c | wo) & 3u) == 0u) {
    const uint n4 = pc.n / 4u, a4 = a / 4u, c4 = c / 4u, w4 = wo / 4u;
    vec4 x[NC], wt[NC];  // the weights too, before the reduction: one memory round trip fewer
    [[unroll]] for (uint k = 0u; k < NC; ++k) {
      const uint i = tid + k * WG;
      x[k] = i < n4 ? arena4[a4 + i] : vec4(0.0);
      wt[k] = i < n4 ? params4[w4 + i] : vec4(0.0);
    }
#ifdef FUSE_ADD
    vec4 y[NC];
    [[unroll]] for (uint k = 0u; k < NC; ++k) {
      const uint i = tid + k * WG;
      y[k] = i < n4 ? arena4[b / 4u + i] : vec4(0.0);
    }
    [[unroll]] for (uint k = 0u; k < NC; ++k) {
      const uint i = tid + k * WG;
      x[k] += y[k];
      if (i < n4) arena4[a4 + i] = x[k];
    }
#endif
    float ss = 0.0;
    [[unroll]] for (uint k = 0u; k < NC; ++k) ss += dot(x[k], x[k]);
    for (uint i = tid + NC * WG; i < n4; i += WG) {  // rows longer than NC x WG vec4s
      vec4 v = arena4[a4 + i];
#ifdef FUSE_ADD
      v += arena4[b / 4u + i];
      arena4[a4 + i] = v;
#endif
      ss += dot(v, v);
    }
    const float s = 1.0 / sqrt(wg_sum(ss) / float(pc.n) + pc.eps);
    [[unroll]] for (uint k = 0u; k < NC; ++k) {
      const uint i = tid + k * WG;
      if (i < n4) {
        const vec4 o = x[k] * s * wt[k];
        arena4[c4 + i] = o;
#ifdef Q8
        q8_store(pc.n, r, i, o);  // a block's 8 lanes are all in or all out (n4 % 8 == 0)
#endif
      }
    }
    for (uint i = tid + NC * WG; i < n4; i += WG) {
      const vec4 o = arena4[a4 + i] * s * params4[w4 + i];
      arena4[c4 + i] = o;
#ifdef Q8
      q8_store(pc.n, r, i, o);
#endif
    }
    return;
  }
  float ss = 0.0;
  for (uint i = tid; i < pc.n; i += WG) {
#ifdef FUSE_ADD
    arena[a + i] += arena[b + i];
#endif
    ss += arena[a + i] * arena[a + i];
  }
  const float s = 1.0 / sqrt(wg_sum(ss) / float(pc.n) + pc.eps);
  for (uint i = tid; i < pc.n; i += WG) arena[c + i] = arena[a + i] * s * params[wo + i];
}
