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

#include <algorithm>
#include <cassert>
#include <vector>

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

// ---- many weight rows x one activation row (decode matvec) ----
//
// The same arithmetic as dot_blocks32<Codes, 1>, lane for lane, with both of its accumulator
// chains in one zmm: lanes 0-7 = the even-block chain, 8-15 = the odd-block chain, so one
// 512-bit vpdpbusd / cvt / fma does two blocks. The f32 products d_w * d_a and m_w * s_a (exact:
// f16 x f16 fits in f32) come 16 blocks at a time (weights: vpermt2w from 64-byte loads;
// activations: converted once per call, not once per row) and are spread to the two halves with
// one vpermps per block pair. The m * s chains (even, odd) run in two lanes of an xmm in block
// order. Four rows at a time: four independent chains, one activation load. So every output is
// bitwise the vec_dot of the same ISA. Measured (SmolLM2-135M's matrices, 1 thread, CPU time):
// Q4_1 576x1536 1.64 -> 1.18 ns per block from L2; all its layer matmuls from DRAM 11.3 -> 8.0
// ms; the Q8_0 head 3.6 -> 3.3 ms (bound by DRAM there).

namespace {

// unpack_nibbles_32 of two blocks' 16 code bytes into the two 256-bit halves.
inline __m512i unpack_nibbles_64(const uint8_t* p0, const uint8_t* p1) {
  __m512i b = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0)));
  b = _mm512_mask_broadcast_i32x4(b, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1)));
  return _mm512_and_si512(_mm512_srlv_epi64(b, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)),
                          _mm512_set1_epi8(0x0F));
}

// Codes of blocks i and i + 1 as one zmm of UNSIGNED bytes (block i in bytes 0-31), u = q +
// kOffset for the signed formats. The dot of u with the activations is then the dot of q plus
// kOffset * (sum of 4 activations) per int32 lane, which dot_rows32 subtracts exactly (it starts
// vpdpbusd from -kOffset * sum): the same int32 lanes as the sign trick, without its 3 extra
// uops per pair in 512 bits (no vpsignb there).
template <typename WBlock>
struct PairCodes;
template <>
struct PairCodes<BlockQ4_0> {
  static constexpr int kOffset = 8;
  static __m512i codes(const BlockQ4_0* b) { return unpack_nibbles_64(b[0].qs, b[1].qs); }
};
template <>
struct PairCodes<BlockQ4_1> {
  static constexpr int kOffset = 0;
  static __m512i codes(const BlockQ4_1* b) { return unpack_nibbles_64(b[0].qs, b[1].qs); }
};
inline __mmask64 high_bits_mask64(const uint8_t qh0[4], const uint8_t qh1[4]) {
  uint32_t v0, v1;
  std::memcpy(&v0, qh0, 4);
  std::memcpy(&v1, qh1, 4);
  return _cvtu64_mask64(uint64_t(v0) | uint64_t(v1) << 32);
}
template <>
struct PairCodes<BlockQ5_0> {  // nibble + 16 where the 5th bit is set: q + 16
  static constexpr int kOffset = 16;
  static __m512i codes(const BlockQ5_0* b) {
    const __m512i nib = unpack_nibbles_64(b[0].qs, b[1].qs);
    return _mm512_mask_add_epi8(nib, high_bits_mask64(b[0].qh, b[1].qh), nib, _mm512_set1_epi8(16));
  }
};
template <>
struct PairCodes<BlockQ5_1> {
  static constexpr int kOffset = 0;
  static __m512i codes(const BlockQ5_1* b) {
    const __m512i nib = unpack_nibbles_64(b[0].qs, b[1].qs);
    return _mm512_mask_add_epi8(nib, high_bits_mask64(b[0].qh, b[1].qh), nib, _mm512_set1_epi8(16));
  }
};
template <>
struct PairCodes<BlockQ8_0> {  // q ^ 0x80 = q + 128 as u8
  static constexpr int kOffset = 128;
  static __m512i codes(const BlockQ8_0* b) {
    const __m512i q =
        _mm512_inserti64x4(_mm512_castsi256_si512(load256(b[0].qs)), load256(b[1].qs), 1);
    return _mm512_xor_si512(q, _mm512_set1_epi8(char(0x80)));
  }
};

