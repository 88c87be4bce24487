// W4A8 (kernels/w4a8.h): the scalar reference against f64 math on the dequantised operands, and
// every SIMD variant (AVX2, AVX-VNNI, AVX-512 VNNI, AMX) against the scalar reference on random
// data: odd group counts, N not a multiple of 16 or 64, every group size, sym, asym and fp, 1-37
// tokens.
#include "kernels/w4a8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/amx.h"
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
        out.push_back({100, 3 * gs, n_tok, {gs, zp}});  // 3 groups; N = 6 tiles + 4 rows
      }
      out.push_back({16, 5 * gs, 17, {gs, zp}});
    }
  }
  return out;
}

// |terms| of every output, for error bounds: sum_k (|w| + 16 |s|) |x| with the group's scale.
std::vector<double> magnitudes(const Int4Vnni16& w, const std::vector<float>& x, int64_t n_tok) {
  std::vector<float> deq(size_t(w.n_out * w.n_in));
  dequantize_int4_vnni16_ref(w, 0, w.n_out, deq.data());
  std::vector<double> mag(size_t(n_tok * w.n_out));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t o = 0; o < w.n_out; ++o) {
      double m = 0;
      for (int64_t k = 0; k < w.n_in; ++k) {
        const double s =
            std::fabs(f16_to_f32(w.tile_scales(o / 16)[(k / w.fmt.group_size) * 16 + o % 16]));
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

TEST(W4A8, ReferenceEqualsF64DotOfDequantisedWeightsAndActivations) {
  std::mt19937 rng(1);
  for (const Case& c : cases()) {
    const std::vector<float> wf = random_floats(c.n_out * c.n_in, rng);
    const std::vector<float> x = random_floats(c.n_tok * c.n_in, rng);
    const Int4Vnni16 w = pack_int4_vnni16_ref(wf.data(), c.n_out, c.n_in, c.fmt);
    W4A8Acts a;
    quantize_w4a8_acts(x.data(), c.n_tok, c.n_in, c.fmt.group_size, a);
    std::vector<float> deq(size_t(c.n_out * c.n_in));
    dequantize_int4_vnni16_ref(w, 0, c.n_out, deq.data());
    ThreadPool pool(1);
    std::vector<float> y(size_t(c.n_tok * c.n_out));
    matmul_w4a8_preq(w, a, y.data(), pool, W4A8Isa::scalar);
    const int64_t groups = c.n_in / c.fmt.group_size;
    for (int64_t t = 0; t < c.n_tok; ++t) {
      for (int64_t o = 0; o < c.n_out; ++o) {
        double want = 0, mag = 0;
        for (int64_t k = 0; k < c.n_in; ++k) {
          const double xa = double(a.scales[size_t(t * groups + k / c.fmt.group_size)]) *
                            a.qs[size_t(t * c.n_in + k)];
          want += double(deq[size_t(o * c.n_in + k)]) * xa;
          mag += std::fabs(double(deq[size_t(o * c.n_in + k)]) * xa) + 16 * std::fabs(xa);
        }
        ASSERT_NEAR(y[size_t(t * c.n_out + o)], want, 1e-5 * mag + 1e-6) << c.label();
      }
    }
  }
}

TEST(W4A8, QuantisedActivationsCarryTheirGroupSums) {
  std::mt19937 rng(2);
  const std::vector<float> x = random_floats(3 * 128, rng);
  W4A8Acts a;
  quantize_w4a8_acts(x.data(), 3, 128, 32, a);
  ASSERT_EQ(a.qs.size(), size_t(16 * 128));  // padded to a 16-row AMX tile
  for (int64_t t = 0; t < 3; ++t) {
    for (int64_t g = 0; g < 4; ++g) {
      int sum = 0, amax = 0;
      for (int k = 0; k < 32; ++k) {
        const int q = a.qs[size_t(t * 128 + g * 32 + k)];
        sum += q;
        amax = std::max(amax, std::abs(q));
      }
      EXPECT_EQ(amax, 127);
      EXPECT_FLOAT_EQ(a.sums[size_t(t * 4 + g)], a.scales[size_t(t * 4 + g)] * float(sum));
    }
  }
  for (size_t i = 3 * 128; i < a.qs.size(); ++i) ASSERT_EQ(a.qs[i], 0);
}

TEST(W4A8, EverySimdVariantMatchesTheScalarReference) {
  std::mt19937 rng(3);
  int tested = 0;
  for (W4A8Isa isa : {W4A8Isa::avx2, W4A8Isa::avx_vnni, W4A8Isa::avx512_vnni, W4A8Isa::amx}) {
    if (!w4a8_isa_supported(isa)) {
      std::printf("w4a8 %s: not supported here (%s), skipped\n",
                  std::string(w4a8_isa_name(isa)).c_str(), amx_status().c_str());
      continue;
    }
    for (const Case& c : cases()) {
      const std::vector<float> wf = random_floats(c.n_out * c.n_in, rng);
      const std::vector<float> x = random_floats(c.n_tok * c.n_in, rng);
      const Int4Vnni16 w = pack_int4_vnni16_ref(wf.data(), c.n_out, c.n_in, c.fmt);
      ThreadPool pool(2);
      std::vector<float> want(size_t(c.n_tok * c.n_out)), got(want.size(), -1.0f);
      matmul_w4a8(w, x.data(), c.n_tok, want.data(), pool, W4A8Isa::scalar);
      matmul_w4a8(w, x.data(), c.n_tok, got.data(), pool, isa);
      expect_close(got, want, magnitudes(w, x, c.n_tok),
                   std::string(w4a8_isa_name(isa)) + " " + c.label());
      ++tested;
    }
  }
  if (isa_supported(Isa::avx2)) {
    EXPECT_GT(tested, 0);
  }
}

TEST(W4A8, AmxPrefillMatchesTheScalarReferenceWhenTheCpuHasIt) {
  if (!w4a8_isa_supported(W4A8Isa::amx)) {
    GTEST_SKIP() << "AMX not usable here: " << amx_status();
  }
  std::mt19937 rng(4);
  for (int gs : {32, 64, 128}) {
    for (Int4ZeroPoint zp : {Int4ZeroPoint::sym, Int4ZeroPoint::asym, Int4ZeroPoint::fp}) {
      for (int64_t n_tok : {5, 16, 33}) {  // > kW4A8AmxMinTokens: the tile path
        const Case c{48, 5 * gs, n_tok, {gs, zp}};
        const std::vector<float> wf = random_floats(c.n_out * c.n_in, rng);
        const std::vector<float> x = random_floats(c.n_tok * c.n_in, rng);
        const Int4Vnni16 w = pack_int4_vnni16_ref(wf.data(), c.n_out, c.n_in, c.fmt);
        ThreadPool pool(2);
        std::vector<float> want(size_t(n_tok * c.n_out)), got(want.size(), -1.0f);
        matmul_w4a8(w, x.data(), n_tok, want.data(), pool, W4A8Isa::scalar);
        matmul_w4a8(w, x.data(), n_tok, got.data(), pool, W4A8Isa::amx);
        expect_close(got, want, magnitudes(w, x, n_tok), "amx " + c.label());
      }
    }
  }
}

TEST(W4A8, VariantNamesRoundTripAndScalarIsAlwaysThere) {
  for (int i = 0; i < kW4A8IsaCount; ++i) {
    EXPECT_EQ(parse_w4a8_isa(w4a8_isa_name(W4A8Isa(i))), W4A8Isa(i));
  }
  EXPECT_TRUE(w4a8_isa_supported(W4A8Isa::scalar));
  EXPECT_TRUE(w4a8_isa_supported(w4a8_best_isa()));
#ifdef FISH_SCALAR_ONLY
  EXPECT_EQ(w4a8_best_isa(), W4A8Isa::scalar);
  EXPECT_FALSE(amx_int8_usable());
#endif
}

}  // namespace
}  // namespace fish
