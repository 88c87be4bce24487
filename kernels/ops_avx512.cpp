// AVX-512 variants of the exp-heavy element-wise ops (ops.h) and axpy for attention's V sum.
// exp: Cephes expf range reduction (x = n ln2 + r, |r| <= ln2/2, ln2 split in two constants for
// exactness) and its degree-6 polynomial: ~1-2 ulp over the clamped range [-87.3, 88.4].
// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized in callers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cmath>

#include "kernels/ops.h"
#include "kernels/simd_avx2.h"

namespace fish {
namespace {

inline __m512 exp_f32x16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33654f)), _mm512_set1_ps(88.37626f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  // 2^n: n in [-126, 127] after the clamp, so the biased exponent is a normal float's.
  const __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

inline __m512 silu_f32x16(__m512 g) {
  const __m512 e = exp_f32x16(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

// 0.5 g (1 + tanh(u)) = g - g / (exp(2u) + 1): no cancellation for small u.
inline __m512 gelu_tanh_f32x16(__m512 g) {
  const __m512 u = _mm512_mul_ps(
      _mm512_mul_ps(_mm512_set1_ps(0.79788456080286535588f), g),
      _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), g), g, _mm512_set1_ps(1.0f)));
  const __m512 e = exp_f32x16(_mm512_add_ps(u, u));
  return _mm512_sub_ps(g, _mm512_div_ps(g, _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
}

}  // namespace

void silu_mul_avx512(const float* gate, const float* up, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(
        y + i, _mm512_mul_ps(silu_f32x16(_mm512_loadu_ps(gate + i)), _mm512_loadu_ps(up + i)));
  }
  for (; i < n; ++i) y[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void gelu_tanh_mul_avx512(const float* gate, const float* up, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(
        y + i, _mm512_mul_ps(gelu_tanh_f32x16(_mm512_loadu_ps(gate + i)), _mm512_loadu_ps(up + i)));
  }
  gelu_tanh_mul_ref(gate + i, up + i, y + i, n - i);
}

void softmax_avx512(float* x, int64_t n) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
  float mx = _mm512_reduce_max_ps(vmax);
  for (; i < n; ++i) mx = std::fmax(mx, x[i]);
  const __m512 vm = _mm512_set1_ps(mx);
  __m512 vsum = _mm512_setzero_ps();
  i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp_f32x16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
    _mm512_storeu_ps(x + i, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  float sum = _mm512_reduce_add_ps(vsum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
  for (; i < n; ++i) x[i] *= 1.0f / sum;
}

void axpy_avx512(int64_t n, float a, const float* x, float* y) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // namespace fish
