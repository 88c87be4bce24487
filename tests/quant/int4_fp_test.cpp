// The float zero point (quant/int4.h, zero_point fp: w = d * q + m): the fp fit, the fish_i4fp
// GGUF types, and the exact repack of 4-bit GGUF sources — q4_1 and q4_0 bit-identical to the GGUF
// dequantiser through every layout, q4_k within the f16 rounding bound stated in int4.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/f16.h"
#include "quant/int4.h"
#include "quant/k_quants.h"
#include "quant/q4_0.h"
#include "quant/q4_1.h"
#include "quant/q4_k.h"
#include "quant/q8_0.h"
#include "quant/types.h"

namespace fish {
namespace {

std::vector<float> random_weights(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> w(static_cast<size_t>(n));
  for (float& v : w) v = dist(rng);
  return w;
}

// Rows of `type` from random weights through its reference quantiser (real-looking blocks).
std::vector<uint8_t> quantized_rows(GgmlType type, int64_t n_out, int64_t n_in, uint32_t seed,
                                    float scale = 1.0f) {
  const std::vector<float> w = random_weights(n_out * n_in, seed, scale);
  const size_t row = row_bytes(type, n_in);
  std::vector<uint8_t> out(row * size_t(n_out));
  for (int64_t o = 0; o < n_out; ++o) {
    type_info(type).quantize_row(w.data() + o * n_in, out.data() + size_t(o) * row, n_in);
  }
  return out;
}

// Every row of src repacked as fish_i4_type(fmt); expects every row exact.
std::vector<uint8_t> repack(GgmlType src, const std::vector<uint8_t>& rows, int64_t n_out,
                            int64_t n_in, Int4Format fmt) {
  const size_t in_row = row_bytes(src, n_in);
  const size_t out_row = row_bytes(fish_i4_type(fmt), n_in);
  std::vector<uint8_t> out(out_row * size_t(n_out));
  std::vector<float> scratch(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    EXPECT_TRUE(pack_row_fish_i4(src, rows.data() + size_t(o) * in_row, n_in, fmt,
                                 out.data() + size_t(o) * out_row, scratch.data()));
  }
  return out;
}

std::vector<float> dequantized(GgmlType t, const uint8_t* rows, int64_t n) {
  std::vector<float> f(static_cast<size_t>(n));
  type_info(t).dequantize_row(rows, f.data(), n);
  return f;
}

// The f32 weights of fish_i4 rows through each kernel layout's dequantiser (Int4Vnni16,
// Int4Blocks64, and Int4Rows from it), each expected bit-identical to `want`.
void expect_layouts_equal(const std::vector<uint8_t>& rows, int64_t n_out, int64_t n_in,
                          Int4Format fmt, const std::vector<float>& want, const char* what) {
  Int4Vnni16 v;
  Int4Blocks64 b;
  ASSERT_TRUE(int4_from_fish_i4(rows.data(), n_out, n_in, fmt, &v, &b)) << what;
  std::vector<float> got(want.size());
  dequantize_int4_vnni16_ref(v, 0, n_out, got.data());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << what << " vnni16";
  dequantize_int4_blocks64_ref(b, 0, n_out, got.data());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << what << " blocks64";
  dequantize_int4_rows_ref(int4_rows_from_blocks64(b), 0, n_out, got.data());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << what << " rows";
}

TEST(Int4Fp, Q4_1RowsRepackBitIdenticallyThroughTheGgufTypeAndEveryLayout) {
  const int64_t n_out = 80, n_in = 96;  // a 16-channel tail in Int4Blocks64
  const Int4Format fmt{32, Int4ZeroPoint::fp};
  ASSERT_TRUE(int4_repack_is_exact(GgmlType::q4_1, fmt));
  const std::vector<uint8_t> src = quantized_rows(GgmlType::q4_1, n_out, n_in, 1);
  const std::vector<uint8_t> rows = repack(GgmlType::q4_1, src, n_out, n_in, fmt);
  const std::vector<float> want = dequantized(GgmlType::q4_1, src.data(), n_out * n_in);
  const std::vector<float> got = dequantized(GgmlType::fish_i4fp_g32, rows.data(), n_out * n_in);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0);
  expect_layouts_equal(rows, n_out, n_in, fmt, want, "q4_1");
}

TEST(Int4Fp, Q4_0RowsRepackExactlyForEveryZeroPointAtGroup32) {
  const int64_t n_out = 48, n_in = 160;
  const std::vector<uint8_t> src = quantized_rows(GgmlType::q4_0, n_out, n_in, 2);
  const std::vector<float> want = dequantized(GgmlType::q4_0, src.data(), n_out * n_in);
  for (Int4ZeroPoint zp : {Int4ZeroPoint::sym, Int4ZeroPoint::asym, Int4ZeroPoint::fp}) {
    const Int4Format fmt{32, zp};
    ASSERT_TRUE(int4_repack_is_exact(GgmlType::q4_0, fmt));
    const std::vector<uint8_t> rows = repack(GgmlType::q4_0, src, n_out, n_in, fmt);
    const std::vector<float> got = dequantized(fish_i4_type(fmt), rows.data(), n_out * n_in);
    if (zp != Int4ZeroPoint::fp) {
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0)
          << int4_zero_point_name(zp);
      expect_layouts_equal(rows, n_out, n_in, fmt, want, "q4_0");
      continue;
    }
    // fp: d q + (-8 d) equals d (q - 8) as a value; only code 8 under a negative d differs in
    // the sign of zero (+0 here, -0 from q4_0).
    EXPECT_EQ(got, want);
    expect_layouts_equal(rows, n_out, n_in, fmt, got, "q4_0 fp");
  }
}

