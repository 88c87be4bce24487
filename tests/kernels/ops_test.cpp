// Element-wise ops and attention against naive f64 formulas and their scalar references
// (kernels/ops.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/ops.h"
#include "kernels/vec_dot.h"

namespace fish {
namespace {

using test::random_floats;

TEST(Ops, RmsnormMatchesNaiveFormula) {
  std::mt19937 rng(1);
  for (int64_t n : {1, 7, 64, 577, 2048}) {
    const std::vector<float> x = random_floats(n, rng, 2.0f), w = random_floats(n, rng);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double r = 1.0 / std::sqrt(ss / double(n) + 1e-6);
    std::vector<float> y(x.size()), y_ref(x.size()), y_nw(x.size());
    rmsnorm(x.data(), w.data(), y.data(), n, 1e-6f);
    rmsnorm_ref(x.data(), w.data(), y_ref.data(), n, 1e-6f);
    rmsnorm(x.data(), nullptr, y_nw.data(), n, 1e-6f);
    for (int64_t i = 0; i < n; ++i) {
      const double want = double(x[size_t(i)]) * r * w[size_t(i)];
      EXPECT_NEAR(y[size_t(i)], want, 1e-5 * std::fabs(want) + 1e-7) << n << " " << i;
      EXPECT_NEAR(y_ref[size_t(i)], want, 1e-6 * std::fabs(want) + 1e-7);
      EXPECT_NEAR(y_nw[size_t(i)], double(x[size_t(i)]) * r,
                  1e-5 * std::fabs(x[size_t(i)] * r) + 1e-7);
    }
  }
}

TEST(Ops, RmsnormInPlace) {
  std::mt19937 rng(2);
  std::vector<float> x = random_floats(100, rng), y(100);
  rmsnorm(x.data(), nullptr, y.data(), 100, 1e-5f);
  rmsnorm(x.data(), nullptr, x.data(), 100, 1e-5f);
  EXPECT_EQ(x, y);
}

// Naive rotation in f64 for one vector.
std::vector<double> rope_naive(const std::vector<float>& v, int64_t n_rot, int64_t pos, double base,
                               RopeStyle style) {
  std::vector<double> out(v.begin(), v.end());
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double th = double(pos) * std::pow(base, -2.0 * double(i) / double(n_rot));
    const int64_t a = style == RopeStyle::normal ? 2 * i : i;
    const int64_t b = style == RopeStyle::normal ? 2 * i + 1 : i + n_rot / 2;
    out[size_t(a)] = v[size_t(a)] * std::cos(th) - v[size_t(b)] * std::sin(th);
    out[size_t(b)] = v[size_t(a)] * std::sin(th) + v[size_t(b)] * std::cos(th);
  }
  return out;
}

TEST(Ops, RopeRotatesAdjacentPairsOrHalvesLikeTheNaiveFormula) {
  std::mt19937 rng(3);
  const int64_t n_heads = 3, head_dim = 64;
  for (RopeStyle style : {RopeStyle::normal, RopeStyle::neox}) {
    for (int64_t pos : {0, 1, 17, 4095}) {
      for (int64_t n_rot : {64, 32}) {  // 32 < head_dim: the tail dims stay untouched
        const std::vector<float> x0 = random_floats(n_heads * head_dim, rng);
        std::vector<float> x = x0, x_ref = x0;
        rope(x.data(), n_heads, head_dim, n_rot, pos, 10000.0f, style);
        rope_ref(x_ref.data(), n_heads, head_dim, n_rot, pos, 10000.0f, style);
        EXPECT_EQ(x, x_ref);
        for (int64_t h = 0; h < n_heads; ++h) {
          const std::vector<float> head(x0.begin() + h * head_dim, x0.begin() + (h + 1) * head_dim);
          const std::vector<double> want = rope_naive(head, n_rot, pos, 10000.0, style);
          for (int64_t d = 0; d < head_dim; ++d) {
            EXPECT_NEAR(x[size_t(h * head_dim + d)], want[size_t(d)],
                        2e-6 * (1 + std::fabs(want[size_t(d)])))
                << (style == RopeStyle::normal ? "normal" : "neox") << " pos " << pos << " n_rot "
                << n_rot << " head " << h << " dim " << d;
          }
        }
      }
    }
  }
}

TEST(Ops, RopeNormalAndNeoxDifferForTheSameInput) {
  std::vector<float> a(8), b(8);
  for (int i = 0; i < 8; ++i) a[size_t(i)] = b[size_t(i)] = float(i + 1);
  rope(a.data(), 1, 8, 8, 3, 10000.0f, RopeStyle::normal);
  rope(b.data(), 1, 8, 8, 3, 10000.0f, RopeStyle::neox);
  EXPECT_NE(a, b);
  // Pair 0 is (0,1) in normal mode and (0,4) in neox mode, both with angle 3 rad.
  EXPECT_NEAR(a[0], 1 * std::cos(3.0) - 2 * std::sin(3.0), 1e-6);
  EXPECT_NEAR(b[0], 1 * std::cos(3.0) - 5 * std::sin(3.0), 1e-6);
}

TEST(Ops, SoftmaxMatchesNaiveAndSumsToOne) {
  std::mt19937 rng(4);
  for (int64_t n : {1, 2, 7, 16, 33, 1000}) {
    std::vector<float> x = random_floats(n, rng, 5.0f), x_ref = x;
    const std::vector<float> x0 = x;
    x[0] += 30.0f;  // a dominant entry: the max subtraction must keep exp finite
    x_ref[0] += 30.0f;
    std::vector<float> in = x;
    softmax(x.data(), n);
    softmax_ref(x_ref.data(), n);
    double mx = in[0];
    for (float v : in) mx = std::fmax(mx, double(v));
    double sum = 0;
    for (float v : in) sum += std::exp(double(v) - mx);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(double(in[size_t(i)]) - mx) / sum;
      EXPECT_NEAR(x[size_t(i)], want, 1e-6 * want + 1e-12) << n << " " << i;
      EXPECT_NEAR(x_ref[size_t(i)], want, 1e-6 * want + 1e-12);
      total += x[size_t(i)];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(Ops, SiluMulAndGeluTanhMulMatchNaiveFormulas) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 7, 8, 17, 64, 1001}) {
    std::vector<float> g = random_floats(n, rng, 4.0f), u = random_floats(n, rng);
    if (n > 4) {
      g[0] = -100.0f;  // exp overflow side
      g[1] = 100.0f;
      g[2] = 0.0f;
      g[3] = 1e-6f;
    }
    std::vector<float> ys(static_cast<size_t>(n)), ys_ref(ys), yg(ys), yg_ref(ys);
    silu_mul(g.data(), u.data(), ys.data(), n);
    silu_mul_ref(g.data(), u.data(), ys_ref.data(), n);
    gelu_tanh_mul(g.data(), u.data(), yg.data(), n);
    gelu_tanh_mul_ref(g.data(), u.data(), yg_ref.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double gi = g[size_t(i)], ui = u[size_t(i)];
      const double silu = gi / (1.0 + std::exp(-gi)) * ui;
      const double gelu =
          0.5 * gi * (1.0 + std::tanh(0.7978845608028654 * (gi + 0.044715 * gi * gi * gi))) * ui;
      const double tol = 2e-6 * std::fabs(gi * ui) + 1e-30;
      EXPECT_NEAR(ys[size_t(i)], silu, tol) << "silu n " << n << " g " << gi;
      EXPECT_NEAR(ys_ref[size_t(i)], silu, tol);
      EXPECT_NEAR(yg[size_t(i)], gelu, tol) << "gelu n " << n << " g " << gi;
      EXPECT_NEAR(yg_ref[size_t(i)], gelu, tol);
    }
  }
}

