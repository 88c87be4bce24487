// AVX-512 (F/BW/VL/DQ + VNNI): K-quant weights (Q2_K..Q6_K) x Q8_K activations. Layouts:
// quant/q*_k.h. 64 weights per 512-bit register: unsigned weight codes x int8 activations with
// vpdpbusd (int32 sums of 4, nothing saturates), times the per-lane sub-block scale (vpmulld),
// summed in int32 per super-block (exact), one f32 FMA per super-block. Offsets (Q3_K -4, Q6_K -32)
// and minimums (Q2_K, Q4_K, Q5_K) go through Q8_K's bsums, as in the AVX2 and scalar versions.
//
// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized in callers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cassert>

#include "kernels/simd_avx2.h"
#include "kernels/vec_dot.h"
#include "quant/q2_k.h"
#include "quant/q3_k.h"
#include "quant/q4_k.h"
#include "quant/q5_k.h"
#include "quant/q6_k.h"

namespace fish {
namespace {

inline __m512i load512(const void* p) {
  return _mm512_loadu_si512(p);
}
inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
inline __m512i join256(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
inline __m512i dpbusd(__m512i u8, __m512i s8) {
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u8, s8);
}
// Bytes of w whose bit in `bits` (one bit per 256-bit half) is set get `value` OR-ed in.
inline __m512i or_where_bit(__m512i w, __m512i bits_src, int bit_lo, int bit_hi, char value) {
  const __m512i m = join256(_mm256_set1_epi8(char(bit_lo)), _mm256_set1_epi8(char(bit_hi)));
  return _mm512_or_si512(
      w, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(bits_src, m), _mm512_set1_epi8(value)));
}
// Lane j of a 64-weight vpdpbusd result covers weights 4j..4j+3, i.e. sub-block (of 16) j/4.
// Returns the 16-lane scale vector for sub-blocks first..first+3 of `scales` (16 int32 lanes).
inline __m512i spread_scales_4(__m512i scales, int first) {
  const __m512i idx = _mm512_add_epi32(
      _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0), _mm512_set1_epi32(first));
  return _mm512_permutexvar_epi32(idx, scales);
}
// sum_s scales[s] * bsums[s] over the 16 sub-blocks of 16.
inline int scaled_bsums(__m512i scales, const int16_t* bsums) {
  const __m512i bs = _mm512_cvtepi16_epi32(load256(bsums));
  return _mm512_reduce_add_epi32(_mm512_mullo_epi32(scales, bs));
}

}  // namespace

float vec_dot_q2_k_q8_k_avx512(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const BlockQ2_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  const __m256i m3 = _mm256_set1_epi8(3);
  __m512 acc = _mm512_setzero_ps();
  float acc_min = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m512i packed =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[i].scales)));
    const __m512i sc = _mm512_and_si512(packed, _mm512_set1_epi32(0xF));
    const int summs = scaled_bsums(_mm512_srli_epi32(packed, 4), b[i].bsums);
    __m512i sumi = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(a[i].qs + 32 * h);
      const __m512i w01 =
          join256(_mm256_and_si256(q, m3), _mm256_and_si256(_mm256_srli_epi16(q, 2), m3));
      const __m512i w23 = join256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m3),
                                  _mm256_and_si256(_mm256_srli_epi16(q, 6), m3));
      const __m512i dp01 = dpbusd(w01, load512(b[i].qs + 128 * h));
      const __m512i dp23 = dpbusd(w23, load512(b[i].qs + 128 * h + 64));
      sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dp01, spread_scales_4(sc, 8 * h)));
      sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dp23, spread_scales_4(sc, 8 * h + 4)));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(b[i].d * f16_to_f32_simd(a[i].d)),
                          _mm512_cvtepi32_ps(sumi), acc);
    acc_min += b[i].d * f16_to_f32_simd(a[i].dmin) * float(summs);
  }
  return _mm512_reduce_add_ps(acc) - acc_min;
}

