#version 450
// rope_kv: RoPE and the KV store in one dispatch (one barrier fewer per layer). Token t's q|k|v
// row: rows_per_tok query heads of n floats from a_off + t a_stride, its key heads from b_off +
// t a_stride, the value heads right after them (2 kv_stride floats = kv_dim later). The query
// heads are rotated in place (attention reads them from ARENA); the key heads are rotated into
// the layer's f16 K at position pos0 + t and the value heads stored as f16 to V (word i of a
// position holds values 2i, 2i+1, positions kv_stride words apart from kv_k / kv_v); ARENA's k|v
// stay unrotated. Grid y = tokens; grid x covers rows_per_tok x n_rot / 2 query pairs (one
// invocation rotates a pair) then kv_stride K/V words (one invocation writes a word of each).
// CPU reference: rope_ref (kernels/ops.h), then the KV cache's f16 rounding.
#extension GL_GOOGLE_include_directive : require
#include "fish_vk_span.h"
#include "span_common.glsl"
#include "span_rope.glsl"
layout(local_size_x = FISH_SPAN_WG) in;

void main() {
  const uint u = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y, pos = pc.pos0 + t;
  const uint half_rot = pc.n_rot / 2u, q_units = pc.rows_per_tok * half_rot;
  if (u < q_units) {  // both values of a pair read before either is written
    const uint h = u / half_rot, i = u % half_rot;
    const uint head = pc.a_off + t * pc.a_stride + h * pc.n;
    const bool neox = (pc.flags & 1u) != 0u;
    const uint da = neox ? i : 2u * i, db = neox ? i + half_rot : 2u * i + 1u;
    const float a = rope_value(head, da, pos), b = rope_value(head, db, pos);
    arena[head + da] = a;
    arena[head + db] = b;
    return;
  }
  const uint w = u - q_units;
  if (w >= pc.kv_stride) return;
  const uint row = pc.b_off + t * pc.a_stride, d = (2u * w) % pc.n;
  const uint head = row + 2u * w - d;
  const uint dst = pos * pc.kv_stride + w;
  kv[pc.kv_k + dst] = packHalf2x16(vec2(rope_value(head, d, pos), rope_value(head, d + 1u, pos)));
  const uint v = row + 2u * pc.kv_stride + 2u * w;
  kv[pc.kv_v + dst] = packHalf2x16(vec2(arena[v], arena[v + 1u]));
}
