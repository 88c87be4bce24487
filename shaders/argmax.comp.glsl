#version 450
// span_argmax: the index of the largest of n floats at ARENA a_off, written as uint bits to
// ARENA c_off (uintBitsToFloat; the host reads the word back as uint32). One workgroup of
// FISH_SPAN_ARGMAX_WG invocations: a greedy decode step runs it once over n_vocab logits.
// Ties go to the lowest index, and NaN ranks as engine/sampling's greedy_token sees it (its scan
// keeps index 0 when logits[0] is NaN and never moves to a NaN): NaN at index 0 counts as +inf,
// NaN elsewhere as -inf; with the lowest-index tie rule that gives exactly greedy_token's id.
#extension GL_GOOGLE_include_directive : require
#include "fish_vk_span.h"
#include "span_common.glsl"
layout(local_size_x = FISH_SPAN_ARGMAX_WG) in;

shared float s_v[FISH_SPAN_ARGMAX_WG];
shared uint s_i[FISH_SPAN_ARGMAX_WG];

// Whether (v, i) ranks above (bv, bi).
bool better(float v, uint i, float bv, uint bi) {
  return v > bv || (v == bv && i < bi);
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const float kInf = uintBitsToFloat(0x7f800000u);
  float bv = -kInf;
  uint bi = 0xffffffffu;
  for (uint i = tid; i < pc.n; i += FISH_SPAN_ARGMAX_WG) {
    float v = arena[pc.a_off + i];
    if (isnan(v)) v = i == 0 ? kInf : -kInf;
    if (better(v, i, bv, bi)) {
      bv = v;
      bi = i;
    }
  }
  s_v[tid] = bv;
  s_i[tid] = bi;
  barrier();
  for (uint s = FISH_SPAN_ARGMAX_WG / 2; s > 0; s >>= 1) {
    if (tid < s && better(s_v[tid + s], s_i[tid + s], s_v[tid], s_i[tid])) {
      s_v[tid] = s_v[tid + s];
      s_i[tid] = s_i[tid + s];
    }
    barrier();
  }
  if (tid == 0) arena[pc.c_off] = uintBitsToFloat(s_i[0]);
}
