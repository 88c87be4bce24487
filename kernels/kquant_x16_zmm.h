// The AVX-512 format policies of the x16 K-quant layout (kquant_x16.h), shared by the VNNI tile
// kernels (kquant_x16_avx512.cpp) and the AMX ones (kquant_x16_amx.cpp): per format, the 64
// unsigned weight codes of a panel quad (16 rows x 4 weights, one 32-bit lane per row), the
// sub-block scales as int32 per row, and the super-block epilogue that turns the exact int32 sums
// into f32 with the scalar reference's operations and order. Include only from files compiled for
// AVX-512 (the *_avx512.cpp / *_amx.cpp flags) with -ffp-contract=off; everything here has
// internal linkage, so each including file gets its own copy.
#pragma once
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized in callers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/kquant_x16.h"

namespace fish {
namespace kx16_zmm {
namespace {
constexpr int R = 16;

inline __m512i load512(const uint8_t* p) {
  return _mm512_loadu_si512(p);
}
inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline __m512i bcast32(const int8_t* p) {
  int v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
// The 16 rows' int16 pairs (a[r], b[r]) in lanes 2r, 2r + 1, from two rows of 16 bytes.
inline __m512i pairs_u8(const uint8_t* a, const uint8_t* b) {
  const __m128i x = load128(a), y = load128(b);
  return _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(x, y), _mm_unpacklo_epi8(x, y)));
}
inline __m512i pairs_i8(const uint8_t* a, const uint8_t* b) {
  const __m128i x = load128(a), y = load128(b);
  return _mm512_cvtepi8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(x, y), _mm_unpacklo_epi8(x, y)));
}
inline __m512 f16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// Bit B of every byte moved to bit 4 (value 16) or 0.
template <int B>
inline __m512i bit_to_16(__m512i v) {
  __m512i s;
  if constexpr (B < 4) {
    s = _mm512_slli_epi16(v, 4 - B);
  } else if constexpr (B > 4) {
    s = _mm512_srli_epi16(v, B - 4);
  } else {
    s = v;
  }
  return _mm512_and_si512(s, _mm512_set1_epi8(0x10));
}

// Format policies, as in kquant_x16_avx2.cpp: weights<S>(blk, q) -> 64 unsigned codes (16 rows x
// 4) of slice S, quad q; x_off(S, q); the scales of slice S's sub-blocks (int32 per row); the
// super-block epilogue.
struct Q45Base {
  static constexpr int kSlices = 8;  // (chunk c, nibble half): 32 weights, sub-block 2c + half
  static constexpr int kSubsPerSlice = 1;
  static constexpr int x_off(int s, int q) { return 64 * (s >> 1) + 32 * (s & 1) + 4 * q; }
  static __m512i scale(const uint8_t* blk, int s, int) {
    return _mm512_cvtepu8_epi32(load128(blk + 64 + s * R));
  }
  static __m512 finish(const uint8_t* blk, const BlockQ8_K& b, __m512i isum, __m512 acc) {
    const __m128i bs =
        _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums)),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums + 8)));
    const uint8_t* mn = blk + 192;
    __m512i summs =
        _mm512_madd_epi16(pairs_u8(mn, mn + R), _mm512_set1_epi32(_mm_extract_epi32(bs, 0)));
    summs = _mm512_add_epi32(summs, _mm512_madd_epi16(pairs_u8(mn + 2 * R, mn + 3 * R),
                                                      _mm512_set1_epi32(_mm_extract_epi32(bs, 1))));
    summs = _mm512_add_epi32(summs, _mm512_madd_epi16(pairs_u8(mn + 4 * R, mn + 5 * R),
                                                      _mm512_set1_epi32(_mm_extract_epi32(bs, 2))));
    summs = _mm512_add_epi32(summs, _mm512_madd_epi16(pairs_u8(mn + 6 * R, mn + 7 * R),
                                                      _mm512_set1_epi32(_mm_extract_epi32(bs, 3))));
    const __m512 db = _mm512_set1_ps(b.d);
    const __m512 dall = _mm512_mul_ps(db, f16x16(blk));
    const __m512 dmin = _mm512_mul_ps(db, f16x16(blk + 32));
    return _mm512_add_ps(acc, _mm512_sub_ps(_mm512_mul_ps(dall, _mm512_cvtepi32_ps(isum)),
                                            _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summs))));
  }
};

