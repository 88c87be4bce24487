// The fast quantisers (kernels/quantize_fast.h) against the scalar references: byte-identical
// output on every input family that reaches a different branch of ggml's search (flat and
// all-zero sub-blocks, sub-blocks whose 6-bit scale rounds to 0, rounding ties, extreme
// magnitudes, non-finite values), for every SIMD level the CPU runs.
#include "kernels/quantize_fast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace fish {
namespace {

constexpr GgmlType kSimdTypes[] = {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::q8_0,
                                   GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::fq3};

std::vector<Isa> simd_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

enum class Dist {
  gaussian,
  gaussian_small,    // sigma 0.02, like real weights
  uniform_positive,  // every min > 0: the search clamps min to 0
  uniform_negative,
  outliers,       // 1% of values x100: other sub-blocks' 6-bit scales round to 0
  scale_spread,   // each 16-value run scaled by 10^[-8, 0]: more zero 6-bit scales
  zero_runs,      // random 16/32-value runs (and whole super-blocks) exactly 0
  constant_runs,  // runs of one repeated value (max == min)
  half_integers,  // k/2 for small k: rounding ties everywhere
  sparse,         // 95% zeros
  tiny,           // ~1e-30 and subnormals
  huge,           // ~1e30 .. 3e38: max - min overflows
  non_finite,     // a few inf / -inf / NaN among gaussians
};
constexpr Dist kAllDists[] = {Dist::gaussian,         Dist::gaussian_small, Dist::uniform_positive,
                              Dist::uniform_negative, Dist::outliers,       Dist::scale_spread,
                              Dist::zero_runs,        Dist::constant_runs,  Dist::half_integers,
                              Dist::sparse,           Dist::tiny,           Dist::huge,
                              Dist::non_finite};

// n % 16 == 0.
std::vector<float> make_row(Dist dist, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = normal(rng);
  switch (dist) {
    case Dist::gaussian:
      break;
    case Dist::gaussian_small:
      for (float& f : v) f *= 0.02f;
      break;
    case Dist::uniform_positive:
      for (float& f : v) f = 0.5f + unit(rng);
      break;
    case Dist::uniform_negative:
      for (float& f : v) f = -0.5f - unit(rng);
      break;
    case Dist::outliers:
      for (float& f : v) {
        if (unit(rng) < 0.01f) f *= 100.0f;
      }
      break;
    case Dist::scale_spread:
      for (size_t i = 0; i < v.size(); i += 16) {
        const float s = std::pow(10.0f, -8.0f * unit(rng));
        for (size_t k = i; k < i + 16; ++k) v[k] *= s;
      }
      break;
    case Dist::zero_runs:
      for (size_t i = 0; i < v.size(); i += 16) {
        if (unit(rng) < 0.3f) std::fill(v.begin() + long(i), v.begin() + long(i + 16), 0.0f);
      }
      if (n >= 512 && unit(rng) < 0.5f) std::fill(v.begin() + 256, v.begin() + 512, 0.0f);
      break;
    case Dist::constant_runs:
      for (size_t i = 0; i < v.size(); i += 16) {
        if (unit(rng) < 0.5f) std::fill(v.begin() + long(i), v.begin() + long(i + 16), v[i]);
      }
      break;
    case Dist::half_integers:
      for (float& f : v) f = float(int(std::lround(f * 8.0f))) * 0.5f;
      break;
    case Dist::sparse:
      for (float& f : v) {
        if (unit(rng) < 0.95f) f = 0.0f;
      }
      break;
    case Dist::tiny:
      for (float& f : v) f *= unit(rng) < 0.5f ? 1e-30f : 1e-41f;
      break;
    case Dist::huge:
      for (float& f : v) f = std::min(std::max(f * 1e38f, -3.4e38f), 3.4e38f);
      break;
    case Dist::non_finite: {
      const float specials[] = {std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN()};
      for (float& f : v) {
        if (unit(rng) < 0.005f) f = specials[rng() % 3];
      }
      break;
    }
  }
  return v;
}

std::vector<uint8_t> quantize_ref(GgmlType t, const float* x, int64_t n) {
  std::vector<uint8_t> out(row_bytes(t, n));
  type_info(t).quantize_row(x, out.data(), n);
  return out;
}

// Index of the first block whose bytes differ, or -1.
int64_t first_diff_block(GgmlType t, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  const size_t bb = type_info(t).block_bytes;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return int64_t(i / bb);
  }
  return -1;
}

