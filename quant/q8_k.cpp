// Q8_K scalar reference, bit-exact with ggml-quants.c (dequantize_row_q8_K, quantize_row_q8_K_ref).
#include "quant/q8_k.h"

#include <cassert>

namespace fish {

void dequantize_row_q8_k(const BlockQ8_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    for (int j = 0; j < kQK_K; ++j) y[j] = x[i].d * float(x[i].qs[j]);
  }
}

}  // namespace fish