// The 16 f16 pairs (first 4 bytes: d, then m or s) of blocks at base + k * stride, k < 16 (the
// lanes of `mask`; others 0), as f32: *d and *m. A gather: used once per call (activations).
inline void gather_scales16(const void* base, int stride, __mmask16 mask, __m512* d, __m512* m) {
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(stride));
  const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, idx, base, 1);
  *d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
  *m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16)));
}

// The same for the weight blocks of a row, without a gather (vpgatherdd is microcoded and slow
// under the Gather Data Sampling mitigation): the n < 16 blocks' bytes are loaded as 64-byte
// chunks (masked at the end: never past block n - 1) and vpermt2w picks word 0 (d) of block k
// into word k and word 1 (m) into word 16 + k. kB: block bytes (even).
template <int kB>
struct BlockScales16 {
  static constexpr int kChunks = (16 * kB + 63) / 64;
  static constexpr int kPairs = (kChunks + 1) / 2;
  struct Tables {
    alignas(64) int16_t idx[kPairs][32];
    uint32_t mask[kPairs];  // output words taken from chunk pair c
  };
  static constexpr Tables make() {
    Tables t{};
    for (int w = 0; w < 32; ++w) {
      const int src = (kB / 2) * (w % 16) + w / 16;  // word index in the 16 blocks
      const int c = src / 64;                        // chunk pair (64 words)
      t.idx[c][w] = int16_t(src % 64);
      t.mask[c] |= 1u << w;
    }
    return t;
  }
  static constexpr Tables kT = make();

  static void load(const void* base, int64_t n, __m512* d, __m512* m) {
    const auto* p = static_cast<const uint8_t*>(base);
    const int64_t bytes = n * kB;
    auto chunk = [&](int c) {
      const int64_t left = bytes - 64 * c;
      if (left >= 64) return _mm512_loadu_si512(p + 64 * c);
      if (left <= 0) return _mm512_setzero_si512();
      return _mm512_maskz_loadu_epi8((uint64_t(1) << left) - 1, p + 64 * c);
    };
    __m512i r = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int c = 0; c < kPairs; ++c) {
      if (c > 0 && 128 * c >= bytes) break;  // a short last group: no permutes of nothing
      const __m512i idx = _mm512_load_si512(kT.idx[c]);
      const __m512i t = _mm512_permutex2var_epi16(chunk(2 * c), idx, chunk(2 * c + 1));
      r = c == 0 ? t : _mm512_mask_mov_epi16(r, kT.mask[c], t);
    }
    *d = _mm512_cvtph_ps(_mm512_castsi512_si256(r));
    *m = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(r, 1));
  }
};

// vpermps indices: pair p of a 16-block group -> lanes 0-7 = block 2p, lanes 8-15 = 2p + 1.
alignas(64) constexpr int32_t kPairIdx[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},
    {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13},
    {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};

// Decode streams W from DRAM: each pair's bytes ~8 KiB ahead are prefetched (T0) as it is read,
// as matmul.cpp does row by row for vec_dot (a burst of prefetches per 4 or 16 rows measured
// slower).
constexpr size_t kRowsPrefetchBytes = 8192;

