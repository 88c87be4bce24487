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
  uint8_t Laux[32];
  float weights[32];
  float mins[kQK_K / 32];
  float scales[kQK_K / 32];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0;  // scales are >= 0: the min is subtracted
    float max_min = 0;
    for (int j = 0; j < kQK_K / 32; ++j) {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
      scales[j] = make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f,
                                   0.1f, 20, false);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < kQK_K / 32; ++j) {
      ls[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
      lm[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
    }
    pack_scale_min_k4(ls, lm, y[i].scales);
    y[i].d = f32_to_f16(max_scale / 63.f);
    y[i].dmin = f32_to_f16(max_min / 63.f);
    // Requantise against the stored 6-bit scales and mins.
    for (int j = 0; j < kQK_K / 32; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, y[i].scales, &sc, &m);
      const float d = f16_to_f32(y[i].d) * float(sc);
      if (d == 0) continue;
      const float dm = f16_to_f32(y[i].dmin) * float(m);
      for (int ii = 0; ii < 32; ++ii) {
        const int l = nearest_int((x[32 * j + ii] + dm) / d);
        L[32 * j + ii] = uint8_t(std::max(0, std::min(15, l)));
      }
    }
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

}  // namespace fish
