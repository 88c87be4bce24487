// Q8_K scalar reference, bit-exact with ggml-quants.c (dequantize_row_q8_K, quantize_row_q8_K_ref).
#include "quant/q8_k.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace fish {

void dequantize_row_q8_k(const BlockQ8_K* __restrict x, float* __restrict y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    for (int j = 0; j < kQK_K; ++j) y[j] = x[i].d * float(x[i].qs[j]);
  }
}

void quantize_row_q8_k_ref(const float* x, BlockQ8_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max = 0;  // signed value of largest magnitude
    float amax = 0;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0) {
      // ggml leaves bsums unwritten here; FISH zeroes them so the block is fully defined.
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // -127 (ggml changed it from -128): q stays in [-127, 127], so negating a quant never
    // overflows int8 (sign tricks in ggml's SIMD dot products rely on it).
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) y[i].qs[j] = int8_t(std::min(127, nearest_int(iscale * x[j])));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[16 * g + ii];
      y[i].bsums[g] = int16_t(sum);
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace fish