TEST(Ops, AddMulScale) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8, 9}, b = {9, 8, 7, 6, 5, 4, 3, 2, 1};
  std::vector<float> y(9);
  add(a.data(), b.data(), y.data(), 9);
  EXPECT_EQ(y, std::vector<float>(9, 10.0f));
  mul(a.data(), b.data(), y.data(), 9);
  EXPECT_EQ(y, (std::vector<float>{9, 16, 21, 24, 25, 24, 21, 16, 9}));
  scale(a.data(), 0.5f, y.data(), 9);
  EXPECT_EQ(y, (std::vector<float>{0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5}));
}

// Naive attention in f64 for query head h.
std::vector<double> attention_naive(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, const AttentionShape& s,
                                    int64_t kv_begin, int64_t kv_end, double scale_qk, int64_t h) {
  const int64_t g = h / (s.n_head / s.n_kv_head);
  std::vector<double> sc;
  for (int64_t p = kv_begin; p < kv_end; ++p) {
    double d = 0;
    for (int64_t i = 0; i < s.head_dim; ++i) {
      d += double(q[size_t(h * s.head_dim + i)]) * k[size_t(p * s.kv_stride + g * s.head_dim + i)];
    }
    sc.push_back(d * scale_qk);
  }
  double mx = sc[0], sum = 0;
  for (double x : sc) mx = std::fmax(mx, x);
  for (double& x : sc) sum += (x = std::exp(x - mx));
  std::vector<double> out(size_t(s.head_dim), 0.0);
  for (int64_t p = kv_begin; p < kv_end; ++p) {
    for (int64_t i = 0; i < s.head_dim; ++i) {
      out[size_t(i)] +=
          sc[size_t(p - kv_begin)] / sum * v[size_t(p * s.kv_stride + g * s.head_dim + i)];
    }
  }
  return out;
}

