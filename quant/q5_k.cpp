// Q5_K scalar reference, bit-exact with ggml-quants.c (dequantize_row_q5_K, quantize_row_q5_K_ref).
#include "quant/q5_k.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "quant/f16.h"

namespace fish {

void dequantize_row_q5_k(const BlockQ5_K* __restrict x, float* __restrict y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float dmin = f16_to_f32(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;  // qh bits of the two sub-blocks of the current 64-weight chunk
    for (int is = 0; is < 8; is += 2, ql += 32, u1 = uint8_t(u1 << 2), u2 = uint8_t(u2 << 2)) {
      uint8_t sc, m;
      get_scale_min_k4(is, x[i].scales, &sc, &m);
      const float d1 = d * float(sc);
      const float m1 = dmin * float(m);
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * float(sc);
      const float m2 = dmin * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

void quantize_row_q5_k_ref(const float* x, BlockQ5_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    quantize_superblock_k4(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    std::memset(qh, 0, kQK_K / 8);
    uint8_t m1 = 1, m2 = 2;  // qh bits of the two sub-blocks of the current 64-value chunk
    for (int c = 0; c < kQK_K; c += 64, ql += 32, m1 = uint8_t(m1 << 2), m2 = uint8_t(m2 << 2)) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[c + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[c + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = uint8_t(l1 | (l2 << 4));
      }
    }
  }
}

}  // namespace fish
