// W4A16 (kernels/w4a16.h): the scalar reference against f64 math, every decode variant (AVX2,
// AVX-512 f32, AVX512_BF16) against it, the dequantise + GEMM prefill against it, direct vs
// duplicate prefill bit-exact, the tail path, and the memory each prefill setting keeps.
#include "kernels/w4a16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu_features.h"
#include "quant/f16.h"

namespace fish {
namespace {

using Case = test::Int4Case;
using test::random_floats;

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int gs : {32, 64, 128}) {
    for (Int4ZeroPoint zp : {Int4ZeroPoint::sym, Int4ZeroPoint::asym, Int4ZeroPoint::fp}) {
      for (int64_t n_tok : {1, 3, 5, 37}) {
        out.push_back({150, 3 * gs, n_tok, {gs, zp}});  // 2 blocks + a 22-channel tail, 3 groups
      }
      out.push_back({128, 5 * gs, 2, {gs, zp}});
    }
  }
  return out;
}

// Per output: sum_k (|w| + 16 |s|) |x|, the scale of the terms every variant adds.
std::vector<double> magnitudes(const Int4Blocks64& w, const std::vector<float>& x, int64_t n_tok) {
  std::vector<float> deq(size_t(w.n_out * w.n_in));
  dequantize_int4_blocks64_ref(w, 0, w.n_out, deq.data());
  std::vector<double> mag(size_t(n_tok * w.n_out));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t o = 0; o < w.n_out; ++o) {
      double m = 0;
      for (int64_t k = 0; k < w.n_in; ++k) {
        const double s =
            std::fabs(f16_to_f32(w.scales[size_t((k / w.fmt.group_size) * w.n_out + o)]));
        m += (std::fabs(deq[size_t(o * w.n_in + k)]) + 16 * s) *
             std::fabs(x[size_t(t * w.n_in + k)]);
      }
      mag[size_t(t * w.n_out + o)] = m;
    }
  }
  return mag;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::vector<double>& mag, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * mag[i] + 1e-6) << what << " at " << i;
  }
}

const W4A16Options kDecodeOnly{false, true, 8};

TEST(W4A16, ReferenceEqualsF64DotOfDequantisedWeightsAndBf16Activations) {
  std::mt19937 rng(1);
  for (const Case& c : cases()) {
    const std::vector<float> wf = random_floats(c.n_out * c.n_in, rng);
    const std::vector<float> x = random_floats(c.n_tok * c.n_in, rng);
    const W4A16Weights w =
        make_w4a16_weights(pack_int4_blocks64_ref(wf.data(), c.n_out, c.n_in, c.fmt), kDecodeOnly);
    std::vector<float> deq(size_t(c.n_out * c.n_in));
    dequantize_int4_blocks64_ref(w.packed, 0, c.n_out, deq.data());
    ThreadPool pool(1);
    std::vector<float> y(size_t(c.n_tok * c.n_out));
    matmul_w4a16(w, x.data(), c.n_tok, y.data(), pool, kDecodeOnly, W4A16Isa::scalar);
    const std::vector<double> mag = magnitudes(w.packed, x, c.n_tok);
    for (int64_t t = 0; t < c.n_tok; ++t) {
      for (int64_t o = 0; o < c.n_out; ++o) {
        double want = 0;
        for (int64_t k = 0; k < c.n_in; ++k) {
          want += double(deq[size_t(o * c.n_in + k)]) *
                  double(bf16_to_f32(f32_to_bf16(x[size_t(t * c.n_in + k)])));
        }
        ASSERT_NEAR(y[size_t(t * c.n_out + o)], want, 1e-5 * mag[size_t(t * c.n_out + o)] + 1e-6)
            << c.label();
      }
    }
  }
}

TEST(W4A16, EveryDecodeVariantMatchesTheScalarReference) {
  std::mt19937 rng(2);
  int tested = 0;
  for (W4A16Isa isa : {W4A16Isa::avx2, W4A16Isa::avx512, W4A16Isa::avx512_bf16}) {
    if (!w4a16_isa_supported(isa)) {
      std::printf("w4a16 %s: not supported here, skipped\n",
                  std::string(w4a16_isa_name(isa)).c_str());
      continue;
    }
    for (const Case& c : cases()) {
      const std::vector<float> wf = random_floats(c.n_out * c.n_in, rng);
      const std::vector<float> x = random_floats(c.n_tok * c.n_in, rng);
      const W4A16Weights w = make_w4a16_weights(
          pack_int4_blocks64_ref(wf.data(), c.n_out, c.n_in, c.fmt), kDecodeOnly);
      ThreadPool pool(2);
      std::vector<float> want(size_t(c.n_tok * c.n_out)), got(want.size(), -1.0f);
      matmul_w4a16(w, x.data(), c.n_tok, want.data(), pool, kDecodeOnly, W4A16Isa::scalar);
      matmul_w4a16(w, x.data(), c.n_tok, got.data(), pool, kDecodeOnly, isa);
      expect_close(got, want, magnitudes(w.packed, x, c.n_tok),
                   std::string(w4a16_isa_name(isa)) + " " + c.label());
      ++tested;
    }
  }
  if (isa_supported(Isa::avx2)) {
    EXPECT_GT(tested, 0);
  }
}

