// AMX-INT8 prefill kernels of the x16 K-quant layout (kquant_x16.h), Sapphire Rapids and later.
//
// Operands of one tdpbssd (signed x signed bytes, 4 products summed into each int32, no
// saturation): A = 16 tokens x K activation bytes, loaded straight from the Q8_K (Q8_0) rows with
// the token stride; B = the K/4 panel quads of one sub-block, which in the x16 layout are
// already AMX's B format (quad q = B row q, row r's 4 codes = B[q][4r .. 4r+3]); C = 16 tokens x
// 16 rows of int32 dots. The signed variant needs no offset correction: the K-quant codes are
// 0..15 / 0..31 / 0..63 (they are their own signed bytes) and Q8_0 weights are signed already;
// tdpbusd (unsigned A) would need the activations biased by +128 and a correction per row.
//
// Per sub-block (32 weights; 16 for Q6_K) the C tile is stored and each token's 16 row dots are
// multiplied by the rows' scales and summed (vpmulld), exactly as kquant_x16_avx512.cpp does with
// vpdpbusd; the super-block epilogue is the same code (kquant_x16_zmm.h: the scalar reference's
// f32 operations and order, -ffp-contract=off). So every output is BITWISE EQUAL to
// vec_dot_*_q8_k_ref / vec_dot_q8_0_q8_0_ref, as the other x16 kernels are.
//
// Loop order: panel, super-block (its codes decoded once into an L1 buffer of B tiles), 16-token
// block; the f32 sums of a panel live in a per-thread scratch of n_tok x 16 floats. Tokens past
// the last full block of 16, and calls with n_tok < kKx16AmxMinTokens, run the AVX-512 VNNI
// kernel (bitwise the same results). Tiles: 0 = C, 1 = A, 2 = B. The tile configuration is a
// constant in read-only memory, every byte of it set, loaded on entry (so on every thread that
// calls) and released on exit.
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized in callers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/kquant_x16.h"
#include "kernels/kquant_x16_zmm.h"

