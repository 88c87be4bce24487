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
// block's activation sum is subtracted. Q5_0 codes q are 0..31 (q - 16 the weight): vpdpbusd on q,
// and 16 x the block's activation sum (kx16_q8_0_sums16, once per call) subtracted. A tile is the
// 16 rows of one panel x NT <= 4 tokens.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/kquant_x16.h"
#include "kernels/kquant_x16_zmm.h"

namespace fish {
namespace {

using namespace kx16_zmm;  // NOLINT: the format policies
constexpr int kMaxTok = 4;

// Decode (one token) streams the panels from DRAM at one pass: the lines of part P (of kParts) of
// a kBytes block are prefetched `ahead` bytes ahead of `blk` while the part is read, so the
// misses in flight are spread over the block (kx16_prefetch_distance(), 0: none). Into L2 (T1), not
// L1: on the 2-core EPYC the 1B decoded 1.28x (1 thread) / 1.20x (2) faster than with T0, and the
// x16 decode kernels at 8 KiB ran q4_k 20.6 / q5_k 20.8 / q6_k 21.4 GB/s against T0's 17.6 / 15.6
// / 14.8 (docs/cpu-kernels.md).
template <size_t kBytes, int kParts, int P>
inline void prefetch_part(const uint8_t* blk, size_t ahead) {
  constexpr size_t kLines = (kBytes + 63) / 64, kPer = (kLines + kParts - 1) / kParts;
  constexpr size_t l0 = P * kPer, l1 = l0 + kPer < kLines ? l0 + kPer : kLines;
  if (ahead == 0) return;
  for (size_t l = l0; l < l1; ++l)
    _mm_prefetch(reinterpret_cast<const char*>(blk + ahead + 64 * l), _MM_HINT_T1);
}

template <typename F>
constexpr size_t kBlockBytes = std::is_same_v<F, Q4K>   ? 2368
                               : std::is_same_v<F, Q5K> ? 2880
                                                        : 3360;

// Slice S of one super-block: isum[t] += sum over the slice's sub-blocks of sc * dot.
template <typename F, int NT, int S>
inline void slice(const uint8_t* blk, const int8_t* const (&xq)[kMaxTok], __m512i (&isum)[NT],
                  size_t ahead) {
  if constexpr (NT == 1) prefetch_part<kBlockBytes<F>, F::kSlices, S>(blk, ahead);
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
                   size_t ahead, std::integer_sequence<int, S...>) {
  (slice<F, NT, S>(blk, xq, isum, ahead), ...);
}

// One tile: the 16 rows of a panel x NT tokens, over all nb super-blocks.
template <typename F, int NT>
inline void tile(const uint8_t* panel, int64_t nb, const BlockQ8_K* const* xt, float* y,
                 int64_t ldy, int64_t rows_valid) {
  constexpr size_t kBytes = kBlockBytes<F>;
  const size_t ahead = NT == 1 ? kx16_prefetch_distance(std::is_same_v<F, Q4K>) : 0;
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = panel + size_t(i) * kBytes;
    const int8_t* xq[kMaxTok] = {};
    for (int t = 0; t < NT; ++t) xq[t] = xt[t][i].qs;
    __m512i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    slices<F, NT>(blk, xq, isum, ahead, std::make_integer_sequence<int, F::kSlices>{});
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
  // No decode prefetch here: measured no faster with it (docs/cpu-kernels.md).
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

// Q5_0 x Q8_0 (kx16_zmm::Q50): isum starts at -16 x the block's activation sum, so after the 8
// quads it is the reference's sumi = sum (q - 16) x, exactly; then sum += float(sumi) * (dw * dx).
template <int NT, int... K>
inline void q5_quads(const uint8_t* blk, __m512i qh, const int8_t* const (&xq)[kMaxTok],
                     __m512i (&isum)[NT], std::integer_sequence<int, K...>) {
  (
      [&] {
        const __m512i w = Q50::codes<K>(blk, qh);
        for (int t = 0; t < NT; ++t)
          isum[t] = _mm512_dpbusd_epi32(isum[t], w, bcast32(xq[t] + 4 * K));
      }(),
      ...);
}

template <int NT>
inline void tile_q5(const uint8_t* panel, int64_t nb, const BlockQ8_0* const* xt,
                    const int32_t* const* xs16, float* y, int64_t ldy, int64_t rows_valid) {
  const size_t ahead = NT == 1 ? kx16_prefetch_distance(false) : 0;
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = panel + size_t(i) * Q50::kBytes;
    if constexpr (NT == 1) prefetch_part<Q50::kBytes, 1, 0>(blk, ahead);
    const int8_t* xq[kMaxTok] = {};
    __m512i isum[NT];
    for (int t = 0; t < NT; ++t) {
      xq[t] = xt[t][i].qs;
      isum[t] = _mm512_set1_epi32(-xs16[t][i]);
    }
    q5_quads<NT>(blk, load512(blk + 32), xq, isum, std::make_integer_sequence<int, 8>{});
    const __m512 dw = f16x16(blk);
    for (int t = 0; t < NT; ++t) {
      const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(xt[t][i].d)));
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(isum[t]), dd));
    }
  }
  for (int t = 0; t < NT; ++t) store_rows(acc[t], y + t * ldy, rows_valid);
}

template <typename F, int NT>
inline void tile_any(const uint8_t* panel, int64_t nb, const void* const* xt,
                     const int32_t* const* xs16, float* y, int64_t ldy, int64_t rows_valid) {
  if constexpr (std::is_same_v<F, Q50>) {
    tile_q5<NT>(panel, nb, reinterpret_cast<const BlockQ8_0* const*>(xt), xs16, y, ldy, rows_valid);
  } else if constexpr (std::is_same_v<F, Q80>) {
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
                             : std::is_same_v<F, Q50> ? Q50::kBytes
                             : std::is_same_v<F, Q4K> ? 2368
                             : std::is_same_v<F, Q5K> ? 2880
                                                      : 3360;
  const size_t panel_bytes = size_t(nb) * block_bytes;
  const int32_t* sums = std::is_same_v<F, Q50> ? kx16_q8_0_sums16(x, xs, nt, nb) : nullptr;
  for (int64_t t0 = 0; t0 < nt; t0 += kMaxTok) {
    const int n = int(std::min<int64_t>(kMaxTok, nt - t0));
    const void* xt[kMaxTok];
    const int32_t* xs16[kMaxTok] = {};
    for (int t = 0; t < n; ++t) {
      xt[t] = static_cast<const uint8_t*>(x) + (t0 + t) * xs;
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
          tile_any<F, 1>(panel, nb, xt, xs16, yp, ldy, valid);
          break;
        case 2:
          tile_any<F, 2>(panel, nb, xt, xs16, yp, ldy, valid);
          break;
        case 3:
          tile_any<F, 3>(panel, nb, xt, xs16, yp, ldy, valid);
          break;
        default:
          tile_any<F, 4>(panel, nb, xt, xs16, yp, ldy, valid);
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
void kx16_q5_0_avx512(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                      float* y, int64_t ldy, int64_t rows) {
  run<Q50>(w, nb, np, x, xs, nt, y, ldy, rows);
}

}  // namespace fish
