#version 450
// span_argmax: the index of the largest of n floats, written as uint bits to ARENA
// (uintBitsToFloat; the host reads the word back as uint32). Workgroups of FISH_SPAN_ARGMAX_WG
// invocations; each thread scans its strided share of a range in index order, 8 loads at a
// time, then a shared-memory tree. Row y of the grid (a greedy verify's rows) reads its values
// a_stride floats after row 0's and writes c_off + y. Three passes by pc.flags:
//   0 (one workgroup a row): all n logits at a_off -> the index at c_off;
//   1 (FISH_SPAN_ARGMAX_SLICE logits a workgroup, grid x = pc.split workgroups): workgroup w's
//     slice of the row -> its best (value, index bits) pair at b_off + 2 (y split + w);
//   2 (one workgroup a row): the row's pc.split pairs -> the index at c_off;
//   3 (pass 1's grid): pass 1, then the row's last workgroup to finish (an arrival counter at
//     ARENA word w_off1 + y, zero before the dispatch and left zero) runs pass 2 on the pairs
//     through coherent loads: one dependent step instead of two, the same index (pass 2's loop
//     and tree over the same pairs),
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

// Pass 3's pairs and arrival counters: another workgroup's stores, read after its counter.
layout(std430, binding = FISH_SPAN_ARENA) coherent buffer ArenaCoh { float arenac[]; };
layout(std430, binding = FISH_SPAN_ARENA) coherent buffer ArenaCohU { uint arenau[]; };

shared float s_v[WG];
shared uint s_i[WG];
shared bool s_last;

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

// The workgroup's best (value, index) over logits [lo, hi) of the row at src (pairs: pass 2's
// pairs lo .. hi of the row at src, through coherent loads where coh) into s_v[0], s_i[0].
void reduce(uint lo, uint hi, uint src, bool pairs, bool coh) {
  const uint tid = gl_LocalInvocationID.x;
  float bv = -uintBitsToFloat(0x7f800000u);
  uint bi = 0xffffffffu;
  // A thread's indices in increasing order, 8 loads in flight before their compares (one load at
  // a time was a serial chain of memory latencies).
  uint i = lo + tid;
  if (pairs) {
    for (; i < hi; i += WG) {
      const float v = coh ? arenac[src + 2u * i] : arena[src + 2u * i];
      const uint at = floatBitsToUint(coh ? arenac[src + 2u * i + 1u] : arena[src + 2u * i + 1u]);
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
}

void main() {
  const uint tid = gl_LocalInvocationID.x, y = gl_WorkGroupID.y;
  const uint pair_row = pc.b_off + 2u * y * pc.split;
  if (pc.flags == 0u || pc.flags == 2u) {
    const bool pairs = pc.flags == 2u;
    reduce(0u, pairs ? pc.split : pc.n, pairs ? pair_row : pc.a_off + y * pc.a_stride, pairs,
           false);
    if (tid == 0u) arena[pc.c_off + y] = uintBitsToFloat(s_i[0]);
    return;
  }
  const uint lo = min(gl_WorkGroupID.x * FISH_SPAN_ARGMAX_SLICE, pc.n);
  reduce(lo, min(lo + FISH_SPAN_ARGMAX_SLICE, pc.n), pc.a_off + y * pc.a_stride, false, false);
  const uint at = pair_row + 2u * gl_WorkGroupID.x;
  if (pc.flags == 1u) {
    if (tid == 0u) {
      arena[at] = s_v[0];
      arena[at + 1u] = uintBitsToFloat(s_i[0]);
    }
    return;
  }
  // 3: the pair, then the arrival; the last of the row's pc.split workgroups runs pass 2.
  if (tid == 0u) {
    arenac[at] = s_v[0];
    arenac[at + 1u] = uintBitsToFloat(s_i[0]);
    memoryBarrierBuffer();
    s_last = atomicAdd(arenau[pc.w_off1 + y], 1u) == pc.split - 1u;
  }
  barrier();
  if (!s_last) return;
  memoryBarrierBuffer();
  reduce(0u, pc.split, pair_row, true, true);
  if (tid == 0u) {
    arena[pc.c_off + y] = uintBitsToFloat(s_i[0]);
    arenau[pc.w_off1 + y] = 0u;  // for the next forward's
  }
}
