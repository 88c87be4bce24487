// Included (no main) by rope_kv.comp.glsl and attention_decode.comp.glsl after span_common.glsl:
// one value of a head after RoPE, read from its unrotated ARENA row, so a kernel can rotate into
// another place (shared memory, the f16 KV) without a pass that rotates in place first.
// Table params[w_off0 + pos * n_rot + 2i] = (cos, sin) of pair i at position pos (uploaded once,
// f64 angles as the CPU); flags & 1: NeoX pairs (i, i + n_rot/2), else adjacent pairs (2i, 2i+1);
// dims >= n_rot pass through. CPU reference: rope_ref (kernels/ops.h).

// Dim d of the head whose n values start at ARENA `head`, rotated for position pos.
float rope_value(uint head, uint d, uint pos) {
  if (d >= pc.n_rot) return arena[head + d];
  const uint half_rot = pc.n_rot / 2u;
  const bool neox = (pc.flags & 1u) != 0u;
  const uint i = neox ? d % half_rot : d / 2u;
  const bool second = neox ? d >= half_rot : (d & 1u) != 0u;
  const uint partner = neox ? (second ? d - half_rot : d + half_rot) : (d ^ 1u);
  const uint cs = pc.w_off0 + pos * pc.n_rot + 2u * i;
  const float c = params[cs], s = params[cs + 1u];
  const float x = arena[head + d], y = arena[head + partner];
  return second ? y * s + x * c : x * c - y * s;
}
