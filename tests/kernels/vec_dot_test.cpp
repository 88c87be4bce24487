// Dot products and activation quantisers: every SIMD variant against its scalar reference, and
// the references against float dots of the dequantised rows (kernels/vec_dot.h, registry.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/registry.h"

namespace fish {
namespace {

using test::Fill;

std::vector<Isa> simd_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

// Row lengths to test for a weight type: 1 block, 2, 3 (odd pair count for the 2-block AVX-512
// loops), 7 and 16 blocks; float types get odd lengths that leave every SIMD tail non-empty.
std::vector<int64_t> lengths(GgmlType t) {
  const int64_t be = matvec_kernel(t, Isa::scalar).block_elems;
  if (be == 1) return {1, 7, 15, 16, 33, 100, 1031};
  return {be, 2 * be, 3 * be, 7 * be, 16 * be};
}

std::string label(GgmlType t, Isa isa, int64_t n, Fill fill) {
  return std::string(type_name(t)) + " " + std::string(isa_name(isa)) + " n=" + std::to_string(n) +
         (fill == Fill::kQuantised ? " quantised" : " random-bits");
}

// An activation row in the kernel's format, quantised by the scalar reference.
std::vector<uint8_t> quantize_ref(const MatvecKernel& k, const std::vector<float>& x) {
  const int64_t n = int64_t(x.size());
  std::vector<uint8_t> q(k.act_row_bytes(n));
  const MatvecKernel& ref = matvec_kernel(k.weight, Isa::scalar);
  if (ref.quantize_act == nullptr) {
    std::memcpy(q.data(), x.data(), q.size());
  } else {
    ref.quantize_act(x.data(), q.data(), n);
  }
  return q;
}

TEST(Registry, EveryRealModelTypeHasAKernelAndAScalarReference) {
  for (GgmlType t : {GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q4_0, GgmlType::q4_1,
                     GgmlType::q5_0, GgmlType::q5_1, GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k,
                     GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k}) {
    ASSERT_TRUE(has_matvec_kernel(t)) << type_name(t);
    const MatvecKernel& k = matvec_kernel(t, Isa::scalar);
    EXPECT_EQ(k.isa, Isa::scalar);
    EXPECT_NE(k.vec_dot, nullptr);
    EXPECT_EQ(k.quantize_act == nullptr, k.act == GgmlType::f32) << type_name(t);
  }
  EXPECT_FALSE(has_matvec_kernel(GgmlType::iq2_xxs));
}

TEST(Registry, ClampsTheRequestedIsaToWhatTheCpuRuns) {
  for (GgmlType t : matvec_weight_types()) {
    for (int i = 0; i < kIsaCount; ++i) {
      const MatvecKernel& k = matvec_kernel(t, Isa(i));
      EXPECT_LE(int(k.isa), i);
      EXPECT_TRUE(isa_supported(k.isa));
    }
    // The first six types of the real models have a kernel at every level the CPU supports.
    // (FISH's own fish_i4 types are scalar only: their fast paths are W4A8 / W4A16.)
    if (is_fish_type(t)) continue;
    for (Isa isa : simd_isas()) EXPECT_EQ(matvec_kernel(t, isa).isa, isa) << type_name(t);
  }
}

TEST(Registry, WeightTypesAreListedInIdOrder) {
  const auto types = matvec_weight_types();
  ASSERT_GE(types.size(), 13u);
  for (size_t i = 1; i < types.size(); ++i) EXPECT_LT(uint32_t(types[i - 1]), uint32_t(types[i]));
}

// Rows that stress the rounding rules: exact .5 ties (amax 127 -> d = 1 for Q8_0/Q8_1), all
// zeros, a single spike, equal +/- maxima (Q8_K keeps the first one's sign).
std::vector<float> special_row(int kind, int64_t n, std::mt19937& rng) {
  std::vector<float> x(size_t(n), 0.0f);
  std::uniform_int_distribution<int> small(-126, 126);
  for (int64_t i = 0; i < n; ++i) {
    switch (kind) {
      case 0:
        x[size_t(i)] = (i % 32 == 0) ? 127.0f : float(small(rng)) + 0.5f;
        break;
      case 1:
        x[size_t(i)] = 0.0f;
        break;
      case 2:
        x[size_t(i)] = (i == n / 2) ? -3.0f : 1e-3f * float(small(rng));
        break;
      case 3:
        x[size_t(i)] = (i % 5 == 0) ? ((i % 2) ? 2.0f : -2.0f) : 0.25f * float(i % 7);
        break;
    }
  }
  return x;
}

TEST(ActivationQuantizers, SimdMatchesScalarReferenceBitExact) {
  std::mt19937 rng(1234);
  for (GgmlType wt : {GgmlType::q4_0, GgmlType::q4_1, GgmlType::q4_k}) {  // q8_0, q8_1, q8_k
    const MatvecKernel& ref = matvec_kernel(wt, Isa::scalar);
    const int64_t be = ref.block_elems;
    for (Isa isa : simd_isas()) {
      const MatvecKernel& k = matvec_kernel(wt, isa);
      for (int64_t n : {be, 3 * be, 9 * be}) {
        for (int kind = -1; kind < 4; ++kind) {
          SCOPED_TRACE(std::string(type_name(ref.act)) + " " + std::string(isa_name(isa)) +
                       " n=" + std::to_string(n) + " kind=" + std::to_string(kind));
          const std::vector<float> x =
              kind < 0 ? test::random_floats(n, rng, 3.0f) : special_row(kind, n, rng);
          std::vector<uint8_t> a(ref.act_row_bytes(n)), b(ref.act_row_bytes(n), 0xAA);
          ref.quantize_act(x.data(), a.data(), n);
          k.quantize_act(x.data(), b.data(), n);
          EXPECT_EQ(a, b);
        }
      }
    }
  }
}

TEST(VecDot, SimdMatchesScalarReferenceWithinSummationError) {
  std::mt19937 rng(42);
  for (GgmlType t : matvec_weight_types()) {
    if (is_fish_type(t)) continue;  // scalar only (fish_i4: tests/kernels/w4a*_test.cpp)
    const MatvecKernel& ref = matvec_kernel(t, Isa::scalar);
    for (int64_t n : lengths(t)) {
      for (Fill fill : {Fill::kQuantised, Fill::kRandomBits}) {
        if (ref.block_elems == 1 && fill == Fill::kRandomBits) continue;
        const std::vector<uint8_t> w = test::make_weights(t, 1, n, fill, rng);
        const std::vector<float> x = test::random_floats(n, rng);
        const std::vector<uint8_t> xq = quantize_ref(ref, x);
        const float want = ref.vec_dot(n, w.data(), xq.data());
        const double mag = test::dot_magnitude(t, test::dequantize(t, w.data(), n),
                                               test::dequantize(ref.act, xq.data(), n));
        const int64_t roundings = ref.block_elems == 1 ? n : 4 * (n / ref.block_elems);
        for (Isa isa : simd_isas()) {
          SCOPED_TRACE(label(t, isa, n, fill));
          const MatvecKernel& k = matvec_kernel(t, isa);
          ASSERT_EQ(k.isa, isa);
          const float got = k.vec_dot(n, w.data(), xq.data());
          EXPECT_NEAR(got, want, test::summation_bound(roundings, mag));
        }
      }
    }
  }
}

TEST(VecDot, ReferenceEqualsDotOfDequantisedRows) {
  std::mt19937 rng(7);
  for (GgmlType t : matvec_weight_types()) {
    const MatvecKernel& ref = matvec_kernel(t, Isa::scalar);
    for (int64_t n : lengths(t)) {
      for (Fill fill : {Fill::kQuantised, Fill::kRandomBits}) {
        if (ref.block_elems == 1 && fill == Fill::kRandomBits) continue;
        SCOPED_TRACE(label(t, Isa::scalar, n, fill));
        const std::vector<uint8_t> w = test::make_weights(t, 1, n, fill, rng);
        const std::vector<float> x = test::random_floats(n, rng);
        const std::vector<uint8_t> xq = quantize_ref(ref, x);
        const std::vector<float> wd = test::dequantize(t, w.data(), n);
        const std::vector<float> xd = test::dequantize(ref.act, xq.data(), n);
        const double mag = test::dot_magnitude(t, wd, xd);
        const int64_t roundings = ref.block_elems == 1 ? n : 4 * (n / ref.block_elems);
        // Q8_1's s = d * sum(q) is stored as f16 (relative error <= 2^-11) and the weight
        // minimum multiplies it: allow that on top of the summation error.
        const double s_rounding = ref.act == GgmlType::q8_1 ? 0x1p-11 * mag : 0.0;
        EXPECT_NEAR(ref.vec_dot(n, w.data(), xq.data()), test::dot_f64(wd, xd),
                    test::summation_bound(roundings, mag) + s_rounding);
      }
    }
  }
}

TEST(VecDot, QuantisedDotIsWithinActivationQuantisationErrorOfF32Dot) {
  std::mt19937 rng(99);
  for (GgmlType t : matvec_weight_types()) {
    const MatvecKernel& k = matvec_kernel(t);
    for (int64_t n : lengths(t)) {
      SCOPED_TRACE(label(t, k.isa, n, Fill::kQuantised));
      const std::vector<uint8_t> w = test::make_weights(t, 1, n, Fill::kQuantised, rng);
      const std::vector<float> x = test::random_floats(n, rng);
      std::vector<uint8_t> xq(k.act_row_bytes(n));
      if (k.quantize_act) {
        k.quantize_act(x.data(), xq.data(), n);
      } else {
        std::memcpy(xq.data(), x.data(), xq.size());
      }
      const std::vector<float> wd = test::dequantize(t, w.data(), n);
      const std::vector<float> xd = test::dequantize(k.act, xq.data(), n);
      // Each activation is off by at most its block's step d (half a step from rounding, plus
      // the f16 rounding of d and Q8_K's clamp of -128 to -127): bound sum |w_i| * d_block(i),
      // with d_block bounded by max |x - x_deq| over the block plus one step.
      double act_err = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        act_err +=
            std::fabs(double(wd[size_t(i)])) * std::fabs(double(x[size_t(i)]) - xd[size_t(i)]);
      }
      const double mag = test::dot_magnitude(t, wd, xd);
      const double got = k.vec_dot(n, w.data(), xq.data());
      const double want = test::dot_f64(wd, x);
      EXPECT_NEAR(got, want, act_err + 1e-3 * mag + 1e-6);
      // And the activation error term is small: the int8 activations carry ~2 decimal digits.
      if (k.act != GgmlType::f32) {
        EXPECT_LT(act_err, 0.05 * mag + 1e-6);
      }
    }
  }
}

TEST(VecDot, FourTokenVariantEqualsFourSingleDotsBitwise) {
  std::mt19937 rng(21);
  int checked = 0;
  for (GgmlType t : matvec_weight_types()) {
    for (Isa isa : simd_isas()) {
      const MatvecKernel& k = matvec_kernel(t, isa);
      if (k.vec_dot_x4 == nullptr) continue;
      for (int64_t n : lengths(t)) {
        SCOPED_TRACE(label(t, isa, n, Fill::kRandomBits));
        const std::vector<uint8_t> w = test::make_weights(t, 1, n, Fill::kRandomBits, rng);
        const size_t row = k.act_row_bytes(n) + 8;  // a padded stride: rows need not be adjacent
        std::vector<uint8_t> xq(4 * row);
        for (int r = 0; r < 4; ++r) {
          k.quantize_act(test::random_floats(n, rng).data(), xq.data() + r * row, n);
        }
        float out[4];
        k.vec_dot_x4(n, w.data(), xq.data(), row, out);
        for (int r = 0; r < 4; ++r) {
          EXPECT_EQ(out[r], k.vec_dot(n, w.data(), xq.data() + r * row)) << "token " << r;
        }
        ++checked;
      }
    }
  }
  if (!simd_isas().empty()) {
    EXPECT_GE(checked, 8);  // q4_0 q4_1 q5_0 q5_1 q8_0 q4_k q5_k q6_k have 4-token variants
  }
}

TEST(VecDot, ManyRowVariantEqualsSingleDotsBitwise) {
  std::mt19937 rng(22);
  int checked = 0;
  for (GgmlType t : matvec_weight_types()) {
    for (Isa isa : simd_isas()) {
      const MatvecKernel& k = matvec_kernel(t, isa);
      if (k.vec_dot_rows == nullptr) continue;
      const int64_t be = k.block_elems;
      // Blocks per row: odd counts (a lone last block), partial and whole 16-block groups.
      for (int64_t nb : {1, 2, 3, 7, 15, 16, 17, 18, 33, 48, 520}) {  // 520: > 512 blocks
        const int64_t n = nb * be;
        for (int64_t n_rows : {1, 3, 4, 5, 9}) {
          for (Fill fill : {Fill::kRandomBits, Fill::kQuantised}) {
            SCOPED_TRACE(label(t, isa, n, fill) + " rows=" + std::to_string(n_rows));
            const size_t row = row_bytes(t, n);
            const size_t stride = row + 6;  // a padded stride: rows need not be adjacent
            const std::vector<uint8_t> packed = test::make_weights(t, n_rows, n, fill, rng);
            std::vector<uint8_t> w(stride * size_t(n_rows - 1) + row);  // ends at the last row
            for (int64_t r = 0; r < n_rows; ++r) {
              std::memcpy(w.data() + size_t(r) * stride, packed.data() + size_t(r) * row, row);
            }
            std::vector<uint8_t> xq(k.act_row_bytes(n));
            k.quantize_act(test::random_floats(n, rng).data(), xq.data(), n);
            std::vector<float> out(static_cast<size_t>(n_rows));
            k.vec_dot_rows(n, w.data(), stride, n_rows, xq.data(), out.data());
            for (int64_t r = 0; r < n_rows; ++r) {
              EXPECT_EQ(out[size_t(r)], k.vec_dot(n, w.data() + size_t(r) * stride, xq.data()))
                  << "row " << r;
            }
            ++checked;
          }
        }
      }
    }
  }
  if (isa_supported(Isa::avx512)) {
    EXPECT_GE(checked, 5 * 10 * 5 * 2);  // q4_0 q4_1 q5_0 q5_1 q8_0 have many-row variants
  }
}

}  // namespace
}  // namespace fish
