// AVX-512 (F/BW/VL/DQ + VNNI): activation quantisers (bit-exact with the quant/ `_ref` ones,
// 16 lanes, saturating vpmovsdb) and dot products of the 32-weight block formats and float
// weights. Layout and pairing: vec_dot.h.
//
// 32-weight blocks: one block per 256-bit VNNI vpdpbusd (AVX512VL), two blocks per loop
// iteration into two accumulators. vpdpbusd multiplies UNSIGNED bytes by signed int8 activations
// and sums groups of 4 into int32 (no int16 intermediate: nothing saturates). Q4_1/Q5_1 codes
// are unsigned already (their m * s term comes from Q8_1's stored sum); the signed formats (Q4_0
// q - 8, Q5_0 q - 16, Q8_0) use the sign trick |q| x sign(a, q), one vpsignb per token. (Measured:
// packing two 18-34 byte blocks into one 512-bit register costs more in inserts and scale
// broadcasts than it saves.)
//
// GCC 12's avx512fintrin.h builds results from _mm512_undefined_*(), which trips
// -Wmaybe-uninitialized in every caller (GCC bug 105593); the warning is about the header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cassert>

#include "kernels/simd_avx2.h"
#include "kernels/vec_dot.h"

namespace fish {
namespace {

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Exact std::round of 16 lanes (see round_half_away_f32x8).
inline __m512 round_half_away_f32x16(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
  const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_and_ps(v, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(1.0f));
  return _mm512_mask_add_ps(t, up, t, one);
}

// Quantises the 32 floats of one Q8_0/Q8_1 block into qs; sets *d (f32, before f16 rounding);
// returns sum(q).
inline int quantize_block32(const float* x, float* d_out, int8_t* qs) {
  const __m512 x0 = _mm512_loadu_ps(x);
  const __m512 x1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = d;
  const __m512 vid = _mm512_set1_ps(id);
  const __m512i q0 = _mm512_cvttps_epi32(round_half_away_f32x16(_mm512_mul_ps(x0, vid)));
  const __m512i q1 = _mm512_cvttps_epi32(round_half_away_f32x16(_mm512_mul_ps(x1, vid)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtsepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtsepi32_epi8(q1));
  return _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
}

}  // namespace

// ---- activation quantisers ----

void quantize_row_q8_0_avx512(const float* x, void* y, int64_t n) {
  assert(n % kQK8_0 == 0);
  auto* out = static_cast<BlockQ8_0*>(y);
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    float d;
    quantize_block32(x + i * kQK8_0, &d, out[i].qs);
    out[i].d = f32_to_f16_simd(d);
  }
}

void quantize_row_q8_1_avx512(const float* x, void* y, int64_t n) {
  assert(n % kQK8_1 == 0);
  auto* out = static_cast<BlockQ8_1*>(y);
  for (int64_t i = 0; i < n / kQK8_1; ++i) {
    float d;
    const int sum = quantize_block32(x + i * kQK8_1, &d, out[i].qs);
    out[i].d = f32_to_f16_simd(d);
    out[i].s = f32_to_f16_simd(float(sum) * d);  // the f32 d, as the reference
  }
}

void quantize_row_q8_k_avx512(const float* x, void* y, int64_t n) {
  assert(n % kQK_K == 0);
  auto* out = static_cast<BlockQ8_K*>(y);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    __m512 m = _mm512_setzero_ps();
    for (int k = 0; k < kQK_K; k += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.0f) {
      std::memset(&out[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // The reference keeps the sign of the FIRST value of largest magnitude.
    float max = 0.0f;
    const __m512 vamax = _mm512_set1_ps(amax);
    for (int k = 0; k < kQK_K; k += 16) {
      const __mmask16 hit =
          _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + k)), vamax, _CMP_EQ_OQ);
      if (hit != 0) {
        max = x[k + __builtin_ctz(unsigned(hit))];
        break;
      }
    }
    const float iscale = -127.0f / max;  // as quant/q8_k.cpp: q in [-127, 127]
    const __m512 vis = _mm512_set1_ps(iscale);
    for (int g = 0; g < kQK_K / 16; ++g) {
      // cvtps rounds to nearest even (MXCSR default) like ggml's nearest_int; min(127, v).
      const __m512i q =
          _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), vis)),
                           _mm512_set1_epi32(127));
      out[i].bsums[g] = int16_t(_mm512_reduce_add_epi32(q));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out[i].qs + 16 * g), _mm512_cvtsepi32_epi8(q));
    }
    out[i].d = 1.0f / iscale;
  }
}

