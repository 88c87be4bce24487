// Helpers of the Vulkan suites: random weights in any type, the CPU f32 reference (weights
// dequantised by the quant/ reference, double accumulation) and the seed's per-element bound.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/gpu_placement.h"
#include "engine/model.h"
#include "engine/synthetic_model.h"
#include "fish_vk_q8.h"
#include "quant/types.h"
#include "test_env.h"

namespace fish::test {

// A placement request of at most max_layers layers (-1: all that fit) with `span` (n_ctx 0: none),
// every upload under the backend's own settings.
inline GpuRequest placement_request(int64_t max_layers, SpanRequest span = {}) {
  GpuRequest r;
  r.max_layers = max_layers;
  r.span = span;
  return r;
}

// Writes a Q4_K_M synthetic model of `shape` under temp_dir() as `file` and loads it; null (with a
// test failure recorded) when either step fails.
inline std::shared_ptr<const Model> synthetic_q4_k_m(const ModelShape& shape,
                                                     const SyntheticModelOptions& opt,
                                                     const std::string& file) {
  const std::string path = (temp_dir() / file).string();
  auto ft = parse_file_type("q4_k_m");
  EXPECT_TRUE(ft.ok());
  const Status s = write_synthetic_model(shape, ft.value(), opt, path);
  EXPECT_TRUE(s.ok()) << s.error().message;
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? m.value() : nullptr;
}

// n_out rows of n_in N(0,1) values through the type's reference quantiser.
inline std::vector<uint8_t> random_weights(GgmlType t, int64_t n_out, int64_t n_in,
                                           std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(size_t(n_in), 0.0f);
  const size_t rb = row_bytes(t, n_in);
  std::vector<uint8_t> w(rb * size_t(n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    for (float& f : row) f = dist(rng);
    type_info(t).quantize_row(row.data(), w.data() + size_t(r) * rb, n_in);
  }
  return w;
}

inline std::vector<float> random_input(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// y[t][r] and the bound 1e-3 * sum_r sum_k |w[r][k] x[t][k]| / n_out per token t.
struct Reference {
  std::vector<double> y;      // n_tok x n_out
  std::vector<double> bound;  // n_tok
};

inline Reference reference_matmul(const MatrixView& w, const float* x, int64_t n_tok) {
  std::vector<float> deq(size_t(w.n_in * w.n_out));
  const size_t rb = row_bytes(w.type, w.n_in);
  for (int64_t r = 0; r < w.n_out; ++r)
    type_info(w.type).dequantize_row(static_cast<const uint8_t*>(w.data) + size_t(r) * rb,
                                     deq.data() + size_t(r * w.n_in), w.n_in);
  Reference ref;
  ref.y.assign(size_t(n_tok * w.n_out), 0.0);
  ref.bound.assign(size_t(n_tok), 0.0);
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* xt = x + t * w.n_in;
    double abs_sum = 0;
    for (int64_t r = 0; r < w.n_out; ++r) {
      const float* wr = deq.data() + size_t(r * w.n_in);
      double s = 0, a = 0;
      for (int64_t k = 0; k < w.n_in; ++k) {
        s += double(wr[k]) * double(xt[k]);
        a += std::fabs(double(wr[k]) * double(xt[k]));
      }
      ref.y[size_t(t * w.n_out + r)] = s;
      abs_sum += a;
    }
    ref.bound[size_t(t)] = 1e-3 * abs_sum / double(w.n_out);
  }
  return ref;
}

// Every element within the bound; reports the first few failures and the worst ratio.
inline void expect_close(const Reference& ref, const std::vector<float>& y, int64_t n_out,
                         const std::string& what) {
  ASSERT_EQ(y.size(), ref.y.size()) << what;
  int failures = 0;
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const size_t t = i / size_t(n_out);
    const double err = std::fabs(double(y[i]) - ref.y[i]);
    worst = std::max(worst, err / ref.bound[t]);
    if (!(err <= ref.bound[t]) && failures++ < 5)
      ADD_FAILURE() << what << ": token " << t << " row " << i % size_t(n_out) << ": gpu " << y[i]
                    << ", reference " << ref.y[i] << ", bound " << ref.bound[t];
  }
  EXPECT_EQ(failures, 0) << what << ": worst error / bound " << worst;
}

// Errors of token t's q8_1 copy (shaders/fish_vk_q8.h, quant_q8_1's rule) at ARENA float q8_off (K
// = n) of the f32 row c: per 32-value block d = amax(c) / 127 (f32 division slack), every code
// within d / 2 of c / d's value (q = round(c / d); a tie may go either way) and s = d * sum q of
// the written codes.
inline int q8_copy_errors(const std::vector<float>& arena, uint32_t q8_off, uint32_t n, uint32_t t,
                          const float* c) {
  const auto* bytes = reinterpret_cast<const int8_t*>(arena.data() + q8_off);
  int bad = 0;
  for (uint32_t b = 0; b < n / FISH_Q8_BLOCK; ++b) {
    const float* ds = arena.data() + q8_off + 2 * (t * FISH_Q8_DS_STRIDE(n) + b);
    float amax = 0;
    for (uint32_t k = 0; k < FISH_Q8_BLOCK; ++k) amax = std::max(amax, std::fabs(c[32 * b + k]));
    bad += !(std::fabs(ds[0] - amax / 127) <= 1e-5f * amax / 127);
    int sum = 0;
    for (uint32_t k = 0; k < FISH_Q8_BLOCK; ++k) {
      const int q = bytes[FISH_Q8_CODES(n) + t * n + 32 * b + k];
      sum += q;
      bad += !(std::fabs(ds[0] * float(q) - c[32 * b + k]) <= ds[0] * (0.5f + 1e-3f));
    }
    bad += !(std::fabs(ds[1] - ds[0] * float(sum)) <= 1e-6f * std::fabs(ds[0]) * 127 * 32);
  }
  return bad;
}

}  // namespace fish::test
