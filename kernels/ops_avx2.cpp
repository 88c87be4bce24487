// AVX2 + FMA variants of the exp-heavy element-wise ops (ops.h) and axpy for attention's V sum.
// exp: Cephes expf range reduction (x = n ln2 + r, |r| <= ln2/2, ln2 split in two constants for
// exactness) and its degree-6 polynomial: ~1-2 ulp over the clamped range [-87.3, 88.4].
#include <cmath>

#include "kernels/ops.h"
#include "kernels/simd_avx2.h"

namespace fish {
namespace {

inline __m256 exp_f32x8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.37626f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n: n in [-126, 127] after the clamp, so the biased exponent is a normal float's.
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline __m256 silu_f32x8(__m256 g) {
  const __m256 e = exp_f32x8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// 0.5 g (1 + tanh(u)) = g - g / (exp(2u) + 1): no cancellation for small u.
inline __m256 gelu_tanh_f32x8(__m256 g) {
  const __m256 u = _mm256_mul_ps(
      _mm256_mul_ps(_mm256_set1_ps(0.79788456080286535588f), g),
      _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), g), g, _mm256_set1_ps(1.0f)));
  const __m256 e = exp_f32x8(_mm256_add_ps(u, u));
  return _mm256_sub_ps(g, _mm256_div_ps(g, _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
}

}  // namespace

void silu_mul_avx2(const float* gate, const float* up, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i,
                     _mm256_mul_ps(silu_f32x8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) y[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void gelu_tanh_mul_avx2(const float* gate, const float* up, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(
        y + i, _mm256_mul_ps(gelu_tanh_f32x8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  }
  gelu_tanh_mul_ref(gate + i, up + i, y + i, n - i);
}

void softmax_avx2(float* x, int64_t n) {
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float mx = hmax_f32x8(vmax);
  for (; i < n; ++i) mx = std::fmax(mx, x[i]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_f32x8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = hsum_f32x8(vsum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  for (; i < n; ++i) x[i] *= 1.0f / sum;
}

void axpy_avx2(int64_t n, float a, const float* x, float* y) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // namespace fish
