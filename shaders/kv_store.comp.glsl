#version 450
// kv_store: K rows (A) and V rows (B) of n = kv_dim f32 per token into the layer's f16 cache
// at position pos0 + t: word i of a position holds values 2i, 2i+1 (packHalf2x16), positions
// kv_stride words apart from kv_k / kv_v. One invocation = one word of K and of V.
// CPU reference: the memcpy into KvCache in session.cpp, rounded to f16.
#extension GL_GOOGLE_include_directive : require
#include "fish_vk_span.h"
#include "span_common.glsl"
layout(local_size_x = FISH_SPAN_WG) in;

void main() {
  const uint i = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
  if (2u * i >= pc.n) return;
  const uint a = pc.a_off + t * pc.a_stride + 2u * i, b = pc.b_off + t * pc.b_stride + 2u * i;
  const uint dst = (pc.pos0 + t) * pc.kv_stride + i;
  kv[pc.kv_k + dst] = packHalf2x16(vec2(arena[a], arena[a + 1u]));
  kv[pc.kv_v + dst] = packHalf2x16(vec2(arena[b], arena[b + 1u]));
}