namespace fish {
namespace {

using namespace kx16_zmm;  // NOLINT: the format policies

constexpr int kTok = 16;  // tokens per A tile (AMX's 16 rows)

struct alignas(64) TileConfig {  // ldtilecfg memory format, palette 1 (Intel SDM vol. 1, 3.2)
  uint8_t palette_id = 0;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of tile i
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// K = activation bytes per tdpbssd: 32 (a Q4_K / Q5_K sub-block, a Q8_0 block) or 16 (Q6_K).
constexpr TileConfig tile_config(int k) {
  TileConfig c;
  c.palette_id = 1;
  c.rows[0] = kTok;  // C: 16 tokens x 16 int32
  c.colsb[0] = 64;
  c.rows[1] = kTok;  // A: 16 tokens x K bytes
  c.colsb[1] = uint16_t(k);
  c.rows[2] = uint8_t(k / 4);  // B: K/4 quads x 64 bytes
  c.colsb[2] = 64;
  return c;
}
constexpr TileConfig kConfigK32 = tile_config(32);
constexpr TileConfig kConfigK16 = tile_config(16);
// folded_blocks: 0..2 = C_d (16 tokens x 16 int32), 4 = A (16 tokens x 64 bytes), 5..7 = B_d (16
// quads x 64 bytes).
constexpr TileConfig folded_config() {
  TileConfig c;
  c.palette_id = 1;
  for (int i : {0, 1, 2, 4, 5, 6, 7}) {
    c.rows[i] = 16;
    c.colsb[i] = 64;
  }
  return c;
}
constexpr TileConfig kConfigFolded = folded_config();

// Tile configuration for the scope of one kernel call.
class Tiles {
 public:
  explicit Tiles(const TileConfig& c) { _tile_loadconfig(&c); }
  ~Tiles() { _tile_release(); }
  Tiles(const Tiles&) = delete;
  Tiles& operator=(const Tiles&) = delete;
};

// Per-thread f32 sums of one panel: n_tok x 16.
float* panel_scratch(int64_t n_tok) {
  thread_local std::vector<float> s;
  if (s.size() < size_t(n_tok * R)) s.resize(size_t(n_tok * R));
  return s.data();
}

template <typename F, int... S>
inline void decode(const uint8_t* blk, uint8_t (*codes)[8 * 64], std::integer_sequence<int, S...>) {
  (
      [&] {
        for (int q = 0; q < 8; ++q)
          _mm512_store_si512(codes[S] + q * 64, F::template weights<S>(blk, q));
      }(),
      ...);
}

// Full 16-token blocks [0, n16) of a K-quant (Q8_K activations) over panels [0, np).
template <typename F, size_t kBytes>
void kquant_blocks(const uint8_t* wb, int64_t nb, int64_t np, const uint8_t* x, size_t xs,
                   int64_t n16, float* y, int64_t ldy, int64_t rows) {
  constexpr int kQuadsPerSub = 8 / F::kSubsPerSlice;
  const Tiles tiles(kQuadsPerSub == 8 ? kConfigK32 : kConfigK16);
  float* acc = panel_scratch(n16);
  alignas(64) uint8_t codes[F::kSlices][8 * 64];
  alignas(64) int32_t c[kTok * R];
  const size_t panel_bytes = size_t(nb) * kBytes;
  for (int64_t p = 0; p < np; ++p) {
    const int64_t valid = std::min<int64_t>(R, rows - p * R);
    if (valid <= 0) break;
    std::fill(acc, acc + n16 * R, 0.0f);
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* blk = wb + size_t(p) * panel_bytes + size_t(i) * kBytes;
      decode<F>(blk, codes, std::make_integer_sequence<int, F::kSlices>{});
      for (int64_t m0 = 0; m0 < n16; m0 += kTok) {
        const uint8_t* xb = x + size_t(m0) * xs + size_t(i) * sizeof(BlockQ8_K);
        const uint8_t* xa = xb + offsetof(BlockQ8_K, qs);
        __m512i isum[kTok];
        for (int t = 0; t < kTok; ++t) isum[t] = _mm512_setzero_si512();
        for (int s = 0; s < F::kSlices; ++s) {
          for (int h = 0; h < F::kSubsPerSlice; ++h) {
            _tile_zero(0);
            _tile_loadd(1, xa + F::x_off(s, h * kQuadsPerSub), long(xs));
            _tile_loadd(2, codes[s] + h * kQuadsPerSub * 64, 64);
            _tile_dpbssd(0, 1, 2);
            _tile_stored(0, c, 64);
            const __m512i sc = F::scale(blk, s, h);
            for (int t = 0; t < kTok; ++t)
              isum[t] =
                  _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_load_si512(c + t * R), sc));
          }
        }
        for (int t = 0; t < kTok; ++t) {
          const auto& b = *reinterpret_cast<const BlockQ8_K*>(xb + size_t(t) * xs);
          float* a = acc + (m0 + t) * R;
          _mm512_storeu_ps(a, F::finish(blk, b, isum[t], _mm512_loadu_ps(a)));
        }
      }
    }
    for (int64_t t = 0; t < n16; ++t)
      store_rows(_mm512_loadu_ps(acc + t * R), y + t * ldy + p * R, valid);
  }
}

// The codes of the super-block's slices (sub-blocks) S times digit d of their rows' scales:
// codes[chunk][d][quad 0..15][64 bytes], chunk c = sub-blocks 2c (quads 0-7) and 2c + 1 (8-15).
// A lane holds 4 codes of one row, so one 16-bit multiply by the row's digit scales 2 codes at a
// time (code x digit < 128: no carry into the other byte).
template <typename F, int kDigits, int kShift, int... S>
inline void fold(const uint8_t* blk, uint8_t (*codes)[kDigits][16 * 64],
                 std::integer_sequence<int, S...>) {
  (
      [&] {
        const __m512i s32 = F::scale(blk, S, 0);  // sc[S][r] in lane r
        const __m512i s16 = _mm512_or_si512(s32, _mm512_slli_epi32(s32, 16));
        __m512i digit[kDigits];
        for (int d = 0; d < kDigits; ++d)
          digit[d] = _mm512_and_si512(_mm512_srli_epi16(s16, d * kShift),
                                      _mm512_set1_epi16((1 << kShift) - 1));
        for (int q = 0; q < 8; ++q) {
          const __m512i w = F::template weights<S>(blk, q);
          for (int d = 0; d < kDigits; ++d)
            _mm512_store_si512(codes[S >> 1][d] + ((S & 1) * 8 + q) * 64,
                               _mm512_mullo_epi16(w, digit[d]));
        }
      }(),
      ...);
}

