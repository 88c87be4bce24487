// AVX-512 VNNI tile kernels of the x16 K-quant layout (kquant_x16.h). One zmm holds a whole
// panel quad: 16 rows x 4 consecutive weights (one 32-bit lane per row, the layout's 64 contiguous
// bytes), and the 4 matching int8 activations are broadcast to every lane, so one vpdpbusd
// (unsigned weight bytes x signed activation bytes, 4 products summed into each int32 lane, no
// saturation) advances all 16 rows' dots by 4 weights. Per sub-block the int32 dot is multiplied
// by the rows' scales (vpmulld) and summed: the same exact integers as the AVX2 kernel's
// maddubs / madd chain and the scalar reference (Q6_K, the widest: |isum| < 16 x 128 x 129024 <
// 2^31). The min / offset terms use Q8_K's bsums with vpmaddwd, and the f32 epilogue is the scalar
// reference's mul / sub / add per row (compiled with -ffp-contract=off), so results are bitwise the
// reference's. Q8_0 weights are signed: w + 128 is the unsigned byte (w ^ 0x80), and 128 x the
// block's activation sum is subtracted. A tile is the 16 rows of one panel x NT <= 4 tokens.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/kquant_x16.h"

namespace fish {
namespace {

constexpr int R = 16;
constexpr int kMaxTok = 4;

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

inline void store_rows(__m512 v, float* y, int64_t rows_valid) {
  if (rows_valid >= R) {
    _mm512_storeu_ps(y, v);
  } else {
    _mm512_mask_storeu_ps(y, __mmask16((1u << rows_valid) - 1u), v);
  }
}

// Slice S of one super-block: isum[t] += sum over the slice's sub-blocks of sc * dot.
template <typename F, int NT, int S>
inline void slice(const uint8_t* blk, const int8_t* const (&xq)[kMaxTok], __m512i (&isum)[NT]) {
  constexpr int kQuadsPerSub = 8 / F::kSubsPerSlice;
#pragma GCC unroll 2
  for (int h = 0; h < F::kSubsPerSlice; ++h) {
    __m512i dot[NT];
    for (int t = 0; t < NT; ++t) dot[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int q = h * kQuadsPerSub; q < (h + 1) * kQuadsPerSub; ++q) {
      const __m512i w = F::template weights<S>(blk, q);
      for (int t = 0; t < NT; ++t)
        dot[t] = _mm512_dpbusd_epi32(dot[t], w, bcast32(xq[t] + F::x_off(S, q)));
    }
    const __m512i sc = F::scale(blk, S, h);
    for (int t = 0; t < NT; ++t)
      isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(dot[t], sc));
  }
}

template <typename F, int NT, int... S>
inline void slices(const uint8_t* blk, const int8_t* const (&xq)[kMaxTok], __m512i (&isum)[NT],
                   std::integer_sequence<int, S...>) {
  (slice<F, NT, S>(blk, xq, isum), ...);
}

// One tile: the 16 rows of a panel x NT tokens, over all nb super-blocks.
template <typename F, int NT>
inline void tile(const uint8_t* panel, int64_t nb, const BlockQ8_K* const* xt, float* y,
                 int64_t ldy, int64_t rows_valid) {
  constexpr size_t kBytes = std::is_same_v<F, Q4K> ? 2368 : std::is_same_v<F, Q5K> ? 2880 : 3360;
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = panel + size_t(i) * kBytes;
    const int8_t* xq[kMaxTok] = {};
    for (int t = 0; t < NT; ++t) xq[t] = xt[t][i].qs;
    __m512i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    slices<F, NT>(blk, xq, isum, std::make_integer_sequence<int, F::kSlices>{});
    for (int t = 0; t < NT; ++t) acc[t] = F::finish(blk, xt[t][i], isum[t], acc[t]);
  }
  for (int t = 0; t < NT; ++t) store_rows(acc[t], y + t * ldy, rows_valid);
}

struct Q80 {};