TEST(Ops, AttentionWithGroupedQueryHeadsMatchesNaive) {
  std::mt19937 rng(6);
  ThreadPool pool(3);
  struct Case {
    AttentionShape s;
    int64_t kv_begin, kv_end;
  };
  // SmolLM2 (9 heads / 3 KV, dim 64), Gemma 3 (4 / 1, dim 256, a sliding window), MHA, padding
  // in the cache row (kv_stride > n_kv_head * head_dim).
  const Case cases[] = {{{9, 3, 64, 192}, 0, 1},
                        {{9, 3, 64, 192}, 0, 37},
                        {{4, 1, 256, 256}, 5, 70},
                        {{2, 2, 16, 40}, 0, 300},
                        {{8, 2, 64, 128}, 0, 200}};
  for (const Case& c : cases) {
    const int64_t n_ctx = c.kv_end + 2;
    const std::vector<float> q = random_floats(c.s.n_head * c.s.head_dim, rng);
    const std::vector<float> k = random_floats(n_ctx * c.s.kv_stride, rng);
    const std::vector<float> v = random_floats(n_ctx * c.s.kv_stride, rng);
    const float scale_qk = 1.0f / std::sqrt(float(c.s.head_dim));
    const size_t n_out = size_t(c.s.n_head * c.s.head_dim);
    std::vector<float> out(n_out), out_ref(n_out), out_1t(n_out);
    std::vector<float> scratch(size_t(c.s.n_head * (c.kv_end - c.kv_begin)));
    attention_one_query(q.data(), k.data(), v.data(), c.s, c.kv_begin, c.kv_end, scale_qk,
                        out.data(), scratch.data(), &pool);
    attention_one_query(q.data(), k.data(), v.data(), c.s, c.kv_begin, c.kv_end, scale_qk,
                        out_1t.data(), scratch.data(), nullptr);
    attention_one_query_ref(q.data(), k.data(), v.data(), c.s, c.kv_begin, c.kv_end, scale_qk,
                            out_ref.data(), scratch.data());
    EXPECT_EQ(out, out_1t);  // head split does not change numerics
    for (int64_t h = 0; h < c.s.n_head; ++h) {
      const std::vector<double> want =
          attention_naive(q, k, v, c.s, c.kv_begin, c.kv_end, scale_qk, h);
      for (int64_t i = 0; i < c.s.head_dim; ++i) {
        EXPECT_NEAR(out[size_t(h * c.s.head_dim + i)], want[size_t(i)], 2e-5)
            << "heads " << c.s.n_head << "/" << c.s.n_kv_head << " h " << h << " i " << i;
        EXPECT_NEAR(out_ref[size_t(h * c.s.head_dim + i)], want[size_t(i)], 2e-5);
      }
    }
  }
}

