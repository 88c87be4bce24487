// Q4_1 scalar reference, bit-exact with ggml-quants.c (dequantize_row_q4_1, quantize_row_q4_1_ref).
#include "quant/q4_1.h"

#include <algorithm>
#include <cassert>

#include "quant/f16.h"

namespace fish {

void dequantize_row_q4_1(const BlockQ4_1* __restrict x, float* __restrict y, int64_t n) {
  assert(n % kQK4_1 == 0);
  const int64_t nb = n / kQK4_1;
  for (int64_t i = 0; i < nb; ++i, y += kQK4_1) {
    const float d = f16_to_f32(x[i].d);
    const float m = f16_to_f32(x[i].m);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      y[j] = float(x[i].qs[j] & 0xF) * d + m;
      y[j + kQK4_1 / 2] = float(x[i].qs[j] >> 4) * d + m;
    }
  }
}

void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t n) {
  assert(n % kQK4_1 == 0);
  const int64_t nb = n / kQK4_1;
  for (int64_t i = 0; i < nb; ++i, x += kQK4_1) {
    float min = x[0];
    float max = x[0];
    for (int j = 1; j < kQK4_1; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(min);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[j + kQK4_1 / 2] - min) * id;
      const int q0 = std::min(15, int(int8_t(x0 + 0.5f)));
      const int q1 = std::min(15, int(int8_t(x1 + 0.5f)));
      y[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

}  // namespace fish
