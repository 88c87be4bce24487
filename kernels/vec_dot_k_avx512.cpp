// AVX-512 (F/BW/VL/DQ + VNNI): K-quant weights (Q2_K..Q6_K, FISH's FQ3) x Q8_K activations.
// Layouts: quant/q*_k.h. 64 weights per 512-bit register: unsigned weight codes (<= 63) x int8
// activations with vpmaddubsw (int16 pair sums <= 2*63*128: no saturation), then VNNI vpdpwssd
// multiplies by the int16 sub-block scale and accumulates int32 pairs in one instruction
// (cheaper than vpdpbusd + vpmulld for the scale); int32 per super-block (exact), one f32 FMA per
// super-block. Offsets (Q3_K -4, Q6_K -32)
// and minimums (Q2_K, Q4_K, Q5_K) go through Q8_K's bsums, as in the AVX2 and scalar versions.
//
// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized in callers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

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

inline __m512i load512(const void* p) {
  return _mm512_loadu_si512(p);
}
inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
inline __m512i join256(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
// Bytes of w whose bit in `bits` (one bit per 256-bit half) is set get `value` OR-ed in.
inline __m512i or_where_bit(__m512i w, __m512i bits_src, int bit_lo, int bit_hi, char value) {
  const __m512i m = join256(_mm256_set1_epi8(char(bit_lo)), _mm256_set1_epi8(char(bit_hi)));
  return _mm512_or_si512(
      w, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(bits_src, m), _mm512_set1_epi8(value)));
}
// int16 lane k of a 64-weight vpmaddubsw result covers weights 2k, 2k+1.
// Index tables for vpermw: lane k of a 64-weight vpmaddubsw result covers weights 2k, 2k+1.
// kSpread16[f]: sub-blocks of 16 weights starting at sub-block 4f (lane k -> 4f + k/8);
// kSpread32[c]: sub-blocks of 32 starting at 2c (lane k -> 2c + k/16). Constants, so the scale
// vector of a slice costs one load + one vpermw.
struct SpreadTables {
  alignas(64) int16_t sub16[4][32];
  alignas(64) int16_t sub32[4][32];
};
constexpr SpreadTables make_spread_tables() {
  SpreadTables t{};
  for (int f = 0; f < 4; ++f) {
    for (int k = 0; k < 32; ++k) {
      t.sub16[f][k] = int16_t(4 * f + k / 8);
      t.sub32[f][k] = int16_t(2 * f + k / 16);
    }
  }
  return t;
}
alignas(64) constexpr SpreadTables kSpread = make_spread_tables();

// int16 scale per lane of a 64-weight maddubs result for sub-blocks of 16 starting at `first`
// (a multiple of 4), or of 32 starting at 2 * chunk.
inline __m512i spread_scales_sub16(__m512i scales16, int first) {
  return _mm512_permutexvar_epi16(_mm512_load_si512(kSpread.sub16[first / 4]), scales16);
}
inline __m512i spread_scales_sub32(__m512i scales16, int chunk) {
  return _mm512_permutexvar_epi16(_mm512_load_si512(kSpread.sub32[chunk]), scales16);
}

// 32 bytes -> 64: the bytes twice, the upper copy shifted right by `shift_hi` bits per 64-bit
// lane, the lower by `shift_lo`. A broadcast load is a pure load (no shuffle-port uop, unlike
// vinserti64x4); the per-lane variable shift then selects the bit field.
inline __m512i load_twice_shifted(const void* p, int shift_lo, int shift_hi) {
  const __m512i b = _mm512_broadcast_i64x4(load256(p));
  const __m512i sh = _mm512_set_epi64(shift_hi, shift_hi, shift_hi, shift_hi, shift_lo, shift_lo,
                                      shift_lo, shift_lo);
  return _mm512_srlv_epi64(b, sh);
}

