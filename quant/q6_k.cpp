// Q6_K scalar reference, bit-exact with ggml-quants.c (dequantize_row_q6_K, quantize_row_q6_K_ref).
#include "quant/q6_k.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "quant/f16.h"

namespace fish {

void dequantize_row_q6_k(const BlockQ6_K* __restrict x, float* __restrict y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int half = 0; half < kQK_K / 128; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      // Quarter k (32 values): low nibble of ql[l] (k=0), ql[l+32] (k=1), high nibble of ql[l]
      // (k=2), ql[l+32] (k=3); high bits 2k..2k+1 of qh[l]. Sub-block scale sc[2k + l/16].
      for (int k = 0; k < 4; ++k) {
        const uint8_t* lo = ql + 32 * (k & 1);
        const int lo_shift = 4 * (k >> 1);
        const float d0 = d * float(sc[2 * k]);  // ggml's d * sc * q, associated as (d * sc) * q
        const float d1 = d * float(sc[2 * k + 1]);
        for (int l = 0; l < 32; ++l) {
          const int q = (((lo[l] >> lo_shift) & 0xF) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
          y[32 * k + l] = (l < 16 ? d0 : d1) * float(q);
        }
      }
    }
  }
}

void quantize_row_q6_k_ref(const float* x, BlockQ6_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  const int64_t nb = n / kQK_K;
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0;  // signed scale of largest magnitude
    float max_abs_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, nullptr);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) {
        max_abs_scale = std::fabs(scale);
        max_scale = scale;
      }
    }
    if (max_abs_scale < 1e-15f) {  // ggml GROUP_MAX_EPS: an all-zero super-block
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = f32_to_f16(1 / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      y[i].scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
    }
    // Requantise against the stored int8 scales.
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = f16_to_f32(y[i].d) * float(y[i].scales[j]);
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = int8_t(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l + 0] & 0xF;
        const int q2 = L[j + l + 32] & 0xF;
        const int q3 = L[j + l + 64] & 0xF;
        const int q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = uint8_t(q1 | (q3 << 4));
        ql[l + 32] = uint8_t(q2 | (q4 << 4));
        qh[l] = uint8_t((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                        ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace fish