TEST(Int4Fp, Q4_KRowsRepackWithinTheF16RoundingOfScaleAndMin) {
  const int64_t n_out = 40, n_in = 512;
  const Int4Format fmt{32, Int4ZeroPoint::fp};
  ASSERT_TRUE(int4_repack_is_exact(GgmlType::q4_k, fmt));
  // Unit weights, and weights of 1e-4 whose sub-block scales d * sc fall near f16's subnormals.
  for (float scale : {1.0f, 1e-4f}) {
    const std::vector<uint8_t> src = quantized_rows(GgmlType::q4_k, n_out, n_in, 3, scale);
    const std::vector<uint8_t> rows = repack(GgmlType::q4_k, src, n_out, n_in, fmt);
    const std::vector<float> want = dequantized(GgmlType::q4_k, src.data(), n_out * n_in);
    const std::vector<float> got = dequantized(GgmlType::fish_i4fp_g32, rows.data(), n_out * n_in);
    const auto* blocks = reinterpret_cast<const BlockQ4_K*>(src.data());
    int64_t differ = 0;
    for (int64_t i = 0; i < n_out * n_in; ++i) {
      const BlockQ4_K& b = blocks[i / kQK_K];
      uint8_t sc, mn;
      get_scale_min_k4(int(i % kQK_K) / 32, b.scales, &sc, &mn);
      const double ds = std::fabs(double(f16_to_f32(b.d)) * sc);
      const double dm = std::fabs(double(f16_to_f32(b.dmin)) * mn);
      // int4.h: 2^-11 (15 |d sc| + |dmin mn|) + 2^-23 |w| + 2^-21 (f16 subnormal products).
      const double bound =
          0x1p-11 * (15 * ds + dm) + 0x1p-23 * std::fabs(want[size_t(i)]) + 0x1p-21;
      ASSERT_LE(std::fabs(double(got[size_t(i)]) - want[size_t(i)]), bound) << i;
      differ += got[size_t(i)] != want[size_t(i)];
    }
    std::printf("q4_k -> fish_i4fp_g32 (scale %g): %lld of %lld weights differ in f32\n",
                double(scale), (long long)differ, (long long)(n_out * n_in));
    // The layouts reproduce the fish_i4fp rows exactly (the rounding is in the repack only).
    expect_layouts_equal(rows, n_out, n_in, fmt, got, "q4_k");
  }
}

TEST(Int4Fp, OnlyFourBitSourcesAtGroup32RepackExactlyOthersAreFitted) {
  EXPECT_FALSE(int4_repack_is_exact(GgmlType::q4_1, {32, Int4ZeroPoint::asym}));
  EXPECT_FALSE(int4_repack_is_exact(GgmlType::q4_1, {64, Int4ZeroPoint::fp}));
  EXPECT_FALSE(int4_repack_is_exact(GgmlType::q4_k, {32, Int4ZeroPoint::sym}));
  EXPECT_FALSE(int4_repack_is_exact(GgmlType::q8_0, {32, Int4ZeroPoint::fp}));
  EXPECT_FALSE(int4_repack_is_exact(GgmlType::q6_k, {32, Int4ZeroPoint::fp}));
  // A q8_0 row is dequantised and fitted: pack_row_fish_i4 says so, and the result is the fp
  // fit of the dequantised row.
  const int64_t n = 128;
  const std::vector<uint8_t> src = quantized_rows(GgmlType::q8_0, 1, n, 4);
  std::vector<BlockFishI4Fp<32>> got(n / 32), want(n / 32);
  std::vector<float> scratch(n);
  EXPECT_FALSE(pack_row_fish_i4(GgmlType::q8_0, src.data(), n, {32, Int4ZeroPoint::fp}, got.data(),
                                scratch.data()));
  const std::vector<float> f = dequantized(GgmlType::q8_0, src.data(), n);
  quantize_row_fish_i4fp_ref<32>(f.data(), want.data(), n);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(BlockFishI4Fp<32>) * got.size()), 0);
}

