#version 450
// span_get_rows_<type>: one row of the token embedding, picked by a token id the GPU wrote
// itself (the output head's argmax), dequantised into ARENA: a pipelined greedy decode's step
// embeds its token without the id crossing the bus (vulkan_span.h, decode_greedy).
// Bindings: ARENA (binding 0, FISH_SPAN_ARENA), the embedding matrix's rows (binding 1, in
// place of PARAMS: the GGUF blocks of one TYPE_<X>, rows pc.a_stride bytes apart); binding 2
// is not read. Push constants (SpanPush): n values a row, rows the matrix's rows (an id past
// them reads the last row, never out of bounds), a_off the ARENA word holding the id (uint
// bits), c_off the ARENA floats the row goes to, a_stride the row's bytes, scale the model's
// embedding multiplier (Gemma 3's sqrt(n_embd); 1 elsewhere). Grid: ceil(n / FISH_SPAN_WG)
// workgroups, one value a thread.
// Bit-exact with the CPU's Model::embed (quant/<type>.cpp's dequantize_row_<type>, compiled
// with -ffp-contract=off, then out *= embd_scale): every value is computed by the same
// operations in the same order, and `precise` keeps the compiler from fusing a multiply and an
// add into one rounding.
#extension GL_GOOGLE_include_directive : require
#include "fish_vk_span.h"
layout(local_size_x = FISH_SPAN_WG) in;

layout(std430, binding = FISH_SPAN_ARENA) buffer ArenaBuf { float arena[]; };
layout(std430, binding = 1) readonly buffer EmbdBuf { uint w[]; };

uint byte_at(uint off) {
  return (w[off >> 2u] >> ((off & 3u) << 3u)) & 0xffu;
}
// f16 fields sit at even offsets of every block, so they never straddle two words.
float half_at(uint off) {
  return unpackHalf2x16(w[off >> 2u] >> ((off & 2u) << 3u)).x;
}
// get_scale_min_k4 (quant/k_quants.h): the 6-bit scale and min of sub-block j of a Q4_K / Q5_K
// super-block whose 12 scale bytes start at `at`.
uvec2 scale_min_k4(uint at, uint j) {
  if (j < 4u) return uvec2(byte_at(at + j) & 63u, byte_at(at + j + 4u) & 63u);
  return uvec2((byte_at(at + j + 4u) & 15u) | ((byte_at(at + j - 4u) >> 6u) << 4u),
               (byte_at(at + j + 4u) >> 4u) | ((byte_at(at + j) >> 6u) << 4u));
}

