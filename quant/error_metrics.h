// Quantisation error metrics (DESIGN.md "relative RMS"): how far re-quantised weights W' are from
// the weights W they came from.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quant/types.h"

namespace fish {

// ||approx - ref||_2 / ||ref||_2, accumulated in double. Precondition: equal sizes.
// 0 when both are all zero; +inf when ref is all zero and approx is not.
double relative_rms_error(std::span<const float> ref, std::span<const float> approx);

// Quantises w with type t's reference quantiser and dequantises it back into w_out (resized).
// Preconditions: t has both row functions, w.size() % block_elems == 0.
void quantize_roundtrip(GgmlType t, std::span<const float> w, std::vector<float>& w_out);

// relative_rms_error(w, roundtrip(w)) for type t; same preconditions as quantize_roundtrip.
double roundtrip_relative_rms(GgmlType t, std::span<const float> w);

}  // namespace fish
