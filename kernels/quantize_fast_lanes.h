// Lane-parallel K-quant quantisers shared by quantize_fast_avx2.cpp and quantize_fast_avx512.cpp
// (included only there, after the ISA flags are on). See quantize_fast.h for the why.
//
// Layout: a search call takes V::kLanes consecutive sub-blocks (32 values for Q4_K/Q5_K, 16 for
// Q6_K) and gathers them transposed: xt[i] holds value i of every sub-block, lane k = sub-block k.
// Each lane then runs ggml's scalar loop (quant/k_quants.cpp) operation for operation: same
// association, the same 1.5*2^23 rounding with the same integer masking, the scalar `if`s turned
// into compares and per-lane selects. The search keeps only the winning candidate's inverse scale
// (and the min it was rounded against); the rare sub-block whose re-quantisation is skipped
// (stored scale 0) recomputes its levels from those, which gives the reference's L exactly.
//
// Everything here has internal linkage (anonymous namespace): each ISA file compiles its own copy,
// so the linker can never hand an AVX-512 body to an AVX2 caller. f16 conversion uses F16C
// (vcvtps2ph, round to nearest even), which is what quant/f16.h reproduces in software.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "quant/q4_k.h"
#include "quant/q5_k.h"
#include "quant/q6_k.h"

namespace fish {
namespace {

constexpr float kRoundMagic = 12582912.f;  // 1.5 * 2^23: ggml nearest_int's shift
constexpr float kGroupMaxEps = 1e-15f;     // ggml GROUP_MAX_EPS

inline int nearest_int_lane(float v) {  // quant/k_quants.h nearest_int, bit for bit
  const float shifted = v + kRoundMagic;
  int32_t i;
  std::memcpy(&i, &shifted, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}
inline float f16_to_f32_lane(uint16_t h) {
  return _cvtsh_ss(h);
}
inline uint16_t f32_to_f16_lane(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

// ---- Lane vocabularies: select(m, a, b) = m ? a : b per lane; compares are ordered (false on
// NaN) except ne, which is C++'s != (true on NaN). ----

#if defined(__AVX2__)
struct Lanes8 {
  static constexpr int kLanes = 8;
  using F = __m256;
  using I = __m256i;
  using M = __m256;  // all-ones / all-zeros lanes
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F sqrt(F a) { return _mm256_sqrt_ps(a); }
  static F abs(F a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static F neg(F a) { return _mm256_xor_ps(_mm256_set1_ps(-0.0f), a); }
  static M lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M gt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static M eq(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static M ne(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_NEQ_UQ); }
  static M both(M a, M b) { return _mm256_and_ps(a, b); }
  static unsigned bits(M m) { return unsigned(_mm256_movemask_ps(m)); }
  static F select(M m, F a, F b) { return _mm256_blendv_ps(b, a, m); }
  static I nearest_int(F v) {
    const I bits = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(kRoundMagic)));
    return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                            _mm256_set1_epi32(0x00400000));
  }
  static I clamp(I v, int lo, int hi) {
    return _mm256_max_epi32(_mm256_set1_epi32(lo), _mm256_min_epi32(_mm256_set1_epi32(hi), v));
  }
  static I add_i(I a, int b) { return _mm256_add_epi32(a, _mm256_set1_epi32(b)); }
  static F to_float(I v) { return _mm256_cvtepi32_ps(v); }
  static F loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, F v) { _mm256_storeu_ps(p, v); }
  // Lane k = p[k * stride].
  static F gather(const float* p, int stride) {
    const I idx =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
    return _mm256_i32gather_ps(p, idx, 4);
  }
  // Lanes hold 0..255: stores their low bytes.
  static void store_u8(uint8_t* p, I v) {
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(w, w));
  }
};
#endif

