// relative_rms_error and the quantise/dequantise round trip (quant/error_metrics.h).
#include "quant/error_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace fish {
namespace {

TEST(ErrorMetrics, RelativeRmsIsErrorNormOverReferenceNorm) {
  const std::vector<float> ref = {3.f, 4.f};     // norm 5
  const std::vector<float> approx = {3.f, 5.f};  // error norm 1
  EXPECT_DOUBLE_EQ(relative_rms_error(ref, approx), 0.2);
  EXPECT_DOUBLE_EQ(relative_rms_error(ref, ref), 0.0);
}

TEST(ErrorMetrics, AllZeroReferenceGivesZeroOrInfinity) {
  const std::vector<float> zero(8, 0.f);
  std::vector<float> other(8, 0.f);
  EXPECT_EQ(relative_rms_error(zero, other), 0.0);
  other[3] = 1e-3f;
  EXPECT_TRUE(std::isinf(relative_rms_error(zero, other)));
}

TEST(ErrorMetrics, RoundTripOfExactlyRepresentableValuesIsLossless) {
  // Q8_0 with amax 127 has d = 1 exactly: integers in [-127, 127] survive unchanged.
  std::vector<float> w(64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 37 % 255) - 127);
  w[0] = 127.f;
  w[32] = -127.f;
  std::vector<float> back;
  quantize_roundtrip(GgmlType::q8_0, w, back);
  EXPECT_EQ(back, w);
  EXPECT_EQ(roundtrip_relative_rms(GgmlType::q8_0, w), 0.0);
  EXPECT_EQ(roundtrip_relative_rms(GgmlType::f32, w), 0.0);
}

}  // namespace
}  // namespace fish
