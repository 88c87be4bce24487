// Dispatch table of the fast quantisers (quantize_fast.h) and the row-parallel tensor quantiser.
#include "kernels/quantize_fast.h"

#include <array>
#include <cassert>

namespace fish {
namespace {

struct Row {
  GgmlType type;
  std::array<QuantizeRowFn, kIsaCount> fn;  // scalar (nullptr: the reference), avx2, avx512
};

const Row kRows[] = {
    {GgmlType::q4_k, {nullptr, quantize_row_q4_k_fast_avx2, quantize_row_q4_k_fast_avx512}},
    {GgmlType::q5_k, {nullptr, quantize_row_q5_k_fast_avx2, quantize_row_q5_k_fast_avx512}},
    {GgmlType::fq3, {nullptr, quantize_row_fq3_fast_avx2, quantize_row_fq3_fast_avx512}},
    {GgmlType::q6_k, {nullptr, quantize_row_q6_k_fast_avx2, quantize_row_q6_k_fast_avx512}},
    {GgmlType::q8_0, {nullptr, quantize_row_q8_0_fast_avx2, quantize_row_q8_0_fast_avx512}},
    {GgmlType::q4_0, {nullptr, quantize_row_q4_0_fast_avx2, quantize_row_q4_0_fast_avx512}},
    {GgmlType::q4_1, {nullptr, quantize_row_q4_1_fast_avx2, quantize_row_q4_1_fast_avx512}},
    {GgmlType::q5_0, {nullptr, quantize_row_q5_0_fast_avx2, quantize_row_q5_0_fast_avx512}},
};

}  // namespace

QuantizeRowKernel quantize_row_kernel(GgmlType t, Isa isa) {
  const TypeInfo& info = type_info(t);
  assert(info.quantize_row != nullptr);
  QuantizeRowKernel k{t, Isa::scalar, info.quantize_row};
  for (const Row& r : kRows) {
    if (r.type != t) continue;
    for (int level = int(isa); level > int(Isa::scalar); --level) {
      if (r.fn[size_t(level)] != nullptr && isa_supported(Isa(level))) {
        k.isa = Isa(level);
        k.fn = r.fn[size_t(level)];
        break;
      }
    }
  }
  return k;
}

void quantize_row_fast(GgmlType t, const float* src, void* dst, int64_t n) {
  quantize_row_kernel(t).fn(src, dst, n);
}

void quantize_rows(GgmlType t, const float* src, void* dst, int64_t n_rows, int64_t n_per_row,
                   ThreadPool& pool) {
  const QuantizeRowFn fn = quantize_row_kernel(t).fn;
  const size_t rb = row_bytes(t, n_per_row);
  auto* out = static_cast<uint8_t*>(dst);
  pool.parallel_for(n_rows, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) fn(src + r * n_per_row, out + size_t(r) * rb, n_per_row);
  });
}

}  // namespace fish
