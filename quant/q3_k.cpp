// Q3_K scalar reference dequantiser, bit-exact with ggml-quants.c dequantize_row_q3_K.
#include "quant/q3_k.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "quant/f16.h"

namespace fish {

void dequantize_row_q3_k(const BlockQ3_K* __restrict x, float* __restrict y, int64_t n) {
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

void quantize_row_q3_k_ref(const float* x, BlockQ3_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0;  // signed scale of largest magnitude
    float amax = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, 12);
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kQK_K / 16; ++j) {
        int l = std::max(-32, std::min(31, int(int8_t(nearest_int(iscale * scales[j]))))) + 32;
        if (j < 8) {
          y[i].scales[j] = uint8_t(l & 0xF);
        } else {
          y[i].scales[j - 8] = uint8_t(y[i].scales[j - 8] | ((l & 0xF) << 4));
        }
        l >>= 4;
        y[i].scales[j % 4 + 8] = uint8_t(y[i].scales[j % 4 + 8] | (l << (2 * (j / 4))));
      }
      y[i].d = f32_to_f16(1 / iscale);
    } else {
      y[i].d = f32_to_f16(0.f);
    }
    // Requantise against the stored 6-bit scales.
    int8_t sc[16];
    unpack_scales_q3_k(y[i].scales, sc);
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = f16_to_f32(y[i].d) * float(sc[j]);
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = int8_t(std::max(-4, std::min(3, l)) + 4);
      }
    }
    // High bit of value j goes to hmask[j % 32], bit j / 32.
    std::memset(y[i].hmask, 0, kQK_K / 8);
    for (int j = 0; j < kQK_K; ++j) {
      if (L[j] > 3) {
        y[i].hmask[j % 32] = uint8_t(y[i].hmask[j % 32] | (1 << (j / 32)));
        L[j] = int8_t(L[j] - 4);
      }
    }
    for (int j = 0; j < kQK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[j / 4 + l] =
            uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
      }
    }
  }
}

}  // namespace fish
