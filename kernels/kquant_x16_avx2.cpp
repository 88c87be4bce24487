// AVX2 tile kernels of the x16 K-quant layout (kquant_x16.h). A ymm register holds 8 rows x 4
// consecutive weights (one 32-bit lane per row); the 4 matching int8 activations are broadcast
// to every lane, so maddubs + int16 adds give each row's dot over a slice of 32 weights with no
// horizontal reduction; madd with the rows' sub-block scales (int16 pairs per lane) turns the
// int16 sums into int32 (exact: int16 sums are flushed before they can overflow: Q4_K after 8
// quads (8 x 2 x 15 x 128 = 30720), Q5_K after 4, Q6_K after 2). The min / offset terms use
// Q8_K's bsums with madd, and the f32 epilogue is the scalar reference's mul / sub / add per row
// (this file is compiled with -ffp-contract=off), so results are bitwise the reference's.
// A tile is NG row groups of 8 (NG = 2: all 16 rows of a panel, for one token) x NT tokens.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/kquant_x16.h"
#include "kernels/simd_avx2.h"

namespace fish {
namespace {

constexpr int R = 16;

inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m256i bcast32(const int8_t* p) {
  int v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m128i load64(const uint8_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}
// Lanes (a[r], b[r]) as int16 pairs from two rows of 8 bytes (unsigned or signed).
inline __m256i pairs_u8(const uint8_t* a, const uint8_t* b) {
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(load64(a), load64(b)));
}
inline __m256i pairs_i8(const uint8_t* a, const uint8_t* b) {
  return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(load64(a), load64(b)));
}
// Bit B of every byte moved to bit 4 (value 16) or 0.
template <int B>
inline __m256i bit_to_16(__m256i v) {
  __m256i s;
  if constexpr (B < 4) {
    s = _mm256_slli_epi16(v, 4 - B);
  } else if constexpr (B > 4) {
    s = _mm256_srli_epi16(v, B - 4);
  } else {
    s = v;
  }
  return _mm256_and_si256(s, _mm256_set1_epi8(0x10));
}

template <typename Act>
inline const Act* row_at(const void* x, size_t xs, int64_t t) {
  return reinterpret_cast<const Act*>(static_cast<const uint8_t*>(x) + t * xs);
}

// Format policies: weights(blk, slice, quad, group) -> 32 unsigned codes (8 rows x 4), the
// activation offset of (slice, quad), the scale-pair vector of (slice, quad, group), how many
// quads an int16 sum may take, and the super-block epilogue.
struct Q45Base {
  static constexpr int kSlices = 8;  // (chunk c, nibble half): 32 weights, sub-block 2c + half
  static int x_off(int s, int q) { return 64 * (s >> 1) + 32 * (s & 1) + 4 * q; }
  static __m256i scale(const uint8_t* blk, int s, int, int g) {
    const __m128i v = load64(blk + 64 + s * R + 8 * g);
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(v, v));  // lanes (s_r, s_r)
  }
  // acc += dall * isum - dmin * summs (the reference's steps), summs from the mins and bsums.
  static __m256 finish(const uint8_t* blk, int g, const BlockQ8_K& b, __m256i isum, __m256 acc) {
    const __m128i bs =
        _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums)),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums + 8)));
    __m256i summs = _mm256_setzero_si256();
    const uint8_t* mn = blk + 192 + 8 * g;
    summs = _mm256_add_epi32(summs, _mm256_madd_epi16(pairs_u8(mn, mn + R),
                                                      _mm256_set1_epi32(_mm_extract_epi32(bs, 0))));
    summs = _mm256_add_epi32(summs, _mm256_madd_epi16(pairs_u8(mn + 2 * R, mn + 3 * R),
                                                      _mm256_set1_epi32(_mm_extract_epi32(bs, 1))));
    summs = _mm256_add_epi32(summs, _mm256_madd_epi16(pairs_u8(mn + 4 * R, mn + 5 * R),
                                                      _mm256_set1_epi32(_mm_extract_epi32(bs, 2))));
    summs = _mm256_add_epi32(summs, _mm256_madd_epi16(pairs_u8(mn + 6 * R, mn + 7 * R),
                                                      _mm256_set1_epi32(_mm_extract_epi32(bs, 3))));
    const __m256 db = _mm256_set1_ps(b.d);
    const __m256 d =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * g)));
    const __m256 dm =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * g)));
    const __m256 dall = _mm256_mul_ps(db, d);
    const __m256 dmin = _mm256_mul_ps(db, dm);
    return _mm256_add_ps(acc, _mm256_sub_ps(_mm256_mul_ps(dall, _mm256_cvtepi32_ps(isum)),
                                            _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summs))));
  }
};