// Q8_0 x Q8_0 (544-byte panel blocks: d[16] f16 | qs[8 quad][16 rows][4 B]): per block the
// reference's sum += float(sumi) * (dw * dx).
template <int NT>
inline void tile_q8(const uint8_t* panel, int64_t nb, const BlockQ8_0* const* xt, float* y,
                    int64_t ldy, int64_t rows_valid) {
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = panel + size_t(i) * 544;
    __m512i isum[NT], corr[NT];
    for (int t = 0; t < NT; ++t) isum[t] = corr[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      const __m512i w = _mm512_xor_si512(load512(blk + 32 + q * 64), flip);  // w + 128
      for (int t = 0; t < NT; ++t) {
        const __m512i xv = bcast32(xt[t][i].qs + 4 * q);
        isum[t] = _mm512_dpbusd_epi32(isum[t], w, xv);
        corr[t] = _mm512_dpbusd_epi32(corr[t], flip, xv);  // 128 x the quad's activation sum
      }
    }
    const __m512 dw = f16x16(blk);
    for (int t = 0; t < NT; ++t) {
      const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(xt[t][i].d)));
      const __m512i sumi = _mm512_sub_epi32(isum[t], corr[t]);
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), dd));
    }
  }
  for (int t = 0; t < NT; ++t) store_rows(acc[t], y + t * ldy, rows_valid);
}

template <typename F, int NT>
inline void tile_any(const uint8_t* panel, int64_t nb, const void* const* xt, float* y, int64_t ldy,
                     int64_t rows_valid) {
  if constexpr (std::is_same_v<F, Q80>) {
    tile_q8<NT>(panel, nb, reinterpret_cast<const BlockQ8_0* const*>(xt), y, ldy, rows_valid);
  } else {
    tile<F, NT>(panel, nb, reinterpret_cast<const BlockQ8_K* const*>(xt), y, ldy, rows_valid);
  }
}

template <typename F>
void run(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt, float* y,
         int64_t ldy, int64_t rows) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const size_t block_bytes = std::is_same_v<F, Q80>   ? 544
                             : std::is_same_v<F, Q4K> ? 2368
                             : std::is_same_v<F, Q5K> ? 2880
                                                      : 3360;
  const size_t panel_bytes = size_t(nb) * block_bytes;
  for (int64_t t0 = 0; t0 < nt; t0 += kMaxTok) {
    const int n = int(std::min<int64_t>(kMaxTok, nt - t0));
    const void* xt[kMaxTok];
    for (int t = 0; t < n; ++t) xt[t] = static_cast<const uint8_t*>(x) + (t0 + t) * xs;
    float* yt = y + t0 * ldy;
    for (int64_t p = 0; p < np; ++p) {
      const int64_t valid = std::min<int64_t>(R, rows - p * R);
      if (valid <= 0) break;
      const uint8_t* panel = wb + size_t(p) * panel_bytes;
      float* yp = yt + p * R;
      switch (n) {
        case 1:
          tile_any<F, 1>(panel, nb, xt, yp, ldy, valid);
          break;
        case 2:
          tile_any<F, 2>(panel, nb, xt, yp, ldy, valid);
          break;
        case 3:
          tile_any<F, 3>(panel, nb, xt, yp, ldy, valid);
          break;
        default:
          tile_any<F, 4>(panel, nb, xt, yp, ldy, valid);
          break;
      }
    }
  }
}

}  // namespace

void kx16_q4_k_avx512(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                      float* y, int64_t ldy, int64_t rows) {
  run<Q4K>(w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q5_k_avx512(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                      float* y, int64_t ldy, int64_t rows) {
  run<Q5K>(w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q6_k_avx512(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                      float* y, int64_t ldy, int64_t rows) {
  run<Q6K>(w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q8_0_avx512(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                      float* y, int64_t ldy, int64_t rows) {
  run<Q80>(w, nb, np, x, xs, nt, y, ldy, rows);
}

}  // namespace fish
