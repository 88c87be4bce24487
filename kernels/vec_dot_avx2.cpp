// AVX2 + FMA + F16C: activation quantisers (bit-exact with the quant/ `_ref` quantisers) and the
// dot products of the 32-weight block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and float weights.
// Layout and pairing: vec_dot.h. One block per iteration: int8 products summed to int32 with
// maddubs/madd (no int16 saturation, see dot_u8s8_i32x8), scaled in f32 with one FMA per block.
#include <cassert>

#include "kernels/simd_avx2.h"
#include "kernels/vec_dot.h"

namespace fish {

// ---- activation quantisers ----

namespace {
// Quantises 32 floats with scale id; returns the 4 int32 vectors (rounded half away from zero).
inline void quantize_32(const float* x, float id, __m256i q[4]) {
  const __m256 vid = _mm256_set1_ps(id);
  for (int k = 0; k < 4; ++k) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vid);
    q[k] = _mm256_cvttps_epi32(round_half_away_f32x8(v));
  }
}

inline float amax_32(const float* x) {
  __m256 m = abs_f32x8(_mm256_loadu_ps(x));
  for (int k = 1; k < 4; ++k) m = _mm256_max_ps(m, abs_f32x8(_mm256_loadu_ps(x + 8 * k)));
  return hmax_f32x8(m);
}
}  // namespace

void quantize_row_q8_0_avx2(const float* x, void* y, int64_t n) {
  assert(n % kQK8_0 == 0);
  auto* out = static_cast<BlockQ8_0*>(y);
  for (int64_t i = 0; i < n / kQK8_0; ++i, x += kQK8_0) {
    const float d = amax_32(x) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[i].d = f32_to_f16_simd(d);
    __m256i q[4];
    quantize_32(x, id, q);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[i].qs),
                        pack_i32x32_to_i8(q[0], q[1], q[2], q[3]));
  }
}

void quantize_row_q8_1_avx2(const float* x, void* y, int64_t n) {
  assert(n % kQK8_1 == 0);
  auto* out = static_cast<BlockQ8_1*>(y);
  for (int64_t i = 0; i < n / kQK8_1; ++i, x += kQK8_1) {
    const float d = amax_32(x) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[i].d = f32_to_f16_simd(d);
    __m256i q[4];
    quantize_32(x, id, q);
    const int sum =
        hsum_i32x8(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    out[i].s = f32_to_f16_simd(float(sum) * d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[i].qs),
                        pack_i32x32_to_i8(q[0], q[1], q[2], q[3]));
  }
}

void quantize_row_q8_k_avx2(const float* x, void* y, int64_t n) {
  assert(n % kQK_K == 0);
  auto* out = static_cast<BlockQ8_K*>(y);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kQK_K; k += 8) m = _mm256_max_ps(m, abs_f32x8(_mm256_loadu_ps(x + k)));
    const float amax = hmax_f32x8(m);
    if (amax == 0.0f) {
      std::memset(&out[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // The reference keeps the sign of the FIRST value of largest magnitude.
    float max = 0.0f;
    const __m256 vamax = _mm256_set1_ps(amax);
    for (int k = 0; k < kQK_K; k += 8) {
      const int mask =
          _mm256_movemask_ps(_mm256_cmp_ps(abs_f32x8(_mm256_loadu_ps(x + k)), vamax, _CMP_EQ_OQ));
      if (mask != 0) {
        max = x[k + __builtin_ctz(unsigned(mask))];
        break;
      }
    }
    const float iscale = -127.0f / max;  // as quant/q8_k.cpp: q in [-127, 127]
    const __m256 vis = _mm256_set1_ps(iscale);
    for (int g = 0; g < kQK_K; g += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        // cvtps rounds to nearest even (MXCSR default) like ggml's nearest_int; min(127, v).
        q[k] =
            _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + g + 8 * k), vis)),
                             _mm256_set1_epi32(127));
      }
      // bsums of 16: lanes of q[0]+q[1] and q[2]+q[3].
      out[i].bsums[g / 16] = int16_t(hsum_i32x8(_mm256_add_epi32(q[0], q[1])));
      out[i].bsums[g / 16 + 1] = int16_t(hsum_i32x8(_mm256_add_epi32(q[2], q[3])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[i].qs + g),
                          pack_i32x32_to_i8(q[0], q[1], q[2], q[3]));
    }
    out[i].d = 1.0f / iscale;
  }
}

