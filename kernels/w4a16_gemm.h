// The prefill GEMM of the W4A16 path: y[m][c] = sum_k x[m][k] P[k][c] for one dequantised panel
// P of n channels (x: m x k row-major; y: row stride ldy). The panel is k-major ([k][n], what the
// direct dequantiser writes from the [K][32]-byte layout) or channel-major ([n][k], channel_major:
// what the row-major duplicate gives); either way Eigen packs it into the same blocks, so both
// give bit-identical y (tests/kernels/w4a16_test.cpp checks it). Eigen's GEMM compiled for
// AVX2 + FMA (w4a16_gemm_avx2.cpp): call only when isa_supported(Isa::avx2).
// That file is the only one that includes Eigen: its inline templates compiled with -mavx2 must
// not be merged with baseline copies of the same templates from another file (SIGILL).
#pragma once

#include <cstdint>

namespace fish {

void gemm_f32_panel_avx2(const float* x, int64_t m, int64_t k, const float* panel, int64_t n,
                         bool channel_major, float* y, int64_t ldy);

}  // namespace fish
