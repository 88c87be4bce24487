// Scalar references of the element-wise and attention ops, and the dispatchers (ops.h).
#include "kernels/ops.h"

#include <cassert>
#include <cmath>
#include <vector>

#include "kernels/vec_dot.h"

namespace fish {
namespace {

struct OpsTable {
  VecDotFn dot_f32;
  void (*axpy)(int64_t n, float a, const float* x, float* y);
  void (*silu_mul)(const float*, const float*, float*, int64_t);
  void (*gelu_tanh_mul)(const float*, const float*, float*, int64_t);
  void (*softmax)(float*, int64_t);
  // Whole heads at once where the ISA has it (bitwise attend_heads with the fields above).
  bool (*attend)(const float*, const float*, const float*, const AttentionShape&, int64_t, int64_t,
                 float, float*, float*, int64_t, int64_t) = nullptr;
};

void axpy_ref(int64_t n, float a, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

const OpsTable& ops() {
  static const OpsTable t = [] {
    switch (best_isa()) {
      case Isa::avx512:
        return OpsTable{vec_dot_f32_f32_avx512, axpy_avx512,    silu_mul_avx512,
                        gelu_tanh_mul_avx512,   softmax_avx512, attend_heads_avx512};
      case Isa::avx2:
        return OpsTable{vec_dot_f32_f32_avx2, axpy_avx2, silu_mul_avx2, gelu_tanh_mul_avx2,
                        softmax_avx2};
      case Isa::scalar:
        break;
    }
    return OpsTable{vec_dot_f32_f32_ref, axpy_ref, silu_mul_ref, gelu_tanh_mul_ref, softmax_ref};
  }();
  return t;
}

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluCoefA = 0.044715f;

}  // namespace

// ---- rmsnorm ----

void rmsnorm_ref(const float* x, const float* w, float* y, int64_t n, float eps) {
  double ss = 0.0;  // f64: the reference should not depend on summation order
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
  const float r = float(1.0 / std::sqrt(ss / double(n) + double(eps)));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r * (w ? w[i] : 1.0f);
}

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  const float ss = ops().dot_f32(n, x, x);
  const float r = 1.0f / std::sqrt(ss / float(n) + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r * w[i];  // vectorised by the compiler
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r;
  }
}

// ---- rope ----

void rope_ref(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
              float freq_base, RopeStyle style, float freq_scale) {
  assert(n_rot % 2 == 0 && n_rot <= head_dim);
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < n_rot / 2; ++i) {
      const double theta = double(pos) * double(freq_scale) *
                           std::pow(double(freq_base), -2.0 * double(i) / double(n_rot));
      const float c = float(std::cos(theta)), s = float(std::sin(theta));
      const int64_t a = style == RopeStyle::normal ? 2 * i : i;
      const int64_t b = style == RopeStyle::normal ? 2 * i + 1 : i + n_rot / 2;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base,
          RopeStyle style, float freq_scale) {
  assert(n_rot % 2 == 0 && n_rot <= head_dim);
  // The angles depend on the pair only: compute them once for all heads (ggml computes theta
  // by repeated multiplication; FISH uses pow per pair in f64, same as the reference).
  thread_local std::vector<float> cs;
  cs.resize(size_t(n_rot));
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double theta = double(pos) * double(freq_scale) *
                         std::pow(double(freq_base), -2.0 * double(i) / double(n_rot));
    cs[size_t(2 * i)] = float(std::cos(theta));
    cs[size_t(2 * i + 1)] = float(std::sin(theta));
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < n_rot / 2; ++i) {
      const float c = cs[size_t(2 * i)], s = cs[size_t(2 * i + 1)];
      const int64_t a = style == RopeStyle::normal ? 2 * i : i;
      const int64_t b = style == RopeStyle::normal ? 2 * i + 1 : i + n_rot / 2;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

// ---- softmax, activations ----

void softmax_ref(float* x, int64_t n) {
  assert(n >= 1);
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::fmax(mx, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}
void softmax(float* x, int64_t n) {
  ops().softmax(x, n);
}

void silu_mul_ref(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}
void silu_mul(const float* gate, const float* up, float* y, int64_t n) {
  ops().silu_mul(gate, up, y, n);
}

void gelu_tanh_mul_ref(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    y[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + kGeluCoefA * g * g))) * up[i];
  }
}
void gelu_tanh_mul(const float* gate, const float* up, float* y, int64_t n) {
  ops().gelu_tanh_mul(gate, up, y, n);
}