// Q4_K / Q5_K with the sub-block scales folded into the B tiles, so the tiles sum all 8 sub-blocks
// and no per-sub-block step remains. A 6-bit scale is written in kDigits digits of kShift bits
// (Q4_K: 2 x 3 bits, code x digit <= 15 x 7 = 105; Q5_K: 3 x 2 bits, <= 31 x 3 = 93: signed
// bytes). C_d = sum over the 256 weights of x * code * digit_d(sc), and isum = sum_d C_d << (d *
// kShift) = sum_j sc_j * dot_j: the reference's integer (|C_d| < 256 x 128 x 105: no overflow).
// The epilogue is Q45Base::finish with its per-block loads hoisted out of the token loop.
template <typename F, size_t kBytes, int kDigits, int kShift>
void folded_blocks(const uint8_t* wb, int64_t nb, int64_t np, const uint8_t* x, size_t xs,
                   int64_t n16, float* y, int64_t ldy, int64_t rows) {
  static_assert(kDigits == 2 || kDigits == 3);
  const Tiles tiles(kConfigFolded);
  float* acc = panel_scratch(n16);
  alignas(64) uint8_t codes[4][kDigits][16 * 64];
  alignas(64) int32_t c[kDigits][kTok * R];
  const size_t panel_bytes = size_t(nb) * kBytes;
  for (int64_t p = 0; p < np; ++p) {
    const int64_t valid = std::min<int64_t>(R, rows - p * R);
    if (valid <= 0) break;
    std::fill(acc, acc + n16 * R, 0.0f);
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* blk = wb + size_t(p) * panel_bytes + size_t(i) * kBytes;
      fold<F, kDigits, kShift>(blk, codes, std::make_integer_sequence<int, F::kSlices>{});
      const uint8_t* mn = blk + 192;  // mins [8 sub][16 rows]
      const __m512i mn01 = pairs_u8(mn, mn + R), mn23 = pairs_u8(mn + 2 * R, mn + 3 * R);
      const __m512i mn45 = pairs_u8(mn + 4 * R, mn + 5 * R);
      const __m512i mn67 = pairs_u8(mn + 6 * R, mn + 7 * R);
      const __m512 d = f16x16(blk), dmin = f16x16(blk + 32);
      for (int64_t m0 = 0; m0 < n16; m0 += kTok) {
        const uint8_t* xb = x + size_t(m0) * xs + size_t(i) * sizeof(BlockQ8_K);
        const uint8_t* xa = xb + offsetof(BlockQ8_K, qs);
        _tile_zero(0);
        _tile_zero(1);
        if constexpr (kDigits > 2) _tile_zero(2);
        for (int ch = 0; ch < 4; ++ch) {
          _tile_loadd(4, xa + 64 * ch, long(xs));
          _tile_loadd(5, codes[ch][0], 64);
          _tile_loadd(6, codes[ch][1], 64);
          _tile_dpbssd(0, 4, 5);
          _tile_dpbssd(1, 4, 6);
          if constexpr (kDigits > 2) {
            _tile_loadd(7, codes[ch][kDigits - 1], 64);
            _tile_dpbssd(2, 4, 7);
          }
        }
        _tile_stored(0, c[0], 64);
        _tile_stored(1, c[1], 64);
        if constexpr (kDigits > 2) _tile_stored(2, c[kDigits - 1], 64);
        for (int t = 0; t < kTok; ++t) {
          __m512i isum = _mm512_add_epi32(_mm512_load_si512(c[0] + t * R),
                                          _mm512_slli_epi32(_mm512_load_si512(c[1] + t * R), kShift));
          if constexpr (kDigits > 2)
            isum = _mm512_add_epi32(
                isum, _mm512_slli_epi32(_mm512_load_si512(c[kDigits - 1] + t * R), 2 * kShift));
          const auto& b = *reinterpret_cast<const BlockQ8_K*>(xb + size_t(t) * xs);
          const __m128i bs =
              _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums)),
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums + 8)));
          __m512i summs = _mm512_madd_epi16(mn01, _mm512_set1_epi32(_mm_extract_epi32(bs, 0)));
          summs = _mm512_add_epi32(
              summs, _mm512_madd_epi16(mn23, _mm512_set1_epi32(_mm_extract_epi32(bs, 1))));
          summs = _mm512_add_epi32(
              summs, _mm512_madd_epi16(mn45, _mm512_set1_epi32(_mm_extract_epi32(bs, 2))));
          summs = _mm512_add_epi32(
              summs, _mm512_madd_epi16(mn67, _mm512_set1_epi32(_mm_extract_epi32(bs, 3))));
          const __m512 db = _mm512_set1_ps(b.d);
          const __m512 dall = _mm512_mul_ps(db, d), dm = _mm512_mul_ps(db, dmin);
          float* a = acc + (m0 + t) * R;
          _mm512_storeu_ps(
              a, _mm512_add_ps(_mm512_loadu_ps(a),
                               _mm512_sub_ps(_mm512_mul_ps(dall, _mm512_cvtepi32_ps(isum)),
                                             _mm512_mul_ps(dm, _mm512_cvtepi32_ps(summs)))));
        }
      }
    }
    for (int64_t t = 0; t < n16; ++t)
      store_rows(_mm512_loadu_ps(acc + t * R), y + t * ldy + p * R, valid);
  }
}

