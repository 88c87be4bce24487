// W4A8 tile kernel, AVX-VNNI (VEX vpdpbusd on ymm: Alder Lake, Sapphire Rapids and later).
#include "kernels/w4a8.h"
#include "kernels/w4a8_ymm.h"

namespace fish {

void w4a8_tile_avxvnni(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                       const uint8_t* zeros, const uint16_t* mins, const int8_t* aq,
                       const float* a_scales, const float* a_sums, float* out16) {
  w4a8_tile_ymm(
      n_in, group_size, qs, scales, zeros, mins, aq, a_scales, a_sums, out16,
      [](__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); });
}

}  // namespace fish