// ---- 32-weight block formats. Dot::codes(block) gives the 32 weight codes, Dot::dot(codes,
// activations) block i's 8 int32 partial sums. NT activation rows (tokens) share each block's
// decoded codes; per token the operations are those of NT = 1 (bitwise the same result). Two
// blocks per iteration into independent accumulators. ----

namespace {
inline __m256i load_qs(const int8_t* qs) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
}

struct DotQ4_0 {  // codes q - 8 (signed)
  static __m256i codes(const BlockQ4_0& b) {
    return _mm256_sub_epi8(unpack_nibbles_32(b.qs), _mm256_set1_epi8(8));
  }
  static __m256i dot(__m256i c, __m256i a) { return dot_s8s8_i32x8(c, a); }
};
struct DotQ4_1 {  // codes 0..15
  static __m256i codes(const BlockQ4_1& b) { return unpack_nibbles_32(b.qs); }
  static __m256i dot(__m256i c, __m256i a) { return dot_u8s8_i32x8(c, a); }
};
struct DotQ5_0 {  // q - 16 in int8: nibble | 0xF0 (= nibble - 16) where the 5th bit is clear
  static __m256i codes(const BlockQ5_0& b) {
    const __m256i hi = _mm256_andnot_si256(expand_bits_32(b.qh), _mm256_set1_epi8(char(0xF0)));
    return _mm256_or_si256(unpack_nibbles_32(b.qs), hi);
  }
  static __m256i dot(__m256i c, __m256i a) { return dot_s8s8_i32x8(c, a); }
};
struct DotQ5_1 {  // codes 0..31
  static __m256i codes(const BlockQ5_1& b) {
    const __m256i hi = _mm256_and_si256(expand_bits_32(b.qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(unpack_nibbles_32(b.qs), hi);
  }
  static __m256i dot(__m256i c, __m256i a) { return dot_u8s8_i32x8(c, a); }
};
struct DotQ8_0 {  // signed int8 codes
  static __m256i codes(const BlockQ8_0& b) { return load_qs(b.qs); }
  static __m256i dot(__m256i c, __m256i a) { return dot_s8s8_i32x8(c, a); }
};

template <typename Dot, int NT, typename WBlock, typename ABlock>
void dot_blocks32(int64_t nb, const WBlock* a, const ABlock* const* b, float* out) {
  constexpr bool kHasMin = sizeof(ABlock) == sizeof(BlockQ8_1);
  __m256 acc[2][NT];
  __m128 acc_min[2][NT];  // lane 1: sum of m * s
  for (int k = 0; k < 2; ++k) {
    for (int t = 0; t < NT; ++t) {
      acc[k][t] = _mm256_setzero_ps();
      acc_min[k][t] = _mm_setzero_ps();
    }
  }
  auto block = [&](int64_t i, int k) {
    const __m256i qw = Dot::codes(a[i]);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const __m128 sc = block_scales(&a[i], &b[t][i]);
      acc[k][t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(sc),
                                  _mm256_cvtepi32_ps(Dot::dot(qw, load_qs(b[t][i].qs))), acc[k][t]);
      if constexpr (kHasMin) acc_min[k][t] = _mm_add_ps(acc_min[k][t], sc);
    }
  };
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    block(i, 0);
    block(i + 1, 1);
  }
  if (i < nb) block(i, 0);
  for (int t = 0; t < NT; ++t) {
    float sum = hsum_f32x8(_mm256_add_ps(acc[0][t], acc[1][t]));
    if constexpr (kHasMin) {
      const __m128 m = _mm_add_ps(acc_min[0][t], acc_min[1][t]);
      sum += _mm_cvtss_f32(_mm_movehdup_ps(m));
    }
    out[t] = sum;
  }
}

