// Small AVX2/FMA/F16C helpers shared by the *_avx2.cpp and *_avx512.cpp kernel files only.
//
// Everything here is in an anonymous namespace on purpose: an inline function with external
// linkage compiled into two TUs with different -m flags is one symbol, and the linker may keep the
// AVX-512 copy for the AVX2 caller (SIGILL on an AVX2-only CPU). For the same reason the ISA files
// must not odr-use inline functions of shared headers (quant/f16.h f16_to_f32, quant/k_quants.h
// helpers): they use the local copies below.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace fish {
namespace {

inline float f16_to_f32_simd(uint16_t h) {
  return _cvtsh_ss(h);
}
// Round to nearest even, as quant/f16.h f32_to_f16 (F16C rounding mode 0).
inline uint16_t f32_to_f16_simd(float f) {
  return uint16_t(_cvtss_sh(f, 0));
}

inline float hsum_f32x8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int hsum_i32x8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

inline float hmax_f32x8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline __m256 abs_f32x8(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

// std::round (half away from zero) of every lane, exactly: t = trunc(v); v - t is exact, and
// |v - t| >= 0.5 means round away from zero.
inline __m256 round_half_away_f32x8(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = abs_f32x8(_mm256_sub_ps(v, t));
  const __m256 one = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));
  const __m256 adj = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one);
  return _mm256_add_ps(t, adj);
}

// Scales of a 32-weight block pair from the first 8 bytes of the weight block and of the
// activation block (every ggml 32-block format starts with f16 d, then f16 m / s where it has
// one; all blocks are >= 18 bytes): lane 0 = d_w * d_a, lane 1 = m_w * s_a (lanes 1-3 are other
// bytes read as f16 where a format has no m / s: unused). vcvtph2ps with a memory operand is a
// load + one port-0 uop; building the vector from scalars would cost shuffle-port (p5) uops,
// the bottleneck of these loops. f16 * f16 products are never f32-denormal, so no FP assists.
inline __m128 block_scales(const void* w, const void* a) {
  const __m128 fw = _mm_cvtph_ps(_mm_loadl_epi64(static_cast<const __m128i*>(w)));
  const __m128 fa = _mm_cvtph_ps(_mm_loadl_epi64(static_cast<const __m128i*>(a)));
  return _mm_mul_ps(fw, fa);
}

// 4 x 8 int32 (each in -128..127) -> 32 int8 in lane order.
inline __m256i pack_i32x32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);  // a0-3 b0-3 | a4-7 b4-7
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);  // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// 16 bytes of nibble pairs -> 32 bytes: low nibbles of bytes 0..15, then high nibbles.
// Broadcast load (a pure load uop) + per-64-bit-lane variable shift instead of a vinserti128,
// to keep the shuffle port free.
inline __m256i unpack_nibbles_32(const uint8_t* p) {
  const __m256i b =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_and_si256(_mm256_srlv_epi64(b, _mm256_set_epi64x(4, 4, 0, 0)),
                          _mm256_set1_epi8(0x0F));
}

// 32 bits (little-endian) -> 32 bytes, byte i = 0xFF if bit i is set, else 0.
inline __m256i expand_bits_32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101,
                                         0x0000000000000000);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(int(v)), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));  // all but bit i%8
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

// u8 x s8 -> 8 int32 sums of 4 products. The int16 pair sums cannot saturate when
// |u| * |s| * 2 <= 32767: callers keep u <= 127 with s in -127..127, or u <= 63 with any s8.
inline __m256i dot_u8s8_i32x8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// s8 x s8 -> 8 int32 sums of 4 products, by the sign trick: |a| * (b with a's sign). |a| <= 128
// and |b| <= 127 (activations from our quantisers) keep int16 pair sums below 32767.
inline __m256i dot_s8s8_i32x8(__m256i a, __m256i b) {
  return dot_u8s8_i32x8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// Q4_K/Q5_K 12-byte scales -> 16 bytes: bytes 0..7 = the 8 6-bit scales, 8..15 = the 8 mins
// (ggml's utmp shuffle; the same values as get_scale_min_k4 j = 0..7).
inline void unpack_scales_mins_k4(const uint8_t* packed12, uint32_t out[4]) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, packed12, 12);
  out[0] = u[0] & kmask1;
  out[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  out[2] = u[1] & kmask1;
  out[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
}

// Local copy of quant/k_quants.h unpack_scales_q3_k (16 signed scales, minus 32), kept here with
// internal linkage: an inline function compiled in an ISA-flagged file could otherwise be the
// copy the linker keeps for baseline callers (SIGILL on older CPUs).
inline void q3_k_scales(const uint8_t* packed12, int8_t out[16]) {
  constexpr uint32_t kmask1 = 0x03030303;
  constexpr uint32_t kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, packed12, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  uint8_t raw[16];
  std::memcpy(raw, aux, 16);
  for (int i = 0; i < 16; ++i) out[i] = int8_t(int(raw[i]) - 32);
}

}  // namespace
}  // namespace fish