// R rows (w_stride bytes apart) against the activation row a, whose block scales are da / sa
// (f32), into out[0..R). R independent accumulator chains hide the fma / add latency, and each
// pair's activation bytes are loaded once for the R rows.
template <typename Codes, typename WBlock, typename ABlock, int R>
void dot_row_block(int64_t nb, const uint8_t* w, size_t w_stride, const ABlock* a, const float* da,
                   const float* sa, const int32_t* corr, float* out) {
  constexpr int kOffset = PairCodes<WBlock>::kOffset;
  constexpr bool kHasMin = sizeof(ABlock) == sizeof(BlockQ8_1);
  const WBlock* wb[R];
  __m512 acc[R];    // lanes 0-7: even blocks' chain, 8-15: odd blocks'
  __m128 acc_m[R];  // lane 0: even blocks' m * s chain, lane 1: odd
  for (int r = 0; r < R; ++r) {
    wb[r] = reinterpret_cast<const WBlock*>(w + size_t(r) * w_stride);
    acc[r] = _mm512_setzero_ps();
    acc_m[r] = _mm_setzero_ps();
  }
  for (int64_t g = 0; g < nb; g += 16) {
    const int64_t gn = std::min<int64_t>(16, nb - g);
    const __mmask16 mask = gn == 16 ? __mmask16(0xFFFF) : __mmask16((1u << gn) - 1);
    const __m512 dag = _mm512_maskz_loadu_ps(mask, da + g);
    __m512 sc[R];
    alignas(64) float ms[R][16];
    for (int r = 0; r < R; ++r) {
      __m512 dw, mw;
      BlockScales16<int(sizeof(WBlock))>::load(&wb[r][g], gn, &dw, &mw);
      sc[r] = _mm512_mul_ps(dw, dag);
      if constexpr (kHasMin) {
        _mm512_store_ps(ms[r], _mm512_mul_ps(mw, _mm512_maskz_loadu_ps(mask, sa + g)));
      }
    }
    // The pairs of ms are reloaded from memory (pure loads) rather than extracted with shuffles
    // (port 5, which vpermps needs).
    if constexpr (kHasMin) asm volatile("" ::: "memory");
    int64_t j = 0;
    for (; j + 2 <= gn; j += 2) {
      const int64_t i = g + j;
      const __m512i qa =
          _mm512_inserti64x4(_mm512_castsi256_si512(load256(a[i].qs)), load256(a[i + 1].qs), 1);
      const __m512i idx = _mm512_load_si512(kPairIdx[j / 2]);
      const __m512i dp0 = kOffset != 0 ? _mm512_loadu_si512(corr + 8 * i) : _mm512_setzero_si512();
      for (int r = 0; r < R; ++r) {
        // Both cache lines this pair's bytes span, kRowsPrefetchBytes ahead (a stream per row).
        const char* ahead = reinterpret_cast<const char*>(&wb[r][i]) + kRowsPrefetchBytes;
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 2 * sizeof(WBlock) - 1, _MM_HINT_T0);
        const __m512i dp = _mm512_dpbusd_epi32(dp0, PairCodes<WBlock>::codes(&wb[r][i]), qa);
        acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(idx, sc[r]), _mm512_cvtepi32_ps(dp), acc[r]);
        if constexpr (kHasMin) {
          acc_m[r] = _mm_add_ps(
              acc_m[r],
              _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ms[r] + j))));
        }
      }
    }
    if (j < gn) {  // an odd last block (nb odd): the even chain alone
      const int64_t i = g + j;
      const __m512i idx = _mm512_set1_epi32(int(j));
      for (int r = 0; r < R; ++r) {
        const __m256i qw = Codes::codes(wb[r][i]);
        __m256i qa = load256(a[i].qs);
        __m256i uw = qw;
        if constexpr (Codes::kSigned) {
          uw = _mm256_sign_epi8(qw, qw);
          qa = _mm256_sign_epi8(qa, qw);
        }
        const __m256i dp = _mm256_dpbusd_epi32(_mm256_setzero_si256(), uw, qa);
        acc[r] = _mm512_mask3_fmadd_ps(_mm512_permutexvar_ps(idx, sc[r]),
                                       _mm512_cvtepi32_ps(_mm512_zextsi256_si512(dp)), acc[r],
                                       __mmask16(0x00FF));
        if constexpr (kHasMin) acc_m[r] = _mm_add_ss(acc_m[r], _mm_load_ss(ms[r] + j));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    float sum = hsum_f32x8(
        _mm256_add_ps(_mm512_castps512_ps256(acc[r]), _mm512_extractf32x8_ps(acc[r], 1)));
    if constexpr (kHasMin) sum += _mm_cvtss_f32(_mm_add_ss(acc_m[r], _mm_movehdup_ps(acc_m[r])));
    out[r] = sum;
  }
}

