// x16 K-quant / Q8_0 / Q5_0 layout (kernels/kquant_x16.h): the repacking is lossless, and every
// tile kernel (scalar, AVX2, AVX-512 and AMX; any token count, any thread count) is bitwise equal
// to the scalar per-row reference vec_dot_*_ref of the GGUF rows, on random data with row counts
// that are not multiples of 16 (the padded tail panel), odd super-block counts and 1..9 tokens.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/amx.h"
#include "kernels/kquant_x16.h"
#include "kernels/registry.h"
#include "kernels/thread_pool.h"

namespace fish {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::q8_0,
                               GgmlType::q5_0};
using Bytes = std::vector<uint8_t>;

std::vector<uint8_t> pack_all(GgmlType t, const std::vector<uint8_t>& w, int64_t n_out,
                              int64_t n_in) {
  std::vector<uint8_t> p(kx16_matrix_bytes(t, n_out, n_in), 0xAB);
  kx16_pack(t, w.data(), n_out, n_in, p.data(), 0, (n_out + 15) / 16);
  return p;
}

// n_tok activation rows (Q8_K; Q8_0 for q8_0) from N(0, 1) floats through the reference
// quantiser (consistent bsums).
Bytes activations(GgmlType t, int64_t n_tok, int64_t n_in, std::mt19937& rng) {
  const MatvecKernel& k = matvec_kernel(t, Isa::scalar);
  const size_t xs = k.act_row_bytes(n_in);
  Bytes x(xs * size_t(n_tok));
  for (int64_t i = 0; i < n_tok; ++i) {
    const std::vector<float> f = test::random_floats(n_in, rng);
    k.quantize_act(f.data(), x.data() + size_t(i) * xs, n_in);
  }
  return x;
}

std::vector<float> reference(GgmlType t, const Bytes& w, int64_t n_out, int64_t n_in,
                             const Bytes& x, int64_t n_tok) {
  const MatvecKernel& k = matvec_kernel(t, Isa::scalar);
  const size_t rb = row_bytes(t, n_in), xs = k.act_row_bytes(n_in);
  std::vector<float> y(size_t(n_tok * n_out));
  for (int64_t i = 0; i < n_tok; ++i)
    for (int64_t r = 0; r < n_out; ++r)
      y[size_t(i * n_out + r)] =
          k.vec_dot(n_in, w.data() + size_t(r) * rb, x.data() + size_t(i) * xs);
  return y;
}

// The kernel variants this CPU runs: each ISA level, and avx512 with AMX tiles where usable.
struct Variant {
  Isa isa;
  bool amx;
  std::string name() const { return std::string(isa_name(isa)) + (amx ? "+amx" : ""); }
};
std::vector<Variant> variants() {
  std::vector<Variant> v{{Isa::scalar, false}};
  if (isa_supported(Isa::avx2)) v.push_back({Isa::avx2, false});
  if (isa_supported(Isa::avx512)) v.push_back({Isa::avx512, false});
  if (kx16_amx_usable()) v.push_back({Isa::avx512, true});
  return v;
}
Kx16Fn kernel_of(GgmlType t, Variant v) {
  Isa got;
  bool got_amx;
  const Kx16Fn k = kx16_kernel(t, v.isa, &got, v.amx, &got_amx);
  EXPECT_EQ(got, v.isa);
  EXPECT_EQ(got_amx, v.amx);
  return k;
}

// The tile kernel of `v` on the whole packed matrix against the per-row reference, bitwise; ldy
// wider than n_out, so writes past a token's rows would show (the sentinels must stay).
void expect_tiles_equal_reference(GgmlType t, Variant v, int64_t n_out, int64_t n_in, int64_t n_tok,
                                  test::Fill fill, std::mt19937& rng) {
  const std::vector<uint8_t> w = test::make_weights(t, n_out, n_in, fill, rng);
  const std::vector<uint8_t> p = pack_all(t, w, n_out, n_in);
  const Bytes x = activations(t, n_tok, n_in, rng);
  const std::vector<float> want = reference(t, w, n_out, n_in, x, n_tok);
  const Kx16Fn k = kernel_of(t, v);
  const int64_t ldy = n_out + 3;
  std::vector<float> y(size_t(n_tok * ldy), -7.0f);
  k(p.data(), n_in / kx16_block_elems(t), (n_out + 15) / 16, x.data(), x.size() / size_t(n_tok),
    n_tok, y.data(), ldy, n_out);
  for (int64_t tok = 0; tok < n_tok; ++tok) {
    for (int64_t r = 0; r < n_out; ++r) {
      const float a = y[size_t(tok * ldy + r)], b = want[size_t(tok * n_out + r)];
      ASSERT_EQ(std::memcmp(&a, &b, 4), 0)
          << type_name(t) << " " << v.name() << " N=" << n_out << " K=" << n_in << " M=" << n_tok
          << " tok " << tok << " row " << r << ": " << a << " vs " << b;
    }
    for (int64_t r = n_out; r < ldy; ++r) ASSERT_EQ(y[size_t(tok * ldy + r)], -7.0f);
  }
}