#if defined(__AVX512F__)
struct Lanes16 {
  static constexpr int kLanes = 16;
  using F = __m512;
  using I = __m512i;
  using M = __mmask16;
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F sqrt(F a) { return _mm512_sqrt_ps(a); }
  static F abs(F a) {
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
  }
  static F neg(F a) {
    return _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(int32_t(0x80000000u))));
  }
  static M lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M gt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static M eq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static M ne(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }
  static M both(M a, M b) { return M(a & b); }
  static unsigned bits(M m) { return unsigned(m); }
  static F select(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }
  static I nearest_int(F v) {
    const I bits = _mm512_castps_si512(_mm512_add_ps(v, _mm512_set1_ps(kRoundMagic)));
    return _mm512_sub_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0x007fffff)),
                            _mm512_set1_epi32(0x00400000));
  }
  static I clamp(I v, int lo, int hi) {
    return _mm512_max_epi32(_mm512_set1_epi32(lo), _mm512_min_epi32(_mm512_set1_epi32(hi), v));
  }
  static I add_i(I a, int b) { return _mm512_add_epi32(a, _mm512_set1_epi32(b)); }
  static F to_float(I v) { return _mm512_cvtepi32_ps(v); }
  static F loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F gather(const float* p, int stride) {
    const I idx =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(stride));
    return _mm512_i32gather_ps(idx, p, 4);
  }
  static void store_u8(uint8_t* p, I v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
  }
};
#endif

// ---- Q4_K / Q5_K: make_qkx2_quants over 32-value sub-blocks ----

struct Qkx2Search {
  float rmin;  // candidate inverse scales (rmin + rdelta*is + nmax) / (max - min), is = 0..nstep
  float rdelta;
  int nstep;
};
constexpr Qkx2Search kQ4kSearch{-1.f, 0.1f, 20};   // quantize_row_q4_K_ref
constexpr Qkx2Search kQ5kSearch{-0.5f, 0.1f, 15};  // quantize_row_q5_K_ref

// Per sub-block (lane) outcome of the search.
struct Qkx2Lanes {
  float scale[16];    // make_qkx2_quants' return value
  float the_min[16];  // its *the_min (-min)
  float iscale[16];   // the winner's inverse scale: L = clamp(nearest_int(iscale*(x - lmin)))
  float lmin[16];
  unsigned flat = 0;  // bit k: max == min, L all zero
};

