// Q4_K scalar reference, bit-exact with ggml-quants.c (dequantize_row_q4_K, quantize_row_q4_K_ref).
#include "quant/q4_k.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "quant/f16.h"

namespace fish {

void dequantize_row_q4_k(const BlockQ4_K* __restrict x, float* __restrict y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float dmin = f16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int is = 0; is < 8; is += 2, q += 32) {  // one 64-weight chunk = sub-blocks is, is+1
      uint8_t sc, m;
      get_scale_min_k4(is, x[i].scales, &sc, &m);
      const float d1 = d * float(sc);
      const float m1 = dmin * float(m);
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * float(sc);
      const float m2 = dmin * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

void quantize_row_q4_k_ref(const float* x, BlockQ4_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    quantize_superblock_k4(x, 15, -1.f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

}  // namespace fish