// Full 16-token blocks of Q8_0 x Q8_0: per 32-weight block the reference's sum += float(sumi) *
// (dw * dx), the f32 sums of a token block in registers.
void q8_0_blocks(const uint8_t* wb, int64_t nb, int64_t np, const uint8_t* x, size_t xs,
                 int64_t n16, float* y, int64_t ldy, int64_t rows) {
  constexpr size_t kBytes = 544;
  const Tiles tiles(kConfigK32);
  alignas(64) int32_t c[kTok * R];
  const size_t panel_bytes = size_t(nb) * kBytes;
  for (int64_t p = 0; p < np; ++p) {
    const int64_t valid = std::min<int64_t>(R, rows - p * R);
    if (valid <= 0) break;
    const uint8_t* panel = wb + size_t(p) * panel_bytes;
    for (int64_t m0 = 0; m0 < n16; m0 += kTok) {
      __m512 acc[kTok];
      for (int t = 0; t < kTok; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* blk = panel + size_t(i) * kBytes;
        const uint8_t* xb = x + size_t(m0) * xs + size_t(i) * sizeof(BlockQ8_0);
        _tile_zero(0);
        _tile_loadd(1, xb + offsetof(BlockQ8_0, qs), long(xs));
        _tile_loadd(2, blk + 32, 64);
        _tile_dpbssd(0, 1, 2);
        _tile_stored(0, c, 64);
        const __m512 dw = f16x16(blk);
        for (int t = 0; t < kTok; ++t) {
          uint16_t dx;
          std::memcpy(&dx, xb + size_t(t) * xs + offsetof(BlockQ8_0, d), 2);
          const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(dx)));
          acc[t] = _mm512_add_ps(
              acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + t * R)), dd));
        }
      }
      for (int t = 0; t < kTok; ++t) store_rows(acc[t], y + (m0 + t) * ldy + p * R, valid);
    }
  }
}

using BlocksFn = void (*)(const uint8_t*, int64_t, int64_t, const uint8_t*, size_t, int64_t, float*,
                          int64_t, int64_t);

// AMX for the full 16-token blocks, the AVX-512 kernel for the rest.
void run(BlocksFn blocks, Kx16Fn vnni, const void* w, int64_t nb, int64_t np, const void* x,
         size_t xs, int64_t nt, float* y, int64_t ldy, int64_t rows) {
  const int64_t n16 = nt < kKx16AmxMinTokens ? 0 : nt / kTok * kTok;
  const auto* xb = static_cast<const uint8_t*>(x);
  if (n16 > 0) blocks(static_cast<const uint8_t*>(w), nb, np, xb, xs, n16, y, ldy, rows);
  if (n16 < nt) vnni(w, nb, np, xb + size_t(n16) * xs, xs, nt - n16, y + n16 * ldy, ldy, rows);
}

}  // namespace

void kx16_q4_k_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  run(folded_blocks<Q4K, 2368, 2, 3>, kx16_q4_k_avx512, w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q5_k_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  run(folded_blocks<Q5K, 2880, 3, 2>, kx16_q5_k_avx512, w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q6_k_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  run(kquant_blocks<Q6K, 3360>, kx16_q6_k_avx512, w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q8_0_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  run(q8_0_blocks, kx16_q8_0_avx512, w, nb, np, x, xs, nt, y, ldy, rows);
}

}  // namespace fish
