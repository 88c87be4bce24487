// Q3_K scalar reference dequantiser, bit-exact with ggml-quants.c dequantize_row_q3_K.
#include "quant/q3_k.h"

#include <cassert>

#include "quant/f16.h"

namespace fish {

void dequantize_row_q3_k(const BlockQ3_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d_all = f16_to_f32(x[i].d);
    int8_t scales[16];
    unpack_scales_q3_k(x[i].scales, scales);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;  // hmask bit of the current 32-weight group
    int is = 0;
    for (int half = 0; half < kQK_K / 128; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = uint8_t(m << 1)) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d_all * float(scales[is++]);
          for (int l = 16 * part; l < 16 * part + 16; ++l) {
            const int v = int((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
            *y++ = dl * float(v);
          }
        }
      }
    }
  }
}

}  // namespace fish