// sumi += (u8 codes x s8 activations, pairs) x int16 scales, pairs: vpmaddubsw + vpdpwssd. The
// int16 pair sums stay below 2 * 63 * 128 for codes <= 63, so nothing saturates.
inline __m512i dot_scaled(__m512i sumi, __m512i codes, __m512i act, __m512i scales16) {
  return _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(codes, act), scales16);
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
  const __m512i m3 = _mm512_set1_epi8(3);
  __m512 acc = _mm512_setzero_ps();
  float acc_min = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m512i packed =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[i].scales)));
    // per sub-block: low nibble scale, high nibble min
    const __m512i sc16 = _mm512_zextsi256_si512(_mm256_and_si256(
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[i].scales))),
        _mm256_set1_epi16(0xF)));
    const int summs = scaled_bsums(_mm512_srli_epi32(packed, 4), b[i].bsums);
    // Two accumulators: vpdpwssd's latency would otherwise chain the whole super-block.
    __m512i sumi = _mm512_setzero_si512(), sumi2 = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i w01 = _mm512_and_si512(load_twice_shifted(a[i].qs + 32 * h, 0, 2), m3);
      const __m512i w23 = _mm512_and_si512(load_twice_shifted(a[i].qs + 32 * h, 4, 6), m3);
      sumi = dot_scaled(sumi, w01, load512(b[i].qs + 128 * h), spread_scales_sub16(sc16, 8 * h));
      sumi2 = dot_scaled(sumi2, w23, load512(b[i].qs + 128 * h + 64),
                         spread_scales_sub16(sc16, 8 * h + 4));
    }
    sumi = _mm512_add_epi32(sumi, sumi2);
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
  const __m512i m3 = _mm512_set1_epi8(3);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t sc8[16];
    q3_k_scales(a[i].scales, sc8);
    const __m128i sc8v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc8));
    const __m512i sc16 = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(sc8v));
    // codes are q + 4: subtract 4 * this
    const int offset = scaled_bsums(_mm512_cvtepi8_epi32(sc8v), b[i].bsums);
    const __m512i hm2 = _mm512_broadcast_i64x4(load256(a[i].hmask));
    // Two accumulators: vpdpwssd's latency would otherwise chain the whole super-block.
    __m512i sumi = _mm512_setzero_si512(), sumi2 = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      __m512i w01 = _mm512_and_si512(load_twice_shifted(a[i].qs + 32 * h, 0, 2), m3);
      __m512i w23 = _mm512_and_si512(load_twice_shifted(a[i].qs + 32 * h, 4, 6), m3);
      w01 = or_where_bit(w01, hm2, 1 << (4 * h), 1 << (4 * h + 1), 4);
      w23 = or_where_bit(w23, hm2, 1 << (4 * h + 2), 1 << (4 * h + 3), 4);
      sumi = dot_scaled(sumi, w01, load512(b[i].qs + 128 * h), spread_scales_sub16(sc16, 8 * h));
      sumi2 = dot_scaled(sumi2, w23, load512(b[i].qs + 128 * h + 64),
                         spread_scales_sub16(sc16, 8 * h + 4));
    }
    sumi = _mm512_add_epi32(sumi, sumi2);
    acc = _mm512_fmadd_ps(
        _mm512_set1_ps(b[i].d * f16_to_f32_simd(a[i].d)),
        _mm512_cvtepi32_ps(_mm512_sub_epi32(
            sumi, _mm512_setr_epi32(4 * offset, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))),
        acc);
  }
  return _mm512_reduce_add_ps(acc);
}

namespace {
// Q4_K / Q5_K share everything but the 5th bit. NT activation rows (tokens) against one weight
// row: the weight codes of each chunk are decoded once and used NT times; the per-token
// operations are the same as for NT = 1, so every NT gives bitwise the same result per token.
template <bool kHasHigh, int NT, typename Block>
inline void dot_q45_k(int64_t n, const Block* a, const BlockQ8_K* const* b, float* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[NT];
  __m128 acc_min[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm512_setzero_ps();
    acc_min[t] = _mm_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint32_t sm[4];  // bytes 0..7 scales, 8..15 mins
    unpack_scales_mins_k4(a[i].scales, sm);
    const __m512i sc16 = _mm512_zextsi256_si512(
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sm))));
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
    __m512i qh2 = _mm512_setzero_si512();
    if constexpr (kHasHigh) {
      const __m256i qh = load256(a[i].qh);
      qh2 = _mm512_broadcast_i64x4(qh);
    }
    // Even and odd chunks in separate accumulators: vpdpwssd's latency would otherwise chain the
    // whole super-block (integer sums: the split does not change the result).
    __m512i sumi[2][NT];
    for (int t = 0; t < NT; ++t) sumi[0][t] = sumi[1][t] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      __m512i qw = _mm512_and_si512(load_twice_shifted(a[i].qs + 32 * c, 0, 4), m4);
      if constexpr (kHasHigh) qw = or_where_bit(qw, qh2, 1 << (2 * c), 1 << (2 * c + 1), 16);
      // low nibbles: sub-block 2c, high nibbles (lanes 16..31): 2c+1
      const __m512i scv = spread_scales_sub32(sc16, c);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        sumi[c & 1][t] = dot_scaled(sumi[c & 1][t], qw, load512(b[t][i].qs + 64 * c), scv);
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      acc[t] =
          _mm512_fmadd_ps(_mm512_set1_ps(b[t][i].d * d),
                          _mm512_cvtepi32_ps(_mm512_add_epi32(sumi[0][t], sumi[1][t])), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    __m128 m = _mm_add_ps(acc_min[t], _mm_movehl_ps(acc_min[t], acc_min[t]));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    out[t] = _mm512_reduce_add_ps(acc[t]) - _mm_cvtss_f32(m);
  }
}

