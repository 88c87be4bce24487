// Q5_1 scalar reference, bit-exact with ggml-quants.c (dequantize_row_q5_1, quantize_row_q5_1_ref).
#include "quant/q5_1.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "quant/f16.h"
#include "quant/q5_0.h"

namespace fish {

void dequantize_row_q5_1(const BlockQ5_1* __restrict x, float* __restrict y, int64_t n) {
  assert(n % kQK5_1 == 0);
  const int64_t nb = n / kQK5_1;
  for (int64_t i = 0; i < nb; ++i, y += kQK5_1) {
    const float d = f16_to_f32(x[i].d);
    const float m = f16_to_f32(x[i].m);
    // Bit 4 of each quant, unpacked first so the main loop has no variable shifts (vectorises).
    uint8_t hi[kQK5_1];
    unpack_q5_high_bits(x[i].qh, hi);
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      y[j] = float((x[i].qs[j] & 0xF) | hi[j]) * d + m;
      y[j + kQK5_1 / 2] = float((x[i].qs[j] >> 4) | hi[j + kQK5_1 / 2]) * d + m;
    }
  }
}

void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t n) {
  assert(n % kQK5_1 == 0);
  const int64_t nb = n / kQK5_1;
  for (int64_t i = 0; i < nb; ++i, x += kQK5_1) {
    float min = x[0];
    float max = x[0];
    for (int j = 1; j < kQK5_1; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[j + kQK5_1 / 2] - min) * id;
      const int q0 = int(uint8_t(x0 + 0.5f));
      const int q1 = int(uint8_t(x1 + 0.5f));
      y[i].qs[j] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= uint32_t((q0 & 0x10) >> 4) << j;
      qh |= uint32_t((q1 & 0x10) >> 4) << (j + kQK5_1 / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof qh);
  }
}

}  // namespace fish