// ---- 32-weight block formats: codes(block) gives the 32 weight codes (weight j at byte j),
// w = d * code [+ m for the formats with a minimum]. ----

namespace {

// kSigned: codes() gives the signed weight q directly (int8), multiplied as |q| x (a with q's
// sign), the sign trick (|q| <= 128 as u8, |a| <= 127: vpdpbusd takes it exactly). Otherwise
// codes() gives unsigned codes (<= 31) multiplied as they are.
struct CodesQ4_0 {
  static constexpr bool kSigned = true;
  static __m256i codes(const BlockQ4_0& b) {
    return _mm256_sub_epi8(unpack_nibbles_32(b.qs), _mm256_set1_epi8(8));
  }
};
struct CodesQ4_1 {
  static constexpr bool kSigned = false;
  static __m256i codes(const BlockQ4_1& b) { return unpack_nibbles_32(b.qs); }
};
// The 5th bits straight into an AVX-512 mask register (bit i = weight i) and a masked byte
// add/sub: fewer uops than expanding them to bytes with shuffles.
inline __mmask32 high_bits_mask(const uint8_t qh[4]) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return _cvtu32_mask32(v);
}
struct CodesQ5_0 {  // q - 16: nibble - 16 where the 5th bit is clear, nibble where set
  static constexpr bool kSigned = true;
  static __m256i codes(const BlockQ5_0& b) {
    const __m256i nib = unpack_nibbles_32(b.qs);
    return _mm256_mask_sub_epi8(nib, _knot_mask32(high_bits_mask(b.qh)), nib, _mm256_set1_epi8(16));
  }
};
struct CodesQ5_1 {  // codes 0..31
  static constexpr bool kSigned = false;
  static __m256i codes(const BlockQ5_1& b) {
    const __m256i nib = unpack_nibbles_32(b.qs);
    return _mm256_mask_add_epi8(nib, high_bits_mask(b.qh), nib, _mm256_set1_epi8(16));
  }
};
struct CodesQ8_0 {
  static constexpr bool kSigned = true;
  static __m256i codes(const BlockQ8_0& b) { return load256(b.qs); }
};

