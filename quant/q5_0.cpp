// Q5_0 scalar reference, bit-exact with ggml-quants.c (dequantize_row_q5_0, quantize_row_q5_0_ref).
#include "quant/q5_0.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "quant/f16.h"

namespace fish {

void dequantize_row_q5_0(const BlockQ5_0* __restrict x, float* __restrict y, int64_t n) {
  assert(n % kQK5_0 == 0);
  const int64_t nb = n / kQK5_0;
  for (int64_t i = 0; i < nb; ++i, y += kQK5_0) {
    const float d = f16_to_f32(x[i].d);
    // Bit 4 of each quant, unpacked first so the main loop has no variable shifts (vectorises).
    uint8_t hi[kQK5_0];
    unpack_q5_high_bits(x[i].qh, hi);
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      y[j] = float(((x[i].qs[j] & 0xF) | hi[j]) - 16) * d;
      y[j + kQK5_0 / 2] = float(((x[i].qs[j] >> 4) | hi[j + kQK5_0 / 2]) - 16) * d;
    }
  }
}

void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t n) {
  assert(n % kQK5_0 == 0);
  const int64_t nb = n / kQK5_0;
  for (int64_t i = 0; i < nb; ++i, x += kQK5_0) {
    float amax = 0.0f;
    float max = 0.0f;  // signed value of largest magnitude: maps to q = 0 (value -16 * d)
    for (int j = 0; j < kQK5_0; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + kQK5_0 / 2] * id;
      const int q0 = std::min(31, int(int8_t(x0 + 16.5f)));
      const int q1 = std::min(31, int(int8_t(x1 + 16.5f)));
      y[i].qs[j] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= uint32_t((q0 & 0x10) >> 4) << j;
      qh |= uint32_t((q1 & 0x10) >> 4) << (j + kQK5_0 / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof qh);
  }
}

}  // namespace fish
