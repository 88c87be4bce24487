// The 256-bit W4A8 tile kernel, shared by w4a8_avx2.cpp (pmaddubsw + pmaddwd) and
// w4a8_avxvnni.cpp (VEX vpdpbusd), which differ only in the u8 x s8 dot step `Dot`.
// Included only by those ISA files; internal linkage (see simd_avx2.h on why).
// Per k-octet: a tile's 64 bytes are two ymm of 8 rows; mask / shift give the codes of k..k+3 and
// k+4..k+7 per row dword; the activation's 4 bytes are broadcast; int32 sums per row stay in
// lanes through a group, then scale and zero point apply once per group (w4a8.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace fish {
namespace {

inline __m256i broadcast_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// zeros (nullptr: the constant 8) of 8 rows of group g, as f32.
inline __m256 zeros_f32x8(const uint8_t* zeros) {
  if (zeros == nullptr) return _mm256_set1_ps(8.0f);
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zeros))));
}

template <typename Dot>
inline void w4a8_tile_ymm(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                          const uint8_t* zeros, const uint16_t* mins, const int8_t* aq,
                          const float* a_scales, const float* a_sums, float* out16, Dot dot) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  __m256 acc0 = _mm256_setzero_ps();  // rows 0..7
  __m256 acc1 = _mm256_setzero_ps();  // rows 8..15
  const int64_t groups = n_in / group_size;
  const int octets = group_size / 8;
  for (int64_t g = 0; g < groups; ++g) {
    __m256i i0a = _mm256_setzero_si256(), i0b = _mm256_setzero_si256();
    __m256i i1a = _mm256_setzero_si256(), i1b = _mm256_setzero_si256();
    for (int j = 0; j < octets; ++j, qs += 64, aq += 8) {
      const __m256i a_lo = broadcast_i32(aq);
      const __m256i a_hi = broadcast_i32(aq + 4);
      const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
      const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32));
      i0a = dot(i0a, _mm256_and_si256(v0, mask), a_lo);
      i0b = dot(i0b, _mm256_and_si256(_mm256_srli_epi16(v0, 4), mask), a_hi);
      i1a = dot(i1a, _mm256_and_si256(v1, mask), a_lo);
      i1b = dot(i1b, _mm256_and_si256(_mm256_srli_epi16(v1, 4), mask), a_hi);
    }
    const __m256 as = _mm256_set1_ps(a_scales[g]);
    const __m256 am = _mm256_set1_ps(a_sums[g]);
    const __m128i* sp = reinterpret_cast<const __m128i*>(scales + g * 16);
    const __m256 s0 = _mm256_cvtph_ps(_mm_loadu_si128(sp));
    const __m256 s1 = _mm256_cvtph_ps(_mm_loadu_si128(sp + 1));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(i0a, i0b)), _mm256_mul_ps(s0, as),
                           acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(i1a, i1b)), _mm256_mul_ps(s1, as),
                           acc1);
    if (mins != nullptr) {  // fp: + m * a_sum
      const __m128i* mp = reinterpret_cast<const __m128i*>(mins + g * 16);
      acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(mp)), am, acc0);
      acc1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(mp + 1)), am, acc1);
      continue;
    }
    const uint8_t* zg = zeros != nullptr ? zeros + g * 16 : nullptr;
    const __m256 z0 = zeros_f32x8(zg);
    const __m256 z1 = zeros_f32x8(zg != nullptr ? zg + 8 : nullptr);
    acc0 = _mm256_fnmadd_ps(_mm256_mul_ps(s0, z0), am, acc0);
    acc1 = _mm256_fnmadd_ps(_mm256_mul_ps(s1, z1), am, acc1);
  }
  _mm256_storeu_ps(out16, acc0);
  _mm256_storeu_ps(out16 + 8, acc1);
}

}  // namespace
}  // namespace fish
