// FQ3 (quant/fq3.h): the seed's bit layout on hand-built blocks, packing, and the quantiser's
// round-trip error.
#include "quant/fq3.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/error_metrics.h"
#include "quant/f16.h"
#include "quant/types.h"

namespace fish {
namespace {

// A block with d = 1, dmin = 0.5, group scale g + 1 and group min 2g + 1, all codes 0.
BlockFQ3 scaled_zero_block() {
  BlockFQ3 b{};
  b.d = f32_to_f16(1.0f);
  b.dmin = f32_to_f16(0.5f);
  uint8_t ls[8], lm[8];
  for (int g = 0; g < 8; ++g) {
    ls[g] = uint8_t(g + 1);
    lm[g] = uint8_t(2 * g + 1);
  }
  pack_scale_min_k4(ls, lm, b.scales);
  return b;
}

float expected_value(int g, int q) {
  return float(g + 1) * float(q) - 0.5f * float(2 * g + 1);
}

// Every group g, every s = 0..7, every byte j and every bit of q, set by hand in the word the
// seed's formula names: bits 0-1 of value 4s+j are bits 8j + 2(s&3) + {0,1} of A (s < 4) or B,
// bit 2 is bit 8j + s of C. Only that value may change.
TEST(Fq3Layout, EachCodeBitLivesWhereTheSeedFormulaSays) {
  for (int g = 0; g < kFq3Groups; ++g) {
    for (int s = 0; s < 8; ++s) {
      for (int j = 0; j < 4; ++j) {
        for (int bit = 0; bit < 3; ++bit) {
          BlockFQ3 b = scaled_zero_block();
          if (bit < 2) {
            b.q[g][s < 4 ? 0 : 1] = 1u << (8 * j + 2 * (s & 3) + bit);
          } else {
            b.q[g][2] = 1u << (8 * j + s);
          }
          float y[kQK_K];
          dequantize_row_fq3(&b, y, kQK_K);
          for (int v = 0; v < kQK_K; ++v) {
            const int q = (v == 32 * g + 4 * s + j) ? (1 << bit) : 0;
            ASSERT_EQ(y[v], expected_value(v / 32, q))
                << "g=" << g << " s=" << s << " j=" << j << " bit=" << bit << " value " << v;
          }
        }
      }
    }
  }
}

TEST(Fq3Layout, AllCodesSevenSetEveryBitOfTheGroupWords) {
  BlockFQ3 b = scaled_zero_block();
  for (auto& w : b.q) w[0] = w[1] = w[2] = 0xFFFFFFFFu;
  float y[kQK_K];
  dequantize_row_fq3(&b, y, kQK_K);
  for (int v = 0; v < kQK_K; ++v) ASSERT_EQ(y[v], expected_value(v / 32, 7)) << v;
}

TEST(Fq3Layout, PackIsTheInverseOfUnpack) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> code(0, 7);
  for (int rep = 0; rep < 200; ++rep) {
    uint8_t q[32], back[32];
    for (uint8_t& c : q) c = uint8_t(code(rng));
    uint32_t abc[3];
    fq3_pack_group(q, abc);
    fq3_unpack_group(abc, back);
    ASSERT_EQ(std::memcmp(q, back, 32), 0);
  }
}

std::vector<float> gaussian_rows(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> w(static_cast<size_t>(n));
  float sigma = 1.f;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 256 == 0) sigma = std::exp2(std::uniform_real_distribution<float>(-8.f, 2.f)(rng));
    w[size_t(i)] = sigma * normal(rng);
  }
  return w;
}

// 8 levels over a Gaussian group: ~2x Q4_K's error and well below Q2_K's (4 levels).
TEST(Fq3RoundTrip, GaussianErrorLiesBetweenQ4KAndQ2K) {
  const std::vector<float> w = gaussian_rows(256 * 512, 11);
  const double fq3 = roundtrip_relative_rms(GgmlType::fq3, w);
  const double q4k = roundtrip_relative_rms(GgmlType::q4_k, w);
  const double q2k = roundtrip_relative_rms(GgmlType::q2_k, w);
  EXPECT_GT(fq3, 1.6 * q4k);
  EXPECT_LT(fq3, 2.4 * q4k);
  EXPECT_LT(fq3, 0.8 * q2k);
  EXPECT_LT(fq3, 0.20);
}

