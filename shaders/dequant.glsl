// Weight unpacking shared by matvec.comp.glsl and matmul.comp.glsl: dequant8(row_byte, u, a, b)
// writes values 8u .. 8u+7 of the weight row starting at byte row_byte of w[] to a (first four)
// and b. One variant per TYPE_* define, each matching the CPU reference dequantize_row_<type>
// in quant/<type>.cpp (ggml block layouts, quant/<type>.h). Bytes come from 32-bit words by
// shifts (no 8/16-bit storage); blocks of 18/34/210 bytes are not 4-aligned, so their reads
// are funnel shifts over two words. Needs `uint w[]` declared by the includer; buffers are
// padded by 16 bytes so the funnel's second word is always in range.

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
// 4 unsigned 4-bit fields (bit offset sh of each byte of v) as floats.
vec4 nibbles(uint v, uint sh) {
  return vec4((uvec4(v) >> (uvec4(0u, 8u, 16u, 24u) + sh)) & 15u);
}

#if defined(TYPE_F32)
// Rows are padded to FISH_K_ALIGN values: 8 values = 8 aligned words.
void dequant8(uint row_byte, uint u, out vec4 a, out vec4 b) {
  uint i = (row_byte >> 2u) + 8u * u;
  a = uintBitsToFloat(uvec4(w[i], w[i + 1u], w[i + 2u], w[i + 3u]));
  b = uintBitsToFloat(uvec4(w[i + 4u], w[i + 5u], w[i + 6u], w[i + 7u]));
}
#elif defined(TYPE_F16)
void dequant8(uint row_byte, uint u, out vec4 a, out vec4 b) {
  uint i = (row_byte >> 2u) + 4u * u;
  a = vec4(unpackHalf2x16(w[i]), unpackHalf2x16(w[i + 1u]));
  b = vec4(unpackHalf2x16(w[i + 2u]), unpackHalf2x16(w[i + 3u]));
}
#elif defined(TYPE_Q4_0)
// 18-byte blocks of 32: f16 d, qs[16]; value j: low nibble of qs[j] (j < 16), high of qs[j-16].
void dequant8(uint row_byte, uint u, out vec4 a, out vec4 b) {
  uint blk = row_byte + (u >> 2u) * 18u;
  uint j = u & 3u;
  float d = ld_half(blk);
  uint q = blk + 2u + 8u * (j & 1u);
  uint sh = (j >> 1u) * 4u;
  a = d * (nibbles(ld32(q), sh) - 8.0);
  b = d * (nibbles(ld32(q + 4u), sh) - 8.0);
}
#elif defined(TYPE_Q4_1)
// 20-byte blocks of 32: f16 d, f16 m, qs[16] as Q4_0; value = d * q + m.
void dequant8(uint row_byte, uint u, out vec4 a, out vec4 b) {
  uint blk = row_byte + (u >> 2u) * 20u;
  uint j = u & 3u;
  vec2 dm = unpackHalf2x16(w[blk >> 2u]);
  uint q = (blk >> 2u) + 1u + 2u * (j & 1u);
  uint sh = (j >> 1u) * 4u;
  a = dm.x * nibbles(w[q], sh) + dm.y;
  b = dm.x * nibbles(w[q + 1u], sh) + dm.y;
}
#elif defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
// Q5_0 22-byte blocks of 32: f16 d, qh (u32, bit i = 5th bit of value i), qs[16] as Q4_0;
// d * (q - 16). Q5_1 24-byte blocks: f16 d, f16 m, qh, qs[16]; d * q + m.
vec4 high_bits(uint qh, uint first) {
  return 16.0 * vec4((uvec4(qh) >> (uvec4(0u, 1u, 2u, 3u) + first)) & 1u);
}
void dequant8(uint row_byte, uint u, out vec4 a, out vec4 b) {
  uint j = u & 3u;
#if defined(TYPE_Q5_0)
  uint blk = row_byte + (u >> 2u) * 22u;
  float d = ld_half(blk);
  float m = -16.0 * d;
  uint qh = ld32(blk + 2u);
  uint q = blk + 6u + 8u * (j & 1u);
#else
  uint blk = row_byte + (u >> 2u) * 24u;
  vec2 dm = unpackHalf2x16(w[blk >> 2u]);
  float d = dm.x;
  float m = dm.y;
  uint qh = w[(blk >> 2u) + 1u];
  uint q = blk + 8u + 8u * (j & 1u);
#endif
  uint sh = (j >> 1u) * 4u;
  a = d * (nibbles(ld32(q), sh) + high_bits(qh, 8u * j)) + m;
  b = d * (nibbles(ld32(q + 4u), sh) + high_bits(qh, 8u * j + 4u)) + m;
}
#elif defined(TYPE_Q8_0)
// 34-byte blocks of 32: f16 d, int8 qs[32].
void dequant8(uint row_byte, uint u, out vec4 a, out vec4 b) {
  uint blk = row_byte + (u >> 2u) * 34u;
  uint q = blk + 2u + 8u * (u & 3u);
  float d = ld_half(blk);
  a = d * vec4(ivec4(uvec4(ld32(q)) << uvec4(24u, 16u, 8u, 0u)) >> 24);
  b = d * vec4(ivec4(uvec4(ld32(q + 4u)) << uvec4(24u, 16u, 8u, 0u)) >> 24);
}
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// 6-bit scale and min of sub-block s from the 12 packed bytes (ggml get_scale_min_k4).
uint sbyte(uvec3 sw, uint i) {
  return (sw[i >> 2u] >> ((i & 3u) << 3u)) & 255u;
}
vec2 scale_min_k4(uvec3 sw, uint s) {
  if (s < 4u) return vec2(sbyte(sw, s) & 63u, sbyte(sw, s + 4u) & 63u);
  uint hi = sbyte(sw, s + 4u);
  return vec2((hi & 15u) | ((sbyte(sw, s - 4u) >> 6u) << 4u),
              (hi >> 4u) | ((sbyte(sw, s) >> 6u) << 4u));
}
#if defined(TYPE_Q4_K)
#define K4_BLOCK_BYTES 144u
#define K4_QS_WORD 4u
#else
#define K4_BLOCK_BYTES 176u
#define K4_QS_WORD 12u
#endif
// Q4_K 144-byte / Q5_K 176-byte super-blocks of 256 (4-aligned): f16 d, f16 dmin, scales[12],
// (Q5_K: qh[32]), qs[128]; value 64c + l: low nibble of qs[32c + l] (sub-block 2c), 64c + 32 + l:
// high nibble (2c + 1); Q5_K's 5th bit of sub-block s is bit s of qh[l]. d*sc*q - dmin*m.
void dequant8(uint row_byte, uint u, out vec4 a, out vec4 b) {
  uint bw = (row_byte + (u >> 5u) * K4_BLOCK_BYTES) >> 2u;
  uint j = u & 31u;
  uint s = j >> 2u;
  uint l0w = (j & 3u) * 2u;  // word of the first of 8 bytes within the 32-byte chunk
  vec2 dm = unpackHalf2x16(w[bw]);
  vec2 sm = scale_min_k4(uvec3(w[bw + 1u], w[bw + 2u], w[bw + 3u]), s);
  float d = dm.x * sm.x;
  float m = dm.y * sm.y;
  uint q = bw + K4_QS_WORD + 8u * (s >> 1u) + l0w;
  uint sh = (s & 1u) * 4u;
  vec4 qa = nibbles(w[q], sh);
  vec4 qb = nibbles(w[q + 1u], sh);
#if defined(TYPE_Q5_K)
  uint h = bw + 4u + l0w;
  qa += 16.0 * vec4((uvec4(w[h]) >> (uvec4(0u, 8u, 16u, 24u) + s)) & 1u);
  qb += 16.0 * vec4((uvec4(w[h + 1u]) >> (uvec4(0u, 8u, 16u, 24u) + s)) & 1u);
#endif
  a = d * qa - m;
  b = d * qb - m;
}
#elif defined(TYPE_Q6_K)
// 210-byte super-blocks of 256 (2-aligned): ql[128], qh[64], int8 scales[16], f16 d. Value
// 128h + 32k + l (k = 0..3, l < 32): low 4 bits from ql[64h + 32(k&1) + l] (nibble k>>1), high 2
// bits from qh[32h + l] >> 2k; scale of sub-block (value / 16); d * sc * (q - 32).
void dequant8(uint row_byte, uint u, out vec4 a, out vec4 b) {
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
  float d = ld_half(blk + 208u) * sc;
  uvec4 sh8 = uvec4(0u, 8u, 16u, 24u);
  uint l = ld32(ql), hh = ld32(qh);
  a = d * (vec4(((uvec4(l) >> (sh8 + shl)) & 15u) | (((uvec4(hh) >> (sh8 + shh)) & 3u) << 4u)) -
           32.0);
  l = ld32(ql + 4u);
  hh = ld32(qh + 4u);
  b = d * (vec4(((uvec4(l) >> (sh8 + shl)) & 15u) | (((uvec4(hh) >> (sh8 + shh)) & 3u) << 4u)) -
           32.0);
}
#else
#error "dequant.glsl: define one TYPE_<type> (shaders/CMakeLists.txt FISH_VK_TYPES)"
#endif
