// Row conversions of the plain float types; see f16.h for rounding rules.
#include "quant/f16.h"

#include <cstring>
#include <vector>

namespace fish {

void dequantize_row_f32(const float* __restrict x, float* __restrict y, int64_t n) {
  if (n > 0) std::memcpy(y, x, size_t(n) * sizeof(float));
}
void quantize_row_f32_ref(const float* x, float* y, int64_t n) {
  dequantize_row_f32(x, y, n);
}

namespace {
// All 65536 f16 values as f32 (256 KiB, built on first use): a row decode is one load per value,
// ~3x faster than the bit arithmetic in scalar code (ggml keeps the same table).
const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = f16_to_f32(uint16_t(h));
    return t;
  }();
  return table.data();
}
}  // namespace

void dequantize_row_f16(const uint16_t* __restrict x, float* __restrict y, int64_t n) {
  const float* table = f16_table();
  for (int64_t i = 0; i < n; ++i) y[i] = table[x[i]];
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