// The weights and make_qkx2_quants(32, kNmax, ...) of quantize_row_q4_K_ref / q5_K_ref for the
// V::kLanes sub-blocks at x (32 floats each, consecutive).
template <class V, int kNmax>
void qkx2_search(const float* x, const Qkx2Search& p, Qkx2Lanes* out) {
  using F = typename V::F;
  using M = typename V::M;
  F xt[32], wt[32], laux[32];
  F sum_x2 = V::set1(0.f);
  for (int l = 0; l < 32; ++l) {
    xt[l] = V::gather(x + l, 32);
    sum_x2 = V::add(sum_x2, V::mul(xt[l], xt[l]));
  }
  const F av_x = V::sqrt(V::div(sum_x2, V::set1(32.f)));
  for (int l = 0; l < 32; ++l) wt[l] = V::add(av_x, V::abs(xt[l]));

  F min = xt[0], max = xt[0];
  F sum_w = wt[0];
  F sum_x = V::mul(sum_w, xt[0]);
  for (int i = 1; i < 32; ++i) {
    min = V::select(V::lt(xt[i], min), xt[i], min);
    max = V::select(V::gt(xt[i], max), xt[i], max);
    sum_w = V::add(sum_w, wt[i]);
    sum_x = V::add(sum_x, V::mul(wt[i], xt[i]));
  }
  const F zero = V::set1(0.f);
  min = V::select(V::gt(min, zero), zero, min);
  const M flat = V::eq(max, min);
  const F flat_min = min;  // a flat lane returns here in the reference: its min stays this one

  F iscale = V::div(V::set1(float(kNmax)), V::sub(max, min));
  F scale = V::div(V::set1(1.f), iscale);
  F best_error = zero;
  for (int i = 0; i < 32; ++i) {
    const F lf =
        V::to_float(V::clamp(V::nearest_int(V::mul(iscale, V::sub(xt[i], min))), 0, kNmax));
    F diff = V::sub(V::add(V::mul(scale, lf), min), xt[i]);
    diff = V::mul(diff, diff);
    best_error = V::add(best_error, V::mul(wt[i], diff));
  }
  F best_iscale = iscale;
  F best_lmin = min;
  for (int is = 0; is <= p.nstep; ++is) {
    const float numer = p.rmin + p.rdelta * float(is) + float(kNmax);
    iscale = V::div(V::set1(numer), V::sub(max, min));
    F sum_l = zero, sum_l2 = zero, sum_xl = zero;
    for (int i = 0; i < 32; ++i) {
      const F lf =
          V::to_float(V::clamp(V::nearest_int(V::mul(iscale, V::sub(xt[i], min))), 0, kNmax));
      laux[i] = lf;
      const F wl = V::mul(wt[i], lf);  // ggml's w * float(l), a common subexpression of all three
      sum_l = V::add(sum_l, wl);
      sum_l2 = V::add(sum_l2, V::mul(wl, lf));
      sum_xl = V::add(sum_xl, V::mul(wl, xt[i]));
    }
    const F D = V::sub(V::mul(sum_w, sum_l2), V::mul(sum_l, sum_l));
    const M d_pos = V::gt(D, zero);
    if (V::bits(d_pos) == 0) continue;
    F this_scale = V::div(V::sub(V::mul(sum_w, sum_xl), V::mul(sum_x, sum_l)), D);
    F this_min = V::div(V::sub(V::mul(sum_l2, sum_x), V::mul(sum_l, sum_xl)), D);
    const M min_pos = V::gt(this_min, zero);
    this_min = V::select(min_pos, zero, this_min);
    this_scale = V::select(min_pos, V::div(sum_xl, sum_l2), this_scale);
    F cur_error = zero;
    for (int i = 0; i < 32; ++i) {
      F diff = V::sub(V::add(V::mul(this_scale, laux[i]), this_min), xt[i]);
      diff = V::mul(diff, diff);
      cur_error = V::add(cur_error, V::mul(wt[i], diff));
    }
    const M better = V::both(d_pos, V::lt(cur_error, best_error));
    best_error = V::select(better, cur_error, best_error);
    scale = V::select(better, this_scale, scale);
    best_iscale = V::select(better, iscale, best_iscale);
    best_lmin = V::select(better, min, best_lmin);  // Laux was rounded against the old min
    min = V::select(better, this_min, min);
  }
  out->flat = V::bits(flat);
  V::storeu(out->scale, V::select(flat, zero, scale));
  V::storeu(out->the_min, V::neg(V::select(flat, flat_min, min)));
  V::storeu(out->iscale, best_iscale);
  V::storeu(out->lmin, best_lmin);
}

// The rest of quantize_row_q4_K_ref / q5_K_ref for one super-block whose 8 sub-block searches are
// s[lane0 .. lane0+7]: 6-bit scales and mins, d and dmin, and the levels L (0..kNmax) re-quantised
// against them. Writes y->d, y->dmin, y->scales.
template <class V, int kNmax, class Block>
void finish_q45_k(const float* x, const Qkx2Lanes& s, int lane0, Block* y, uint8_t L[kQK_K]) {
  const float* scales = s.scale + lane0;
  const float* mins = s.the_min + lane0;
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < 8; ++j) {
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = std::min<uint8_t>(63, uint8_t(nearest_int_lane(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, uint8_t(nearest_int_lane(inv_min * mins[j])));
  }
  pack_scale_min_k4(ls, lm, y->scales);
  y->d = f32_to_f16_lane(max_scale / 63.f);
  y->dmin = f32_to_f16_lane(max_min / 63.f);
  const float d_all = f16_to_f32_lane(y->d);
  const float dmin_all = f16_to_f32_lane(y->dmin);
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + 32 * j;
    uint8_t* Lj = L + 32 * j;
    const float d = d_all * float(ls[j]);  // ls/lm are what get_scale_min_k4 unpacks
    if (d == 0) {                          // the reference keeps the search's levels
      const int lane = lane0 + j;
      if ((s.flat >> lane) & 1) {
        std::memset(Lj, 0, 32);
        continue;
      }
      for (int ii = 0; ii < 32; ++ii) {
        const int l = nearest_int_lane(s.iscale[lane] * (xj[ii] - s.lmin[lane]));
        Lj[ii] = uint8_t(std::max(0, std::min(kNmax, l)));
      }
      continue;
    }
    const float dm = dmin_all * float(lm[j]);
    for (int ii = 0; ii < 32; ii += V::kLanes) {
      const auto q = V::div(V::add(V::loadu(xj + ii), V::set1(dm)), V::set1(d));
      V::store_u8(Lj + ii, V::clamp(V::nearest_int(q), 0, kNmax));
    }
  }
}