template <typename Codes, typename WBlock, typename ABlock>
void dot_rows32(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* x,
                float* out) {
  assert(n % 32 == 0);
  const int64_t nb = n / 32;
  const auto* a = static_cast<const ABlock*>(x);
  // Activation d (and s) per block as f32, once for all rows.
  constexpr int64_t kStackBlocks = 512;
  float stack_scales[2 * kStackBlocks];
  std::vector<float> heap_scales;
  float* da = stack_scales;
  if (nb > kStackBlocks) {
    heap_scales.resize(size_t(2 * nb));
    da = heap_scales.data();
  }
  float* sa = da + nb;
  // Signed formats: -kOffset * (sum of each 4 activations), 8 int32 per block (see PairCodes).
  constexpr int kOffset = PairCodes<WBlock>::kOffset;
  alignas(64) int32_t stack_corr[kOffset != 0 ? 8 * kStackBlocks : 1];
  std::vector<int32_t> heap_corr;
  int32_t* corr = stack_corr;
  if constexpr (kOffset != 0) {
    if (nb > kStackBlocks) {
      heap_corr.resize(size_t(8 * nb));
      corr = heap_corr.data();
    }
    const __m256i off = _mm256_set1_epi8(char(uint8_t(kOffset)));
    for (int64_t i = 0; i < nb; ++i) {
      const __m256i sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), off, load256(a[i].qs));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr + 8 * i),
                          _mm256_sub_epi32(_mm256_setzero_si256(), sum));
    }
  }
  for (int64_t g = 0; g < nb; g += 16) {
    const __mmask16 mask = nb - g >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (nb - g)) - 1);
    __m512 d, m;
    gather_scales16(&a[g], int(sizeof(ABlock)), mask, &d, &m);
    _mm512_mask_storeu_ps(da + g, mask, d);
    _mm512_mask_storeu_ps(sa + g, mask, m);
  }
  constexpr int kR = 4;
  const auto* wr = static_cast<const uint8_t*>(w);
  int64_t r = 0;
  for (; r + kR <= n_rows; r += kR) {
    dot_row_block<Codes, WBlock, ABlock, kR>(nb, wr + size_t(r) * w_stride, w_stride, a, da, sa,
                                             corr, out + r);
  }
  for (; r < n_rows; ++r) {
    dot_row_block<Codes, WBlock, ABlock, 1>(nb, wr + size_t(r) * w_stride, w_stride, a, da, sa,
                                            corr, out + r);
  }
}

}  // namespace

void vec_dot_q4_0_q8_0_rows_avx512(int64_t n, const void* w, size_t ws, int64_t nr, const void* x,
                                   float* out) {
  dot_rows32<CodesQ4_0, BlockQ4_0, BlockQ8_0>(n, w, ws, nr, x, out);
}
void vec_dot_q4_1_q8_1_rows_avx512(int64_t n, const void* w, size_t ws, int64_t nr, const void* x,
                                   float* out) {
  dot_rows32<CodesQ4_1, BlockQ4_1, BlockQ8_1>(n, w, ws, nr, x, out);
}
void vec_dot_q5_0_q8_0_rows_avx512(int64_t n, const void* w, size_t ws, int64_t nr, const void* x,
                                   float* out) {
  dot_rows32<CodesQ5_0, BlockQ5_0, BlockQ8_0>(n, w, ws, nr, x, out);
}
void vec_dot_q5_1_q8_1_rows_avx512(int64_t n, const void* w, size_t ws, int64_t nr, const void* x,
                                   float* out) {
  dot_rows32<CodesQ5_1, BlockQ5_1, BlockQ8_1>(n, w, ws, nr, x, out);
}
void vec_dot_q8_0_q8_0_rows_avx512(int64_t n, const void* w, size_t ws, int64_t nr, const void* x,
                                   float* out) {
  dot_rows32<CodesQ8_0, BlockQ8_0, BlockQ8_0>(n, w, ws, nr, x, out);
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