TEST(Kx16, LayoutSizes) {
  EXPECT_EQ(kx16_block_bytes(GgmlType::q4_k), 16 * sizeof(BlockQ4_K) + 64);
  EXPECT_EQ(kx16_block_bytes(GgmlType::q5_k), 16 * sizeof(BlockQ5_K) + 64);
  EXPECT_EQ(kx16_block_bytes(GgmlType::q6_k), 16 * sizeof(BlockQ6_K));
  EXPECT_EQ(kx16_block_bytes(GgmlType::q8_0), 16 * sizeof(BlockQ8_0));
  EXPECT_EQ(kx16_block_elems(GgmlType::q8_0), 32);
  EXPECT_EQ(kx16_matrix_bytes(GgmlType::q8_0, 17, 640), 2u * 20u * 544u);
  EXPECT_EQ(kx16_block_bytes(GgmlType::q5_0), 16 * sizeof(BlockQ5_0));  // GGUF's bytes, no more
  EXPECT_EQ(kx16_block_elems(GgmlType::q5_0), 32);
  EXPECT_TRUE(kx16_q8_0_act(GgmlType::q5_0));
  EXPECT_FALSE(kx16_q8_0_act(GgmlType::q4_k));
  EXPECT_EQ(kx16_block_bytes(GgmlType::q4_0), 0u);
  EXPECT_FALSE(kx16_supported(GgmlType::q4_0));
  // 33 rows -> 3 panels; 3 super-blocks each.
  EXPECT_EQ(kx16_matrix_bytes(GgmlType::q6_k, 33, 768), 3u * 3u * 3360u);
}

TEST(Kx16, UnpackGivesBackTheGgufBytesOfEveryRow) {
  std::mt19937 rng(11);
  for (GgmlType t : kTypes) {
    for (test::Fill fill : {test::Fill::kQuantised, test::Fill::kRandomBits}) {
      const int64_t n_out = 37, n_in = 3 * kx16_block_elems(t);
      const std::vector<uint8_t> w = test::make_weights(t, n_out, n_in, fill, rng);
      const std::vector<uint8_t> p = pack_all(t, w, n_out, n_in);
      const size_t rb = row_bytes(t, n_in);
      std::vector<uint8_t> back(rb);
      for (int64_t r = 0; r < n_out; ++r) {
        kx16_unpack_row(t, p.data(), n_in, r, back.data());
        ASSERT_EQ(0, std::memcmp(back.data(), w.data() + size_t(r) * rb, rb))
            << type_name(t) << " row " << r;
      }
      // The padded rows of the tail panel are zero blocks.
      kx16_unpack_row(t, p.data(), n_in, 47, back.data());
      for (uint8_t b : back) ASSERT_EQ(b, 0) << type_name(t);
    }
  }
}

