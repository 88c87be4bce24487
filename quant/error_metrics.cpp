// Relative RMS error and the quantise/dequantise round trip used to measure it.
#include "quant/error_metrics.h"

#include <cassert>
#include <cmath>
#include <limits>

namespace fish {

double relative_rms_error(std::span<const float> ref, std::span<const float> approx) {
  assert(ref.size() == approx.size());
  double err2 = 0.0;
  double ref2 = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(approx[i]) - double(ref[i]);
    err2 += d * d;
    ref2 += double(ref[i]) * double(ref[i]);
  }
  if (ref2 == 0.0) return err2 == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(err2 / ref2);
}

void quantize_roundtrip(GgmlType t, std::span<const float> w, std::vector<float>& w_out) {
  const TypeInfo& info = type_info(t);
  assert(info.quantize_row != nullptr && info.dequantize_row != nullptr);
  const auto n = int64_t(w.size());
  std::vector<uint8_t> packed(row_bytes(t, n));
  info.quantize_row(w.data(), packed.data(), n);
  w_out.resize(w.size());
  info.dequantize_row(packed.data(), w_out.data(), n);
}

double roundtrip_relative_rms(GgmlType t, std::span<const float> w) {
  std::vector<float> back;
  quantize_roundtrip(t, w, back);
  return relative_rms_error(w, back);
}

}  // namespace fish
