// Scalar f16/bf16 conversions (quant/f16.h), bit-exact against numpy (f16) and gguf (bf16).
#include "quant/f16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "quant_reference.h"

namespace fish {
namespace {

// Finite and special f32 values that stress rounding: f16 overflow threshold, ties to even,
// subnormal boundaries, signed zeros, infinities, NaN; then random bit patterns of every exponent.
std::vector<float> conversion_inputs() {
  std::vector<float> v = {0.f,
                          -0.f,
                          1.f,
                          -1.f,
                          65504.f,
                          65519.99f,
                          65520.f,
                          -65520.f,
                          70000.f,
                          1e30f,
                          0x1p-14f,
                          0x1p-24f,
                          0x1p-25f,
                          0x1.000002p-25f,
                          0x1.8p-24f,
                          0x1.4p-23f,
                          0x1.ffcp-15f,
                          0x1.ffep-15f,
                          1.00048828125f,
                          1.00146484375f,
                          3.14159265f,
                          1e-40f,
                          -1e-45f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 rng(1234);
  for (int i = 0; i < 100000; ++i) v.push_back(f32_from_bits(rng()));
  // Values near f16's range, where rounding decisions happen most often.
  std::uniform_real_distribution<float> exp_dist(-27.f, 17.f);
  for (int i = 0; i < 100000; ++i) v.push_back((i % 2 ? -1.f : 1.f) * std::exp2(exp_dist(rng)));
  return v;
}

TEST(F16, F16ToF32MatchesNumpyForEveryBitPattern) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = uint16_t(i);
  test::TempDir dir;
  test::write_file(dir.file("in.bin"), all.data(), all.size() * 2);
  ASSERT_EQ(test::run_quant_reference(
                dir, {"dequant f16 " + dir.file("in.bin") + " " + dir.file("out.f32")}),
            "");
  const std::vector<float> want = test::read_floats(dir.file("out.f32"));
  ASSERT_EQ(want.size(), all.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    ASSERT_EQ(f32_bits(f16_to_f32(uint16_t(i))), f32_bits(want[i]))
        << "f16 bits 0x" << std::hex << i;
  }
}

TEST(F16, F32ToF16RoundsToNearestEvenLikeNumpy) {
  const std::vector<float> in = conversion_inputs();
  test::TempDir dir;
  test::write_file(dir.file("in.f32"), in.data(), in.size() * 4);
  ASSERT_EQ(test::run_quant_reference(
                dir, {"quant f16 " + dir.file("in.f32") + " " + dir.file("out.bin")}),
            "");
  const std::vector<uint8_t> want = test::read_bytes(dir.file("out.bin"));
  ASSERT_EQ(want.size(), in.size() * 2);
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t w = uint16_t(want[2 * i] | (want[2 * i + 1] << 8));
    if (std::isnan(in[i])) {  // NaN payloads are not specified; it must stay a NaN
      EXPECT_EQ(f32_to_f16(in[i]) & 0x7c00, 0x7c00);
      EXPECT_NE(f32_to_f16(in[i]) & 0x3ff, 0);
      continue;
    }
    ASSERT_EQ(f32_to_f16(in[i]), w) << "f32 " << in[i] << " bits 0x" << std::hex << f32_bits(in[i]);
  }
}

TEST(F16, F32ToBf16MatchesGgufPackage) {
  const std::vector<float> in = conversion_inputs();
  test::TempDir dir;
  test::write_file(dir.file("in.f32"), in.data(), in.size() * 4);
  ASSERT_EQ(test::run_quant_reference(
                dir, {"quant bf16 " + dir.file("in.f32") + " " + dir.file("out.bin")}),
            "");
  const std::vector<uint8_t> want = test::read_bytes(dir.file("out.bin"));
  ASSERT_EQ(want.size(), in.size() * 2);
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t w = uint16_t(want[2 * i] | (want[2 * i + 1] << 8));
    ASSERT_EQ(f32_to_bf16(in[i]), w)
        << "f32 " << in[i] << " bits 0x" << std::hex << f32_bits(in[i]);
  }
}

TEST(F16, F16RoundTripIsExactForEveryNonNanValue) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const float f = f16_to_f32(uint16_t(i));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), uint16_t(i)) << std::hex << i;
  }
}

TEST(F16, Bf16KeepsTopBitsAndQuietsNan) {
  EXPECT_EQ(f32_to_bf16(1.f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.f);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7f800001)), 0x7fc0);  // signalling NaN -> quiet
}

}  // namespace
}  // namespace fish
