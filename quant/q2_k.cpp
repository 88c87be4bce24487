// Q2_K scalar reference dequantiser, bit-exact with ggml-quants.c dequantize_row_q2_K.
#include "quant/q2_k.h"

#include <cassert>

#include "quant/f16.h"

namespace fish {

void dequantize_row_q2_k(const BlockQ2_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float dmin = f16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int half = 0; half < kQK_K / 128; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {  // two sub-blocks of 16 share a 32-byte row
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * float(sc & 0xF);
          const float ml = dmin * float(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * float((q[16 * part + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

}  // namespace fish