struct Q4K : Q45Base {
  static constexpr size_t kBytes = 2368;
  static constexpr int kFlush = 8;
  static __m256i weights(const uint8_t* blk, int s, int q, int g) {
    const __m256i w = load256(blk + 320 + (s >> 1) * 512 + (q * R + 8 * g) * 4);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    return (s & 1) ? _mm256_and_si256(_mm256_srli_epi16(w, 4), m4) : _mm256_and_si256(w, m4);
  }
};

struct Q5K : Q45Base {
  static constexpr size_t kBytes = 2880;
  static constexpr int kFlush = 4;
  static __m256i weights(const uint8_t* blk, int s, int q, int g) {
    const __m256i w = load256(blk + 832 + (s >> 1) * 512 + (q * R + 8 * g) * 4);
    const __m256i qh = load256(blk + 320 + (q * R + 8 * g) * 4);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i lo =
        (s & 1) ? _mm256_and_si256(_mm256_srli_epi16(w, 4), m4) : _mm256_and_si256(w, m4);
    __m256i hb;  // bit s of qh (sub-block s = 2c + half) -> 16
    switch (s) {
      case 0:
        hb = bit_to_16<0>(qh);
        break;
      case 1:
        hb = bit_to_16<1>(qh);
        break;
      case 2:
        hb = bit_to_16<2>(qh);
        break;
      case 3:
        hb = bit_to_16<3>(qh);
        break;
      case 4:
        hb = bit_to_16<4>(qh);
        break;
      case 5:
        hb = bit_to_16<5>(qh);
        break;
      case 6:
        hb = bit_to_16<6>(qh);
        break;
      default:
        hb = bit_to_16<7>(qh);
        break;
    }
    return _mm256_or_si256(lo, hb);
  }
};

struct Q6K {
  static constexpr size_t kBytes = 3360;
  static constexpr int kSlices = 8;  // (half h, r): weights 128h + 32r + 0..31
  static constexpr int kFlush = 2;
  static int x_off(int s, int q) { return 128 * (s >> 2) + 32 * (s & 3) + 4 * q; }
  static __m256i weights(const uint8_t* blk, int s, int q, int g) {
    const int h = s >> 2, r = s & 3;
    const __m256i l = load256(blk + 288 + (h * 2 + (r & 1)) * 512 + (q * R + 8 * g) * 4);
    const __m256i qh = load256(blk + 2336 + h * 512 + (q * R + 8 * g) * 4);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i lo =
        r < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
    __m256i hi;  // qh bits 2r, 2r+1 -> bits 4, 5
    switch (r) {
      case 0:
        hi = _mm256_slli_epi16(qh, 4);
        break;
      case 1:
        hi = _mm256_slli_epi16(qh, 2);
        break;
      case 2:
        hi = qh;
        break;
      default:
        hi = _mm256_srli_epi16(qh, 2);
        break;
    }
    return _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
  }
  static __m256i scale(const uint8_t* blk, int s, int q, int g) {
    const int sub = 8 * (s >> 2) + 2 * (s & 3) + (q >> 2);
    const __m128i v = load64(blk + 32 + sub * R + 8 * g);
    return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(v, v));  // lanes (s_r, s_r), signed
  }
  // acc += (db * d) * (isum - 32 * sum_s sc_s * bsum_s).
  static __m256 finish(const uint8_t* blk, int g, const BlockQ8_K& b, __m256i isum, __m256 acc) {
    __m256i offs = _mm256_setzero_si256();
    const uint8_t* sc = blk + 32 + 8 * g;
    for (int k = 0; k < 8; ++k) {
      int pair;
      std::memcpy(&pair, b.bsums + 2 * k, 4);
      offs =
          _mm256_add_epi32(offs, _mm256_madd_epi16(pairs_i8(sc + 2 * k * R, sc + (2 * k + 1) * R),
                                                   _mm256_set1_epi32(pair)));
    }
    isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(offs, 5));
    const __m256 d =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * g)));
    const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(b.d), d);
    return _mm256_add_ps(acc, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(isum)));
  }
};

