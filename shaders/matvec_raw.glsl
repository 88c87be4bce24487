// Included by matvec_fast.comp.glsl and matvec_idot.comp.glsl (no main) after their W
// bindings (uint w[], uvec4 w4[]): the byte helpers and, per weight type, what one matvec "chunk"
// of a row reads (struct Raw, load_raw(row byte offset, chunk index)); the kernels load every
// row's Raw before using any, so ROWS x (2..9) loads are in flight per thread.

const uint kLo = 0x0F0F0F0Fu;

// 4 bytes at an even byte offset from two words (16-bit funnel when not 4-aligned).
uint funnel16(uint lo, uint hi, bool odd_half) {
  return odd_half ? (lo >> 16u) | (hi << 16u) : lo;
}
// 8 bytes at an even byte offset.
uvec2 ld64(uint byte_off) {
  const uint i = byte_off >> 2u;
  const bool odd = (byte_off & 2u) != 0u;
  const uint a = w[i], b = w[i + 1u], c = w[i + 2u];
  return uvec2(funnel16(a, b, odd), funnel16(b, c, odd));
}
// Sign-extended int8 byte k (0..7) of two words.
float sbyte(uvec2 p, uint k) {
  const uint word = k < 4u ? p.x : p.y;
  return float(int(word << (24u - 8u * (k & 3u))) >> 24);
}

// 6-bit scale and min of sub-block (group) s (ggml get_scale_min_k4) from a Q4_K-packed header
// uvec4 (f16 d, f16 dmin, scales[12]): Q4_K, Q5_K and FQ3.
uvec2 scale_min(uvec4 hdr, uint s) {
  const uint sh = 8u * (s & 3u);
  const uint a = hdr.y >> sh, b = hdr.z >> sh, h = hdr.w >> sh;
  return s < 4u ? uvec2(a & 63u, b & 63u)
                : uvec2((h & 15u) | ((a >> 2u) & 48u), ((h >> 4u) & 15u) | ((b >> 2u) & 48u));
}

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// Q4_K 144-byte (9 x uvec4) / Q5_K 176-byte (11 x uvec4) super-blocks of 256, 16-aligned since
// rows are whole super-blocks: uvec4 0 = f16 d, f16 dmin, scales[12]; (Q5_K: uvec4 1..2 =
// qh[32]); then qs[128]. Chunk c16 = c & 7 is qs bytes 16 c16 .. +15 = pair cc = c16 / 2,
// l0 = 16 (c16 & 1): low nibbles are values 64 cc + l0 + 0..15 (sub-block 2cc), high nibbles
// 64 cc + 32 + l0 + 0..15 (sub-block 2cc + 1); Q5_K's 5th bits are bits 2cc, 2cc+1 of qh[l0 + i].
#if defined(TYPE_Q4_K)
#define SB_VEC4 9u
#define QS_VEC4 1u
#else
#define SB_VEC4 11u
#define QS_VEC4 3u
#endif
struct Raw {
  uvec4 hdr;
  uvec4 q;
#if defined(TYPE_Q5_K)
  uvec4 qh;
#endif
};
Raw load_raw(uint row_byte, uint c) {
  const uint sb = (row_byte >> 4u) + (c >> 3u) * SB_VEC4;
  Raw r;
  r.hdr = w4[sb];
  r.q = w4[sb + QS_VEC4 + (c & 7u)];
#if defined(TYPE_Q5_K)
  r.qh = w4[sb + 1u + (c & 1u)];
#endif
  return r;
}
// Code word j of a chunk (4 codes each): x of sub-block s0 (low nibbles), y of s0 + 1 (high),
// Q5_K's 5th bits merged.
uvec2 kq_codes(Raw r, uint s0, uint j) {
  uint ql = r.q[j] & kLo, qh = (r.q[j] >> 4u) & kLo;
#if defined(TYPE_Q5_K)
  ql |= ((r.qh[j] >> s0) & 0x01010101u) << 4u;
  qh |= ((r.qh[j] >> (s0 + 1u)) & 0x01010101u) << 4u;
#endif
  return uvec2(ql, qh);
}
#elif defined(TYPE_Q6_K)
// 210-byte super-blocks (2-aligned): ql[128], qh[64], int8 scales[16], f16 d. Value
// 128h + 32k + l: low 4 bits from ql[64h + 32(k&1) + l] (nibble k>>1), high 2 bits from
// qh[32h + l] >> 2k, scale scales[8h + 2k + l/16]. Chunk c & 7 = 4h + g: columns l = 8g .. 8g+7
// of half h for k = 0..3 (vec4 pair k): 3 x 8 code bytes + 8 scale bytes + d.
struct Raw {
  uvec2 ql0;  // ql[64h + 8g ..]: k = 0 (low nibbles), k = 2 (high)
  uvec2 ql1;  // ql[64h + 32 + 8g ..]: k = 1, k = 3
  uvec2 qh;   // qh[32h + 8g ..]
  uvec2 sc;   // scales[8h .. 8h + 7]
  uint d;     // the word holding d
  uint g;
};
Raw load_raw(uint row_byte, uint c) {
  const uint b = row_byte + (c >> 3u) * 210u;
  const uint h = (c >> 2u) & 1u, g = c & 3u;
  Raw r;
  r.ql0 = ld64(b + 64u * h + 8u * g);
  r.ql1 = ld64(b + 64u * h + 32u + 8u * g);
  r.qh = ld64(b + 128u + 32u * h + 8u * g);
  r.sc = ld64(b + 192u + 8u * h);
  r.d = w[(b + 208u) >> 2u] >> (((b + 208u) & 2u) << 3u);
  r.g = g;
  return r;
}
#elif defined(TYPE_Q8_0) || defined(TYPE_Q4_0)
// One block per chunk. Q8_0: 34 bytes, f16 d, int8 qs[32], value d q (codes read biased,
// q + 128, as unsigned bytes). Q4_0: 18 bytes, f16 d, qs[16], value j < 16: low nibble of qs[j],
// j >= 16: high nibble of qs[j - 16], d (q - 8). Blocks are 2-aligned: the words from the one
// holding d are read and the codes funnelled by 16 bits when d sits in a word's low half.
#if defined(TYPE_Q8_0)
#define BLOCK_BYTES 34u
#define CODE_WORDS 8u
#else
#define BLOCK_BYTES 18u
#define CODE_WORDS 4u
#endif
struct Raw {
  uint wd[CODE_WORDS + 1u];
  bool odd;  // d in the high half of wd[0]: codes are wd[1..] as they are
};
Raw load_raw(uint row_byte, uint c) {
  const uint b = row_byte + c * BLOCK_BYTES;
  Raw r;
  [[unroll]] for (uint i = 0u; i <= CODE_WORDS; ++i) r.wd[i] = w[(b >> 2u) + i];
  r.odd = (b & 2u) != 0u;
  return r;
}
#elif defined(TYPE_Q4_1)
// One block per chunk: 20 bytes (4-aligned), f16 d, f16 m, qs[16]; value j < 16: low nibble of
// qs[j], j >= 16: high nibble of qs[j - 16], d q + m. wd[0] holds d and m, wd[1..4] the codes.
struct Raw {
  uint wd[5];
};
Raw load_raw(uint row_byte, uint c) {
  const uint w0 = (row_byte >> 2u) + 5u * c;
  Raw r;
  [[unroll]] for (uint i = 0u; i < 5u; ++i) r.wd[i] = w[w0 + i];
  return r;
}
#endif
