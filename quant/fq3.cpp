// FQ3 scalar reference: bit packing, dequantiser and the Q4_K-scheme quantiser (quant/fq3.h).
#include "quant/fq3.h"

#include <cassert>

#include "quant/f16.h"

namespace fish {

namespace {

void quantize_row(const float* x, BlockFQ3* y, int64_t n, const float* importance) {
  assert(n % kQK_K == 0);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    quantize_superblock_k4(x, kFq3Nmax, kFq3Rmin, kFq3Nstep, &y[i].d, &y[i].dmin, y[i].scales, L,
                           importance ? importance + i * kQK_K : nullptr);
    for (int g = 0; g < kFq3Groups; ++g) fq3_pack_group(L + 32 * g, y[i].q[g]);
  }
}
}  // namespace

void fq3_pack_group(const uint8_t q[32], uint32_t abc[3]) {
  abc[0] = abc[1] = abc[2] = 0;
  for (int s = 0; s < 8; ++s) {
    for (int j = 0; j < 4; ++j) {
      const uint32_t v = q[4 * s + j];
      assert(v <= 7);
      abc[s < 4 ? 0 : 1] |= (v & 3u) << (8 * j + 2 * (s & 3));
      abc[2] |= (v >> 2) << (8 * j + s);
    }
  }
}

void dequantize_row_fq3(const BlockFQ3* __restrict x, float* __restrict y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float dmin = f16_to_f32(x[i].dmin);
    for (int g = 0; g < kFq3Groups; ++g) {
      uint8_t sc, m;
      get_scale_min_k4(g, x[i].scales, &sc, &m);
      const float dg = d * float(sc);
      const float mg = dmin * float(m);
      uint8_t q[32];
      fq3_unpack_group(x[i].q[g], q);
      for (int l = 0; l < 32; ++l) *y++ = dg * float(q[l]) - mg;
    }
  }
}

void quantize_row_fq3_ref(const float* x, BlockFQ3* y, int64_t n) {
  quantize_row(x, y, n, nullptr);
}

void quantize_row_fq3_weighted(const float* x, BlockFQ3* y, int64_t n, const float* importance) {
  quantize_row(x, y, n, importance);
}

}  // namespace fish