TEST(Kx16, TileKernelsEqualTheScalarReferenceBitwise) {
  std::mt19937 rng(12);
  struct Shape {
    int64_t n_out, n_in, n_tok;
  };
  // n_in in super-blocks (256 weights; 32 for q8_0).
  const Shape shapes[] = {{16, 1, 1}, {1, 1, 1},  {5, 3, 2},  {37, 5, 1}, {37, 5, 3},
                          {24, 2, 4}, {41, 7, 9}, {64, 4, 5}, {9, 1, 7},  {19, 20, 2}};
  for (GgmlType t : kTypes) {
    for (test::Fill fill : {test::Fill::kQuantised, test::Fill::kRandomBits}) {
      for (Shape s : shapes) {
        for (Variant v : variants()) {
          expect_tiles_equal_reference(t, v, s.n_out, s.n_in * kx16_block_elems(t), s.n_tok, fill,
                                       rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// The AMX variants: blocks of 16 tokens on tiles, a last partial block of kKx16AmxMinTokens or
// more zero-padded on tiles, a smaller one on the AVX-512 kernel; all bitwise the reference, with
// odd row counts (a padded tail panel), odd super-block counts and token counts on both sides of
// the threshold and of the 16-token blocks.
TEST(Kx16, AmxTilesEqualTheScalarReferenceBitwise) {
  if (!kx16_amx_usable()) GTEST_SKIP() << "AMX-INT8 not usable here: " << amx_status();
  std::mt19937 rng(15);
  struct Shape {
    int64_t n_out, n_in, n_tok;
  };
  static_assert(kKx16AmxMinTokens > 1 && kKx16AmxMinTokens < 16);
  constexpr int64_t kMin = kKx16AmxMinTokens;
  const Shape shapes[] = {{16, 1, 16},           {1, 1, 16},        {37, 3, 17},
                          {33, 5, 31},           {50, 2, 32},       {17, 7, 33},
                          {64, 1, 15},           {9, 4, 53},        {31, 20, 16},
                          {19, 2, kMin},         {21, 3, kMin - 1}, {35, 2, 16 + kMin},
                          {3, 1, 32 + kMin - 1}, {40, 2, 1}};
  for (GgmlType t : kTypes) {
    for (test::Fill fill : {test::Fill::kQuantised, test::Fill::kRandomBits}) {
      for (Shape s : shapes) {
        expect_tiles_equal_reference(t, {Isa::avx512, true}, s.n_out, s.n_in * kx16_block_elems(t),
                                     s.n_tok, fill, rng);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(Kx16, AmxIsUsedExactlyWhereUsableAndAllowed) {
  bool got_amx = true;
  kx16_kernel(GgmlType::q4_k, Isa::avx512, nullptr, true, &got_amx);
  EXPECT_EQ(got_amx, kx16_amx_usable()) << amx_status();
  kx16_kernel(GgmlType::q4_k, Isa::avx512, nullptr, false, &got_amx);
  EXPECT_FALSE(got_amx);
  kx16_kernel(GgmlType::q4_k, Isa::avx2, nullptr, true, &got_amx);
  EXPECT_FALSE(got_amx) << "an avx2 request must not run AVX-512 / AMX code";
}

TEST(Kx16, ThreadedMatmulEqualsTheReferenceForAnyThreadCount) {
  std::mt19937 rng(13);
  for (GgmlType t : kTypes) {
    const int64_t n_out = 333, n_in = 3 * kx16_block_elems(t);
    const std::vector<uint8_t> w = test::make_weights(t, n_out, n_in, test::Fill::kQuantised, rng);
    const std::vector<uint8_t> p = pack_all(t, w, n_out, n_in);
    for (int64_t n_tok : {1, 2, 6, 33}) {
      const Bytes x = activations(t, n_tok, n_in, rng);
      const std::vector<float> want = reference(t, w, n_out, n_in, x, n_tok);
      for (Variant v : variants()) {
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          std::vector<float> y(size_t(n_tok * n_out), -1.0f);
          kx16_matmul(kernel_of(t, v), t, p.data(), n_out, n_in, x.data(), n_tok, y.data(), pool);
          ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4))
              << type_name(t) << " " << v.name() << " M=" << n_tok << " T=" << threads;
        }
      }
    }
  }
}

TEST(Kx16, PackingPanelRangesEqualsPackingAll) {
  std::mt19937 rng(14);
  const GgmlType t = GgmlType::q4_k;
  const int64_t n_out = 50, n_in = 2 * kQK_K;
  const std::vector<uint8_t> w = test::make_weights(t, n_out, n_in, test::Fill::kQuantised, rng);
  const std::vector<uint8_t> all = pack_all(t, w, n_out, n_in);
  std::vector<uint8_t> split(all.size(), 0);
  kx16_pack(t, w.data(), n_out, n_in, split.data(), 2, 4);
  kx16_pack(t, w.data(), n_out, n_in, split.data(), 0, 2);
  EXPECT_EQ(split, all);
}

TEST(Kx16, ARequestGetsTheHighestLevelTheCpuSupports) {
  Isa got;
  ASSERT_NE(kx16_kernel(GgmlType::q6_k, Isa::avx512, &got), nullptr);
  const Isa want = isa_supported(Isa::avx512) ? Isa::avx512
                   : isa_supported(Isa::avx2) ? Isa::avx2
                                              : Isa::scalar;
  EXPECT_EQ(got, want);
  ASSERT_NE(kx16_kernel(GgmlType::q4_k, Isa::scalar, &got), nullptr);
  EXPECT_EQ(got, Isa::scalar);
  EXPECT_EQ(kx16_kernel(GgmlType::q4_1, Isa::avx2), nullptr);
}

}  // namespace
}  // namespace fish
