// AVX2: K-quant weights (Q2_K..Q6_K, FISH's FQ3) x Q8_K activations. Layouts: quant/q*_k.h.
// Each 32-weight slice: unsigned weight codes (at most 6 bits) x int8 activations with maddubs
// (int16 pair sums <= 2*63*128, no saturation), then madd with the int16 sub-block scales gives
// int32 partial sums (exact); one f32 FMA per super-block. Constant offsets (Q3_K's -4, Q6_K's
// -32) and minimums (Q2_K, Q4_K, Q5_K) are applied through Q8_K's bsums.
#include <cassert>

#include "kernels/simd_avx2.h"
#include "kernels/vec_dot.h"
#include "quant/fq3.h"
#include "quant/q2_k.h"
#include "quant/q3_k.h"
#include "quant/q4_k.h"
#include "quant/q5_k.h"
#include "quant/q6_k.h"

namespace fish {
namespace {

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// int16 scale s0 for the first 16 weights of a 32-weight slice (one 128-bit lane), s1 the next 16.
inline __m256i scales_16_16(int s0, int s1) {
  return _mm256_set_m128i(_mm_set1_epi16(short(s1)), _mm_set1_epi16(short(s0)));
}

// Bytes of v whose bit `bit` (a one-bit mask) is set -> `value`, else 0.
inline __m256i bit_to(__m256i v, int bit, char value) {
  const __m256i m = _mm256_set1_epi8(char(bit));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, m), m), _mm256_set1_epi8(value));
}

}  // namespace

float vec_dot_q2_k_q8_k_avx2(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const BlockQ2_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int summs = 0;
    for (int s = 0; s < 16; ++s) summs += (a[i].scales[s] >> 4) * b[i].bsums[s];
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(a[i].qs + 32 * h);
      const uint8_t* sc = a[i].scales + 8 * h;
      for (int k = 0; k < 4; ++k) {
        const __m256i qw = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
        const __m256i p = _mm256_maddubs_epi16(qw, load256(b[i].qs + 128 * h + 32 * k));
        sumi = _mm256_add_epi32(
            sumi, _mm256_madd_epi16(p, scales_16_16(sc[2 * k] & 0xF, sc[2 * k + 1] & 0xF)));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(b[i].d * f16_to_f32_simd(a[i].d)),
                          _mm256_cvtepi32_ps(sumi), acc);
    acc_min += b[i].d * f16_to_f32_simd(a[i].dmin) * float(summs);
  }
  return hsum_f32x8(acc) - acc_min;
}

float vec_dot_q3_k_q8_k_avx2(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const BlockQ3_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  const __m256i m3 = _mm256_set1_epi8(3);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t sc[16];
    q3_k_scales(a[i].scales, sc);
    int offset = 0;  // sum_s sc_s * 4 * bsum_s: codes are stored as q + 4 (0..7)
    for (int s = 0; s < 16; ++s) offset += sc[s] * b[i].bsums[s];
    const __m256i hm = load256(a[i].hmask);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(a[i].qs + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i qw = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3),
                                           bit_to(hm, 1 << (4 * h + k), 4));
        const __m256i p = _mm256_maddubs_epi16(qw, load256(b[i].qs + 128 * h + 32 * k));
        sumi = _mm256_add_epi32(
            sumi, _mm256_madd_epi16(p, scales_16_16(sc[8 * h + 2 * k], sc[8 * h + 2 * k + 1])));
      }
    }
    const int isum = hsum_i32x8(sumi) - 4 * offset;
    sum += b[i].d * f16_to_f32_simd(a[i].d) * float(isum);
  }
  return sum;
}