inline void pack_levels(const uint8_t* L, BlockQ4_K* y) {
  uint8_t* q = y->qs;
  for (int j = 0; j < kQK_K; j += 64, q += 32) {
    for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
  }
}

inline void pack_levels(const uint8_t* L, BlockQ5_K* y) {
  uint8_t* qh = y->qh;
  uint8_t* ql = y->qs;
  std::memset(qh, 0, kQK_K / 8);
  for (int c = 0, shift = 0; c < kQK_K; c += 64, ql += 32, shift += 2) {
    for (int j = 0; j < 32; ++j) {
      const int l1 = L[c + j];
      const int l2 = L[c + j + 32];
      qh[j] = uint8_t(qh[j] | ((l1 >> 4) << shift) | ((l2 >> 4) << (shift + 1)));
      ql[j] = uint8_t((l1 & 0xF) | ((l2 & 0xF) << 4));
    }
  }
}

// nb super-blocks of Q4_K (kNmax 15) or Q5_K (31); nb % (V::kLanes / 8) == 0.
template <class V, int kNmax, class Block>
void quantize_q45_k_blocks(const float* x, Block* y, int64_t nb, const Qkx2Search& search) {
  constexpr int kBlocksPerSearch = V::kLanes / 8;
  Qkx2Lanes s;
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; i += kBlocksPerSearch) {
    qkx2_search<V, kNmax>(x + i * kQK_K, search, &s);
    for (int b = 0; b < kBlocksPerSearch; ++b) {
      finish_q45_k<V, kNmax>(x + (i + b) * kQK_K, s, 8 * b, &y[i + b], L);
      pack_levels(L, &y[i + b]);
    }
  }
}

// ---- Q6_K: make_qx_quants(16, 32, x, L, rmse_type 1) over 16-value sub-blocks ----

struct QxLanes {
  float scale[16];    // make_qx_quants' return value
  float iscale[16];   // the winner's: L = 32 + clamp(nearest_int(iscale * x), -32, 31)
  unsigned zero = 0;  // bit k: amax < GROUP_MAX_EPS, L all zero
};

