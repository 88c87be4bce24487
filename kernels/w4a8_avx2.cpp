// W4A8 tile kernel, AVX2: u8 codes x s8 activations with pmaddubsw + pmaddwd. The int16 pair
// sums are at most 2 * 15 * 127 = 3810 (codes are the unsigned operand), so never saturate.
#include "kernels/w4a8.h"
#include "kernels/w4a8_ymm.h"

namespace fish {

void w4a8_tile_avx2(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                    const uint8_t* zeros, const uint16_t* mins, const int8_t* aq,
                    const float* a_scales, const float* a_sums, float* out16) {
  const __m256i ones = _mm256_set1_epi16(1);
  w4a8_tile_ymm(n_in, group_size, qs, scales, zeros, mins, aq, a_scales, a_sums, out16,
                [ones](__m256i acc, __m256i u, __m256i s) {
                  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones));
                });
}

}  // namespace fish
