// Checked entry points over the type registry (quant/types.h) for callers holding untrusted
// type ids and sizes, e.g. a GGUF tensor: errors instead of asserts or nullptr calls.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/result.h"
#include "quant/types.h"

namespace fish {

// Dequantises n values of type t from src into dst (n floats).
// Errors (message names `what`, e.g. the tensor, and the type): FISH has no dequantiser for t,
// or n is negative or not a multiple of the type's block size.
Status dequantize_row_checked(GgmlType t, const void* src, float* dst, int64_t n,
                              std::string_view what);

}  // namespace fish
