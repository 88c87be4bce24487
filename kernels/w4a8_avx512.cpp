// W4A8 tile kernel, AVX-512 VNNI: one zmm holds a tile's 64 bytes of a k-octet = 16 row lanes;
// EVEX vpdpbusd (u8 codes x s8 broadcast activations) adds 64 products per instruction into the
// 16 row sums; scale and zero point apply once per group (w4a8.h).
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized in callers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/w4a8.h"

namespace fish {

void w4a8_tile_avx512(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                      const uint8_t* zeros, const uint16_t* mins, const int8_t* aq,
                      const float* a_scales, const float* a_sums, float* out16) {
  const __m512i mask = _mm512_set1_epi8(0x0F);
  __m512 acc = _mm512_setzero_ps();
  const int64_t groups = n_in / group_size;
  const int octets = group_size / 8;
  for (int64_t g = 0; g < groups; ++g) {
    __m512i ia = _mm512_setzero_si512();
    __m512i ib = _mm512_setzero_si512();
    for (int j = 0; j < octets; ++j, qs += 64, aq += 8) {
      int32_t lo, hi;
      std::memcpy(&lo, aq, 4);
      std::memcpy(&hi, aq + 4, 4);
      const __m512i v = _mm512_loadu_si512(qs);
      ia = _mm512_dpbusd_epi32(ia, _mm512_and_si512(v, mask), _mm512_set1_epi32(lo));
      ib = _mm512_dpbusd_epi32(ib, _mm512_and_si512(_mm512_srli_epi16(v, 4), mask),
                               _mm512_set1_epi32(hi));
    }
    const __m512 s =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + g * 16)));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(ia, ib)),
                          _mm512_mul_ps(s, _mm512_set1_ps(a_scales[g])), acc);
    if (mins != nullptr) {  // fp: + m * a_sum
      const __m512 m =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(mins + g * 16)));
      acc = _mm512_fmadd_ps(m, _mm512_set1_ps(a_sums[g]), acc);
      continue;
    }
    const __m512 z = zeros != nullptr ? _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                                            reinterpret_cast<const __m128i*>(zeros + g * 16))))
                                      : _mm512_set1_ps(8.0f);
    acc = _mm512_fnmadd_ps(_mm512_mul_ps(s, z), _mm512_set1_ps(a_sums[g]), acc);
  }
  _mm512_storeu_ps(out16, acc);
}

}  // namespace fish
