// Matrix x matrix (and matrix x vector) for every weight type with a matvec kernel:
//   y[t][o] = sum_i W[o][i] * x[t][i],   W: n_out rows of n_in weights in `wtype` (row-major,
//   row_bytes(wtype, n_in) apart), x: n_tok rows of n_in f32, y: n_tok rows of n_out f32.
// Each activation row is quantised once (to the weight type's activation format); the n_out rows
// of W are split across the pool's threads; each thread walks its rows in blocks and, for each
// block, all tokens in blocks, so a weight row is read from memory once per call and re-read from
// cache for the other tokens (prefill runs the prompt as matrix x matrix). Each y element is one
// vec_dot call, so results do not depend on the thread count.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/registry.h"
#include "kernels/thread_pool.h"
#include "quant/types.h"

namespace fish {

// Preconditions: has_matvec_kernel(wtype); n_in % matvec_kernel(wtype).block_elems == 0; y does
// not alias x or w. Quantised activations go into a per-thread scratch buffer that grows to the
// largest n_tok x n_in seen.
void matmul(const void* w, GgmlType wtype, int64_t n_out, int64_t n_in, const float* x,
            int64_t n_tok, float* y, ThreadPool& pool, Isa isa = best_isa());

// Same with activations already in the kernel's format: xq holds n_tok rows of
// kernel.act_row_bytes(n_in) bytes each (f32 rows when kernel.act == f32). Lets one quantised
// input feed several matrices (q/k/v, gate/up).
void matmul_preq(const MatvecKernel& kernel, const void* w, int64_t n_out, int64_t n_in,
                 const void* xq, int64_t n_tok, float* y, ThreadPool& pool);

// Quantises n_tok rows of n_in f32 into kernel.act format (xq as for matmul_preq), rows split
// across the pool. For f32 activations this is a copy.
void quantize_activations(const MatvecKernel& kernel, const float* x, int64_t n_tok, int64_t n_in,
                          void* xq, ThreadPool& pool);

}  // namespace fish