TEST(QuantizeRowKernel, ScalarLevelIsTheReference) {
  for (const TypeInfo& info : all_types()) {
    if (info.quantize_row == nullptr) continue;
    const QuantizeRowKernel k = quantize_row_kernel(info.type, Isa::scalar);
    EXPECT_EQ(k.isa, Isa::scalar) << info.name;
    EXPECT_EQ(k.fn, info.quantize_row) << info.name;
  }
}

TEST(QuantizeRowKernel, SimdTypesGetEverySupportedLevel) {
  for (GgmlType t : kSimdTypes) {
    for (Isa isa : simd_isas()) EXPECT_EQ(quantize_row_kernel(t, isa).isa, isa) << type_name(t);
  }
}

TEST(QuantizeFast, SimdIsByteIdenticalToScalarReference) {
  const std::vector<Isa> isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no SIMD level on this CPU (or FISH_SCALAR_ONLY)";
  for (GgmlType t : kSimdTypes) {
    const int64_t be = type_info(t).block_elems;
    // Rows of 1..5 super-blocks (odd counts hit the AVX-512 Q4_K/Q5_K single-block tail); for
    // 32-value types also non-multiples of 256.
    std::vector<int64_t> lengths = {256, 512, 768, 1024, 1280};
    if (be == 32) lengths.insert(lengths.end(), {32, 96, 416});
    for (Dist dist : kAllDists) {
      std::mt19937 rng(uint32_t(t) * 1000 + uint32_t(dist));
      for (int64_t n : lengths) {
        for (int rep = 0; rep < 10; ++rep) {
          // Offset by one float: the kernels must not assume aligned rows.
          std::vector<float> buf = make_row(dist, n, rng);
          buf.insert(buf.begin(), 0.0f);
          const float* x = buf.data() + 1;
          const std::vector<uint8_t> want = quantize_ref(t, x, n);
          for (Isa isa : isas) {
            const QuantizeRowKernel k = quantize_row_kernel(t, isa);
            std::vector<uint8_t> got(want.size(), 0xAB);
            k.fn(x, got.data(), n);
            const int64_t bad = first_diff_block(t, want, got);
            EXPECT_EQ(bad, -1) << type_name(t) << " " << isa_name(isa) << " dist " << int(dist)
                               << " n " << n << " rep " << rep << ": first differing block " << bad;
          }
        }
      }
    }
  }
}

TEST(QuantizeRows, OutputIsIndependentOfThreadCountAndEqualsPerRowReference) {
  const int64_t n_rows = 37;  // not a multiple of 2 or 3: uneven slices
  const int64_t n_per_row = 512;
  std::mt19937 rng(7);
  std::vector<float> src = make_row(Dist::gaussian_small, n_rows * n_per_row, rng);
  for (GgmlType t :
       {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::q8_0, GgmlType::q4_0}) {
    const size_t rb = row_bytes(t, n_per_row);
    std::vector<uint8_t> want(rb * size_t(n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
      type_info(t).quantize_row(src.data() + r * n_per_row, want.data() + size_t(r) * rb,
                                n_per_row);
    }
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<uint8_t> got(want.size(), 0xCD);
      quantize_rows(t, src.data(), got.data(), n_rows, n_per_row, pool);
      EXPECT_EQ(first_diff_block(t, want, got), -1) << type_name(t) << " threads " << threads;
    }
  }
}

}  // namespace
}  // namespace fish
