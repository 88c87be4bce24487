// matmul: against a naive loop of scalar reference dots, for every weight type, several token
// counts and odd n_out; and bitwise independence from the thread count (kernels/matmul.h).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/matmul.h"

namespace fish {
namespace {

struct Problem {
  GgmlType t;
  int64_t n_out, n_in, n_tok;
  std::vector<uint8_t> w;
  std::vector<float> x;
};

Problem make_problem(GgmlType t, int64_t n_out, int64_t n_tok, std::mt19937& rng) {
  const int64_t be = matvec_kernel(t, Isa::scalar).block_elems;
  const int64_t n_in = be == 1 ? 515 : 2 * 256;  // odd for float types: SIMD tails in every row
  Problem p{t,
            n_out,
            n_in,
            n_tok,
            test::make_weights(t, n_out, n_in, test::Fill::kQuantised, rng),
            test::random_floats(n_in * n_tok, rng)};
  return p;
}

// y[t][o] by the scalar reference kernel, one dot at a time.
std::vector<float> naive(const Problem& p) {
  const MatvecKernel& k = matvec_kernel(p.t, Isa::scalar);
  const size_t xrow = k.act_row_bytes(p.n_in), wrow = row_bytes(p.t, p.n_in);
  std::vector<uint8_t> xq(xrow * size_t(p.n_tok));
  for (int64_t t = 0; t < p.n_tok; ++t) {
    if (k.quantize_act) {
      k.quantize_act(p.x.data() + t * p.n_in, xq.data() + size_t(t) * xrow, p.n_in);
    } else {
      std::memcpy(xq.data() + size_t(t) * xrow, p.x.data() + t * p.n_in, xrow);
    }
  }
  std::vector<float> y(static_cast<size_t>(p.n_out * p.n_tok));
  for (int64_t t = 0; t < p.n_tok; ++t) {
    for (int64_t o = 0; o < p.n_out; ++o) {
      y[size_t(t * p.n_out + o)] =
          k.vec_dot(p.n_in, p.w.data() + size_t(o) * wrow, xq.data() + size_t(t) * xrow);
    }
  }
  return y;
}

std::vector<float> run(const Problem& p, ThreadPool& pool, Isa isa) {
  std::vector<float> y(size_t(p.n_out * p.n_tok), -1.0f);
  matmul(p.w.data(), p.t, p.n_out, p.n_in, p.x.data(), p.n_tok, y.data(), pool, isa);
  return y;
}

TEST(Matmul, ScalarPathEqualsNaiveLoopBitwise) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  for (GgmlType t : matvec_weight_types()) {
    for (int64_t n_tok : {1, 3, 37}) {
      SCOPED_TRACE(std::string(type_name(t)) + " n_tok=" + std::to_string(n_tok));
      const Problem p = make_problem(t, 67, n_tok, rng);
      EXPECT_EQ(run(p, pool, Isa::scalar), naive(p));
    }
  }
}

TEST(Matmul, BestIsaMatchesNaiveLoopWithinSummationError) {
  std::mt19937 rng(6);
  ThreadPool pool(2);
  for (GgmlType t : matvec_weight_types()) {
    for (int64_t n_tok : {1, 3, 37}) {
      SCOPED_TRACE(std::string(type_name(t)) + " n_tok=" + std::to_string(n_tok) + " " +
                   std::string(isa_name(matvec_kernel(t).isa)));
      const Problem p = make_problem(t, 67, n_tok, rng);
      const std::vector<float> want = naive(p);
      const std::vector<float> got = run(p, pool, best_isa());
      const MatvecKernel& k = matvec_kernel(t);
      const std::vector<float> wd_all = test::dequantize(t, p.w.data(), p.n_in * p.n_out);
      for (int64_t tok = 0; tok < p.n_tok; ++tok) {
        const std::vector<float> x(p.x.begin() + tok * p.n_in, p.x.begin() + (tok + 1) * p.n_in);
        for (int64_t o = 0; o < p.n_out; ++o) {
          const std::vector<float> wd(wd_all.begin() + o * p.n_in,
                                      wd_all.begin() + (o + 1) * p.n_in);
          // Activations are bit-identical (quantisers are exact); only summation order differs.
          // Magnitude with the f32 x is within 1% of that with the dequantised x.
          const double mag = 1.05 * test::dot_magnitude(t, wd, x);
          const int64_t roundings = k.block_elems == 1 ? p.n_in : 4 * (p.n_in / k.block_elems);
          ASSERT_NEAR(got[size_t(tok * p.n_out + o)], want[size_t(tok * p.n_out + o)],
                      test::summation_bound(roundings, mag))
              << "tok " << tok << " row " << o;
        }
      }
    }
  }
}

TEST(Matmul, ResultsAreBitwiseIdenticalForOneTwoAndThreeThreads) {
  std::mt19937 rng(8);
  ThreadPool p1(1), p2(2), p3(3);
  for (GgmlType t : {GgmlType::q4_1, GgmlType::q8_0, GgmlType::q5_0, GgmlType::q4_k, GgmlType::q6_k,
                     GgmlType::f32, GgmlType::f16}) {
    for (int64_t n_tok : {1, 37}) {
      SCOPED_TRACE(std::string(type_name(t)) + " n_tok=" + std::to_string(n_tok));
      const Problem p = make_problem(t, 101, n_tok, rng);
      const std::vector<float> y1 = run(p, p1, best_isa());
      EXPECT_EQ(run(p, p2, best_isa()), y1);
      EXPECT_EQ(run(p, p3, best_isa()), y1);
    }
  }
}

TEST(Matmul, PreQuantisedActivationsGiveTheSameResult) {
  std::mt19937 rng(9);
  ThreadPool pool(3);
  for (GgmlType t : {GgmlType::q4_1, GgmlType::q4_k, GgmlType::f16}) {
    SCOPED_TRACE(std::string(type_name(t)));
    const Problem p = make_problem(t, 33, 5, rng);
    const MatvecKernel& k = matvec_kernel(t);
    std::vector<uint8_t> xq(k.act_row_bytes(p.n_in) * size_t(p.n_tok));
    quantize_activations(k, p.x.data(), p.n_tok, p.n_in, xq.data(), pool);
    std::vector<float> y(static_cast<size_t>(p.n_out * p.n_tok));
    matmul_preq(k, p.w.data(), p.n_out, p.n_in, xq.data(), p.n_tok, y.data(), pool);
    EXPECT_EQ(y, run(p, pool, best_isa()));
  }
}

TEST(Matmul, SingleOutputRowAndMoreThreadsThanRows) {
  std::mt19937 rng(10);
  ThreadPool pool(3);
  for (int64_t n_out : {1, 2}) {
    const Problem p = make_problem(GgmlType::q8_0, n_out, 3, rng);
    EXPECT_EQ(run(p, pool, Isa::scalar), naive(p));
  }
}

}  // namespace
}  // namespace fish
