// Lane-parallel K-quant quantisers (and the 32-value block formats) shared by
// quantize_fast_avx2.cpp and quantize_fast_avx512.cpp (included only there, after the ISA flags are
// on). See quantize_fast.h for the why.
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

#include "quant/fq3.h"
#include "quant/q4_0.h"
#include "quant/q4_1.h"
#include "quant/q4_k.h"
#include "quant/q5_0.h"
#include "quant/q5_k.h"
#include "quant/q6_k.h"
#include "quant/q8_0.h"

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
  // Any lanes: stores their low bytes (C++'s int -> uint8_t).
  static void store_low_bytes(uint8_t* p, I v) {
    const __m256i lo = _mm256_shuffle_epi8(
        v, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8,
                            12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    const __m128i w =
        _mm_unpacklo_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), w);
  }
  static F trunc(F v) { return _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
  static M ge(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
  static F sign_or(F v, F one) {
    return _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), one);
  }
  static I cvtt(F v) { return _mm256_cvttps_epi32(v); }  // 0x80000000 for NaN / out of range
  static I sext8(I v) { return _mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24); }
  static I min_i(I v, int hi) { return _mm256_min_epi32(v, _mm256_set1_epi32(hi)); }
  static I and_i(I v, int m) { return _mm256_and_si256(v, _mm256_set1_epi32(m)); }
  static I or_shl4(I a, I b) { return _mm256_or_si256(a, _mm256_slli_epi32(b, 4)); }
  static unsigned bit4_mask(I v) {  // lane k: bit 4 of v
    return unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 27))));
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
  static void store_low_bytes(uint8_t* p, I v) { store_u8(p, v); }  // vpmovdb truncates
  static F trunc(F v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
  static M ge(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  static F sign_or(F v, F one) {
    return _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(int32_t(0x80000000u))),
        _mm512_castps_si512(one)));
  }
  static I cvtt(F v) { return _mm512_cvttps_epi32(v); }
  static I sext8(I v) { return _mm512_srai_epi32(_mm512_slli_epi32(v, 24), 24); }
  static I min_i(I v, int hi) { return _mm512_min_epi32(v, _mm512_set1_epi32(hi)); }
  static I and_i(I v, int m) { return _mm512_and_si512(v, _mm512_set1_epi32(m)); }
  static I or_shl4(I a, I b) { return _mm512_or_si512(a, _mm512_slli_epi32(b, 4)); }
  static unsigned bit4_mask(I v) { return _mm512_test_epi32_mask(v, _mm512_set1_epi32(0x10)); }
};
#endif

// ---- Q4_K / Q5_K: make_qkx2_quants over 32-value sub-blocks ----

struct Qkx2Search {
  float rmin;  // candidate inverse scales (rmin + rdelta*is + nmax) / (max - min), is = 0..nstep
  float rdelta;
  int nstep;
};
constexpr Qkx2Search kQ4kSearch{-1.f, 0.1f, 20};             // quantize_row_q4_K_ref
constexpr Qkx2Search kQ5kSearch{-0.5f, 0.1f, 15};            // quantize_row_q5_K_ref
constexpr Qkx2Search kFq3Search{kFq3Rmin, 0.1f, kFq3Nstep};  // quantize_row_fq3_ref

// Per sub-block (lane) outcome of the search.
struct Qkx2Lanes {
  float scale[16];    // make_qkx2_quants' return value
  float the_min[16];  // its *the_min (-min)
  float iscale[16];   // the winner's inverse scale: L = clamp(nearest_int(iscale*(x - lmin)))
  float lmin[16];
  unsigned flat = 0;  // bit k: max == min, L all zero
};

