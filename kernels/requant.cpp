// Re-quantisation of weight rows on the thread pool (kernels/requant.h).
#include "kernels/requant.h"

#include <cassert>
#include <cmath>
#include <vector>

#include "kernels/quantize_fast.h"
#include "quant/fq3.h"

namespace fish {

std::optional<GgmlType> requant_target(int mode, GgmlType src) {
  assert(mode >= 0 && mode <= kRequantModeMax);
  const TypeInfo& info = type_info(src);
  if (!info.is_quantized() || info.dequantize_row == nullptr) return std::nullopt;
  switch (mode) {
    case 1:
      if (src != GgmlType::fq3) return GgmlType::fq3;
      break;
    case 2:
      if (src == GgmlType::q6_k) return GgmlType::q4_k;
      break;
    case 3:
      if (src == GgmlType::q6_k) return GgmlType::q4_k;
      if (src == GgmlType::q4_k) return GgmlType::fq3;
      break;
    default:
      break;
  }
  return std::nullopt;
}

double RequantError::relative_rms() const {
  if (sum_sq_ref == 0) return sum_sq_err == 0 ? 0.0 : INFINITY;
  return std::sqrt(sum_sq_err / sum_sq_ref);
}

RequantError requantize_rows(GgmlType src_type, const void* src, GgmlType dst_type, void* dst,
                             int64_t n_rows, int64_t n_per_row, ThreadPool& pool,
                             const float* col_importance) {
  const TypeInfo& sinfo = type_info(src_type);
  const TypeInfo& dinfo = type_info(dst_type);
  assert(sinfo.dequantize_row != nullptr && dinfo.dequantize_row != nullptr);
  assert(n_per_row % sinfo.block_elems == 0 && n_per_row % dinfo.block_elems == 0);
  assert(col_importance == nullptr || dst_type == GgmlType::fq3);
  const QuantizeRowFn quantize = quantize_row_kernel(dst_type).fn;
  const size_t src_row = row_bytes(src_type, n_per_row);
  const size_t dst_row = row_bytes(dst_type, n_per_row);
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);

  std::vector<RequantError> per_slice(size_t(pool.size()));
  pool.parallel_for(n_rows, [&](int64_t begin, int64_t end, int slice) {
    std::vector<float> w(static_cast<size_t>(n_per_row));
    std::vector<float> back(static_cast<size_t>(n_per_row));
    RequantError e;
    for (int64_t r = begin; r < end; ++r) {
      uint8_t* q = out + size_t(r) * dst_row;
      sinfo.dequantize_row(in + size_t(r) * src_row, w.data(), n_per_row);
      if (col_importance != nullptr) {
        quantize_row_fq3_weighted(w.data(), reinterpret_cast<BlockFQ3*>(q), n_per_row,
                                  col_importance);
      } else {
        quantize(w.data(), q, n_per_row);
      }
      dinfo.dequantize_row(q, back.data(), n_per_row);
      for (int64_t i = 0; i < n_per_row; ++i) {
        const double ref = w[size_t(i)];
        const double diff = double(back[size_t(i)]) - ref;
        e.sum_sq_err += diff * diff;
        e.sum_sq_ref += ref * ref;
      }
    }
    per_slice[size_t(slice)] += e;
  });
  RequantError total;
  for (const RequantError& e : per_slice) total += e;
  return total;
}

}  // namespace fish