// Plain loops: the compiler vectorises them at the baseline ISA (SSE2), and they are
// bandwidth-bound anyway.
void add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
void mul(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
void scale(const float* x, float s, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = s * x[i];
}

// ---- attention ----

namespace {
template <typename Dot, typename Axpy, typename Softmax>
void attend_heads(const float* q, const float* k, const float* v, const AttentionShape& s,
                  int64_t kv_begin, int64_t kv_end, float scale_qk, float* out, float* scratch,
                  int64_t h_begin, int64_t h_end, Dot dot, Axpy axpy, Softmax softmax_fn) {
  const int64_t n_kv = kv_end - kv_begin;
  const int64_t group = s.n_head / s.n_kv_head;
  // Rows wrap at `rows`; without a ring no row reaches kv_end, so the wrap never happens.
  const int64_t rows = s.kv_rows > 0 ? s.kv_rows : kv_end;
  const int64_t row0 = kv_begin % rows;
  for (int64_t h = h_begin; h < h_end; ++h) {
    const float* qh = q + h * s.head_dim;
    const int64_t g = h / group;
    float* scores = scratch + h * n_kv;
    for (int64_t p = 0, r = row0; p < n_kv; ++p, r = r + 1 == rows ? 0 : r + 1) {
      scores[p] = scale_qk * dot(s.head_dim, qh, k + r * s.kv_stride + g * s.head_dim);
    }
    softmax_fn(scores, n_kv);
    float* oh = out + h * s.head_dim;
    for (int64_t d = 0; d < s.head_dim; ++d) oh[d] = 0.0f;
    for (int64_t p = 0, r = row0; p < n_kv; ++p, r = r + 1 == rows ? 0 : r + 1) {
      axpy(s.head_dim, scores[p], v + r * s.kv_stride + g * s.head_dim, oh);
    }
  }
}
}  // namespace

void attention_one_query_ref(const float* q, const float* k, const float* v,
                             const AttentionShape& s, int64_t kv_begin, int64_t kv_end,
                             float scale_qk, float* out, float* scratch) {
  assert(s.n_kv_head > 0 && s.n_head % s.n_kv_head == 0 && kv_end > kv_begin);
  assert(s.kv_rows == 0 || kv_end - kv_begin <= s.kv_rows);
  attend_heads(
      q, k, v, s, kv_begin, kv_end, scale_qk, out, scratch, 0, s.n_head,
      [](int64_t n, const float* a, const float* b) { return vec_dot_f32_f32_ref(n, a, b); },
      axpy_ref, softmax_ref);
}

void attention_one_query(const float* q, const float* k, const float* v, const AttentionShape& s,
                         int64_t kv_begin, int64_t kv_end, float scale_qk, float* out,
                         float* scratch, ThreadPool* pool) {
  assert(s.n_kv_head > 0 && s.n_head % s.n_kv_head == 0 && kv_end > kv_begin);
  assert(s.kv_rows == 0 || kv_end - kv_begin <= s.kv_rows);
  const OpsTable& t = ops();
  auto heads = [&](int64_t hb, int64_t he, int) {
    if (t.attend != nullptr &&
        t.attend(q, k, v, s, kv_begin, kv_end, scale_qk, out, scratch, hb, he)) {
      return;
    }
    attend_heads(
        q, k, v, s, kv_begin, kv_end, scale_qk, out, scratch, hb, he,
        [&t](int64_t n, const float* a, const float* b) { return t.dot_f32(n, a, b); }, t.axpy,
        t.softmax);
  };
  if (pool != nullptr && s.n_head > 1 && (kv_end - kv_begin) * s.head_dim >= 4096) {
    pool->parallel_for(s.n_head, heads);
  } else {
    heads(0, s.n_head, 0);
  }
}

}  // namespace fish