template <class V>
void qx_search(const float* x, QxLanes* out) {
  using F = typename V::F;
  using M = typename V::M;
  constexpr int kNmax = 32;
  F xt[16], wt[16], wx[16];
  const F zero = V::set1(0.f);
  F max = zero, amax = zero;
  for (int i = 0; i < 16; ++i) {
    xt[i] = V::gather(x + i, 16);
    const F ax = V::abs(xt[i]);
    const M bigger = V::gt(ax, amax);
    amax = V::select(bigger, ax, amax);
    max = V::select(bigger, xt[i], max);
    wt[i] = V::mul(xt[i], xt[i]);  // rmse_type 1: w = x^2
    wx[i] = V::mul(wt[i], xt[i]);  // ggml's w * x[i] * l, associated as (w * x) * l
  }
  const M all_zero = V::lt(amax, V::set1(kGroupMaxEps));
  F iscale = V::div(V::set1(float(-kNmax)), max);
  F sumlx = zero, suml2 = zero;
  for (int i = 0; i < 16; ++i) {
    const F lf = V::to_float(V::clamp(V::nearest_int(V::mul(iscale, xt[i])), -kNmax, kNmax - 1));
    sumlx = V::add(sumlx, V::mul(wx[i], lf));
    suml2 = V::add(suml2, V::mul(V::mul(wt[i], lf), lf));
  }
  F scale = V::select(V::ne(suml2, zero), V::div(sumlx, suml2), zero);
  F best = V::mul(scale, sumlx);
  F best_iscale = iscale;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = V::div(V::set1(-(float(kNmax) + 0.1f * float(is))), max);
    sumlx = suml2 = zero;
    for (int i = 0; i < 16; ++i) {
      const F lf = V::to_float(V::clamp(V::nearest_int(V::mul(iscale, xt[i])), -kNmax, kNmax - 1));
      sumlx = V::add(sumlx, V::mul(wx[i], lf));
      suml2 = V::add(suml2, V::mul(V::mul(wt[i], lf), lf));
    }
    const M better = V::both(V::gt(suml2, zero), V::gt(V::mul(sumlx, sumlx), V::mul(best, suml2)));
    scale = V::select(better, V::div(sumlx, suml2), scale);
    best = V::select(better, V::mul(scale, sumlx), best);
    best_iscale = V::select(better, iscale, best_iscale);
  }
  out->zero = V::bits(all_zero);
  V::storeu(out->scale, V::select(all_zero, zero, scale));
  V::storeu(out->iscale, best_iscale);
}

// nb super-blocks of Q6_K; each takes 16 / V::kLanes searches.
template <class V>
void quantize_q6_k_blocks(const float* x, BlockQ6_K* y, int64_t nb) {
  constexpr int kSearches = 16 / V::kLanes;
  constexpr int kNmax6 = 32;
  QxLanes s[kSearches];
  int8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float scales[16];
    unsigned zero = 0;
    for (int k = 0; k < kSearches; ++k) {
      qx_search<V>(x + k * 16 * V::kLanes, &s[k]);
      std::memcpy(scales + k * V::kLanes, s[k].scale, sizeof(float) * V::kLanes);
      zero |= s[k].zero << (k * V::kLanes);
    }
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const float scale = scales[ib];
      if (__builtin_fabsf(scale) > max_abs_scale) {
        max_abs_scale = __builtin_fabsf(scale);
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = f32_to_f16_lane(1 / iscale);
    for (int ib = 0; ib < 16; ++ib) {
      y[i].scales[ib] = int8_t(std::min(127, nearest_int_lane(iscale * scales[ib])));
    }
    const float d_all = f16_to_f32_lane(y[i].d);
    for (int j = 0; j < 16; ++j) {
      const float* xj = x + 16 * j;
      int8_t* Lj = L + 16 * j;
      const float d = d_all * float(y[i].scales[j]);
      if (d == 0) {  // the reference keeps the search's levels
        if ((zero >> j) & 1) {
          std::memset(Lj, 0, 16);
          continue;
        }
        const float is = s[j / V::kLanes].iscale[j % V::kLanes];
        for (int ii = 0; ii < 16; ++ii) {
          const int l = nearest_int_lane(is * xj[ii]);
          Lj[ii] = int8_t(kNmax6 + std::max(-kNmax6, std::min(kNmax6 - 1, l)));
        }
        continue;
      }
      for (int ii = 0; ii < 16; ii += V::kLanes) {
        const auto q = V::nearest_int(V::div(V::loadu(xj + ii), V::set1(d)));
        V::store_u8(reinterpret_cast<uint8_t*>(Lj + ii), V::add_i(V::clamp(q, -32, 31), 32));
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l + 0] & 0xF;
        const int q2 = L[j + l + 32] & 0xF;
        const int q3 = L[j + l + 64] & 0xF;
        const int q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = uint8_t(q1 | (q3 << 4));
        ql[l + 32] = uint8_t(q2 | (q4 << 4));
        qh[l] = uint8_t((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                        ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace
}  // namespace fish