// The weights and make_qkx2_quants(32, kNmax, ...) of quantize_row_q4_K_ref / q5_K_ref for
// kGroups * V::kLanes sub-blocks at x (32 floats each, consecutive); out[g] gets group g. The
// groups are independent and interleaved only to overlap latencies: each candidate's error pass
// waits on its sums, the next candidate on the error pass (the min may move).
template <class V, int kNmax, int kGroups>
void qkx2_search(const float* x, const Qkx2Search& p, Qkx2Lanes* out) {
  using F = typename V::F;
  using M = typename V::M;
  constexpr int G = kGroups;
  const F zero = V::set1(0.f);
  F xt[G][32], wt[G][32], laux[G][32];
  F min[G], max[G], sum_w[G], sum_x[G], flat_min[G];
  M flat[G];
  for (int g = 0; g < G; ++g) {
    const float* xg = x + g * 32 * V::kLanes;
    F sum_x2 = zero;
    for (int l = 0; l < 32; ++l) {
      xt[g][l] = V::gather(xg + l, 32);
      sum_x2 = V::add(sum_x2, V::mul(xt[g][l], xt[g][l]));
    }
    const F av_x = V::sqrt(V::div(sum_x2, V::set1(32.f)));
    for (int l = 0; l < 32; ++l) wt[g][l] = V::add(av_x, V::abs(xt[g][l]));
    min[g] = max[g] = xt[g][0];
    sum_w[g] = wt[g][0];
    sum_x[g] = V::mul(sum_w[g], xt[g][0]);
    for (int i = 1; i < 32; ++i) {
      min[g] = V::select(V::lt(xt[g][i], min[g]), xt[g][i], min[g]);
      max[g] = V::select(V::gt(xt[g][i], max[g]), xt[g][i], max[g]);
      sum_w[g] = V::add(sum_w[g], wt[g][i]);
      sum_x[g] = V::add(sum_x[g], V::mul(wt[g][i], xt[g][i]));
    }
    min[g] = V::select(V::gt(min[g], zero), zero, min[g]);
    flat[g] = V::eq(max[g], min[g]);
    flat_min[g] = min[g];  // a flat lane returns here in the reference: its min stays this one
  }

  F scale[G], best_error[G], best_iscale[G], best_lmin[G];
  for (int g = 0; g < G; ++g) {
    const F iscale = V::div(V::set1(float(kNmax)), V::sub(max[g], min[g]));
    scale[g] = V::div(V::set1(1.f), iscale);
    best_error[g] = zero;
    best_iscale[g] = iscale;
    best_lmin[g] = min[g];
  }
  for (int i = 0; i < 32; ++i) {
    for (int g = 0; g < G; ++g) {
      const F lf = V::to_float(
          V::clamp(V::nearest_int(V::mul(best_iscale[g], V::sub(xt[g][i], min[g]))), 0, kNmax));
      F diff = V::sub(V::add(V::mul(scale[g], lf), min[g]), xt[g][i]);
      diff = V::mul(diff, diff);
      best_error[g] = V::add(best_error[g], V::mul(wt[g][i], diff));
    }
  }
  for (int is = 0; is <= p.nstep; ++is) {
    const F numer = V::set1(p.rmin + p.rdelta * float(is) + float(kNmax));
    F iscale[G], sum_l[G], sum_l2[G], sum_xl[G];
    for (int g = 0; g < G; ++g) {
      iscale[g] = V::div(numer, V::sub(max[g], min[g]));
      sum_l[g] = sum_l2[g] = sum_xl[g] = zero;
    }
    for (int i = 0; i < 32; ++i) {
      for (int g = 0; g < G; ++g) {
        const F lf = V::to_float(
            V::clamp(V::nearest_int(V::mul(iscale[g], V::sub(xt[g][i], min[g]))), 0, kNmax));
        laux[g][i] = lf;
        const F wl = V::mul(wt[g][i], lf);  // ggml's w * float(l), common to all three sums
        sum_l[g] = V::add(sum_l[g], wl);
        sum_l2[g] = V::add(sum_l2[g], V::mul(wl, lf));
        sum_xl[g] = V::add(sum_xl[g], V::mul(wl, xt[g][i]));
      }
    }
    F this_scale[G], this_min[G], cur_error[G];
    M d_pos[G];
    for (int g = 0; g < G; ++g) {
      const F D = V::sub(V::mul(sum_w[g], sum_l2[g]), V::mul(sum_l[g], sum_l[g]));
      d_pos[g] = V::gt(D, zero);
      this_scale[g] = V::div(V::sub(V::mul(sum_w[g], sum_xl[g]), V::mul(sum_x[g], sum_l[g])), D);
      this_min[g] = V::div(V::sub(V::mul(sum_l2[g], sum_x[g]), V::mul(sum_l[g], sum_xl[g])), D);
      const M min_pos = V::gt(this_min[g], zero);
      this_min[g] = V::select(min_pos, zero, this_min[g]);
      this_scale[g] = V::select(min_pos, V::div(sum_xl[g], sum_l2[g]), this_scale[g]);
      cur_error[g] = zero;
    }
    for (int i = 0; i < 32; ++i) {
      for (int g = 0; g < G; ++g) {
        F diff = V::sub(V::add(V::mul(this_scale[g], laux[g][i]), this_min[g]), xt[g][i]);
        diff = V::mul(diff, diff);
        cur_error[g] = V::add(cur_error[g], V::mul(wt[g][i], diff));
      }
    }
    for (int g = 0; g < G; ++g) {  // D <= 0 (or NaN): the reference skips the candidate
      const M better = V::both(d_pos[g], V::lt(cur_error[g], best_error[g]));
      best_error[g] = V::select(better, cur_error[g], best_error[g]);
      scale[g] = V::select(better, this_scale[g], scale[g]);
      best_iscale[g] = V::select(better, iscale[g], best_iscale[g]);
      best_lmin[g] = V::select(better, min[g], best_lmin[g]);  // Laux was rounded with the old min
      min[g] = V::select(better, this_min[g], min[g]);
    }
  }
  for (int g = 0; g < G; ++g) {
    out[g].flat = V::bits(flat[g]);
    V::storeu(out[g].scale, V::select(flat[g], zero, scale[g]));
    V::storeu(out[g].the_min, V::neg(V::select(flat[g], flat_min[g], min[g])));
    V::storeu(out[g].iscale, best_iscale[g]);
    V::storeu(out[g].lmin, best_lmin[g]);
  }
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

inline void pack_levels(const uint8_t* L, BlockFQ3* y) {
  for (int g = 0; g < kFq3Groups; ++g) fq3_pack_group(L + 32 * g, y->q[g]);
}

// Super-blocks [0, nb) of Q4_K (kNmax 15), Q5_K (31) or FQ3 (7), kGroups * V::kLanes / 8 per
// search, as many as fit; returns how many were done (nb rounded down to that multiple).
template <class V, int kNmax, int kGroups, class Block>
int64_t quantize_q45_k_blocks(const float* x, Block* y, int64_t nb, const Qkx2Search& search) {
  constexpr int kBlocksPerGroup = V::kLanes / 8;
  constexpr int kBlocksPerSearch = kGroups * kBlocksPerGroup;
  Qkx2Lanes s[kGroups];
  uint8_t L[kQK_K];
  const int64_t n_done = nb / kBlocksPerSearch * kBlocksPerSearch;
  for (int64_t i = 0; i < n_done; i += kBlocksPerSearch) {
    qkx2_search<V, kNmax, kGroups>(x + i * kQK_K, search, s);
    for (int b = 0; b < kBlocksPerSearch; ++b) {
      const Qkx2Lanes& sg = s[b / kBlocksPerGroup];
      finish_q45_k<V, kNmax>(x + (i + b) * kQK_K, sg, 8 * (b % kBlocksPerGroup), &y[i + b], L);
      pack_levels(L, &y[i + b]);
    }
  }
  return n_done;
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

// ---- 32-value block formats (Q8_0, Q4_0, Q4_1, Q5_0): no search, so the natural layout
// vectorises; only the reductions need care. amax/min/max reductions are order-independent over
// the values that can win (the references' compares skip NaN, except Q4_1's x[0]), and the
// signed value the reference keeps is found again as the FIRST element equal to the winner (the
// references update only on strictly better, so the first one stays; this also keeps the sign of
// a zero). Float -> int8_t in the references compiles to cvttss2si and the low byte; the vector
// form is cvttps2dq and the low byte. ----

template <class V>
float lane_max(typename V::F v) {  // over non-NaN lanes >= +0: any order
  float lanes[16];
  V::storeu(lanes, v);
  float m = 0;
  for (int k = 0; k < V::kLanes; ++k) m = lanes[k] > m ? lanes[k] : m;
  return m;
}

// First j in [0, 32) with pred(v[j / kLanes] lane j % kLanes), or -1.
template <class V, class Pred>
int first_lane(const typename V::F* v, Pred pred) {
  for (int k = 0; k < 32 / V::kLanes; ++k) {
    const unsigned bits = V::bits(pred(v[k]));
    if (bits) return k * V::kLanes + __builtin_ctz(bits);
  }
  return -1;
}

// std::round (half away from zero), exactly: v - trunc(v) is exact.
template <class V>
typename V::F round_half_away(typename V::F v) {
  const auto t = V::trunc(v);
  const auto up = V::ge(V::abs(V::sub(v, t)), V::set1(0.5f));
  return V::add(t, V::select(up, V::sign_or(v, V::set1(1.0f)), V::set1(0.0f)));
}

template <class V>
void quantize_q8_0_blocks(const float* x, BlockQ8_0* y, int64_t nb) {
  constexpr int kVecs = 32 / V::kLanes;
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    typename V::F v[kVecs];
    auto acc = V::set1(0.0f);
    for (int k = 0; k < kVecs; ++k) {
      v[k] = V::loadu(x + k * V::kLanes);
      const auto a = V::abs(v[k]);
      acc = V::select(V::lt(acc, a), a, acc);  // std::max(amax, |x|)
    }
    const float d = lane_max<V>(acc) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16_lane(d);
    for (int k = 0; k < kVecs; ++k) {
      const auto q = V::cvtt(round_half_away<V>(V::mul(v[k], V::set1(id))));
      V::store_low_bytes(reinterpret_cast<uint8_t*>(y[i].qs) + k * V::kLanes, q);
    }
  }
}

// Q4_0 (kNmax 8) / Q5_0 (16): the signed value of largest magnitude maps to level 0.
template <class V>
float signed_absmax(const float* x, const typename V::F* v) {
  auto acc = V::set1(0.0f);
  for (int k = 0; k < 32 / V::kLanes; ++k) {
    const auto a = V::abs(v[k]);
    acc = V::select(V::gt(a, acc), a, acc);
  }
  const float amax = lane_max<V>(acc);
  if (!(amax > 0.0f)) return 0.0f;  // never updated in the reference
  const auto target = V::set1(amax);
  return x[first_lane<V>(v, [&](auto e) { return V::eq(V::abs(e), target); })];
}

template <class V>
void quantize_q4_0_blocks(const float* x, BlockQ4_0* y, int64_t nb) {
  constexpr int kVecs = 32 / V::kLanes;
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    typename V::F v[kVecs];
    for (int k = 0; k < kVecs; ++k) v[k] = V::loadu(x + k * V::kLanes);
    const float d = signed_absmax<V>(x, v) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16_lane(d);
    auto level = [&](typename V::F e) {
      return V::min_i(V::sext8(V::cvtt(V::add(V::mul(e, V::set1(id)), V::set1(8.5f)))), 15);
    };
    for (int k = 0; k < kVecs / 2; ++k) {
      V::store_low_bytes(y[i].qs + k * V::kLanes, V::or_shl4(level(v[k]), level(v[k + kVecs / 2])));
    }
  }
}