// attend_heads_avx512 against the per-position composition it replaces (ops.cpp attend_heads with
// vec_dot_f32_f32_avx512, softmax_avx512 and axpy_avx512): bitwise, for head ranges that split
// KV groups, runs of 1-4 heads, every supported head_dim, odd position counts.
TEST(Ops, Avx512AttentionEqualsPerPositionDotSoftmaxAxpyBitwise) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(7);
  struct Case {
    AttentionShape s;
    int64_t kv_begin, kv_end, h_begin, h_end;
  };
  const Case cases[] = {{{9, 3, 64, 192}, 0, 1, 0, 9},   {{9, 3, 64, 192}, 3, 40, 0, 4},
                        {{9, 3, 64, 192}, 0, 33, 4, 9},  {{8, 1, 64, 72}, 2, 19, 0, 8},
                        {{6, 2, 128, 300}, 0, 17, 1, 6}, {{4, 1, 256, 256}, 5, 70, 0, 4},
                        {{4, 1, 256, 256}, 0, 3, 1, 3},  {{5, 5, 128, 640}, 1, 12, 0, 5}};
  for (const Case& c : cases) {
    SCOPED_TRACE("heads " + std::to_string(c.s.n_head) + "/" + std::to_string(c.s.n_kv_head) +
                 " dim " + std::to_string(c.s.head_dim) + " kv [" + std::to_string(c.kv_begin) +
                 "," + std::to_string(c.kv_end) + ") heads [" + std::to_string(c.h_begin) + "," +
                 std::to_string(c.h_end) + ")");
    const int64_t n_ctx = c.kv_end + 1, n_kv = c.kv_end - c.kv_begin, hd = c.s.head_dim;
    const std::vector<float> q = random_floats(c.s.n_head * hd, rng);
    const std::vector<float> k = random_floats(n_ctx * c.s.kv_stride, rng);
    const std::vector<float> v = random_floats(n_ctx * c.s.kv_stride, rng);
    const float scale_qk = 1.0f / std::sqrt(float(hd));
    const size_t n_out = size_t(c.s.n_head * hd);
    std::vector<float> out(n_out, -1.0f), want(n_out, -1.0f);
    std::vector<float> scratch(static_cast<size_t>(c.s.n_head * n_kv));
    std::vector<float> scores(static_cast<size_t>(n_kv));
    ASSERT_TRUE(attend_heads_avx512(q.data(), k.data(), v.data(), c.s, c.kv_begin, c.kv_end,
                                    scale_qk, out.data(), scratch.data(), c.h_begin, c.h_end));
    const int64_t group = c.s.n_head / c.s.n_kv_head;
    for (int64_t h = c.h_begin; h < c.h_end; ++h) {
      const int64_t g = h / group;
      for (int64_t p = 0; p < n_kv; ++p) {
        scores[size_t(p)] =
            scale_qk * vec_dot_f32_f32_avx512(hd, q.data() + h * hd,
                                              k.data() + (c.kv_begin + p) * c.s.kv_stride + g * hd);
      }
      softmax_avx512(scores.data(), n_kv);
      float* oh = want.data() + h * hd;
      std::fill(oh, oh + hd, 0.0f);
      for (int64_t p = 0; p < n_kv; ++p) {
        axpy_avx512(hd, scores[size_t(p)], v.data() + (c.kv_begin + p) * c.s.kv_stride + g * hd,
                    oh);
      }
    }
    EXPECT_EQ(out, want);  // heads outside [h_begin, h_end) untouched (-1) in both
  }
  AttentionShape odd{2, 1, 48, 48};
  std::vector<float> x(1000);
  EXPECT_FALSE(
      attend_heads_avx512(x.data(), x.data(), x.data(), odd, 0, 2, 1.0f, x.data(), x.data(), 0, 2));
}