// NT activation rows (tokens) against one weight row: the weight codes of each block are decoded
// once and used NT times; per token the operations (and their order) are those of NT = 1, so the
// result per token is bitwise the same for every NT.
template <typename Codes, int NT, typename WBlock, typename ABlock>
void dot_blocks32(int64_t nb, const WBlock* a, const ABlock* const* b, float* out) {
  constexpr bool kHasMin = sizeof(ABlock) == sizeof(BlockQ8_1);
  // Two independent chains per token (even / odd blocks) so FMA latency does not bound the loop.
  __m256 acc[2][NT];
  __m128 acc_min[2][NT];  // lane 1: sum of m * s
  for (int k = 0; k < 2; ++k) {
    for (int t = 0; t < NT; ++t) {
      acc[k][t] = _mm256_setzero_ps();
      acc_min[k][t] = _mm_setzero_ps();
    }
  }
  auto block = [&](int64_t i, int k) {
    const __m256i qw = Codes::codes(a[i]);
    const __m256i uw = Codes::kSigned ? _mm256_sign_epi8(qw, qw) : qw;  // |q| for the sign trick
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      __m256i qa = load256(b[t][i].qs);
      if constexpr (Codes::kSigned) qa = _mm256_sign_epi8(qa, qw);
      const __m256i dp = _mm256_dpbusd_epi32(_mm256_setzero_si256(), uw, qa);
      const __m128 sc = block_scales(&a[i], &b[t][i]);
      acc[k][t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(sc), _mm256_cvtepi32_ps(dp), acc[k][t]);
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

template <typename Codes, typename WBlock, typename ABlock>
float dot1(int64_t n, const void* w, const void* x) {
  assert(n % 32 == 0);
  const auto* b = static_cast<const ABlock*>(x);
  float out;
  dot_blocks32<Codes, 1>(n / 32, static_cast<const WBlock*>(w), &b, &out);
  return out;
}

template <typename Codes, typename WBlock, typename ABlock>
void dot4(int64_t n, const void* w, const void* x, size_t x_stride, float* out) {
  assert(n % 32 == 0);
  const ABlock* rows[4];
  for (int t = 0; t < 4; ++t) {
    rows[t] = reinterpret_cast<const ABlock*>(static_cast<const uint8_t*>(x) + t * x_stride);
  }
  dot_blocks32<Codes, 4>(n / 32, static_cast<const WBlock*>(w), rows, out);
}

}  // namespace

float vec_dot_q4_0_q8_0_avx512(int64_t n, const void* w, const void* x) {
  return dot1<CodesQ4_0, BlockQ4_0, BlockQ8_0>(n, w, x);
}
float vec_dot_q4_1_q8_1_avx512(int64_t n, const void* w, const void* x) {
  return dot1<CodesQ4_1, BlockQ4_1, BlockQ8_1>(n, w, x);
}
float vec_dot_q5_0_q8_0_avx512(int64_t n, const void* w, const void* x) {
  return dot1<CodesQ5_0, BlockQ5_0, BlockQ8_0>(n, w, x);
}
float vec_dot_q5_1_q8_1_avx512(int64_t n, const void* w, const void* x) {
  return dot1<CodesQ5_1, BlockQ5_1, BlockQ8_1>(n, w, x);
}
float vec_dot_q8_0_q8_0_avx512(int64_t n, const void* w, const void* x) {
  return dot1<CodesQ8_0, BlockQ8_0, BlockQ8_0>(n, w, x);
}
void vec_dot_q4_0_q8_0_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out) {
  dot4<CodesQ4_0, BlockQ4_0, BlockQ8_0>(n, w, x, s, out);
}
void vec_dot_q4_1_q8_1_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out) {
  dot4<CodesQ4_1, BlockQ4_1, BlockQ8_1>(n, w, x, s, out);
}
void vec_dot_q5_0_q8_0_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out) {
  dot4<CodesQ5_0, BlockQ5_0, BlockQ8_0>(n, w, x, s, out);
}
void vec_dot_q5_1_q8_1_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out) {
  dot4<CodesQ5_1, BlockQ5_1, BlockQ8_1>(n, w, x, s, out);
}
void vec_dot_q8_0_q8_0_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out) {
  dot4<CodesQ8_0, BlockQ8_0, BlockQ8_0>(n, w, x, s, out);
}

// ---- float weights: 4 accumulators of 16, masked tail ----

namespace {
template <typename LoadW>
inline float dot_f32x16_loop(int64_t n, const float* xf, LoadW load_w) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm512_fmadd_ps(load_w(i + 16 * k, __mmask16(0xFFFF)),
                               _mm512_loadu_ps(xf + i + 16 * k), acc[k]);
    }
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    acc[0] = _mm512_fmadd_ps(load_w(i, m), _mm512_maskz_loadu_ps(m, xf + i), acc[0]);
  }
  return _mm512_reduce_add_ps(
      _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}
}  // namespace

float vec_dot_f32_f32_avx512(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const float*>(w);
  return dot_f32x16_loop(n, static_cast<const float*>(x),
                         [a](int64_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, a + i); });
}

float vec_dot_f16_f32_avx512(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  return dot_f32x16_loop(n, static_cast<const float*>(x), [a](int64_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i));
  });
}

float vec_dot_bf16_f32_avx512(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  return dot_f32x16_loop(n, static_cast<const float*>(x), [a](int64_t i, __mmask16 m) {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, a + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));  // bf16 = top half of an f32
  });
}

}  // namespace fish
