// W4A16 decode block kernels, AVX-512: f32 FMA (4 zmm of 16 channels), and AVX512_BF16, where
// code pairs (k, k+1) of a channel become one bf16 dword lane: the two k rows' bytes are widened
// to words and interleaved (vpermt2w), the nibble of each word is mapped to its bf16 value by a
// 16-entry table (vpermw), and vdpbf16ps multiplies the pair with the broadcast activation pair.
// Group sums are f32; scales and zero points apply once per group (w4a16.h).
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized in callers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/w4a16.h"

namespace fish {
namespace {

// acc[i] (channels 16i..16i+15) += s * gs[i] - s * z * x_gsum (fp: + m * x_gsum), for group g.
inline void apply_group(const uint16_t* scales, const uint8_t* zeros, const uint16_t* mins,
                        int64_t scale_stride, int64_t g, float x_gsum, const __m512 gs[4],
                        __m512 acc[4]) {
  const __m512 xs = _mm512_set1_ps(x_gsum);
  for (int i = 0; i < 4; ++i) {
    const __m512 s = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + g * scale_stride + 16 * i)));
    if (mins != nullptr) {  // fp: + m * x_gsum
      const __m512 m = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mins + g * scale_stride + 16 * i)));
      acc[i] = _mm512_fmadd_ps(s, gs[i], acc[i]);
      acc[i] = _mm512_fmadd_ps(m, xs, acc[i]);
      continue;
    }
    const __m512 z =
        zeros != nullptr
            ? _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                  reinterpret_cast<const __m128i*>(zeros + g * scale_stride + 16 * i))))
            : _mm512_set1_ps(8.0f);
    acc[i] = _mm512_fmadd_ps(s, gs[i], acc[i]);
    acc[i] = _mm512_fnmadd_ps(_mm512_mul_ps(s, z), xs, acc[i]);
  }
}

}  // namespace

void w4a16_block_avx512(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                        const uint8_t* zeros, const uint16_t* mins, int64_t scale_stride,
                        const uint16_t* x_bf16, const float* x_f32, const float* x_gsum,
                        float* out64) {
  (void)x_bf16;
  const __m256i mask = _mm256_set1_epi8(0x0F);
  __m512 acc[4];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (int64_t g = 0; g < n_in / group_size; ++g) {
    __m512 gs[4];
    for (__m512& a : gs) a = _mm512_setzero_ps();
    for (int64_t k = g * group_size; k < (g + 1) * group_size; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + k * 32));
      const __m256i lo = _mm256_and_si256(v, mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
      const __m512 xb = _mm512_set1_ps(x_f32[k]);
      const __m128i parts[4] = {_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1),
                                _mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)};
      for (int p = 0; p < 4; ++p) {
        gs[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(parts[p])), xb, gs[p]);
      }
    }
    apply_group(scales, zeros, mins, scale_stride, g, x_gsum[g], gs, acc);
  }
  for (int i = 0; i < 4; ++i) _mm512_storeu_ps(out64 + 16 * i, acc[i]);
}

void w4a16_block_avx512bf16(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                            const uint8_t* zeros, const uint16_t* mins, int64_t scale_stride,
                            const uint16_t* x_bf16, const float* x_f32, const float* x_gsum,
                            float* out64) {
  (void)x_f32;
  // Word j of the result: j even -> word j/2 of a (row k), j odd -> word j/2 of b (row k + 1);
  // idx_lo covers bytes d = 0..15 of the rows, idx_hi d = 16..31.
  alignas(64) uint16_t idx_lo[32], idx_hi[32], lut[32] = {};
  for (int j = 0; j < 32; ++j) {
    idx_lo[j] = uint16_t((j & 1) * 32 + j / 2);
    idx_hi[j] = uint16_t((j & 1) * 32 + 16 + j / 2);
  }
  for (int q = 1; q < 16; ++q) {  // bf16 of the integer q: the top half of its f32 bits (exact)
    const float f = float(q);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    lut[q] = uint16_t(u >> 16);
  }
  const __m512i vidx_lo = _mm512_load_si512(idx_lo);
  const __m512i vidx_hi = _mm512_load_si512(idx_hi);
  const __m512i vlut = _mm512_load_si512(lut);
  const __m512i mask = _mm512_set1_epi16(0x000F);
  __m512 acc[4];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (int64_t g = 0; g < n_in / group_size; ++g) {
    __m512 gs[4];
    for (__m512& a : gs) a = _mm512_setzero_ps();
    for (int64_t k = g * group_size; k < (g + 1) * group_size; k += 2) {
      const __m512i r0 =
          _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + k * 32)));
      const __m512i r1 = _mm512_cvtepu8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + (k + 1) * 32)));
      const __m512i p0 = _mm512_permutex2var_epi16(r0, vidx_lo, r1);  // bytes d = 0..15
      const __m512i p1 = _mm512_permutex2var_epi16(r0, vidx_hi, r1);  // bytes d = 16..31
      uint32_t xp;
      std::memcpy(&xp, x_bf16 + k, 4);
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(int(xp));
      const __m512i w[4] = {_mm512_and_si512(p0, mask), _mm512_and_si512(p1, mask),
                            _mm512_srli_epi16(p0, 4), _mm512_srli_epi16(p1, 4)};
      for (int i = 0; i < 4; ++i) {
        gs[i] = _mm512_dpbf16_ps(gs[i], (__m512bh)_mm512_permutexvar_epi16(w[i], vlut), xv);
      }
    }
    apply_group(scales, zeros, mins, scale_stride, g, x_gsum[g], gs, acc);
  }
  for (int i = 0; i < 4; ++i) _mm512_storeu_ps(out64 + 16 * i, acc[i]);
}

}  // namespace fish
