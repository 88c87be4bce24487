// AVX-512 K-quant quantisers, byte-identical to quant/'s references: 16 lanes = the sub-blocks of
// two Q4_K/Q5_K super-blocks (an odd last one goes through the 8-lane AVX2 form) or of one Q6_K
// super-block (quantize_fast_lanes.h has the scheme).
// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized in callers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "kernels/quantize_fast.h"
#include "kernels/quantize_fast_lanes.h"

namespace fish {
namespace {

// Four super-blocks per search while they last (two interleaved 16-lane groups hide latency),
// then two, then the 8-lane form for an odd last one.
template <int kNmax, class Block>
void quantize_q45_k_row(const float* x, Block* y, int64_t n, const Qkx2Search& search) {
  const int64_t nb = n / kQK_K;
  int64_t done = quantize_q45_k_blocks<Lanes16, kNmax, 2>(x, y, nb, search);
  done += quantize_q45_k_blocks<Lanes16, kNmax, 1>(x + done * kQK_K, y + done, nb - done, search);
  quantize_q45_k_blocks<Lanes8, kNmax, 1>(x + done * kQK_K, y + done, nb - done, search);
}

}  // namespace

void quantize_row_q4_k_fast_avx512(const float* x, void* y, int64_t n) {
  quantize_q45_k_row<15>(x, static_cast<BlockQ4_K*>(y), n, kQ4kSearch);
}

void quantize_row_q5_k_fast_avx512(const float* x, void* y, int64_t n) {
  quantize_q45_k_row<31>(x, static_cast<BlockQ5_K*>(y), n, kQ5kSearch);
}

void quantize_row_fq3_fast_avx512(const float* x, void* y, int64_t n) {
  quantize_q45_k_row<kFq3Nmax>(x, static_cast<BlockFQ3*>(y), n, kFq3Search);
}

void quantize_row_q6_k_fast_avx512(const float* x, void* y, int64_t n) {
  quantize_q6_k_blocks<Lanes16>(x, static_cast<BlockQ6_K*>(y), n / kQK_K);
}

void quantize_row_q8_0_fast_avx512(const float* x, void* y, int64_t n) {
  quantize_q8_0_blocks<Lanes16>(x, static_cast<BlockQ8_0*>(y), n / 32);
}

void quantize_row_q4_0_fast_avx512(const float* x, void* y, int64_t n) {
  quantize_q4_0_blocks<Lanes16>(x, static_cast<BlockQ4_0*>(y), n / 32);
}

void quantize_row_q4_1_fast_avx512(const float* x, void* y, int64_t n) {
  quantize_q4_1_blocks<Lanes16>(x, static_cast<BlockQ4_1*>(y), n / 32);
}

void quantize_row_q5_0_fast_avx512(const float* x, void* y, int64_t n) {
  quantize_q5_0_blocks<Lanes16>(x, static_cast<BlockQ5_0*>(y), n / 32);
}

}  // namespace fish
