// AVX2 K-quant quantisers, byte-identical to quant/'s references: 8 lanes = the 8 sub-blocks of
// one Q4_K/Q5_K super-block, or half of a Q6_K one (quantize_fast_lanes.h has the scheme).
#include "kernels/quantize_fast.h"
#include "kernels/quantize_fast_lanes.h"

namespace fish {

void quantize_row_q4_k_avx2(const float* x, void* y, int64_t n) {
  quantize_q45_k_blocks<Lanes8, 15>(x, static_cast<BlockQ4_K*>(y), n / kQK_K, kQ4kSearch);
}

void quantize_row_q5_k_avx2(const float* x, void* y, int64_t n) {
  quantize_q45_k_blocks<Lanes8, 31>(x, static_cast<BlockQ5_K*>(y), n / kQK_K, kQ5kSearch);
}

void quantize_row_q6_k_avx2(const float* x, void* y, int64_t n) {
  quantize_q6_k_blocks<Lanes8>(x, static_cast<BlockQ6_K*>(y), n / kQK_K);
}

}  // namespace fish
