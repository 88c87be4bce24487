#version 450
// rmsnorm: C[row] = A[row] / sqrt(mean(A[row]^2) + eps) * w, rows of n floats; also the
// per-head q/k norm (rows_per_tok heads per token, heads j < split weighted by w_off0, the
// rest by w_off1) and gemma3's post-attention / post-FFN norms (in place: C == A).
// Row r: token t = r / rows_per_tok, head j = r % rows_per_tok, A at a_off + t a_stride + j n.
// FUSE_ADD (span_add_rmsnorm): first A[row] += B[row] (the residual add, B at b_off + t b_stride),
// then the norm of the sum: one dispatch and one barrier fewer per residual.
// One workgroup = one row, FISH_SPAN_WG threads; sum of squares in f32 (subgroupAdd + shared).
// CPU reference: rmsnorm() in kernels/ops.h (GGUF already folds gemma's 1 + w into w).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "fish_vk_span.h"
#include "span_common.glsl"
layout(local_size_x = FISH_SPAN_WG) in;
shared float partial[FISH_SPAN_WG];

void main() {
  const uint r = gl_WorkGroupID.x;
  const uint t = r / pc.rows_per_tok, j = r % pc.rows_per_tok;
  const uint a = pc.a_off + t * pc.a_stride + j * pc.n;
  const uint c = pc.c_off + t * pc.c_stride + j * pc.n;
  const uint wo = j < pc.split ? pc.w_off0 : pc.w_off1;
  float ss = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < pc.n; i += FISH_SPAN_WG) {
#ifdef FUSE_ADD
    // Each invocation re-reads only the elements it wrote: no barrier needed.
    arena[a + i] += arena[pc.b_off + t * pc.b_stride + i];
#endif
    ss += arena[a + i] * arena[a + i];
  }
  ss = subgroupAdd(ss);
  if (subgroupElect()) partial[gl_SubgroupID] = ss;
  barrier();
  float tot = 0.0;
  for (uint g = 0u; g < gl_NumSubgroups; ++g) tot += partial[g];
  const float s = 1.0 / sqrt(tot / float(pc.n) + pc.eps);
  for (uint i = gl_LocalInvocationID.x; i < pc.n; i += FISH_SPAN_WG)
    arena[c + i] = arena[a + i] * s * params[wo + i];
}
