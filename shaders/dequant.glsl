// Weight unpacking shared by matvec.comp.glsl and matmul.comp.glsl, one variant per TYPE_*
// define, each matching the CPU reference dequantize_row_<type> (quant/<type>.cpp; ggml block
// layouts in quant/<type>.h).
//
// load_unit(row_byte, u) decodes values 8u .. 8u+7 of the weight row starting at byte row_byte
// of w[] as value_k = scale * q_k + offset, q in qa (values 0..3) and qb (4..7). Quantised types
// keep q as the raw code / 255 from one unpackUnorm4x8 per 4 values, with the block scales folded
// into scale/offset, so the matvec computes scale * dot(q, x) + offset * sum(x) per unit: ~2
// ALU ops per weight instead of a full dequantisation. dequant8() gives the values themselves
// (tiled kernel). Bytes come from 32-bit words by shifts (no 8/16-bit storage); 18/22/34/210-byte
// blocks are not 4-aligned, so their reads are funnel shifts over two words. Needs `uint w[]`
// declared by the includer; buffers are padded by 16 bytes so a funnel's second word exists.

struct Unit {
  vec4 qa;
  vec4 qb;
  float scale;
  float offset;
};

uint ld32(uint byte_off) {
  uint i = byte_off >> 2u;
  uint s = (byte_off & 3u) << 3u;
  uint lo = w[i];
  uint hi = w[i + 1u];
  return s == 0u ? lo : (lo >> s) | (hi << (32u - s));
}
// f16 fields sit at even offsets in every block, so they never straddle two words.
float ld_half(uint byte_off) {
  return unpackHalf2x16(w[byte_off >> 2u] >> ((byte_off & 2u) << 3u)).x;
}
// 4 bits of x (bits first..first+3) to bit 4 of the 4 bytes: Q5_0/Q5_1 fifth bits.
uint spread4(uint x, uint first) {
  return ((((x >> first) & 15u) * 0x00204081u) & 0x01010101u) << 4u;
}

