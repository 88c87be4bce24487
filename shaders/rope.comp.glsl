#version 450
// rope: rotates the first n_rot dims of rows_per_tok heads of n floats per token, in place in
// ARENA (token t at a_off + t a_stride), by the table params[w_off0 + pos * n_rot + 2i] =
// (cos, sin) of pair i at position pos = pos0 + t (uploaded once, f64 angles as the CPU).
// flags & 1: NeoX pairs (i, i + n_rot/2), else adjacent pairs (2i, 2i+1).
// One invocation = one pair of one head of one token. CPU reference: apply_rope (session.cpp).
#extension GL_GOOGLE_include_directive : require
#include "fish_vk_span.h"
#include "span_common.glsl"
layout(local_size_x = FISH_SPAN_WG) in;

void main() {
  const uint half_rot = pc.n_rot / 2u;
  const uint gid = gl_GlobalInvocationID.x;
  const uint i = gid % half_rot, hj = gid / half_rot;
  const uint h = hj % pc.rows_per_tok, t = hj / pc.rows_per_tok;
  if (t >= pc.rows) return;
  const uint base = pc.a_off + t * pc.a_stride + h * pc.n;
  const uint cs = pc.w_off0 + (pc.pos0 + t) * pc.n_rot + 2u * i;
  const float c = params[cs], s = params[cs + 1u];
  const bool neox = (pc.flags & 1u) != 0u;
  const uint ia = base + (neox ? i : 2u * i), ib = base + (neox ? i + half_rot : 2u * i + 1u);
  const float x0 = arena[ia], x1 = arena[ib];
  arena[ia] = x0 * c - x1 * s;
  arena[ib] = x0 * s + x1 * c;
}