// FQ3: two groups (64 codes) per register from 32 bytes ending with their words A0 B0 C0 A1 B1
// C1: u32 lanes 4s'..4s'+3 of each half = A or B shifted by 0,2,4,6 (low bit pairs of values
// 4s..4s+3 in lane s), C >> s the high bits (quant/fq3.h). Codes come out in value order.
template <int NT>
inline void dot_fq3(int64_t n, const BlockFQ3* a, const BlockQ8_K* const* b, float* out) {
  const __m512i m2 = _mm512_set1_epi32(0x03030303);
  const __m512i m1 = _mm512_set1_epi32(0x01010101);
  // 32-byte window = words [x, x, A0, B0, C0, A1, B1, C1] (x: the bytes before, in the block)
  const __m512i idx_ab = _mm512_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3, 5, 5, 5, 5, 6, 6, 6, 6);
  const __m512i idx_c = _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 7, 7, 7, 7, 7, 7, 7, 7);
  const __m512i shift_ab = _mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6);
  const __m512i shift_c = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
  __m512 acc[NT];
  __m128 acc_min[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm512_setzero_ps();
    acc_min[t] = _mm_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint32_t sm[4];  // bytes 0..7 scales, 8..15 mins
    unpack_scales_mins_k4(a[i].scales, sm);
    const __m512i sc16 = _mm512_zextsi256_si512(
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sm))));
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
    __m512i sumi[2][NT];  // two accumulators: see dot_q45_k
    for (int t = 0; t < NT; ++t) sumi[0][t] = sumi[1][t] = _mm512_setzero_si512();
    for (int c = 0; c < kFq3Groups / 2; ++c) {
      const __m512i w =
          _mm512_broadcast_i64x4(load256(reinterpret_cast<const uint8_t*>(a[i].q[2 * c]) - 8));
      const __m512i lo = _mm512_srlv_epi32(_mm512_permutexvar_epi32(idx_ab, w), shift_ab);
      const __m512i hi = _mm512_srlv_epi32(_mm512_permutexvar_epi32(idx_c, w), shift_c);
      const __m512i codes =
          _mm512_or_si512(_mm512_and_si512(lo, m2), _mm512_slli_epi32(_mm512_and_si512(hi, m1), 2));
      const __m512i scv = spread_scales_sub32(sc16, c);  // lanes 0..15: group 2c, 16..31: 2c+1
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        sumi[c & 1][t] = dot_scaled(sumi[c & 1][t], codes, load512(b[t][i].qs + 64 * c), scv);
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      acc[t] =
          _mm512_fmadd_ps(_mm512_set1_ps(b[t][i].d * d),
                          _mm512_cvtepi32_ps(_mm512_add_epi32(sumi[0][t], sumi[1][t])), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    __m128 m = _mm_add_ps(acc_min[t], _mm_movehl_ps(acc_min[t], acc_min[t]));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    out[t] = _mm512_reduce_add_ps(acc[t]) - _mm_cvtss_f32(m);
  }
}