TEST(W4A16, PrefillThroughDequantisedPanelsMatchesTheDecodeReference) {
  std::mt19937 rng(3);
  for (W4A16Isa isa : {W4A16Isa::scalar, w4a16_best_isa()}) {
    for (const Case& c : cases()) {
      if (c.n_tok < 3) continue;
      const W4A16Options prefill{true, true, 2};  // 3+ tokens take the GEMM path
      const std::vector<float> wf = random_floats(c.n_out * c.n_in, rng);
      const std::vector<float> x = random_floats(c.n_tok * c.n_in, rng);
      const W4A16Weights w =
          make_w4a16_weights(pack_int4_blocks64_ref(wf.data(), c.n_out, c.n_in, c.fmt), prefill);
      ThreadPool pool(2);
      std::vector<float> want(size_t(c.n_tok * c.n_out)), got(want.size(), -1.0f);
      matmul_w4a16(w, x.data(), c.n_tok, want.data(), pool, kDecodeOnly, W4A16Isa::scalar);
      matmul_w4a16(w, x.data(), c.n_tok, got.data(), pool, prefill, isa);
      expect_close(got, want, magnitudes(w.packed, x, c.n_tok),
                   "prefill " + std::string(w4a16_isa_name(isa)) + " " + c.label());
    }
  }
}

TEST(W4A16, DirectAndDuplicatePrefillAreBitExact) {
  std::mt19937 rng(4);
  for (int gs : {32, 128}) {
    for (Int4ZeroPoint zp : {Int4ZeroPoint::sym, Int4ZeroPoint::asym, Int4ZeroPoint::fp}) {
      const int64_t n_out = 192, n_in = (gs == 128 ? 17 : 3) * gs, n_tok = 37;  // K up to 2176
      const std::vector<float> wf = random_floats(n_out * n_in, rng);
      const std::vector<float> x = random_floats(n_tok * n_in, rng);
      const Int4Blocks64 packed = pack_int4_blocks64_ref(wf.data(), n_out, n_in, {gs, zp});
      const W4A16Options direct{true, true, 4};
      const W4A16Options dup{true, false, 4};
      const W4A16Weights wd = make_w4a16_weights(packed, direct);
      const W4A16Weights wr = make_w4a16_weights(packed, dup);
      EXPECT_FALSE(wd.duplicate.has_value());
      ASSERT_TRUE(wr.duplicate.has_value());
      EXPECT_GT(wr.bytes(), wd.bytes());
      for (W4A16Isa isa : {W4A16Isa::scalar, w4a16_best_isa()}) {
        ThreadPool pool(2);
        std::vector<float> yd(size_t(n_tok * n_out)), yr(yd.size(), -1.0f);
        matmul_w4a16(wd, x.data(), n_tok, yd.data(), pool, direct, isa);
        matmul_w4a16(wr, x.data(), n_tok, yr.data(), pool, dup, isa);
        EXPECT_EQ(std::memcmp(yd.data(), yr.data(), yd.size() * sizeof(float)), 0)
            << "g=" << gs << " " << int4_zero_point_name(zp) << " " << w4a16_isa_name(isa);
      }
      // The panels hold the same values (k-major vs channel-major).
      std::vector<float> pd(size_t(64 * n_in)), pr(pd.size());
      dequantize_w4a16_panel_direct(packed, 64, 64, pd.data());
      dequantize_w4a16_panel_rows(*wr.duplicate, 64, 64, pr.data());
      for (int64_t c = 0; c < 64; ++c) {
        for (int64_t k = 0; k < n_in; ++k) {
          ASSERT_EQ(pd[size_t(k * 64 + c)], pr[size_t(c * n_in + k)]) << c << " " << k;
        }
      }
    }
  }
}

TEST(W4A16, TailMatricesKeepTheDuplicateEvenWhenDirectIsAsked) {
  std::mt19937 rng(5);
  const std::vector<float> wf = random_floats(80 * 64, rng);
  const Int4Blocks64 packed = pack_int4_blocks64_ref(wf.data(), 80, 64, {32, Int4ZeroPoint::sym});
  EXPECT_FALSE(packed.supports_direct_dequant());
  EXPECT_TRUE(make_w4a16_weights(packed, {true, true, 8}).duplicate.has_value());
  EXPECT_FALSE(make_w4a16_weights(packed, {false, true, 8}).duplicate.has_value());
}

TEST(W4A16, VariantNamesRoundTripAndScalarIsAlwaysThere) {
  for (int i = 0; i < kW4A16IsaCount; ++i) {
    EXPECT_EQ(parse_w4a16_isa(w4a16_isa_name(W4A16Isa(i))), W4A16Isa(i));
  }
  EXPECT_TRUE(w4a16_isa_supported(w4a16_best_isa()));
#ifdef FISH_SCALAR_ONLY
  EXPECT_EQ(w4a16_best_isa(), W4A16Isa::scalar);
#endif
}

}  // namespace
}  // namespace fish
