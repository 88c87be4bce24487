// Q8_0 / Q8_1 scalar reference, bit-exact with ggml-quants.c.
#include "quant/q8_0.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "quant/f16.h"

namespace fish {

void dequantize_row_q8_0(const BlockQ8_0* __restrict x, float* __restrict y, int64_t n) {
  assert(n % kQK8_0 == 0);
  const int64_t nb = n / kQK8_0;
  for (int64_t i = 0; i < nb; ++i, y += kQK8_0) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[j] = float(x[i].qs[j]) * d;
  }
}

void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n) {
  assert(n % kQK8_0 == 0);
  const int64_t nb = n / kQK8_0;
  for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK8_0; ++j)
      y[i].qs[j] = int8_t(std::round(x[j] * id));  // half away from 0
  }
}

void dequantize_row_q8_1(const BlockQ8_1* __restrict x, float* __restrict y, int64_t n) {
  assert(n % kQK8_1 == 0);
  const int64_t nb = n / kQK8_1;
  for (int64_t i = 0; i < nb; ++i, y += kQK8_1) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < kQK8_1; ++j) y[j] = float(x[i].qs[j]) * d;
  }
}

void quantize_row_q8_1_ref(const float* x, BlockQ8_1* y, int64_t n) {
  assert(n % kQK8_1 == 0);
  const int64_t nb = n / kQK8_1;
  for (int64_t i = 0; i < nb; ++i, x += kQK8_1) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_1; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      y[i].qs[j] = int8_t(std::round(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = f32_to_f16(float(sum) * d);
  }
}

}  // namespace fish
