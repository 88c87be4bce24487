// AVX-512 variants of the exp-heavy element-wise ops (ops.h) and axpy for attention's V sum.
// exp: Cephes expf range reduction (x = n ln2 + r, |r| <= ln2/2, ln2 split in two constants for
// exactness) and its degree-6 polynomial: ~1-2 ulp over the clamped range [-87.3, 88.4].
// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized in callers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
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

// ---- attention over f32 KV for one query (attend_heads in ops.cpp with the AVX-512 dot, softmax
// and axpy, bitwise) ----
//
// The same operations in the same order per output, arranged for the CPU: the dot is
// vec_dot_f32_f32_avx512's loop inlined (no call per position); the query heads of one KV group
// are done together (each K / V row loaded once for them); the V sums stay in registers across
// positions instead of a load + store of the output per position (the store-to-load round trip
// bounded the old loop), with several heads' independent chains hiding the fma latency.

namespace {

// vec_dot_f32_f32_avx512 (dot_f32x16_loop) for n = 16 * V, V % 4 == 0: 4 accumulators.
template <int V>
inline float dot_f32_head(const float* a, const float* b) {
  static_assert(V % 4 == 0);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  for (int i = 0; i < 16 * V; i += 64) {
    for (int k = 0; k < 4; ++k) {
      acc[k] =
          _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16 * k), _mm512_loadu_ps(b + i + 16 * k), acc[k]);
    }
  }
  return _mm512_reduce_add_ps(
      _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

// Query heads h0 .. h0 + H - 1, all reading KV head g.
template <int V, int H>
void attend_group(const float* q, const float* k, const float* v, const AttentionShape& s,
                  int64_t kv_begin, int64_t n_kv, float scale_qk, float* out, float* scratch,
                  int64_t h0, int64_t g) {
  // Rows wrap at `rows` in a ring cache (AttentionShape::kv_rows); a linear one never wraps.
  const int64_t rows = s.kv_rows > 0 ? s.kv_rows : kv_begin + n_kv;
  const int64_t row0 = kv_begin % rows;
  const float* kg = k + g * s.head_dim;
  const float* vg = v + g * s.head_dim;
  for (int64_t p = 0, r = row0; p < n_kv; ++p, r = r + 1 == rows ? 0 : r + 1) {
    for (int h = 0; h < H; ++h) {
      scratch[(h0 + h) * n_kv + p] =
          scale_qk * dot_f32_head<V>(q + (h0 + h) * s.head_dim, kg + r * s.kv_stride);
    }
  }
  for (int h = 0; h < H; ++h) softmax_avx512(scratch + (h0 + h) * n_kv, n_kv);
  __m512 acc[H][V];
  for (int h = 0; h < H; ++h) {
    for (int d = 0; d < V; ++d) acc[h][d] = _mm512_setzero_ps();
  }
  for (int64_t p = 0, r = row0; p < n_kv; ++p, r = r + 1 == rows ? 0 : r + 1) {
    const float* vp = vg + r * s.kv_stride;
    for (int h = 0; h < H; ++h) {
      const __m512 a = _mm512_set1_ps(scratch[(h0 + h) * n_kv + p]);
      for (int d = 0; d < V; ++d) {
        acc[h][d] = _mm512_fmadd_ps(a, _mm512_loadu_ps(vp + 16 * d), acc[h][d]);
      }
    }
  }
  for (int h = 0; h < H; ++h) {
    for (int d = 0; d < V; ++d) _mm512_storeu_ps(out + (h0 + h) * s.head_dim + 16 * d, acc[h][d]);
  }
}

// Heads [h_begin, h_end) at head_dim 16 * V, in runs of at most kMaxHeads heads of one KV group
// (H * V accumulators <= 16 of the 32 zmm registers).
template <int V>
void attend_heads_v(const float* q, const float* k, const float* v, const AttentionShape& s,
                    int64_t kv_begin, int64_t kv_end, float scale_qk, float* out, float* scratch,
                    int64_t h_begin, int64_t h_end) {
  constexpr int kMaxHeads = 16 / V < 4 ? 16 / V : 4;
  const int64_t n_kv = kv_end - kv_begin;
  const int64_t group = s.n_head / s.n_kv_head;
  for (int64_t h = h_begin; h < h_end;) {
    const int64_t g = h / group;
    const int64_t run = std::min<int64_t>({h_end - h, (g + 1) * group - h, kMaxHeads});
    switch (run) {
      case 1:
        attend_group<V, 1>(q, k, v, s, kv_begin, n_kv, scale_qk, out, scratch, h, g);
        break;
      case 2:
        if constexpr (kMaxHeads >= 2) {
          attend_group<V, 2>(q, k, v, s, kv_begin, n_kv, scale_qk, out, scratch, h, g);
        }
        break;
      case 3:
        if constexpr (kMaxHeads >= 3) {
          attend_group<V, 3>(q, k, v, s, kv_begin, n_kv, scale_qk, out, scratch, h, g);
        }
        break;
      default:
        if constexpr (kMaxHeads >= 4) {
          attend_group<V, 4>(q, k, v, s, kv_begin, n_kv, scale_qk, out, scratch, h, g);
        }
        break;
    }
    h += run;
  }
}

}  // namespace

bool attend_heads_avx512(const float* q, const float* k, const float* v, const AttentionShape& s,
                         int64_t kv_begin, int64_t kv_end, float scale_qk, float* out,
                         float* scratch, int64_t h_begin, int64_t h_end) {
  switch (s.head_dim) {
    case 64:
      attend_heads_v<4>(q, k, v, s, kv_begin, kv_end, scale_qk, out, scratch, h_begin, h_end);
      return true;
    case 128:
      attend_heads_v<8>(q, k, v, s, kv_begin, kv_end, scale_qk, out, scratch, h_begin, h_end);
      return true;
    case 256:
      attend_heads_v<16>(q, k, v, s, kv_begin, kv_end, scale_qk, out, scratch, h_begin, h_end);
      return true;
    default:
      return false;
  }
}

}  // namespace fish
