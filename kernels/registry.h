// The one registration table of matvec kernels: for each weight type, the activation format it
// pairs with, the activation quantiser and the dot product for every ISA level. The engine, the
// tests and the benchmarks all go through matvec_kernel(), so a kernel added here is tested and
// benchmarked everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu_features.h"
#include "kernels/vec_dot.h"
#include "quant/types.h"

namespace fish {

struct MatvecKernel {
  GgmlType weight = GgmlType::f32;
  GgmlType act = GgmlType::f32;  // q8_0, q8_1, q8_k, or f32 (activations used as they are)
  Isa isa = Isa::scalar;         // level of vec_dot/quantize_act: may be below the one asked for
                                 // when the CPU or this table has nothing higher for the type
  VecDotFn vec_dot = nullptr;
  VecDotX4Fn vec_dot_x4 = nullptr;  // 4 tokens at once (prefill), same ISA; nullptr: use vec_dot
  VecDotRowsFn vec_dot_rows = nullptr;   // many rows x 1 token (decode), same ISA; or nullptr
  QuantizeActFn quantize_act = nullptr;  // nullptr when act == f32
  int64_t block_elems = 1;  // n_in must be a multiple of this (weight and activation blocks)

  // Bytes of one activation row of n values in `act` format.
  size_t act_row_bytes(int64_t n) const { return row_bytes(act, n); }
};

// Kernel for `weight` at ISA level `isa`, clamped to what the CPU supports and to the highest
// variant registered for the type (check .isa to see what you got). Precondition:
// has_matvec_kernel(weight).
const MatvecKernel& matvec_kernel(GgmlType weight, Isa isa = best_isa());
bool has_matvec_kernel(GgmlType weight);
// The weight types with a kernel, in GgmlType id order.
std::span<const GgmlType> matvec_weight_types();

}  // namespace fish