// The tile's row sums (row group g0 + g, token t) into y; rows at or past rows_valid dropped.
template <int NT, int NG>
inline void store_tile(const __m256 (&acc)[NG][NT], int g0, float* y, int64_t ldy,
                       int64_t rows_valid) {
  for (int g = 0; g < NG; ++g) {
    const int64_t r0 = 8 * (g0 + g);
    for (int t = 0; t < NT; ++t) {
      if (r0 + 8 <= rows_valid) {
        _mm256_storeu_ps(y + t * ldy + r0, acc[g][t]);
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, acc[g][t]);
        for (int64_t r = r0; r < rows_valid; ++r) y[t * ldy + r] = tmp[r - r0];
      }
    }
  }
}

// One tile: row groups [g0, g0 + NG) of one panel x NT tokens, over all nb super-blocks.
template <typename F, int NT, int NG>
inline void tile(const uint8_t* panel, int64_t nb, const BlockQ8_K* const* xt, int g0, float* y,
                 int64_t ldy, int64_t rows_valid) {
  __m256 acc[NG][NT];
  for (int g = 0; g < NG; ++g)
    for (int t = 0; t < NT; ++t) acc[g][t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = panel + size_t(i) * F::kBytes;
    __m256i isum[NG][NT];
    for (int g = 0; g < NG; ++g)
      for (int t = 0; t < NT; ++t) isum[g][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int s = 0; s < F::kSlices; ++s) {
#pragma GCC unroll 4
      for (int q0 = 0; q0 < 8; q0 += F::kFlush) {
        __m256i a16[NG][NT];
        for (int g = 0; g < NG; ++g)
          for (int t = 0; t < NT; ++t) a16[g][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int q = q0; q < q0 + F::kFlush; ++q) {
          __m256i xv[NT];
          for (int t = 0; t < NT; ++t) xv[t] = bcast32(xt[t][i].qs + F::x_off(s, q));
          for (int g = 0; g < NG; ++g) {
            const __m256i w = F::weights(blk, s, q, g0 + g);
            for (int t = 0; t < NT; ++t)
              a16[g][t] = _mm256_add_epi16(a16[g][t], _mm256_maddubs_epi16(w, xv[t]));
          }
        }
        for (int g = 0; g < NG; ++g) {
          const __m256i sc = F::scale(blk, s, q0, g0 + g);
          for (int t = 0; t < NT; ++t)
            isum[g][t] = _mm256_add_epi32(isum[g][t], _mm256_madd_epi16(a16[g][t], sc));
        }
      }
    }
    for (int g = 0; g < NG; ++g)
      for (int t = 0; t < NT; ++t)
        acc[g][t] = F::finish(blk, g0 + g, xt[t][i], isum[g][t], acc[g][t]);
  }
  store_tile<NT, NG>(acc, g0, y, ldy, rows_valid);
}

// Q8_0 x Q8_0: a 32-weight block per panel super-block; per quad maddubs(|w|, sign(x, w))
// (pair sums <= 2 x 128 x 127: no saturation) then madd with ones to int32; per block the
// reference's sum += float(sumi) * (dw * dx).
struct Q80 {
  static constexpr size_t kBytes = 544;
};