template <int NT>
inline void dot_q6_k(int64_t n, const BlockQ6_K* a, const BlockQ8_K* const* b, float* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m128i sc8v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a[i].scales));
    const __m512i sc16 = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(sc8v));
    const __m512i sc32 = _mm512_cvtepi8_epi32(sc8v);
    __m512i sumi[2][NT];  // two accumulators: see dot_q45_k
    for (int t = 0; t < NT; ++t) sumi[0][t] = sumi[1][t] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      // ql[64h..64h+63]: low 4 bits of weights 0..63 (low nibbles) and 64..127 (high nibbles).
      const __m512i ql = load512(a[i].ql + 64 * h);
      // High 2 bits: weights 0..31 bits 0-1 / 64..95 bits 4-5 of qh; weights 32..63 bits 2-3 /
      // 96..127 bits 6-7, moved down by 2 in the upper half.
      const __m512i qh2 = load_twice_shifted(a[i].qh + 32 * h, 0, 2);
      const __m512i w01 = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                          _mm512_and_si512(_mm512_slli_epi16(qh2, 4), m30));
      const __m512i w23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                          _mm512_and_si512(qh2, m30));
      const __m512i s01 = spread_scales_sub16(sc16, 8 * h);
      const __m512i s23 = spread_scales_sub16(sc16, 8 * h + 4);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        sumi[0][t] = dot_scaled(sumi[0][t], w01, load512(b[t][i].qs + 128 * h), s01);
        sumi[1][t] = dot_scaled(sumi[1][t], w23, load512(b[t][i].qs + 128 * h + 64), s23);
      }
    }
    const float d = f16_to_f32_simd(a[i].d);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      // codes are q + 32: subtract 32 * sum_s sc_s * bsum_s
      const int offset = scaled_bsums(sc32, b[t][i].bsums);
      acc[t] = _mm512_fmadd_ps(
          _mm512_set1_ps(b[t][i].d * d),
          _mm512_cvtepi32_ps(_mm512_sub_epi32(
              _mm512_add_epi32(sumi[0][t], sumi[1][t]),
              _mm512_setr_epi32(32 * offset, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))),
          acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
}

// Activation rows t = 0..3 at x + t * x_stride bytes.
inline void rows4(const void* x, size_t x_stride, const BlockQ8_K* rows[4]) {
  for (int t = 0; t < 4; ++t) {
    rows[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + t * x_stride);
  }
}
}  // namespace

float vec_dot_q4_k_q8_k_avx512(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float out;
  dot_q45_k<false, 1>(n, static_cast<const BlockQ4_K*>(w), &b, &out);
  return out;
}
void vec_dot_q4_k_q8_k_x4_avx512(int64_t n, const void* w, const void* x, size_t x_stride,
                                 float* out) {
  assert(n % kQK_K == 0);
  const BlockQ8_K* rows[4];
  rows4(x, x_stride, rows);
  dot_q45_k<false, 4>(n, static_cast<const BlockQ4_K*>(w), rows, out);
}

float vec_dot_q5_k_q8_k_avx512(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float out;
  dot_q45_k<true, 1>(n, static_cast<const BlockQ5_K*>(w), &b, &out);
  return out;
}
void vec_dot_q5_k_q8_k_x4_avx512(int64_t n, const void* w, const void* x, size_t x_stride,
                                 float* out) {
  assert(n % kQK_K == 0);
  const BlockQ8_K* rows[4];
  rows4(x, x_stride, rows);
  dot_q45_k<true, 4>(n, static_cast<const BlockQ5_K*>(w), rows, out);
}

float vec_dot_q6_k_q8_k_avx512(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float out;
  dot_q6_k<1>(n, static_cast<const BlockQ6_K*>(w), &b, &out);
  return out;
}
void vec_dot_q6_k_q8_k_x4_avx512(int64_t n, const void* w, const void* x, size_t x_stride,
                                 float* out) {
  assert(n % kQK_K == 0);
  const BlockQ8_K* rows[4];
  rows4(x, x_stride, rows);
  dot_q6_k<4>(n, static_cast<const BlockQ6_K*>(w), rows, out);
}

float vec_dot_fq3_q8_k_avx512(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float out;
  dot_fq3<1>(n, static_cast<const BlockFQ3*>(w), &b, &out);
  return out;
}
void vec_dot_fq3_q8_k_x4_avx512(int64_t n, const void* w, const void* x, size_t x_stride,
                                float* out) {
  assert(n % kQK_K == 0);
  const BlockQ8_K* rows[4];
  rows4(x, x_stride, rows);
  dot_fq3<4>(n, static_cast<const BlockFQ3*>(w), rows, out);
}

}  // namespace fish