namespace {
// Q4_K / Q5_K share everything but the 5th bit. NT activation rows (tokens) share the decoded
// weight codes; per token the operations are those of NT = 1 (bitwise the same result).
template <bool kHasHigh, int NT, typename Block>
inline void dot_q45_k(int64_t n, const Block* a, const BlockQ8_K* const* b, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  __m128 acc_min[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm256_setzero_ps();
    acc_min[t] = _mm_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint32_t sm[4];  // bytes 0..7 scales, 8..15 mins
    unpack_scales_mins_k4(a[i].scales, sm);
    const uint8_t* sc = reinterpret_cast<const uint8_t*>(sm);
    const __m128i mins =
        _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 2)));
    const float d = f16_to_f32_simd(a[i].d), dmin = f16_to_f32_simd(a[i].dmin);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      // sum_j min_j * (bsums[2j] + bsums[2j+1]): pairs of bsums by hadd, then madd.
      const __m256i bs = load256(b[t][i].bsums);
      const __m128i bs_pairs =
          _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
      acc_min[t] = _mm_fmadd_ps(_mm_set1_ps(b[t][i].d * dmin),
                                _mm_cvtepi32_ps(_mm_madd_epi16(mins, bs_pairs)), acc_min[t]);
    }
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kHasHigh) qh = load256(a[i].qh);
    __m256i sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(a[i].qs + 32 * c);
      __m256i lo = _mm256_and_si256(q, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kHasHigh) {
        lo = _mm256_or_si256(lo, bit_to(qh, 1 << (2 * c), 16));
        hi = _mm256_or_si256(hi, bit_to(qh, 1 << (2 * c + 1), 16));
      }
      const __m256i s0 = _mm256_set1_epi16(short(sc[2 * c]));
      const __m256i s1 = _mm256_set1_epi16(short(sc[2 * c + 1]));
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const __m256i p0 = _mm256_maddubs_epi16(lo, load256(b[t][i].qs + 64 * c));
        const __m256i p1 = _mm256_maddubs_epi16(hi, load256(b[t][i].qs + 64 * c + 32));
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p0, s0));
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p1, s1));
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(b[t][i].d * d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    __m128 m = _mm_add_ps(acc_min[t], _mm_movehl_ps(acc_min[t], acc_min[t]));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    out[t] = hsum_f32x8(acc[t]) - _mm_cvtss_f32(m);
  }
}

template <int NT>
inline void dot_q6_k(int64_t n, const BlockQ6_K* a, const BlockQ8_K* const* b, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  float sum[NT];
  for (int t = 0; t < NT; ++t) sum[t] = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int8_t* sc = a[i].scales;
    __m256i sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = load256(a[i].ql + 64 * h);
      const __m256i l1 = load256(a[i].ql + 64 * h + 32);
      const __m256i qh = load256(a[i].qh + 32 * h);
      __m256i qw[4];
      qw[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                              _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
      qw[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                              _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
      qw[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                              _mm256_and_si256(qh, m30));
      qw[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                              _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
      for (int r = 0; r < 4; ++r) {
        const __m256i scv = scales_16_16(sc[8 * h + 2 * r], sc[8 * h + 2 * r + 1]);
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) {
          const __m256i p = _mm256_maddubs_epi16(qw[r], load256(b[t][i].qs + 128 * h + 32 * r));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, scv));
        }
      }
    }
    const float d = f16_to_f32_simd(a[i].d);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      int offset = 0;  // codes are q + 32 (0..63): subtract 32 * sum_s sc_s * bsum_s
      for (int s = 0; s < 16; ++s) offset += sc[s] * b[t][i].bsums[s];
      const int isum = hsum_i32x8(sumi[t]) - 32 * offset;
      sum[t] += b[t][i].d * d * float(isum);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = sum[t];
}