// A ring cache (position p at row p % kv_rows, as a sliding-window layer keeps it) attends
// bit-identically to the same positions stored linearly: same rows, same order, same sums.
TEST(Ops, AttentionOverARingCacheEqualsTheLinearCache) {
  std::mt19937 rng(7);
  ThreadPool pool(3);
  struct Case {
    AttentionShape s;  // kv_rows set: the ring
    int64_t kv_begin, kv_end;
  };
  // The window wraps the ring, ends exactly at its last row, lies inside it, and fills it.
  const Case cases[] = {{{4, 1, 256, 256, 23}, 30, 47},
                        {{4, 1, 256, 256, 23}, 5, 23},
                        {{9, 3, 64, 200, 17}, 40, 41},
                        {{2, 2, 16, 40, 61}, 100, 161},
                        {{8, 2, 64, 128, 9}, 1000, 1007}};
  for (const Case& c : cases) {
    AttentionShape lin = c.s;
    lin.kv_rows = 0;
    const int64_t n_ctx = c.kv_end + 3;
    const std::vector<float> q = random_floats(c.s.n_head * c.s.head_dim, rng);
    const std::vector<float> k = random_floats(n_ctx * c.s.kv_stride, rng);
    const std::vector<float> v = random_floats(n_ctx * c.s.kv_stride, rng);
    // The ring holds the last kv_rows positions before kv_end.
    std::vector<float> kr(size_t(c.s.kv_rows * c.s.kv_stride)), vr(kr.size());
    for (int64_t p = std::max<int64_t>(0, c.kv_end - c.s.kv_rows); p < c.kv_end; ++p) {
      const size_t src = size_t(p * c.s.kv_stride), dst = size_t(p % c.s.kv_rows * c.s.kv_stride);
      std::copy_n(k.begin() + long(src), c.s.kv_stride, kr.begin() + long(dst));
      std::copy_n(v.begin() + long(src), c.s.kv_stride, vr.begin() + long(dst));
    }
    const float scale_qk = 1.0f / std::sqrt(float(c.s.head_dim));
    const size_t n_out = size_t(c.s.n_head * c.s.head_dim);
    std::vector<float> want(n_out), got(n_out), want_ref(n_out), got_ref(n_out);
    std::vector<float> scratch(size_t(c.s.n_head * (c.kv_end - c.kv_begin)));
    attention_one_query(q.data(), k.data(), v.data(), lin, c.kv_begin, c.kv_end, scale_qk,
                        want.data(), scratch.data(), &pool);
    attention_one_query(q.data(), kr.data(), vr.data(), c.s, c.kv_begin, c.kv_end, scale_qk,
                        got.data(), scratch.data(), &pool);
    attention_one_query_ref(q.data(), k.data(), v.data(), lin, c.kv_begin, c.kv_end, scale_qk,
                            want_ref.data(), scratch.data());
    attention_one_query_ref(q.data(), kr.data(), vr.data(), c.s, c.kv_begin, c.kv_end, scale_qk,
                            got_ref.data(), scratch.data());
    EXPECT_EQ(got, want) << "rows " << c.s.kv_rows << " [" << c.kv_begin << ", " << c.kv_end << ")";
    EXPECT_EQ(got_ref, want_ref) << "rows " << c.s.kv_rows;
  }
}

TEST(Ops, EverySimdVariantMatchesTheScalarReference) {
  struct Variant {
    Isa isa;
    void (*silu)(const float*, const float*, float*, int64_t);
    void (*gelu)(const float*, const float*, float*, int64_t);
    void (*softmax)(float*, int64_t);
    void (*axpy)(int64_t, float, const float*, float*);
  };
  const Variant variants[] = {
      {Isa::avx2, silu_mul_avx2, gelu_tanh_mul_avx2, softmax_avx2, axpy_avx2},
      {Isa::avx512, silu_mul_avx512, gelu_tanh_mul_avx512, softmax_avx512, axpy_avx512}};
  std::mt19937 rng(11);
  for (const Variant& v : variants) {
    if (!isa_supported(v.isa)) continue;
    for (int64_t n : {1, 5, 8, 16, 31, 100, 2051}) {
      SCOPED_TRACE(std::string(isa_name(v.isa)) + " n=" + std::to_string(n));
      const std::vector<float> g = random_floats(n, rng, 6.0f), u = random_floats(n, rng);
      std::vector<float> a(static_cast<size_t>(n)), b(a);
      v.silu(g.data(), u.data(), a.data(), n);
      silu_mul_ref(g.data(), u.data(), b.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(a[size_t(i)], b[size_t(i)],
                    1e-6 * std::fabs(g[size_t(i)] * u[size_t(i)]) + 1e-30);
      }
      v.gelu(g.data(), u.data(), a.data(), n);
      gelu_tanh_mul_ref(g.data(), u.data(), b.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(a[size_t(i)], b[size_t(i)],
                    1e-6 * std::fabs(g[size_t(i)] * u[size_t(i)]) + 1e-30);
      }
      a = g;
      b = g;
      v.softmax(a.data(), n);
      softmax_ref(b.data(), n);
      for (int64_t i = 0; i < n; ++i)
        EXPECT_NEAR(a[size_t(i)], b[size_t(i)], 1e-6 * b[size_t(i)] + 1e-30);
      a = u;
      b = u;
      v.axpy(n, 0.37f, g.data(), a.data());
      for (int64_t i = 0; i < n; ++i) b[size_t(i)] += 0.37f * g[size_t(i)];
      for (int64_t i = 0; i < n; ++i)
        EXPECT_NEAR(a[size_t(i)], b[size_t(i)], 1e-6 * (std::fabs(b[size_t(i)]) + 1));
    }
  }
}

}  // namespace
}  // namespace fish
