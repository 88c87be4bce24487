// On-line re-quantisation (seed 000 "Online re-quantisation", issue 5): weight rows are
// dequantised and quantised again into a smaller type, on the thread pool, with the error
// measured on the way (relative RMS against the original weights, DESIGN.md "Metrics").
//
// Modes (FISH_GPU_REQUANT / `requant`): 0 off; 1 every quantised weight -> fq3; 2 q6_k -> q4_k
// only; 3 q4_k -> fq3 and q6_k -> q4_k.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/thread_pool.h"
#include "quant/types.h"

namespace fish {

inline constexpr int kRequantModeMax = 3;

// The type a weight of type `src` becomes under `mode`; nullopt when it stays as it is (mode 0,
// an unquantised type, a type FISH cannot decode, or one the mode does not name). The caller
// still checks that the row length is a multiple of the target's block (256 for q4_k and fq3).
// Precondition: 0 <= mode <= kRequantModeMax.
std::optional<GgmlType> requant_target(int mode, GgmlType src);

// Squared-error sums of one re-quantisation, in double.
struct RequantError {
  double sum_sq_err = 0;        // sum (W' - W)^2
  double sum_sq_ref = 0;        // sum W^2
  double relative_rms() const;  // ||W' - W|| / ||W||; 0 for an all-zero W' = W
  RequantError& operator+=(const RequantError& o) {
    sum_sq_err += o.sum_sq_err;
    sum_sq_ref += o.sum_sq_ref;
    return *this;
  }
};

// Re-quantises n_rows rows of n_per_row values: row r of src (row_bytes(src_type, n_per_row)
// bytes each) is dequantised, quantised to dst_type with its fastest quantiser
// (quantize_row_kernel, byte-identical to the reference) into row r of dst, and dequantised
// again for the error. Rows are split across the pool; the bytes do not depend on the thread
// count. col_importance (n_per_row values >= 0, or nullptr) weights each input column in the
// fit (activation-aware FQ3; only for dst_type fq3, which then uses the scalar weighted fit).
// Preconditions: src_type has a dequantiser, dst_type a quantiser, n_per_row is a multiple of
// both block sizes, dst holds n_rows * row_bytes(dst_type, n_per_row) bytes.
RequantError requantize_rows(GgmlType src_type, const void* src, GgmlType dst_type, void* dst,
                             int64_t n_rows, int64_t n_per_row, ThreadPool& pool,
                             const float* col_importance = nullptr);

}  // namespace fish
