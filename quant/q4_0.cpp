// Q4_0 scalar reference, bit-exact with ggml-quants.c (dequantize_row_q4_0, quantize_row_q4_0_ref).
#include "quant/q4_0.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "quant/f16.h"

namespace fish {

void dequantize_row_q4_0(const BlockQ4_0* __restrict x, float* __restrict y, int64_t n) {
  assert(n % kQK4_0 == 0);
  const int64_t nb = n / kQK4_0;
  for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = float((x[i].qs[j] & 0xF) - 8) * d;
      y[j + kQK4_0 / 2] = float((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n) {
  assert(n % kQK4_0 == 0);
  const int64_t nb = n / kQK4_0;
  for (int64_t i = 0; i < nb; ++i, x += kQK4_0) {
    float amax = 0.0f;  // largest magnitude ...
    float max = 0.0f;   // ... and its signed value: it maps to q = 0 (value -8 * d)
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + kQK4_0 / 2] * id;
      const int q0 = std::min(15, int(int8_t(x0 + 8.5f)));  // truncation, as ggml
      const int q1 = std::min(15, int(int8_t(x1 + 8.5f)));
      y[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

}  // namespace fish