// FQ3: one group's 32 codes from its words A, B, C with two variable shifts (quant/fq3.h): u32
// lanes 0..3 = A >> 0,2,4,6 and 4..7 = B >> 0,2,4,6 give the low bit pairs of values 4s..4s+3 in
// lane s; C >> s gives their high bits. The codes come out in value order, like the activations.
template <int NT>
inline void dot_fq3(int64_t n, const BlockFQ3* a, const BlockQ8_K* const* b, float* out) {
  const __m256i m2 = _mm256_set1_epi32(0x03030303);
  const __m256i m1 = _mm256_set1_epi32(0x01010101);
  const __m256i idx_ab = _mm256_setr_epi32(1, 1, 1, 1, 2, 2, 2, 2);  // words [prev, A, B, C]
  const __m256i idx_c = _mm256_set1_epi32(3);
  const __m256i shift_ab = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  const __m256i shift_c = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 acc[NT];
  __m128 acc_min[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm256_setzero_ps();
    acc_min[t] = _mm_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint32_t sm[4];  // bytes 0..7 scales, 8..15 mins
    unpack_scales_mins_k4(a[i].scales, sm);
    const uint8_t* sc = reinterpret_cast<const uint8_t*>(sm);
    const __m128i mins =
        _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 2)));
    const float d = f16_to_f32_simd(a[i].d), dmin = f16_to_f32_simd(a[i].dmin);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const __m256i bs = load256(b[t][i].bsums);
      const __m128i bs_pairs =
          _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
      acc_min[t] = _mm_fmadd_ps(_mm_set1_ps(b[t][i].d * dmin),
                                _mm_cvtepi32_ps(_mm_madd_epi16(mins, bs_pairs)), acc_min[t]);
    }
    __m256i sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
    for (int g = 0; g < kFq3Groups; ++g) {
      // 16 bytes ending with the group's A, B, C: the word before is still inside the block.
      const __m256i w = _mm256_broadcastsi128_si256(_mm_loadu_si128(
          reinterpret_cast<const __m128i*>(reinterpret_cast<const uint8_t*>(a[i].q[g]) - 4)));
      const __m256i lo = _mm256_srlv_epi32(_mm256_permutevar8x32_epi32(w, idx_ab), shift_ab);
      const __m256i hi = _mm256_srlv_epi32(_mm256_permutevar8x32_epi32(w, idx_c), shift_c);
      const __m256i codes =
          _mm256_or_si256(_mm256_and_si256(lo, m2), _mm256_slli_epi32(_mm256_and_si256(hi, m1), 2));
      const __m256i s = _mm256_set1_epi16(short(sc[g]));
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const __m256i p = _mm256_maddubs_epi16(codes, load256(b[t][i].qs + 32 * g));
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, s));
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(b[t][i].d * d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    __m128 m = _mm_add_ps(acc_min[t], _mm_movehl_ps(acc_min[t], acc_min[t]));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    out[t] = hsum_f32x8(acc[t]) - _mm_cvtss_f32(m);
  }
}

inline void rows4(const void* x, size_t x_stride, const BlockQ8_K* rows[4]) {
  for (int t = 0; t < 4; ++t) {
    rows[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + t * x_stride);
  }
}
}  // namespace

float vec_dot_q4_k_q8_k_avx2(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float out;
  dot_q45_k<false, 1>(n, static_cast<const BlockQ4_K*>(w), &b, &out);
  return out;
}
void vec_dot_q4_k_q8_k_x4_avx2(int64_t n, const void* w, const void* x, size_t x_stride,
                               float* out) {
  assert(n % kQK_K == 0);
  const BlockQ8_K* rows[4];
  rows4(x, x_stride, rows);
  dot_q45_k<false, 4>(n, static_cast<const BlockQ4_K*>(w), rows, out);
}

float vec_dot_q5_k_q8_k_avx2(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float out;
  dot_q45_k<true, 1>(n, static_cast<const BlockQ5_K*>(w), &b, &out);
  return out;
}
void vec_dot_q5_k_q8_k_x4_avx2(int64_t n, const void* w, const void* x, size_t x_stride,
                               float* out) {
  assert(n % kQK_K == 0);
  const BlockQ8_K* rows[4];
  rows4(x, x_stride, rows);
  dot_q45_k<true, 4>(n, static_cast<const BlockQ5_K*>(w), rows, out);
}

float vec_dot_q6_k_q8_k_avx2(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float out;
  dot_q6_k<1>(n, static_cast<const BlockQ6_K*>(w), &b, &out);
  return out;
}
void vec_dot_q6_k_q8_k_x4_avx2(int64_t n, const void* w, const void* x, size_t x_stride,
                               float* out) {
  assert(n % kQK_K == 0);
  const BlockQ8_K* rows[4];
  rows4(x, x_stride, rows);
  dot_q6_k<4>(n, static_cast<const BlockQ6_K*>(w), rows, out);
}

float vec_dot_fq3_q8_k_avx2(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float out;
  dot_fq3<1>(n, static_cast<const BlockFQ3*>(w), &b, &out);
  return out;
}
void vec_dot_fq3_q8_k_x4_avx2(int64_t n, const void* w, const void* x, size_t x_stride,
                              float* out) {
  assert(n % kQK_K == 0);
  const BlockQ8_K* rows[4];
  rows4(x, x_stride, rows);
  dot_fq3<4>(n, static_cast<const BlockFQ3*>(w), rows, out);
}

}  // namespace fish
