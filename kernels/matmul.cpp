// matmul: quantise activations once, then rows of W split across threads; see matmul.h.
#include "kernels/matmul.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

namespace fish {
namespace {

// Blocking for prefill: kRowBlock weight rows (~ 16 x 1-9 KB for n_in 2048-8192) stay in L1/L2
// while kTokBlock activation rows (~16 x 2-9 KB quantised) are walked against them.
constexpr int64_t kRowBlock = 16;
constexpr int64_t kTokBlock = 16;

// Decode (few tokens) streams W from DRAM: each row is software-prefetched (T0) ~8 KiB ahead.
// Measured on the 16-core Sapphire Rapids VM (bench/kernels_bench.cpp matvec_cold, 8192x2048,
// 8 rows ahead, noisy +-15%): Q4_1 4.8 -> 8.7 GB/s at 1 thread, 44 -> 64 GB/s at 16 threads;
// Q4_K 5.2 -> 7.0 and 58 -> 73. The NTA hint measured worse than no prefetch. Prefill (more
// tokens per row) is compute-bound: no prefetch.
constexpr size_t kPrefetchBytes = 8192;
constexpr int64_t kPrefetchMaxTokens = 4;

}  // namespace

void quantize_activations(const MatvecKernel& kernel, const float* x, int64_t n_tok, int64_t n_in,
                          void* xq, ThreadPool& pool) {
  assert(n_in % kernel.block_elems == 0);
  const size_t row = kernel.act_row_bytes(n_in);
  auto* out = static_cast<uint8_t*>(xq);
  if (kernel.quantize_act == nullptr) {
    std::memcpy(out, x, row * size_t(n_tok));
    return;
  }
  auto quantize_rows = [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) kernel.quantize_act(x + t * n_in, out + size_t(t) * row, n_in);
  };
  if (n_tok == 1) {
    quantize_rows(0, 1, 0);  // not worth a dispatch
  } else {
    pool.parallel_for(n_tok, quantize_rows);
  }
}

void matmul_preq(const MatvecKernel& kernel, const void* w, int64_t n_out, int64_t n_in,
                 const void* xq, int64_t n_tok, float* y, ThreadPool& pool) {
  assert(n_in % kernel.block_elems == 0);
  const size_t w_row = row_bytes(kernel.weight, n_in);
  const size_t x_row = kernel.act_row_bytes(n_in);
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(xq);
  const VecDotFn dot = kernel.vec_dot;
  const VecDotX4Fn dot4 = kernel.vec_dot_x4;
  const VecDotRowsFn dot_rows = n_tok == 1 ? kernel.vec_dot_rows : nullptr;
  // Rows to prefetch ahead (0: none).
  const int64_t pf =
      n_tok <= kPrefetchMaxTokens ? int64_t((kPrefetchBytes + w_row - 1) / w_row) : 0;
  pool.parallel_for(n_out, [&](int64_t row_begin, int64_t row_end, int) {
    if (dot_rows != nullptr) {  // decode: the slice's rows in one call (it prefetches itself)
      dot_rows(n_in, wb + size_t(row_begin) * w_row, w_row, row_end - row_begin, xb, y + row_begin);
      return;
    }
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRowBlock) {
      const int64_t r1 = std::min(r0 + kRowBlock, row_end);
      for (int64_t t0 = 0; t0 < n_tok; t0 += kTokBlock) {
        const int64_t t1 = std::min(t0 + kTokBlock, n_tok);
        for (int64_t r = r0; r < r1; ++r) {
          const uint8_t* wr = wb + size_t(r) * w_row;
          if (pf > 0 && r + pf < row_end) {
            const uint8_t* ahead = wr + size_t(pf) * w_row;
            for (size_t off = 0; off < w_row; off += 64) __builtin_prefetch(ahead + off, 0, 3);
          }
          int64_t t = t0;
          if (dot4 != nullptr) {
            for (; t + 4 <= t1; t += 4) {  // weight codes decoded once for 4 tokens
              float out[4];
              dot4(n_in, wr, xb + size_t(t) * x_row, x_row, out);
              for (int k = 0; k < 4; ++k) y[(t + k) * n_out + r] = out[k];
            }
          }
          for (; t < t1; ++t) y[t * n_out + r] = dot(n_in, wr, xb + size_t(t) * x_row);
        }
      }
    }
  });
}

void matmul(const void* w, GgmlType wtype, int64_t n_out, int64_t n_in, const float* x,
            int64_t n_tok, float* y, ThreadPool& pool, Isa isa) {
  const MatvecKernel& kernel = matvec_kernel(wtype, isa);
  if (kernel.quantize_act == nullptr) {
    matmul_preq(kernel, w, n_out, n_in, x, n_tok, y, pool);
    return;
  }
  thread_local std::vector<uint8_t> scratch;
  const size_t need = kernel.act_row_bytes(n_in) * size_t(n_tok);
  if (scratch.size() < need) scratch.resize(need);
  quantize_activations(kernel, x, n_tok, n_in, scratch.data(), pool);
  matmul_preq(kernel, w, n_out, n_in, scratch.data(), n_tok, y, pool);
}

}  // namespace fish
