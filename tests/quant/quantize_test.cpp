// Reference quantisers: bit-exact against the gguf package where it has a quantiser (f16, bf16,
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 in gguf 0.19); for the K-quants, which gguf can only dequantise,
// round-trip error bounds on Gaussian data plus structural checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "quant/error_metrics.h"
#include "quant/k_quants.h"
#include "quant/q8_k.h"
#include "quant/types.h"
#include "quant_reference.h"

namespace fish {
namespace {

// Gaussian rows (sigma varying per 256 values, like real weight rows) followed by blocks that
// exercise the quantisers' special cases: all zero, constant, one outlier, +-max ties.
std::vector<float> test_weights(int64_t n_gauss, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> w(static_cast<size_t>(n_gauss));
  float sigma = 1.f;
  for (int64_t i = 0; i < n_gauss; ++i) {
    if (i % 256 == 0) sigma = std::exp2(std::uniform_real_distribution<float>(-8.f, 2.f)(rng));
    w[size_t(i)] = sigma * normal(rng);
  }
  const auto add_block = [&](auto value_at) {
    for (int j = 0; j < 256; ++j) w.push_back(value_at(j));
  };
  add_block([](int) { return 0.f; });
  add_block([](int) { return 0.375f; });
  add_block([](int) { return -1.5f; });
  add_block([](int j) { return j == 17 ? 100.f : 0.01f * float(j % 7); });
  add_block([](int j) { return j % 32 == 3 ? 2.f : (j % 32 == 9 ? -2.f : 0.1f * float(j % 5)); });
  add_block([](int j) { return float(j % 32) - 15.5f; });
  return w;
}

class QuantMatchesGgufPackage : public ::testing::TestWithParam<GgmlType> {};

TEST_P(QuantMatchesGgufPackage, OnGaussianAndEdgeCaseBlocks) {
  const TypeInfo& info = type_info(GetParam());
  const std::vector<float> w = test_weights(256 * 512, 100 + uint32_t(info.type));
  const auto n = int64_t(w.size());

  test::TempDir dir;
  test::write_file(dir.file("in.f32"), w.data(), w.size() * sizeof(float));
  const std::string job =
      "quant " + std::string(info.name) + " " + dir.file("in.f32") + " " + dir.file("out.bin");
  ASSERT_EQ(test::run_quant_reference(dir, {job}), "");
  const std::vector<uint8_t> want = test::read_bytes(dir.file("out.bin"));
  ASSERT_EQ(want.size(), row_bytes(info.type, n));

  std::vector<uint8_t> got(want.size(), 0xee);
  info.quantize_row(w.data(), got.data(), n);
  const auto [g, x] = std::mismatch(got.begin(), got.end(), want.begin());
  const size_t at = size_t(g - got.begin());
  ASSERT_EQ(at, got.size()) << info.name << ": first differing byte " << at << " (block "
                            << at / info.block_bytes << ", byte " << at % info.block_bytes
                            << "): FISH " << int(*g) << " gguf " << int(*x);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantMatchesGgufPackage,
                         ::testing::Values(GgmlType::f16, GgmlType::bf16, GgmlType::q4_0,
                                           GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1,
                                           GgmlType::q8_0),
                         [](const auto& p) { return std::string(type_name(p.param)); });

// Round-trip relative RMS error ||W' - W|| / ||W|| on N(0, 1) data (256 Ki values), per type.
// The band is [0.9, 1.1] x the value this implementation measures (in the comment; stable to
// +-0.5% across seeds). Why these values: a b-bit uniform quantiser over a block's range R has
// RMS error R / (2^b - 1) / sqrt(12), and R of a Gaussian block is ~4.5 sigma (32 values) to
// ~5.5 sigma (256), so each extra bit halves the error. K-quants beat the same-width legacy
// formats because each 16/32-value sub-block's scale (and min) is searched for least weighted
// squared error (ggml make_qkx2_quants / make_qx_quants) instead of taken from the block's max.
// f16 / bf16 are round-to-nearest with unit roundoff 2^-11 / 2^-8: ~0.75 u on normal data.
// A value outside the band means the algorithm changed: it no longer is ggml's.
struct ErrorBand {
  GgmlType type;
  double measured;
};
const std::vector<ErrorBand> kErrorBands = {
    {GgmlType::f16, 0.00021},   // 10 mantissa bits
    {GgmlType::bf16, 0.00167},  // 7 mantissa bits
    {GgmlType::q4_0, 0.0861},   // 16 levels, scale = max|w| / 8: one level wasted on the sign
    {GgmlType::q4_1, 0.0783},   // 16 levels over [min, max]
    {GgmlType::q5_0, 0.0427},  {GgmlType::q5_1, 0.0379},
    {GgmlType::q8_0, 0.00536},  // 255 levels, amax / 127
    {GgmlType::q8_1, 0.00536},  // same quants as Q8_0 (plus the sum)
    {GgmlType::q2_k, 0.2967},   // 4 levels per 16 values, 4-bit scales and mins
    {GgmlType::q3_k, 0.1508},   // 8 levels per 16 values, 6-bit scales
    {GgmlType::q4_k, 0.0714},   // 16 levels per 32 values, searched scale + min: below Q4_1
    {GgmlType::q5_k, 0.0361},   // 32 levels per 32 values
    {GgmlType::q6_k, 0.0177},   // 64 levels per 16 values, int8 scales
    {GgmlType::q8_k, 0.00697},  // 255 levels per 256 values: wider block than Q8_0, more error
};

std::vector<float> gaussian(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& v : w) v = normal(rng);
  return w;
}

// Test names and failure messages show the type name, not the struct's bytes.
void PrintTo(const ErrorBand& b, std::ostream* os) {
  *os << type_name(b.type);
}

class RoundTripError : public ::testing::TestWithParam<ErrorBand> {};

TEST_P(RoundTripError, OnGaussianDataIsWithinMeasuredBand) {
  const ErrorBand& b = GetParam();
  const double err = roundtrip_relative_rms(b.type, gaussian(256 * 1024, 5));
  EXPECT_GE(err, 0.9 * b.measured) << type_name(b.type);
  EXPECT_LE(err, 1.1 * b.measured) << type_name(b.type);
}

INSTANTIATE_TEST_SUITE_P(Types, RoundTripError, ::testing::ValuesIn(kErrorBands),
                         [](const auto& p) { return std::string(type_name(p.param.type)); });

TEST(RoundTripError, MoreBitsMeanLessError) {
  const std::vector<float> w = gaussian(256 * 256, 9);
  const auto err = [&](GgmlType t) { return roundtrip_relative_rms(t, w); };
  EXPECT_GT(err(GgmlType::q2_k), err(GgmlType::q3_k));
  EXPECT_GT(err(GgmlType::q3_k), err(GgmlType::q4_k));
  EXPECT_GT(err(GgmlType::q4_k), err(GgmlType::q5_k));
  EXPECT_GT(err(GgmlType::q5_k), err(GgmlType::q6_k));
  EXPECT_GT(err(GgmlType::q6_k), err(GgmlType::q8_k));
  EXPECT_GT(err(GgmlType::q4_0), err(GgmlType::q4_k));
  EXPECT_GT(err(GgmlType::q5_0), err(GgmlType::q5_k));
}

// Zero blocks must come back exactly zero and no edge-case block may produce inf/NaN (all-zero
// and constant blocks hit the quantisers' divide-by-zero guards).
TEST(RoundTripError, EdgeCaseBlocksStayFiniteAndZeroStaysZero) {
  const std::vector<float> w = test_weights(0, 1);  // only the edge-case blocks
  for (const TypeInfo& t : all_types()) {
    if (!t.quantize_row || !t.dequantize_row) continue;
    std::vector<float> back;
    quantize_roundtrip(t.type, w, back);
    for (size_t i = 0; i < w.size(); ++i) {
      ASSERT_TRUE(std::isfinite(back[i])) << t.name << " value " << i;
      if (i < 256) {
        ASSERT_EQ(back[i], 0.f) << t.name << " value " << i;
      }
    }
    // Constant blocks (values 256..767) are representable closely by every format.
    EXPECT_LT(relative_rms_error(std::span(w).subspan(256, 512), std::span(back).subspan(256, 512)),
              0.05)
        << t.name;
  }
}

TEST(Q8K, QuantKeepsQuantsWithinPlusMinus127AndBsumsAreGroupSums) {
  std::vector<float> w = gaussian(kQK_K * 64, 3);
  // The value of largest magnitude always maps to q = -127 (d takes the opposite sign), whatever
  // its sign; with -128 the other sign could reach +128, which int8 cannot hold.
  w[5] = -40.f;
  w[kQK_K + 9] = 40.f;
  std::vector<BlockQ8_K> q(64);
  quantize_row_q8_k_ref(w.data(), q.data(), int64_t(w.size()));
  EXPECT_EQ(q[0].qs[5], -127);
  EXPECT_GT(q[0].d, 0.f);
  EXPECT_EQ(q[1].qs[9], -127);
  EXPECT_LT(q[1].d, 0.f);
  for (const BlockQ8_K& b : q) {
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) {
        ASSERT_GE(b.qs[16 * g + j], -127);
        sum += b.qs[16 * g + j];
      }
      ASSERT_EQ(b.bsums[g], sum);
    }
  }
}

TEST(KQuantScales, ScaleMinK4PackingRoundTripsEveryValue) {
  for (int v = 0; v < 64; ++v) {
    uint8_t ls[8], lm[8], packed[12] = {};
    for (int j = 0; j < 8; ++j) {
      ls[j] = uint8_t((v + 7 * j) % 64);
      lm[j] = uint8_t((v + 13 * j + 5) % 64);
    }
    pack_scale_min_k4(ls, lm, packed);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, packed, &sc, &m);
      ASSERT_EQ(sc, ls[j]) << "v " << v << " j " << j;
      ASSERT_EQ(m, lm[j]) << "v " << v << " j " << j;
    }
  }
}

}  // namespace
}  // namespace fish
