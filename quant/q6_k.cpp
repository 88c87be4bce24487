// Q6_K scalar reference, bit-exact with ggml-quants.c (dequantize_row_q6_K, quantize_row_q6_K_ref).
#include "quant/q6_k.h"

#include <cassert>

#include "quant/f16.h"

namespace fish {

void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int half = 0; half < kQK_K / 128; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is + 0]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

}  // namespace fish
