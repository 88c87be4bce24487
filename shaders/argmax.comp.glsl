#version 450
// span_argmax: the index of the largest of n floats at ARENA a_off, written as uint bits to
// ARENA c_off (uintBitsToFloat; the host reads the word back as uint32). One workgroup of
// FISH_SPAN_ARGMAX_WG invocations: a greedy decode step runs it once over n_vocab logits; each
// thread scans its strided share in index order, 8 loads at a time, then a shared-memory tree.
// Ties go to the lowest index, and NaN ranks as engine/sampling's greedy_token sees it (its scan
// keeps index 0 when logits[0] is NaN and never moves to a NaN): NaN at index 0 counts as +inf,
// NaN elsewhere as -inf; with the lowest-index tie rule that gives exactly greedy_token's id.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "fish_vk_span.h"
#include "span_common.glsl"
#define WG FISH_SPAN_ARGMAX_WG
layout(local_size_x = WG) in;

shared float s_v[WG];
shared uint s_i[WG];

// Whether (v, i) ranks above (bv, bi).
bool better(float v, uint i, float bv, uint bi) {
  return v > bv || (v == bv && i < bi);
}

// Logit v at index i against the thread's best so far (NaN ranked as greedy_token does).
void consider(float v, uint i, inout float bv, inout uint bi) {
  const float kInf = uintBitsToFloat(0x7f800000u);
  if (isnan(v)) v = i == 0u ? kInf : -kInf;
  if (better(v, i, bv, bi)) {
    bv = v;
    bi = i;
  }
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  float bv = -uintBitsToFloat(0x7f800000u);
  uint bi = 0xffffffffu;
  // A thread's indices in increasing order, 8 loads in flight before their compares (a vocabulary
  // is ~250 values a thread: one load at a time was a serial chain of memory latencies).
  uint i = tid;
  for (; i + 7u * WG < pc.n; i += 8u * WG) {
    float v[8];
    [[unroll]] for (uint k = 0u; k < 8u; ++k) v[k] = arena[pc.a_off + i + k * WG];
    [[unroll]] for (uint k = 0u; k < 8u; ++k) consider(v[k], i + k * WG, bv, bi);
  }
  for (; i < pc.n; i += WG) consider(arena[pc.a_off + i], i, bv, bi);
  s_v[tid] = bv;
  s_i[tid] = bi;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (tid < s && better(s_v[tid + s], s_i[tid + s], s_v[tid], s_i[tid])) {
      s_v[tid] = s_v[tid + s];
      s_i[tid] = s_i[tid + s];
    }
    barrier();
  }
  if (tid == 0) arena[pc.c_off] = uintBitsToFloat(s_i[0]);
}
