#version 450
// span_argmax: the index of the largest of n floats, written as uint bits to ARENA
// (uintBitsToFloat; the host reads the word back as uint32). Workgroups of FISH_SPAN_ARGMAX_WG
// invocations; each thread scans its strided share of a range in index order, 8 loads at a
// time, then a shared-memory tree. Row y of the grid (a greedy verify's rows) reads its values
// a_stride floats after row 0's and writes c_off + y. Three passes by pc.flags:
//   0 (one workgroup a row): all n logits at a_off -> the index at c_off;
//   1 (FISH_SPAN_ARGMAX_SLICE logits a workgroup, grid x = pc.split workgroups): workgroup w's
//     slice of the row -> its best (value, index bits) pair at b_off + 2 (y split + w);
//   2 (one workgroup a row): the row's pc.split pairs -> the index at c_off,
// so a greedy decode step runs passes 1 and 2 over n_vocab logits (many workgroups stream them)
// instead of one workgroup walking 128k logits alone.
// Ties go to the lowest index, and NaN ranks as engine/sampling's greedy_token sees it (its scan
// keeps index 0 when logits[0] is NaN and never moves to a NaN): NaN at index 0 counts as +inf,
// NaN elsewhere as -inf; with the lowest-index tie rule that gives exactly greedy_token's id
// (pass 2's pairs hold ranked values, no NaN; an empty slice's pair never wins).
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
  const uint tid = gl_LocalInvocationID.x, y = gl_WorkGroupID.y;
  const bool pairs = pc.flags == 2u;
  uint lo = 0u, hi = pairs ? pc.split : pc.n;
  if (pc.flags == 1u) {
    lo = min(gl_WorkGroupID.x * FISH_SPAN_ARGMAX_SLICE, pc.n);
    hi = min(lo + FISH_SPAN_ARGMAX_SLICE, pc.n);
  }
  const uint src = pairs ? pc.b_off + 2u * y * pc.split : pc.a_off + y * pc.a_stride;
  float bv = -uintBitsToFloat(0x7f800000u);
  uint bi = 0xffffffffu;
  // A thread's indices in increasing order, 8 loads in flight before their compares (one load at
  // a time was a serial chain of memory latencies).
  uint i = lo + tid;
  if (pairs) {
    for (; i < hi; i += WG) {
      const float v = arena[src + 2u * i];
      const uint at = floatBitsToUint(arena[src + 2u * i + 1u]);
      if (better(v, at, bv, bi)) {
        bv = v;
        bi = at;
      }
    }
  } else {
    for (; i + 7u * WG < hi; i += 8u * WG) {
      float v[8];
      [[unroll]] for (uint k = 0u; k < 8u; ++k) v[k] = arena[src + i + k * WG];
      [[unroll]] for (uint k = 0u; k < 8u; ++k) consider(v[k], i + k * WG, bv, bi);
    }
    for (; i < hi; i += WG) consider(arena[src + i], i, bv, bi);
  }
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
  if (tid != 0u) return;
  if (pc.flags == 1u) {
    const uint at = pc.b_off + 2u * (y * pc.split + gl_WorkGroupID.x);
    arena[at] = s_v[0];
    arena[at + 1u] = uintBitsToFloat(s_i[0]);
  } else {
    arena[pc.c_off + y] = uintBitsToFloat(s_i[0]);
  }
}