float vec_dot_q3_k_q8_k_avx512(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const BlockQ3_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  const __m256i m3 = _mm256_set1_epi8(3);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t sc8[16];
    q3_k_scales(a[i].scales, sc8);
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc8)));
    const int offset = scaled_bsums(sc, b[i].bsums);  // codes are q + 4: subtract 4 * this
    const __m256i hm = load256(a[i].hmask);
    const __m512i hm2 = join256(hm, hm);
    __m512i sumi = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(a[i].qs + 32 * h);
      __m512i w01 = join256(_mm256_and_si256(q, m3), _mm256_and_si256(_mm256_srli_epi16(q, 2), m3));
      __m512i w23 = join256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m3),
                            _mm256_and_si256(_mm256_srli_epi16(q, 6), m3));
      w01 = or_where_bit(w01, hm2, 1 << (4 * h), 1 << (4 * h + 1), 4);
      w23 = or_where_bit(w23, hm2, 1 << (4 * h + 2), 1 << (4 * h + 3), 4);
      const __m512i dp01 = dpbusd(w01, load512(b[i].qs + 128 * h));
      const __m512i dp23 = dpbusd(w23, load512(b[i].qs + 128 * h + 64));
      sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dp01, spread_scales_4(sc, 8 * h)));
      sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dp23, spread_scales_4(sc, 8 * h + 4)));
    }
    acc = _mm512_fmadd_ps(
        _mm512_set1_ps(b[i].d * f16_to_f32_simd(a[i].d)),
        _mm512_cvtepi32_ps(_mm512_sub_epi32(
            sumi, _mm512_setr_epi32(4 * offset, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))),
        acc);
  }
  return _mm512_reduce_add_ps(acc);
}

namespace {
// Q4_K / Q5_K share everything but the 5th bit.
template <bool kHasHigh, typename Block>
inline float dot_q45_k(int64_t n, const Block* a, const BlockQ8_K* b) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m512 acc = _mm512_setzero_ps();
  float acc_min = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) scale_min_k4(j, a[i].scales, &sc[j], &mn[j]);
    int summs = 0;
    for (int j = 0; j < 8; ++j) summs += mn[j] * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
    __m512i qh2 = _mm512_setzero_si512();
    if constexpr (kHasHigh) {
      const __m256i qh = load256(a[i].qh);
      qh2 = join256(qh, qh);
    }
    __m512i sumi = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(a[i].qs + 32 * c);
      __m512i qw = join256(_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
      if constexpr (kHasHigh) qw = or_where_bit(qw, qh2, 1 << (2 * c), 1 << (2 * c + 1), 16);
      const __m512i dp = dpbusd(qw, load512(b[i].qs + 64 * c));
      const __m512i scv = join256(_mm256_set1_epi32(sc[2 * c]), _mm256_set1_epi32(sc[2 * c + 1]));
      sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dp, scv));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(b[i].d * f16_to_f32_simd(a[i].d)),
                          _mm512_cvtepi32_ps(sumi), acc);
    acc_min += b[i].d * f16_to_f32_simd(a[i].dmin) * float(summs);
  }
  return _mm512_reduce_add_ps(acc) - acc_min;
}
}  // namespace

float vec_dot_q4_k_q8_k_avx512(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  return dot_q45_k<false>(n, static_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(x));
}

float vec_dot_q5_k_q8_k_avx512(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  return dot_q45_k<true>(n, static_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(x));
}

float vec_dot_q6_k_q8_k_avx512(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const BlockQ6_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m512i sc =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[i].scales)));
    const int offset = scaled_bsums(sc, b[i].bsums);  // codes are q + 32: subtract 32 * this
    __m512i sumi = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      // ql[64h..64h+63]: low 4 bits of weights 0..63 (low nibbles) and 64..127 (high nibbles).
      const __m512i ql = load512(a[i].ql + 64 * h);
      const __m256i qh = load256(a[i].qh + 32 * h);
      // High 2 bits: weights 0..31 bits 0-1 / 64..95 bits 4-5 of qh; weights 32..63 bits 2-3 /
      // 96..127 bits 6-7, moved down by 2 in the upper half.
      const __m512i qh2 = join256(qh, _mm256_srli_epi16(qh, 2));
      const __m512i w01 = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                          _mm512_and_si512(_mm512_slli_epi16(qh2, 4), m30));
      const __m512i w23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                          _mm512_and_si512(qh2, m30));
      const __m512i dp01 = dpbusd(w01, load512(b[i].qs + 128 * h));
      const __m512i dp23 = dpbusd(w23, load512(b[i].qs + 128 * h + 64));
      sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dp01, spread_scales_4(sc, 8 * h)));
      sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dp23, spread_scales_4(sc, 8 * h + 4)));
    }
    acc = _mm512_fmadd_ps(
        _mm512_set1_ps(b[i].d * f16_to_f32_simd(a[i].d)),
        _mm512_cvtepi32_ps(_mm512_sub_epi32(
            sumi, _mm512_setr_epi32(32 * offset, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))),
        acc);
  }
  return _mm512_reduce_add_ps(acc);
}

}  // namespace fish