#if defined(TYPE_F32)
// Rows are padded to FISH_K_ALIGN values: 8 values = 8 aligned words.
Unit load_unit(uint row_byte, uint u) {
  uint i = (row_byte >> 2u) + 8u * u;
  return Unit(uintBitsToFloat(uvec4(w[i], w[i + 1u], w[i + 2u], w[i + 3u])),
              uintBitsToFloat(uvec4(w[i + 4u], w[i + 5u], w[i + 6u], w[i + 7u])), 1.0, 0.0);
}
#elif defined(TYPE_F16)
Unit load_unit(uint row_byte, uint u) {
  uint i = (row_byte >> 2u) + 4u * u;
  return Unit(vec4(unpackHalf2x16(w[i]), unpackHalf2x16(w[i + 1u])),
              vec4(unpackHalf2x16(w[i + 2u]), unpackHalf2x16(w[i + 3u])), 1.0, 0.0);
}
#elif defined(TYPE_Q4_0) || defined(TYPE_Q4_1) || defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
// Blocks of 32: Q4_0 (18 B) f16 d, qs[16]; Q4_1 (20 B) f16 d, f16 m, qs[16]; Q5_0 (22 B) f16 d,
// qh (u32: bit i = 5th bit of value i), qs[16]; Q5_1 (24 B) f16 d, f16 m, qh, qs[16]. Value j:
// low nibble of qs[j] (j < 16), high nibble of qs[j - 16]. Q4_0: d(q - 8), Q5_0: d(q - 16),
// Q4_1/Q5_1: d q + m.
Unit load_unit(uint row_byte, uint u) {
  uint j = u & 3u;
#if defined(TYPE_Q4_0)
  uint blk = row_byte + (u >> 2u) * 18u;
  float d = ld_half(blk);
  float offset = -8.0 * d;
  uint q = blk + 2u;
#elif defined(TYPE_Q4_1)
  uint blk = row_byte + (u >> 2u) * 20u;
  vec2 dm = unpackHalf2x16(w[blk >> 2u]);
  float d = dm.x;
  float offset = dm.y;
  uint q = blk + 4u;
#elif defined(TYPE_Q5_0)
  uint blk = row_byte + (u >> 2u) * 22u;
  float d = ld_half(blk);
  float offset = -16.0 * d;
  uint qh = ld32(blk + 2u);
  uint q = blk + 6u;
#else
  uint blk = row_byte + (u >> 2u) * 24u;
  vec2 dm = unpackHalf2x16(w[blk >> 2u]);
  float d = dm.x;
  float offset = dm.y;
  uint qh = w[(blk >> 2u) + 1u];
  uint q = blk + 8u;
#endif
  q += 8u * (j & 1u);
  uint sh = (j >> 1u) * 4u;
  uint qa = (ld32(q) >> sh) & 0x0F0F0F0Fu;
  uint qb = (ld32(q + 4u) >> sh) & 0x0F0F0F0Fu;
#if defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
  qa |= spread4(qh, 8u * j);
  qb |= spread4(qh, 8u * j + 4u);
#endif
  return Unit(unpackUnorm4x8(qa), unpackUnorm4x8(qb), 255.0 * d, offset);
}
#elif defined(TYPE_Q8_0)
// 34-byte blocks of 32: f16 d, int8 qs[32]. Codes are biased to unsigned (q + 128) so that
// unpackUnorm4x8 reads them (unpackSnorm4x8 would clamp -128); value = d (q + 128) - 128 d.
Unit load_unit(uint row_byte, uint u) {
  uint blk = row_byte + (u >> 2u) * 34u;
  uint q = blk + 2u + 8u * (u & 3u);
  float d = ld_half(blk);
  return Unit(unpackUnorm4x8(ld32(q) ^ 0x80808080u), unpackUnorm4x8(ld32(q + 4u) ^ 0x80808080u),
              255.0 * d, -128.0 * d);
}
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#if defined(TYPE_Q4_K)
#define K4_BLOCK_BYTES 144u
#define K4_QS_WORD 4u
#else
#define K4_BLOCK_BYTES 176u
#define K4_QS_WORD 12u
#endif
// Q4_K 144-byte / Q5_K 176-byte super-blocks of 256 (4-aligned): f16 d, f16 dmin, scales[12],
// (Q5_K: qh[32]), qs[128]; value 64c + l: low nibble of qs[32c + l] (sub-block 2c), 64c + 32 + l:
// high nibble (2c + 1); Q5_K's 5th bit of sub-block s is bit s of qh[l]. d*sc*q - dmin*m with
// 6-bit sc, m of sub-block s from the 12 scale bytes (ggml get_scale_min_k4), branch-free.
Unit load_unit(uint row_byte, uint u) {
  uint bw = (row_byte + (u >> 5u) * K4_BLOCK_BYTES) >> 2u;
  uint j = u & 31u;
  uint s = j >> 2u;
  uint l0w = (j & 3u) * 2u;  // word of the first of 8 bytes within the 32-byte chunk
  vec2 dm = unpackHalf2x16(w[bw]);
  uint ssh = 8u * (s & 3u);
  uint lo_sc = w[bw + 1u] >> ssh;  // bytes 0..3: scales 0..3, top bits of scales 4..7
  uint lo_m = w[bw + 2u] >> ssh;   // bytes 4..7: mins 0..3, top bits of mins 4..7
  uint hi = w[bw + 3u] >> ssh;     // bytes 8..11: low nibbles of scales/mins 4..7
  uint sc = s < 4u ? lo_sc & 63u : (hi & 15u) | ((lo_sc >> 2u) & 48u);
  uint m = s < 4u ? lo_m & 63u : ((hi >> 4u) & 15u) | ((lo_m >> 2u) & 48u);
  uint q = bw + K4_QS_WORD + 8u * (s >> 1u) + l0w;
  uint sh = (s & 1u) * 4u;
  uint qa = (w[q] >> sh) & 0x0F0F0F0Fu;
  uint qb = (w[q + 1u] >> sh) & 0x0F0F0F0Fu;
#if defined(TYPE_Q5_K)
  qa |= ((w[bw + 4u + l0w] >> s) & 0x01010101u) << 4u;
  qb |= ((w[bw + 5u + l0w] >> s) & 0x01010101u) << 4u;
#endif
  return Unit(unpackUnorm4x8(qa), unpackUnorm4x8(qb), 255.0 * dm.x * float(sc),
              -dm.y * float(m));
}
#elif defined(TYPE_Q6_K)
// 210-byte super-blocks of 256 (2-aligned): ql[128], qh[64], int8 scales[16], f16 d. Value
// 128h + 32k + l (k = 0..3, l < 32): low 4 bits from ql[64h + 32(k&1) + l] (nibble k>>1), high 2
// bits from qh[32h + l] >> 2k; scale of sub-block (value / 16); d * sc * (q - 32).
Unit load_unit(uint row_byte, uint u) {
  uint blk = row_byte + (u >> 5u) * 210u;
  uint j = u & 31u;
  uint h = j >> 4u;
  uint k = (j >> 2u) & 3u;
  uint l0 = (j & 3u) * 8u;
  uint ql = blk + 64u * h + 32u * (k & 1u) + l0;
  uint qh = blk + 128u + 32u * h + l0;
  uint shl = (k >> 1u) * 4u;
  uint shh = 2u * k;
  float sc = float(int(ld32(blk + 192u + (j >> 1u)) << 24u) >> 24);
  float ds = ld_half(blk + 208u) * sc;
  uint qa = ((ld32(ql) >> shl) & 0x0F0F0F0Fu) | (((ld32(qh) >> shh) & 0x03030303u) << 4u);
  uint qb = ((ld32(ql + 4u) >> shl) & 0x0F0F0F0Fu) | (((ld32(qh + 4u) >> shh) & 0x03030303u) << 4u);
  return Unit(unpackUnorm4x8(qa), unpackUnorm4x8(qb), 255.0 * ds, -32.0 * ds);
}
#elif defined(TYPE_FQ3)
// FQ3 112-byte super-blocks of 256 (4-aligned; quant/fq3.h, seed 000 "FQ3"): f16 d, f16 dmin,
// scales[12] (Q4_K packing), then per 32-value group g the words A, B, C at word 4 + 3g; values
// 4s..4s+3 of a group are the bytes of ((s < 4 ? A : B) >> 2(s&3)) & 0x03030303 |
// ((C >> s) & 0x01010101) << 2: two masks and one unpackUnorm4x8 per four values.
// d*sc*q - dmin*m, q in 0..7, 6-bit sc, m of group g as Q4_K's sub-block g.
Unit load_unit(uint row_byte, uint u) {
  uint bw = (row_byte + (u >> 5u) * 112u) >> 2u;
  uint j = u & 31u;
  uint g = j >> 2u;         // 32-value group
  uint s = 2u * (j & 3u);   // the unit's first quad in the group: A for s < 4, B after
  vec2 dm = unpackHalf2x16(w[bw]);
  uint ssh = 8u * (g & 3u);
  uint lo_sc = w[bw + 1u] >> ssh;
  uint lo_m = w[bw + 2u] >> ssh;
  uint hi = w[bw + 3u] >> ssh;
  uint sc = g < 4u ? lo_sc & 63u : (hi & 15u) | ((lo_sc >> 2u) & 48u);
  uint m = g < 4u ? lo_m & 63u : ((hi >> 4u) & 15u) | ((lo_m >> 2u) & 48u);
  uint gw = bw + 4u + 3u * g;
  uint ab = w[gw + (s >> 2u)];
  uint c = w[gw + 2u];
  uint sh = 2u * (s & 3u);
  uint qa = ((ab >> sh) & 0x03030303u) | (((c >> s) & 0x01010101u) << 2u);
  uint qb = ((ab >> (sh + 2u)) & 0x03030303u) | (((c >> (s + 1u)) & 0x01010101u) << 2u);
  return Unit(unpackUnorm4x8(qa), unpackUnorm4x8(qb), 255.0 * dm.x * float(sc),
              -dm.y * float(m));
}
#else
#error "dequant.glsl: define one TYPE_<type> (shaders/CMakeLists.txt FISH_VK_TYPES)"
#endif

// Values 8u .. 8u+7 of the row, dequantised.
void dequant8(uint row_byte, uint u, out vec4 a, out vec4 b) {
  Unit un = load_unit(row_byte, u);
  a = un.scale * un.qa + un.offset;
  b = un.scale * un.qb + un.offset;
}