TEST(Fq3RoundTrip, CodesStayInRangeAndZeroBlocksStayZero) {
  std::vector<float> w = gaussian_rows(256 * 8, 3);
  for (int i = 0; i < 256; ++i) w[size_t(i)] = 0.f;
  std::vector<BlockFQ3> q(w.size() / kQK_K);
  quantize_row_fq3_ref(w.data(), q.data(), int64_t(w.size()));
  std::vector<float> back(w.size());
  dequantize_row_fq3(q.data(), back.data(), int64_t(w.size()));
  for (int i = 0; i < 256; ++i) ASSERT_EQ(back[size_t(i)], 0.f);
  for (size_t i = 0; i < w.size(); ++i) ASSERT_TRUE(std::isfinite(back[i]));
  // Every value is within one group step of the input (a step is d*sc <= the group's range / 7
  // rounded to 6 bits, and the min is fitted, not clamped, so allow a full step plus the range
  // of the group's own rounding of the min).
  for (size_t b = 0; b < q.size(); ++b) {
    for (int g = 0; g < kFq3Groups; ++g) {
      float lo = 1e30f, hi = -1e30f;
      for (int l = 0; l < 32; ++l) {
        const float v = w[b * kQK_K + size_t(32 * g + l)];
        lo = std::fmin(lo, v);
        hi = std::fmax(hi, v);
      }
      for (int l = 0; l < 32; ++l) {
        const size_t i = b * kQK_K + size_t(32 * g + l);
        ASSERT_LE(std::fabs(back[i] - w[i]), 0.5f * (hi - std::fmin(lo, 0.f)))
            << "block " << b << " group " << g;
      }
    }
  }
}

TEST(Fq3Weighted, UnitImportanceGivesTheReferenceBytes) {
  const std::vector<float> w = gaussian_rows(256 * 16, 21);
  const std::vector<float> ones(w.size(), 1.0f);
  std::vector<BlockFQ3> a(w.size() / kQK_K), b(w.size() / kQK_K);
  quantize_row_fq3_ref(w.data(), a.data(), int64_t(w.size()));
  quantize_row_fq3_weighted(w.data(), b.data(), int64_t(w.size()), ones.data());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(BlockFQ3)), 0);
}

// Importance on a quarter of the columns lowers the error there (at the others' expense).
TEST(Fq3Weighted, ImportantColumnsGetLowerError) {
  const std::vector<float> w = gaussian_rows(256 * 256, 23);
  std::vector<float> imp(w.size());
  for (size_t i = 0; i < w.size(); ++i) imp[i] = (i % 4 == 0) ? 100.0f : 1.0f;
  std::vector<BlockFQ3> a(w.size() / kQK_K), b(w.size() / kQK_K);
  quantize_row_fq3_ref(w.data(), a.data(), int64_t(w.size()));
  quantize_row_fq3_weighted(w.data(), b.data(), int64_t(w.size()), imp.data());
  std::vector<float> da(w.size()), db(w.size());
  dequantize_row_fq3(a.data(), da.data(), int64_t(w.size()));
  dequantize_row_fq3(b.data(), db.data(), int64_t(w.size()));
  double err_a = 0, err_b = 0, rest_a = 0, rest_b = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double ea = (da[i] - w[i]) * double(da[i] - w[i]);
    const double eb = (db[i] - w[i]) * double(db[i] - w[i]);
    (i % 4 == 0 ? err_a : rest_a) += ea;
    (i % 4 == 0 ? err_b : rest_b) += eb;
  }
  EXPECT_LT(err_b, 0.9 * err_a);
  EXPECT_GT(rest_b, rest_a);
}

}  // namespace
}  // namespace fish
