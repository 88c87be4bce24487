// Fast weight quantisers whose output is BYTE-IDENTICAL to the scalar references in quant/
// (type_info(t).quantize_row, transcribed from ggml's quantize_row_*_ref), plus a row-parallel
// tensor quantiser.
//
// Why identical and still fast: the K-quant references spend ~all their time in a per-sub-block
// scale search (ggml make_qkx2_quants / make_qx_quants: ~20 candidate scales, each a pass over
// the 32 or 16 values with float sums). Vectorising one sub-block's sums would change the float
// summation order; instead the SIMD variants put independent sub-blocks in separate lanes (a
// transposed layout: lane k = sub-block k) and run every lane through exactly the scalar sequence
// of float operations, including ggml's 1.5*2^23 nearest_int trick and its quirks (the min
// updated mid-search). Those files build with -ffp-contract=off: a fused a*b+c rounds once and
// would change the bytes. Work per value after the search (re-quantising against the stored
// 6-bit / int8 scales) is element-wise and vectorises in the natural layout.
//
// Variants: avx512 (16 lanes: 2 Q4_K/Q5_K/FQ3 or 1 Q6_K super-block per 16-lane group; Q4_K/Q5_K
// run two groups interleaved to hide latency), avx2 (8 lanes), scalar = the reference itself. q8_0,
// q4_0, q4_1 and q5_0 (no search) vectorise within a block (quantize_fast_lanes.h says how the
// reductions stay exact). Types without a SIMD variant (q5_1, q2_k, q3_k, f32/f16/bf16, ...)
// resolve to their scalar reference, so quantize_row_kernel() serves every type that has one.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/thread_pool.h"
#include "quant/types.h"

namespace fish {

struct QuantizeRowKernel {
  GgmlType type = GgmlType::f32;
  Isa isa = Isa::scalar;       // level actually used: below the one asked for when the CPU or
                               // this table has nothing higher for the type
  QuantizeRowFn fn = nullptr;  // same contract and bytes as type_info(type).quantize_row
};

// The fastest quantiser for `t` at level `isa`, clamped to what the CPU supports (scalar under
// FISH_SCALAR_ONLY). Precondition: type_info(t).quantize_row != nullptr.
QuantizeRowKernel quantize_row_kernel(GgmlType t, Isa isa = best_isa());

// One row of n values (n % block_elems == 0) with quantize_row_kernel(t).fn.
void quantize_row_fast(GgmlType t, const float* src, void* dst, int64_t n);

// n_rows rows of n_per_row values (row r at src + r*n_per_row, output row r at
// dst + r*row_bytes(t, n_per_row)), rows split statically across the pool's threads. The bytes do
// not depend on the thread count. Preconditions as quantize_row_fast.
void quantize_rows(GgmlType t, const float* src, void* dst, int64_t n_rows, int64_t n_per_row,
                   ThreadPool& pool);

// ---- SIMD variants behind the dispatcher (call only when isa_supported() says so). "fast" in the
// names keeps them apart from vec_dot.h's q8_0 activation quantisers, which are not byte-identical
// on NaN/inf. K-quants: n % 256 == 0.
void quantize_row_q4_k_fast_avx2(const float* x, void* y, int64_t n);
void quantize_row_q4_k_fast_avx512(const float* x, void* y, int64_t n);
void quantize_row_q5_k_fast_avx2(const float* x, void* y, int64_t n);
void quantize_row_q5_k_fast_avx512(const float* x, void* y, int64_t n);
void quantize_row_fq3_fast_avx2(const float* x, void* y, int64_t n);
void quantize_row_fq3_fast_avx512(const float* x, void* y, int64_t n);
void quantize_row_q6_k_fast_avx2(const float* x, void* y, int64_t n);
void quantize_row_q6_k_fast_avx512(const float* x, void* y, int64_t n);
// 32-value block formats: n % 32 == 0.
void quantize_row_q8_0_fast_avx2(const float* x, void* y, int64_t n);
void quantize_row_q8_0_fast_avx512(const float* x, void* y, int64_t n);
void quantize_row_q4_0_fast_avx2(const float* x, void* y, int64_t n);
void quantize_row_q4_0_fast_avx512(const float* x, void* y, int64_t n);
void quantize_row_q4_1_fast_avx2(const float* x, void* y, int64_t n);
void quantize_row_q4_1_fast_avx512(const float* x, void* y, int64_t n);
void quantize_row_q5_0_fast_avx2(const float* x, void* y, int64_t n);
void quantize_row_q5_0_fast_avx512(const float* x, void* y, int64_t n);

}  // namespace fish
