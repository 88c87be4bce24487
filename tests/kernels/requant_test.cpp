// Re-quantisation of weight rows (kernels/requant.h): the mode table, bytes equal to the
// reference quantiser's, independence from the thread count, and the measured error.
#include "kernels/requant.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "quant/error_metrics.h"

namespace fish {
namespace {

TEST(RequantTarget, ModesMapTheSeedsTypePairs) {
  using T = GgmlType;
  for (T t : {T::q4_0, T::q4_1, T::q5_0, T::q8_0, T::q4_k, T::q5_k, T::q6_k, T::q2_k}) {
    EXPECT_FALSE(requant_target(0, t).has_value()) << type_name(t);
    EXPECT_EQ(requant_target(1, t), T::fq3) << type_name(t);
  }
  EXPECT_EQ(requant_target(2, T::q6_k), T::q4_k);
  EXPECT_FALSE(requant_target(2, T::q4_k).has_value());
  EXPECT_FALSE(requant_target(2, T::q8_0).has_value());
  EXPECT_EQ(requant_target(3, T::q6_k), T::q4_k);
  EXPECT_EQ(requant_target(3, T::q4_k), T::fq3);
  EXPECT_FALSE(requant_target(3, T::q5_0).has_value());
  for (int mode = 0; mode <= kRequantModeMax; ++mode) {
    for (T t : {T::f32, T::f16, T::bf16, T::fq3, T::iq2_xxs}) {
      EXPECT_FALSE(requant_target(mode, t).has_value()) << mode << " " << type_name(t);
    }
  }
}

// Rows of `t` quantised from Gaussian values (what a GGUF holds).
std::vector<uint8_t> source_rows(GgmlType t, int64_t n_rows, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  return test::make_weights(t, n_rows, n, test::Fill::kQuantised, rng);
}

TEST(RequantizeRows, BytesEqualReferenceQuantiserOfTheDequantisedRows) {
  const int64_t n_rows = 7, n = 3 * 256;
  for (auto [from, to] :
       {std::pair{GgmlType::q6_k, GgmlType::q4_k}, std::pair{GgmlType::q4_k, GgmlType::fq3},
        std::pair{GgmlType::q4_1, GgmlType::fq3}, std::pair{GgmlType::q8_0, GgmlType::fq3}}) {
    SCOPED_TRACE(std::string(type_name(from)) + "->" + std::string(type_name(to)));
    const std::vector<uint8_t> src = source_rows(from, n_rows, n, 1);
    std::vector<uint8_t> got(size_t(n_rows) * row_bytes(to, n));
    ThreadPool pool(2);
    const RequantError e = requantize_rows(from, src.data(), to, got.data(), n_rows, n, pool);

    std::vector<uint8_t> want(got.size());
    std::vector<float> w(size_t(n_rows * n)), back(w.size());
    for (int64_t r = 0; r < n_rows; ++r) {
      type_info(from).dequantize_row(src.data() + size_t(r) * row_bytes(from, n), &w[size_t(r * n)],
                                     n);
      type_info(to).quantize_row(&w[size_t(r * n)], want.data() + size_t(r) * row_bytes(to, n), n);
      type_info(to).dequantize_row(want.data() + size_t(r) * row_bytes(to, n), &back[size_t(r * n)],
                                   n);
    }
    EXPECT_EQ(got, want);
    EXPECT_NEAR(e.relative_rms(), relative_rms_error(w, back), 1e-9);
    EXPECT_GT(e.relative_rms(), 0.0);
  }
}

TEST(RequantizeRows, ResultDoesNotDependOnTheThreadCount) {
  const int64_t n_rows = 13, n = 2 * 256;
  const std::vector<uint8_t> src = source_rows(GgmlType::q4_k, n_rows, n, 2);
  std::vector<uint8_t> a(size_t(n_rows) * row_bytes(GgmlType::fq3, n)), b(a.size());
  ThreadPool one(1), three(3);
  const RequantError ea =
      requantize_rows(GgmlType::q4_k, src.data(), GgmlType::fq3, a.data(), n_rows, n, one);
  const RequantError eb =
      requantize_rows(GgmlType::q4_k, src.data(), GgmlType::fq3, b.data(), n_rows, n, three);
  EXPECT_EQ(a, b);
  EXPECT_NEAR(ea.relative_rms(), eb.relative_rms(), 1e-12);
}

TEST(RequantizeRows, ColumnImportanceUsesTheWeightedFit) {
  const int64_t n_rows = 5, n = 2 * 256;
  const std::vector<uint8_t> src = source_rows(GgmlType::q4_k, n_rows, n, 3);
  std::vector<float> imp(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) imp[size_t(i)] = 1.0f + float(i % 3);
  std::vector<uint8_t> got(size_t(n_rows) * row_bytes(GgmlType::fq3, n)), want(got.size());
  ThreadPool pool(2);
  requantize_rows(GgmlType::q4_k, src.data(), GgmlType::fq3, got.data(), n_rows, n, pool,
                  imp.data());
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t r = 0; r < n_rows; ++r) {
    type_info(GgmlType::q4_k)
        .dequantize_row(src.data() + size_t(r) * row_bytes(GgmlType::q4_k, n), w.data(), n);
    quantize_row_fq3_weighted(
        w.data(),
        reinterpret_cast<BlockFQ3*>(want.data() + size_t(r) * row_bytes(GgmlType::fq3, n)), n,
        imp.data());
  }
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace fish