struct Q4K : Q45Base {
  template <int S>
  static __m512i weights(const uint8_t* blk, int q) {
    const __m512i w = load512(blk + 320 + (S >> 1) * 512 + q * 64);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    if constexpr (S & 1) return _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
    return _mm512_and_si512(w, m4);
  }
};

struct Q5K : Q45Base {
  template <int S>
  static __m512i weights(const uint8_t* blk, int q) {
    const __m512i w = load512(blk + 832 + (S >> 1) * 512 + q * 64);
    const __m512i qh = load512(blk + 320 + q * 64);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i lo;
    if constexpr (S & 1) {
      lo = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
    } else {
      lo = _mm512_and_si512(w, m4);
    }
    return _mm512_or_si512(lo, bit_to_16<S>(qh));  // bit S of qh: sub-block S's fifth bit
  }
};

struct Q6K {
  static constexpr int kSlices = 8;        // (half h, r): weights 128h + 32r + 0..31
  static constexpr int kSubsPerSlice = 2;  // 16-weight sub-blocks: quads 0-3 and 4-7
  static constexpr int x_off(int s, int q) { return 128 * (s >> 2) + 32 * (s & 3) + 4 * q; }
  template <int S>
  static __m512i weights(const uint8_t* blk, int q) {
    constexpr int h = S >> 2, r = S & 3;
    const __m512i l = load512(blk + 288 + (h * 2 + (r & 1)) * 512 + q * 64);
    const __m512i qh = load512(blk + 2336 + h * 512 + q * 64);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    __m512i lo, hi;  // qh bits 2r, 2r+1 -> bits 4, 5
    if constexpr (r < 2) {
      lo = _mm512_and_si512(l, m4);
    } else {
      lo = _mm512_and_si512(_mm512_srli_epi16(l, 4), m4);
    }
    if constexpr (r == 0) {
      hi = _mm512_slli_epi16(qh, 4);
    } else if constexpr (r == 1) {
      hi = _mm512_slli_epi16(qh, 2);
    } else if constexpr (r == 2) {
      hi = qh;
    } else {
      hi = _mm512_srli_epi16(qh, 2);
    }
    return _mm512_or_si512(lo, _mm512_and_si512(hi, m30));
  }
  // Sub-block `half` (0: quads 0-3, 1: quads 4-7) of slice s, signed scales.
  static __m512i scale(const uint8_t* blk, int s, int half) {
    const int sub = 8 * (s >> 2) + 2 * (s & 3) + half;
    return _mm512_cvtepi8_epi32(load128(blk + 32 + sub * R));
  }
  // acc += (db * d) * (isum - 32 * sum_s sc_s * bsum_s).
  static __m512 finish(const uint8_t* blk, const BlockQ8_K& b, __m512i isum, __m512 acc) {
    __m512i offs = _mm512_setzero_si512();
    const uint8_t* sc = blk + 32;
    for (int k = 0; k < 8; ++k) {
      int pair;
      std::memcpy(&pair, b.bsums + 2 * k, 4);
      offs =
          _mm512_add_epi32(offs, _mm512_madd_epi16(pairs_i8(sc + 2 * k * R, sc + (2 * k + 1) * R),
                                                   _mm512_set1_epi32(pair)));
    }
    isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(offs, 5));
    const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(b.d), f16x16(blk));
    return _mm512_add_ps(acc, _mm512_mul_ps(dd, _mm512_cvtepi32_ps(isum)));
  }
};

// Q5_0 (352-byte panel blocks: d[16] f16 | qh[16 rows][4 B], bit k of byte b = weight 4k + b's
// fifth bit | qs[4 quad][16 rows][4 B] = GGUF qs[4q + b]): the 64 codes 0..31 of quad K, weights
// 4K .. 4K + 3 of the 16 rows (the low nibbles of qs quad K for K < 4, the high ones of K - 4).
struct Q50 {
  static constexpr size_t kBytes = 352;
  template <int K>
  static __m512i codes(const uint8_t* blk, __m512i qh) {
    const __m512i w = load512(blk + 96 + (K & 3) * 64);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i lo;
    if constexpr (K < 4) {
      lo = _mm512_and_si512(w, m4);
    } else {
      lo = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
    }
    return _mm512_or_si512(lo, bit_to_16<K>(qh));
  }
};

inline void store_rows(__m512 v, float* y, int64_t rows_valid) {
  if (rows_valid >= R) {
    _mm512_storeu_ps(y, v);
  } else {
    _mm512_mask_storeu_ps(y, __mmask16((1u << rows_valid) - 1u), v);
  }
}

}  // namespace
}  // namespace kx16_zmm
}  // namespace fish