TEST(Int4Fp, FitIsNoWorseThanTheMinMaxGridAndBeatsAsymOnGaussianGroups) {
  for (int gs : {32, 64, 128}) {
    const int groups = 64;
    const std::vector<float> w = random_weights(gs * groups, uint32_t(gs));
    double fp_err = 0, asym_err = 0;
    for (int g = 0; g < groups; ++g) {
      const float* x = w.data() + g * gs;
      std::vector<uint8_t> codes(static_cast<size_t>(gs));
      uint16_t d16 = 0, m16 = 0;
      quantize_int4_group_fp_ref(x, gs, codes.data(), &d16, &m16);
      float lo = x[0], hi = x[0];
      for (int i = 0; i < gs; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
      const float dg = f16_to_f32(f32_to_f16((hi - lo) / 15.0f));
      const float mg = f16_to_f32(f32_to_f16(lo));
      double err = 0, grid_err = 0;
      for (int i = 0; i < gs; ++i) {
        ASSERT_LE(codes[size_t(i)], 15);
        const double back = double(float(codes[size_t(i)]) * f16_to_f32(d16) + f16_to_f32(m16));
        err += (back - x[i]) * (back - x[i]);
        const int q = std::clamp(int(std::floor((x[i] - mg) / dg + 0.5f)), 0, 15);
        const double gback = double(float(q) * dg + mg);
        grid_err += (gback - x[i]) * (gback - x[i]);
      }
      EXPECT_LE(err, grid_err * (1 + 1e-6) + 1e-12) << "gs=" << gs << " group " << g;
      fp_err += err;
      uint16_t s16 = 0;
      uint8_t z = 0;
      quantize_int4_group_ref(x, {gs, Int4ZeroPoint::asym}, codes.data(), &s16, &z);
      for (int i = 0; i < gs; ++i) {
        const double back = double(f16_to_f32(s16) * float(int(codes[size_t(i)]) - int(z)));
        asym_err += (back - x[i]) * (back - x[i]);
      }
    }
    std::printf("g%d: fp rel RMS %.4f, asym %.4f\n", gs, std::sqrt(fp_err / (gs * groups)),
                std::sqrt(asym_err / (gs * groups)));
    EXPECT_LT(fp_err, asym_err) << "gs=" << gs;
  }
}

template <int G>
void check_fp_rows_roundtrip() {
  const int64_t n_out = 70, n_in = 3 * G;
  const Int4Format fmt{G, Int4ZeroPoint::fp};
  const std::vector<float> w = random_weights(n_out * n_in, G + 1);
  std::vector<BlockFishI4Fp<G>> rows(size_t(n_out * n_in / G));
  for (int64_t o = 0; o < n_out; ++o) {
    quantize_row_fish_i4fp_ref<G>(w.data() + o * n_in, rows.data() + o * n_in / G, n_in);
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(rows.data());
  Int4Vnni16 v;
  Int4Blocks64 b;
  ASSERT_TRUE(int4_from_fish_i4(bytes, n_out, n_in, fmt, &v, &b));
  // The packers fit the same way: codes, scales and offsets agree with the GGUF rows'.
  const Int4Vnni16 v_ref = pack_int4_vnni16_ref(w.data(), n_out, n_in, fmt);
  const Int4Blocks64 b_ref = pack_int4_blocks64_ref(w.data(), n_out, n_in, fmt);
  EXPECT_EQ(v.qs, v_ref.qs);
  EXPECT_EQ(v.scales, v_ref.scales);
  EXPECT_EQ(v.mins, v_ref.mins);
  EXPECT_TRUE(v.zeros.empty());
  EXPECT_EQ(b.qs, b_ref.qs);
  EXPECT_EQ(b.scales, b_ref.scales);
  EXPECT_EQ(b.mins, b_ref.mins);
  EXPECT_EQ(v.bytes(), v_ref.qs.size() + 4 * v_ref.scales.size());  // f16 d + f16 m per group
  const std::vector<float> want = dequantized(fish_i4_type(fmt), bytes, n_out * n_in);
  std::vector<uint8_t> as_bytes(bytes, bytes + rows.size() * sizeof(BlockFishI4Fp<G>));
  expect_layouts_equal(as_bytes, n_out, n_in, fmt, want, "fp rows");
  std::vector<float> from_rows(want.size());
  dequantize_int4_rows_ref(pack_int4_rows_ref(w.data(), n_out, n_in, fmt), 0, n_out,
                           from_rows.data());
  EXPECT_EQ(from_rows, want);
}

TEST(Int4Fp, FishI4FpRowsConvertExactlyIntoTheKernelLayoutsForEveryGroupSize) {
  check_fp_rows_roundtrip<32>();
  check_fp_rows_roundtrip<64>();
  check_fp_rows_roundtrip<128>();
  EXPECT_EQ(fish_i4_type({32, Int4ZeroPoint::fp}), GgmlType::fish_i4fp_g32);
  EXPECT_EQ(fish_i4_type({128, Int4ZeroPoint::asym}), GgmlType::fish_i4_g128);
  EXPECT_EQ(type_info(GgmlType::fish_i4fp_g64).block_bytes, sizeof(BlockFishI4<64>));
  EXPECT_TRUE(is_fish_i4_type(GgmlType::fish_i4fp_g128));
  EXPECT_TRUE(is_fish_i4fp_type(GgmlType::fish_i4fp_g32));
  EXPECT_FALSE(is_fish_i4fp_type(GgmlType::fish_i4_g32));
  EXPECT_EQ(parse_int4_zero_point("fp"), Int4ZeroPoint::fp);
  EXPECT_EQ(int4_zero_point_name(Int4ZeroPoint::fp), "fp");
}

}  // namespace
}  // namespace fish
