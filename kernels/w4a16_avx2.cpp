// W4A16 decode block kernel, AVX2 + FMA: per k, the block's 32 bytes give 64 codes (low nibbles:
// channels 0..31, high: 32..63), widened to f32 and multiplied into 8 ymm group sums; per group
// the channel scales and zero points apply once (w4a16.h).
#include <immintrin.h>

#include "kernels/w4a16.h"

namespace fish {

void w4a16_block_avx2(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                      const uint8_t* zeros, const uint16_t* mins, int64_t scale_stride,
                      const uint16_t* x_bf16, const float* x_f32, const float* x_gsum,
                      float* out64) {
  (void)x_bf16;
  const __m256i mask = _mm256_set1_epi8(0x0F);
  __m256 acc[8];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  for (int64_t g = 0; g < n_in / group_size; ++g) {
    __m256 gs[8];
    for (__m256& a : gs) a = _mm256_setzero_ps();
    for (int64_t k = g * group_size; k < (g + 1) * group_size; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + k * 32));
      const __m256i lo = _mm256_and_si256(v, mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
      const __m128i parts[4] = {_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1),
                                _mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)};
      const __m256 xb = _mm256_set1_ps(x_f32[k]);
      for (int p = 0; p < 4; ++p) {
        gs[2 * p] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[p])), xb, gs[2 * p]);
        gs[2 * p + 1] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(parts[p], 8))),
                            xb, gs[2 * p + 1]);
      }
    }
    const __m256 xs = _mm256_set1_ps(x_gsum[g]);
    for (int i = 0; i < 8; ++i) {
      const __m256 s = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + g * scale_stride + 8 * i)));
      if (mins != nullptr) {  // fp: + m * sum(x)
        const __m256 m = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(mins + g * scale_stride + 8 * i)));
        acc[i] = _mm256_fmadd_ps(s, gs[i], acc[i]);
        acc[i] = _mm256_fmadd_ps(m, xs, acc[i]);
        continue;
      }
      const __m256 z =
          zeros != nullptr
              ? _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                    reinterpret_cast<const __m128i*>(zeros + g * scale_stride + 8 * i))))
              : _mm256_set1_ps(8.0f);
      acc[i] = _mm256_fmadd_ps(s, gs[i], acc[i]);
      acc[i] = _mm256_fnmadd_ps(_mm256_mul_ps(s, z), xs, acc[i]);
    }
  }
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(out64 + 8 * i, acc[i]);
}

}  // namespace fish
