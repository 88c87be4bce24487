// Row conversions of the plain float types; see f16.h for rounding rules.
#include "quant/f16.h"

#include <cstring>

namespace fish {

void dequantize_row_f32(const float* __restrict x, float* __restrict y, int64_t n) {
  if (n > 0) std::memcpy(y, x, size_t(n) * sizeof(float));
}
void quantize_row_f32_ref(const float* x, float* y, int64_t n) {
  dequantize_row_f32(x, y, n);
}

void dequantize_row_f16(const uint16_t* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(x[i]);
}
void quantize_row_f16_ref(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

void dequantize_row_bf16(const uint16_t* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(x[i]);
}
void quantize_row_bf16_ref(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

}  // namespace fish