// Value j of the row starting at byte rb.
float value(uint rb, uint j) {
#if defined(TYPE_F32)
  return uintBitsToFloat(w[(rb >> 2u) + j]);
#elif defined(TYPE_F16)
  return half_at(rb + 2u * j);
#elif defined(TYPE_Q8_0)
  // 34-byte blocks: f16 d, int8 qs[32]; d * q as float(q) * d.
  const uint blk = rb + (j >> 5u) * 34u;
  const int q = int(byte_at(blk + 2u + (j & 31u)) << 24u) >> 24;
  precise float v = float(q) * half_at(blk);
  return v;
#elif defined(TYPE_Q4_0) || defined(TYPE_Q4_1) || defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
  // Blocks of 32: Q4_0 (18 B) d, qs[16]; Q4_1 (20 B) d, m, qs[16]; Q5_0 (22 B) d, qh (u32, bit i
  // the fifth bit of value i), qs[16]; Q5_1 (24 B) d, m, qh, qs[16]. Value i: the low nibble of
  // qs[i] (i < 16), the high nibble of qs[i - 16].
#if defined(TYPE_Q4_0)
  const uint bytes = 18u, qs = 2u;
#elif defined(TYPE_Q4_1)
  const uint bytes = 20u, qs = 4u;
#elif defined(TYPE_Q5_0)
  const uint bytes = 22u, qs = 6u;
#else
  const uint bytes = 24u, qs = 8u;
#endif
  const uint blk = rb + (j >> 5u) * bytes, i = j & 31u;
  const uint b = byte_at(blk + qs + (i & 15u));
  uint q = i < 16u ? b & 15u : b >> 4u;
#if defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
  const uint qh_at = blk + qs - 4u;
  const uint qh = byte_at(qh_at) | (byte_at(qh_at + 1u) << 8u) | (byte_at(qh_at + 2u) << 16u) |
                  (byte_at(qh_at + 3u) << 24u);
  q |= ((qh >> i) & 1u) << 4u;
#endif
  const float d = half_at(blk);
#if defined(TYPE_Q4_0)
  precise float v = float(int(q) - 8) * d;
#elif defined(TYPE_Q5_0)
  precise float v = float(int(q) - 16) * d;
#else
  precise float v = float(q) * d + half_at(blk + 2u);
#endif
  return v;
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
  // 256-value super-blocks: f16 d, f16 dmin, scales[12], (Q5_K: qh[32]), qs[128]. Chunk c of 64
  // values holds sub-blocks 2c (low nibbles of qs[32c ..]) and 2c + 1 (high nibbles); Q5_K's
  // fifth bit of value l of sub-block s is bit s of qh[l]. d1 * q - m1 with d1 = d * scale,
  // m1 = dmin * min.
#if defined(TYPE_Q4_K)
  const uint bytes = 144u, qs = 16u;
#else
  const uint bytes = 176u, qs = 48u;
#endif
  const uint blk = rb + (j >> 8u) * bytes, i = j & 255u;
  const uint c = i >> 6u, l = i & 31u, sub = 2u * c + ((i >> 5u) & 1u);
  const uint b = byte_at(blk + qs + 32u * c + l);
  uint q = (sub & 1u) == 0u ? b & 15u : b >> 4u;
#if defined(TYPE_Q5_K)
  q += ((byte_at(blk + 16u + l) >> sub) & 1u) << 4u;
#endif
  const uvec2 sm = scale_min_k4(blk + 4u, sub);
  precise float d1 = half_at(blk) * float(sm.x);
  precise float m1 = half_at(blk + 2u) * float(sm.y);
  precise float v = d1 * float(q) - m1;
  return v;
#elif defined(TYPE_Q6_K)
  // 210-byte super-blocks: ql[128], qh[64], int8 scales[16], f16 d. Half h (128 values) reads
  // ql[64h ..], qh[32h ..], scales[8h ..]; quarter k of it: the low nibble of ql[l] (k = 0),
  // ql[l + 32] (1), the high nibble of ql[l] (2), ql[l + 32] (3), bits 2k..2k+1 of qh[l] on top;
  // scale scales[2k + l / 16]; (d * scale) * (q - 32).
  const uint blk = rb + (j >> 8u) * 210u, i = j & 255u;
  const uint h = i >> 7u, k = (i >> 5u) & 3u, l = i & 31u;
  const uint lo = (byte_at(blk + 64u * h + 32u * (k & 1u) + l) >> (4u * (k >> 1u))) & 15u;
  const uint hi = (byte_at(blk + 128u + 32u * h + l) >> (2u * k)) & 3u;
  const int q = int(lo | (hi << 4u)) - 32;
  const int sc = int(byte_at(blk + 192u + 8u * h + 2u * k + l / 16u) << 24u) >> 24;
  precise float dl = half_at(blk + 208u) * float(sc);
  precise float v = dl * float(q);
  return v;
#else
#error "get_rows: no TYPE_<X> define"
#endif
}

void main() {
  const uint j = gl_GlobalInvocationID.x;
  if (j >= pc.n) return;
  const uint id = min(floatBitsToUint(arena[pc.a_off]), pc.rows - 1u);
  precise float v = value(id * pc.a_stride, j) * pc.scale;
  arena[pc.c_off + j] = v;
}