// Q8_0 / Q5_0 block epilogue, the reference's sum += float(sumi) * (dw * dx) per row and token
// (the blocks' d[16] f16 first).
template <int NT, int NG>
inline void block_epilogue(const uint8_t* blk, const BlockQ8_0* const* xt, int64_t i, int g0,
                           const __m256i (&isum)[NG][NT], __m256 (&acc)[NG][NT]) {
  for (int g = 0; g < NG; ++g) {
    const __m256 dw =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * (g0 + g))));
    for (int t = 0; t < NT; ++t) {
      const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(f16_to_f32_simd(xt[t][i].d)));
      acc[g][t] = _mm256_add_ps(acc[g][t], _mm256_mul_ps(_mm256_cvtepi32_ps(isum[g][t]), dd));
    }
  }
}

template <typename F, int NT, int NG>
inline void tile_q8(const uint8_t* panel, int64_t nb, const BlockQ8_0* const* xt, int g0, float* y,
                    int64_t ldy, int64_t rows_valid) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NG][NT];
  for (int g = 0; g < NG; ++g)
    for (int t = 0; t < NT; ++t) acc[g][t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = panel + size_t(i) * F::kBytes;
    __m256i isum[NG][NT];
    for (int g = 0; g < NG; ++g)
      for (int t = 0; t < NT; ++t) isum[g][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      __m256i xv[NT];
      for (int t = 0; t < NT; ++t) xv[t] = bcast32(xt[t][i].qs + 4 * q);
      for (int g = 0; g < NG; ++g) {
        const __m256i w = load256(blk + 32 + (q * R + 8 * (g0 + g)) * 4);
        const __m256i aw = _mm256_abs_epi8(w);
        for (int t = 0; t < NT; ++t) {
          const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv[t], w));
          isum[g][t] = _mm256_add_epi32(isum[g][t], _mm256_madd_epi16(p, ones));
        }
      }
    }
    block_epilogue<NT, NG>(blk, xt, i, g0, isum, acc);
  }
  store_tile<NT, NG>(acc, g0, y, ldy, rows_valid);
}

// Q5_0 x Q8_0 (352-byte panel blocks: d[16] f16 | qh[16 rows][4 B], bit k of byte b = weight
// 4k + b's fifth bit | qs[4 quad][16 rows][4 B]): per quad k maddubs(q, x) on the codes q = 0..31
// (pair sums <= 2 x 31 x 128: no saturation), madd with ones to int32; isum starts at -16 x the
// block's activation sum (kx16_q8_0_sums16), so it ends as the reference's sum (q - 16) x; then
// sum += float(sumi) * (dw * dx).
struct Q50 {
  static constexpr size_t kBytes = 352;
};

template <int NT, int NG, int... K>
inline void q5_quads(const uint8_t* blk, const __m256i (&qh)[NG], const BlockQ8_0* const* xt,
                     int64_t i, int g0, __m256i (&isum)[NG][NT], std::integer_sequence<int, K...>) {
  const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0F);
  (
      [&] {
        __m256i xv[NT];
        for (int t = 0; t < NT; ++t) xv[t] = bcast32(xt[t][i].qs + 4 * K);
        for (int g = 0; g < NG; ++g) {
          const __m256i w = load256(blk + 96 + (K & 3) * 64 + 32 * (g0 + g));
          const __m256i lo =
              K < 4 ? _mm256_and_si256(w, m4) : _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
          const __m256i q = _mm256_or_si256(lo, bit_to_16<K>(qh[g]));
          for (int t = 0; t < NT; ++t)
            isum[g][t] = _mm256_add_epi32(isum[g][t],
                                          _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv[t]), ones));
        }
      }(),
      ...);
}

template <int NT, int NG>
inline void tile_q5(const uint8_t* panel, int64_t nb, const BlockQ8_0* const* xt,
                    const int32_t* const* xs16, int g0, float* y, int64_t ldy, int64_t rows_valid) {
  __m256 acc[NG][NT];
  for (int g = 0; g < NG; ++g)
    for (int t = 0; t < NT; ++t) acc[g][t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = panel + size_t(i) * Q50::kBytes;
    __m256i isum[NG][NT], qh[NG];
    for (int g = 0; g < NG; ++g) {
      qh[g] = load256(blk + 32 + 32 * (g0 + g));
      for (int t = 0; t < NT; ++t) isum[g][t] = _mm256_set1_epi32(-xs16[t][i]);
    }
    q5_quads<NT, NG>(blk, qh, xt, i, g0, isum, std::make_integer_sequence<int, 8>{});
    block_epilogue<NT, NG>(blk, xt, i, g0, isum, acc);
  }
  store_tile<NT, NG>(acc, g0, y, ldy, rows_valid);
}