template <typename Dot, typename WBlock, typename ABlock>
float dot1(int64_t n, const void* w, const void* x) {
  assert(n % 32 == 0);
  const auto* b = static_cast<const ABlock*>(x);
  float out;
  dot_blocks32<Dot, 1>(n / 32, static_cast<const WBlock*>(w), &b, &out);
  return out;
}

template <typename Dot, typename WBlock, typename ABlock>
void dot4(int64_t n, const void* w, const void* x, size_t x_stride, float* out) {
  assert(n % 32 == 0);
  const ABlock* rows[4];
  for (int t = 0; t < 4; ++t) {
    rows[t] = reinterpret_cast<const ABlock*>(static_cast<const uint8_t*>(x) + t * x_stride);
  }
  dot_blocks32<Dot, 4>(n / 32, static_cast<const WBlock*>(w), rows, out);
}
}  // namespace

float vec_dot_q4_0_q8_0_avx2(int64_t n, const void* w, const void* x) {
  return dot1<DotQ4_0, BlockQ4_0, BlockQ8_0>(n, w, x);
}
float vec_dot_q4_1_q8_1_avx2(int64_t n, const void* w, const void* x) {
  return dot1<DotQ4_1, BlockQ4_1, BlockQ8_1>(n, w, x);
}
float vec_dot_q5_0_q8_0_avx2(int64_t n, const void* w, const void* x) {
  return dot1<DotQ5_0, BlockQ5_0, BlockQ8_0>(n, w, x);
}
float vec_dot_q5_1_q8_1_avx2(int64_t n, const void* w, const void* x) {
  return dot1<DotQ5_1, BlockQ5_1, BlockQ8_1>(n, w, x);
}
float vec_dot_q8_0_q8_0_avx2(int64_t n, const void* w, const void* x) {
  return dot1<DotQ8_0, BlockQ8_0, BlockQ8_0>(n, w, x);
}
void vec_dot_q4_0_q8_0_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out) {
  dot4<DotQ4_0, BlockQ4_0, BlockQ8_0>(n, w, x, s, out);
}
void vec_dot_q4_1_q8_1_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out) {
  dot4<DotQ4_1, BlockQ4_1, BlockQ8_1>(n, w, x, s, out);
}
void vec_dot_q5_0_q8_0_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out) {
  dot4<DotQ5_0, BlockQ5_0, BlockQ8_0>(n, w, x, s, out);
}
void vec_dot_q5_1_q8_1_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out) {
  dot4<DotQ5_1, BlockQ5_1, BlockQ8_1>(n, w, x, s, out);
}
void vec_dot_q8_0_q8_0_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out) {
  dot4<DotQ8_0, BlockQ8_0, BlockQ8_0>(n, w, x, s, out);
}

// ---- float weights: 4 independent accumulators of 8 keep the FMA pipes busy; scalar tail ----

namespace {
template <typename LoadW, typename ElemW>
inline float dot_f32x8_loop(int64_t n, const float* xf, LoadW load_w, ElemW elem_w) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_fmadd_ps(load_w(i + 8 * k), _mm256_loadu_ps(xf + i + 8 * k), acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load_w(i), _mm256_loadu_ps(xf + i), acc[0]);
  float sum =
      hsum_f32x8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += elem_w(i) * xf[i];
  return sum;
}
}  // namespace

float vec_dot_f32_f32_avx2(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const float*>(w);
  return dot_f32x8_loop(
      n, static_cast<const float*>(x), [a](int64_t i) { return _mm256_loadu_ps(a + i); },
      [a](int64_t i) { return a[i]; });
}

float vec_dot_f16_f32_avx2(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  return dot_f32x8_loop(
      n, static_cast<const float*>(x),
      [a](int64_t i) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
      },
      [a](int64_t i) { return f16_to_f32_simd(a[i]); });
}

float vec_dot_bf16_f32_avx2(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  return dot_f32x8_loop(
      n, static_cast<const float*>(x),
      [a](int64_t i) {
        const __m256i v =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));  // bf16 = top half of an f32
      },
      [a](int64_t i) {
        const uint32_t u = uint32_t(a[i]) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
      });
}

}  // namespace fish