template <class V>
void quantize_q5_0_blocks(const float* x, BlockQ5_0* y, int64_t nb) {
  constexpr int kVecs = 32 / V::kLanes;
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    typename V::F v[kVecs];
    for (int k = 0; k < kVecs; ++k) v[k] = V::loadu(x + k * V::kLanes);
    const float d = signed_absmax<V>(x, v) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16_lane(d);
    auto level = [&](typename V::F e) {
      return V::min_i(V::sext8(V::cvtt(V::add(V::mul(e, V::set1(id)), V::set1(16.5f)))), 31);
    };
    uint32_t qh = 0;
    for (int k = 0; k < kVecs / 2; ++k) {
      const auto q0 = level(v[k]);
      const auto q1 = level(v[k + kVecs / 2]);
      V::store_low_bytes(y[i].qs + k * V::kLanes, V::or_shl4(V::and_i(q0, 0xF), V::and_i(q1, 0xF)));
      qh |= uint32_t(V::bit4_mask(q0)) << (k * V::kLanes);
      qh |= uint32_t(V::bit4_mask(q1)) << (k * V::kLanes + 16);
    }
    std::memcpy(y[i].qh, &qh, sizeof qh);
  }
}

template <class V>
void quantize_q4_1_blocks(const float* x, BlockQ4_1* y, int64_t nb) {
  constexpr int kVecs = 32 / V::kLanes;
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    typename V::F v[kVecs];
    for (int k = 0; k < kVecs; ++k) v[k] = V::loadu(x + k * V::kLanes);
    float min = x[0];
    float max = x[0];
    if (x[0] == x[0]) {  // a NaN x[0] sticks as both (std::min/max never replace it)
      auto vmin = V::set1(x[0]), vmax = vmin;
      for (int k = 0; k < kVecs; ++k) {
        vmin = V::select(V::lt(v[k], vmin), v[k], vmin);
        vmax = V::select(V::gt(v[k], vmax), v[k], vmax);
      }
      float lanes_min[16], lanes_max[16];
      V::storeu(lanes_min, vmin);
      V::storeu(lanes_max, vmax);
      float mn = lanes_min[0], mx = lanes_max[0];
      for (int k = 1; k < V::kLanes; ++k) {
        mn = lanes_min[k] < mn ? lanes_min[k] : mn;
        mx = lanes_max[k] > mx ? lanes_max[k] : mx;
      }
      const auto tmin = V::set1(mn), tmax = V::set1(mx);
      min = x[first_lane<V>(v, [&](auto e) { return V::eq(e, tmin); })];
      max = x[first_lane<V>(v, [&](auto e) { return V::eq(e, tmax); })];
    }
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16_lane(d);
    y[i].m = f32_to_f16_lane(min);
    auto level = [&](typename V::F e) {
      const auto s = V::mul(V::sub(e, V::set1(min)), V::set1(id));
      return V::min_i(V::sext8(V::cvtt(V::add(s, V::set1(0.5f)))), 15);
    };
    for (int k = 0; k < kVecs / 2; ++k) {
      V::store_low_bytes(y[i].qs + k * V::kLanes, V::or_shl4(level(v[k]), level(v[k + kVecs / 2])));
    }
  }
}

}  // namespace
}  // namespace fish
