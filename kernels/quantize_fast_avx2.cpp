// AVX2 K-quant quantisers, byte-identical to quant/'s references: 8 lanes = the 8 sub-blocks of
// one Q4_K/Q5_K super-block, or half of a Q6_K one (quantize_fast_lanes.h has the scheme).
#include "kernels/quantize_fast.h"
#include "kernels/quantize_fast_lanes.h"

namespace fish {

namespace {

// Two super-blocks per search while they last (latency hiding), then one.
template <int kNmax, class Block>
void quantize_q45_k_row(const float* x, Block* y, int64_t n, const Qkx2Search& search) {
  const int64_t nb = n / kQK_K;
  const int64_t done = quantize_q45_k_blocks<Lanes8, kNmax, 2>(x, y, nb, search);
  quantize_q45_k_blocks<Lanes8, kNmax, 1>(x + done * kQK_K, y + done, nb - done, search);
}

}  // namespace

void quantize_row_q4_k_fast_avx2(const float* x, void* y, int64_t n) {
  quantize_q45_k_row<15>(x, static_cast<BlockQ4_K*>(y), n, kQ4kSearch);
}

void quantize_row_q5_k_fast_avx2(const float* x, void* y, int64_t n) {
  quantize_q45_k_row<31>(x, static_cast<BlockQ5_K*>(y), n, kQ5kSearch);
}

void quantize_row_fq3_fast_avx2(const float* x, void* y, int64_t n) {
  quantize_q45_k_row<kFq3Nmax>(x, static_cast<BlockFQ3*>(y), n, kFq3Search);
}

void quantize_row_q6_k_fast_avx2(const float* x, void* y, int64_t n) {
  quantize_q6_k_blocks<Lanes8>(x, static_cast<BlockQ6_K*>(y), n / kQK_K);
}

void quantize_row_q8_0_fast_avx2(const float* x, void* y, int64_t n) {
  quantize_q8_0_blocks<Lanes8>(x, static_cast<BlockQ8_0*>(y), n / 32);
}

void quantize_row_q4_0_fast_avx2(const float* x, void* y, int64_t n) {
  quantize_q4_0_blocks<Lanes8>(x, static_cast<BlockQ4_0*>(y), n / 32);
}

void quantize_row_q4_1_fast_avx2(const float* x, void* y, int64_t n) {
  quantize_q4_1_blocks<Lanes8>(x, static_cast<BlockQ4_1*>(y), n / 32);
}

void quantize_row_q5_0_fast_avx2(const float* x, void* y, int64_t n) {
  quantize_q5_0_blocks<Lanes8>(x, static_cast<BlockQ5_0*>(y), n / 32);
}

}  // namespace fish