template <typename F, int NT, int NG>
inline void tile_any(const uint8_t* panel, int64_t nb, const void* const* xt,
                     const int32_t* const* xs16, int g0, float* y, int64_t ldy,
                     int64_t rows_valid) {
  if constexpr (std::is_same_v<F, Q50>) {
    tile_q5<NT, NG>(panel, nb, reinterpret_cast<const BlockQ8_0* const*>(xt), xs16, g0, y, ldy,
                    rows_valid);
  } else if constexpr (std::is_same_v<F, Q80>) {
    tile_q8<F, NT, NG>(panel, nb, reinterpret_cast<const BlockQ8_0* const*>(xt), g0, y, ldy,
                       rows_valid);
  } else {
    tile<F, NT, NG>(panel, nb, reinterpret_cast<const BlockQ8_K* const*>(xt), g0, y, ldy,
                    rows_valid);
  }
}

template <typename F, int NT>
inline void panel_tokens(const uint8_t* panel, int64_t nb, const void* const* xt,
                         const int32_t* const* xs16, float* y, int64_t ldy, int64_t rows_valid) {
  if constexpr (NT == 1) {
    tile_any<F, 1, 2>(panel, nb, xt, xs16, 0, y, ldy, rows_valid);
  } else {
    tile_any<F, NT, 1>(panel, nb, xt, xs16, 0, y, ldy, rows_valid);
    if (rows_valid > 8) tile_any<F, NT, 1>(panel, nb, xt, xs16, 1, y, ldy, rows_valid);
  }
}

template <typename F>
void run(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt, float* y,
         int64_t ldy, int64_t rows) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const size_t panel_bytes = size_t(nb) * F::kBytes;
  const int32_t* sums = std::is_same_v<F, Q50> ? kx16_q8_0_sums16(x, xs, nt, nb) : nullptr;
  for (int64_t t0 = 0; t0 < nt; t0 += 4) {
    const int n = int(std::min<int64_t>(4, nt - t0));
    const void* xt[4];
    const int32_t* xs16[4] = {};
    for (int t = 0; t < n; ++t) {
      xt[t] = row_at<uint8_t>(x, xs, t0 + t);
      if (sums != nullptr) xs16[t] = sums + (t0 + t) * nb;
    }
    float* yt = y + t0 * ldy;
    for (int64_t p = 0; p < np; ++p) {
      const int64_t valid = std::min<int64_t>(R, rows - p * R);
      if (valid <= 0) break;
      const uint8_t* panel = wb + size_t(p) * panel_bytes;
      float* yp = yt + p * R;
      switch (n) {
        case 1:
          panel_tokens<F, 1>(panel, nb, xt, xs16, yp, ldy, valid);
          break;
        case 2:
          panel_tokens<F, 2>(panel, nb, xt, xs16, yp, ldy, valid);
          break;
        case 3:
          panel_tokens<F, 3>(panel, nb, xt, xs16, yp, ldy, valid);
          break;
        default:
          panel_tokens<F, 4>(panel, nb, xt, xs16, yp, ldy, valid);
          break;
      }
    }
  }
}

}  // namespace

void kx16_q4_k_avx2(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                    float* y, int64_t ldy, int64_t rows) {
  run<Q4K>(w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q5_k_avx2(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                    float* y, int64_t ldy, int64_t rows) {
  run<Q5K>(w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q6_k_avx2(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                    float* y, int64_t ldy, int64_t rows) {
  run<Q6K>(w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q8_0_avx2(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                    float* y, int64_t ldy, int64_t rows) {
  run<Q80>(w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q5_0_avx2(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                    float* y, int64_t ldy, int64_t rows) {
  run<Q50>(w, nb, np, x, xs, nt, y, ldy, rows);
}

}  // namespace fish
