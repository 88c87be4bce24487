// AMX-INT8 prefill kernels of the x16 K-quant layout (kquant_x16.h), Sapphire Rapids and later.
//
// Operands of one tdpbssd (signed x signed bytes, 4 products summed into each int32, no
// saturation): A = 16 tokens x 64 activation bytes, loaded straight from the Q8_K (Q8_0) rows with
// the token stride; B = 16 panel quads, which in the x16 layout are already AMX's B format (quad q
// = B row q, row r's 4 codes = B[q][4r .. 4r+3]); C = 16 tokens x 16 rows of int32 dots. Signed x
// signed because the activations are signed and every B byte is a small signed value (below);
// tdpbusd (unsigned A) would need the activations biased by +128 and a correction per row.
//
// K-quants (folded_blocks): the sub-block scales are folded into B as digits (FoldQ45 / FoldQ6:
// B_d = code x digit_d(scale), a signed byte), so each digit's C tile sums a whole super-block and
// isum = sum_d C_d << (d x bits) is exactly the reference's integer sum_j sc_j * dot_j. The
// super-block epilogue is Q45Base / Q6K's finish (kquant_x16_zmm.h: the scalar reference's f32
// operations and order, -ffp-contract=off). Q8_0 (q8_0_blocks): B is the panel block itself (8
// quads, K = 32), one C per block, the reference's sum += float(sumi) * (dw * dx). So every
// output is BITWISE EQUAL to vec_dot_*_q8_k_ref / vec_dot_q8_0_q8_0_ref, as the other x16 kernels.
// Q5_0 (q5_0_blocks): as Q8_0, B the block's codes q - 16 expanded once per block.
//
// Loop order: panel, super-block (its folded codes written once to an L1 buffer of B tiles),
// 16-token block; the f32 sums of a panel live in a per-thread scratch of n_tok x 16 floats.
// A last partial block of at least kKx16AmxMinTokens tokens is zero-padded to 16 rows; a smaller
// one runs the AVX-512 VNNI kernel (bitwise the same results). The tile configurations are
// constants in read-only memory with every byte set (a half-initialised one on the stack faults in
// ldtilecfg), loaded on entry (so on every thread that calls) and released on exit. GCC 12's
// avx512fintrin.h trips -Wmaybe-uninitialized in callers (GCC bug 105593).
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

// q8_0_blocks: 0 = C, 1 = A (16 tokens x k = 32 bytes: one Q8_0 block), 2 = B (k / 4 quads).
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
// folded_blocks: 0..3 = C_d (16 tokens x 16 int32), 4 = A (16 tokens x 64 bytes), 5..7 = B_d (16
// quads x 64 bytes).
constexpr TileConfig folded_config() {
  TileConfig c;
  c.palette_id = 1;
  for (int i = 0; i < 8; ++i) {
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

// Folding the sub-block scales into the B tiles, so that the tiles sum a whole super-block and no
// per-sub-block step remains: a scale sc is written in kDigits digits of kShift bits, B_d holds
// code x digit_d(sc) for every weight (a signed byte), C_d = sum over the 256 weights of x * B_d,
// and isum = sum_d C_d << (d * kShift) = sum_j sc_j * dot_j: the reference's integer, exactly
// (|C_d| < 256 x 128 x 105: no overflow).
//   Q4_K: codes 0..15, 6-bit scales in 2 digits of 3 bits: code x digit <= 105.
//   Q5_K: codes 0..31, 3 digits of 2 bits: <= 93.
//   Q6_K: codes minus 32 (-32..31, which also drops the reference's -32 x bsums term), signed
//         8-bit scales as two's complement: 3 digits of 2 bits and a signed top digit sc >> 6
//         (-2..1): |code x digit| <= 96.
// A lane holds 4 codes of one row, so a 16-bit multiply by the row's digit handles 2 codes.
template <typename F, int kDigitCount, int kDigitBits>
struct FoldQ45 {
  using Format = F;
  static constexpr int kDigits = kDigitCount;
  static constexpr int kShift = kDigitBits;
  static __m512i digit(__m512i s16, int d) {
    return _mm512_and_si512(_mm512_srli_epi16(s16, d * kShift),
                            _mm512_set1_epi16((1 << kShift) - 1));
  }
  // code x digit < 256 and both >= 0: no carry between the two bytes of a 16-bit lane.
  static __m512i codes(__m512i w) { return w; }
  static __m512i scaled(__m512i w, __m512i digit) { return _mm512_mullo_epi16(w, digit); }
  // Q45Base::finish with its per-block loads hoisted out of the token loop.
  struct Block {
    __m512i mn[4];  // the mins of sub-blocks (2k, 2k + 1) as int16 pairs
    __m512 d, dmin;
    explicit Block(const uint8_t* blk) {
      const uint8_t* m = blk + 192;
      for (int k = 0; k < 4; ++k) mn[k] = pairs_u8(m + 2 * k * R, m + (2 * k + 1) * R);
      d = f16x16(blk);
      dmin = f16x16(blk + 32);
    }
    __m512 finish(const BlockQ8_K& b, __m512i isum, __m512 acc) const {
      const __m128i bs =
          _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums)),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums + 8)));
      __m512i summs = _mm512_madd_epi16(mn[0], _mm512_set1_epi32(_mm_extract_epi32(bs, 0)));
      summs = _mm512_add_epi32(
          summs, _mm512_madd_epi16(mn[1], _mm512_set1_epi32(_mm_extract_epi32(bs, 1))));
      summs = _mm512_add_epi32(
          summs, _mm512_madd_epi16(mn[2], _mm512_set1_epi32(_mm_extract_epi32(bs, 2))));
      summs = _mm512_add_epi32(
          summs, _mm512_madd_epi16(mn[3], _mm512_set1_epi32(_mm_extract_epi32(bs, 3))));
      const __m512 db = _mm512_set1_ps(b.d);
      return _mm512_add_ps(
          acc, _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(db, d), _mm512_cvtepi32_ps(isum)),
                             _mm512_mul_ps(_mm512_mul_ps(db, dmin), _mm512_cvtepi32_ps(summs))));
    }
  };
};

struct FoldQ6 {
  using Format = Q6K;
  static constexpr int kDigits = 4;
  static constexpr int kShift = 2;
  static __m512i digit(__m512i s16, int d) {
    if (d == 3) return _mm512_srai_epi16(s16, 6);
    return _mm512_and_si512(_mm512_srli_epi16(s16, 2 * d), _mm512_set1_epi16(3));
  }
  static __m512i codes(__m512i w) { return _mm512_sub_epi8(w, _mm512_set1_epi8(32)); }
  // Signed bytes: the even and odd bytes of each 16-bit lane multiplied apart (the low byte of a
  // product depends only on the low bytes of its factors).
  static __m512i scaled(__m512i w, __m512i digit) {
    const __m512i even = _mm512_mullo_epi16(w, digit);
    const __m512i odd =
        _mm512_mullo_epi16(_mm512_and_si512(w, _mm512_set1_epi16(int16_t(0xFF00))), digit);
    return _mm512_mask_blend_epi8(__mmask64(0xAAAAAAAAAAAAAAAAull), even, odd);
  }
  struct Block {
    __m512 d;
    explicit Block(const uint8_t* blk) : d(f16x16(blk)) {}
    // Q6K::finish without the offset term (the codes are signed already).
    __m512 finish(const BlockQ8_K& b, __m512i isum, __m512 acc) const {
      return _mm512_add_ps(
          acc, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(b.d), d), _mm512_cvtepi32_ps(isum)));
    }
  };
};

// The super-block's codes times the digits: codes[chunk][d][quad 0..15][64 bytes], chunk c =
// slices 2c (quads 0-7) and 2c + 1 (8-15), the 64 activations 64c .. 64c + 63.
template <typename P, int... S>
inline void fold(const uint8_t* blk, uint8_t (*codes)[P::kDigits][16 * 64],
                 std::integer_sequence<int, S...>) {
  using F = typename P::Format;
  constexpr int kQuadsPerSub = 8 / F::kSubsPerSlice;
  (
      [&] {
        for (int h = 0; h < F::kSubsPerSlice; ++h) {
          const __m512i s32 = F::scale(blk, S, h);  // the sub-block's scale of row r in lane r
          const __m512i s16 = _mm512_or_si512(_mm512_and_si512(s32, _mm512_set1_epi32(0xFFFF)),
                                              _mm512_slli_epi32(s32, 16));
          __m512i digit[P::kDigits];
          for (int d = 0; d < P::kDigits; ++d) digit[d] = P::digit(s16, d);
          for (int q = h * kQuadsPerSub; q < (h + 1) * kQuadsPerSub; ++q) {
            const __m512i w = P::codes(F::template weights<S>(blk, q));
            for (int d = 0; d < P::kDigits; ++d)
              _mm512_store_si512(codes[S >> 1][d] + ((S & 1) * 8 + q) * 64, P::scaled(w, digit[d]));
          }
        }
      }(),
      ...);
}

// Tile D (0..3) += A (tile 4) x B_D; B_D in tiles 5, 6, 7, 5 (the tile macros take literals).
template <int D>
inline void digit_tile(const uint8_t* b) {
  if constexpr (D == 0 || D == 3) {
    _tile_loadd(5, b, 64);
    if constexpr (D == 0) {
      _tile_dpbssd(0, 4, 5);
    } else {
      _tile_dpbssd(3, 4, 5);
    }
  } else if constexpr (D == 1) {
    _tile_loadd(6, b, 64);
    _tile_dpbssd(1, 4, 6);
  } else {
    _tile_loadd(7, b, 64);
    _tile_dpbssd(2, 4, 7);
  }
}

template <typename P, size_t kBytes>
void folded_blocks(const uint8_t* wb, int64_t nb, int64_t np, const uint8_t* x, size_t xs,
                   int64_t n16, int64_t n_store, float* y, int64_t ldy, int64_t rows) {
  constexpr int kD = P::kDigits;
  static_assert(kD >= 2 && kD <= 4);
  const Tiles tiles(kConfigFolded);
  float* acc = panel_scratch(n16);
  alignas(64) uint8_t codes[4][kD][16 * 64];
  alignas(64) int32_t c[kD][kTok * R];
  const size_t panel_bytes = size_t(nb) * kBytes;
  for (int64_t p = 0; p < np; ++p) {
    const int64_t valid = std::min<int64_t>(R, rows - p * R);
    if (valid <= 0) break;
    std::fill(acc, acc + n16 * R, 0.0f);
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* blk = wb + size_t(p) * panel_bytes + size_t(i) * kBytes;
      fold<P>(blk, codes, std::make_integer_sequence<int, P::Format::kSlices>{});
      const typename P::Block pb(blk);
      for (int64_t m0 = 0; m0 < n16; m0 += kTok) {
        const uint8_t* xb = x + size_t(m0) * xs + size_t(i) * sizeof(BlockQ8_K);
        const uint8_t* xa = xb + offsetof(BlockQ8_K, qs);
        _tile_zero(0);
        _tile_zero(1);
        if constexpr (kD > 2) _tile_zero(2);
        if constexpr (kD > 3) _tile_zero(3);
        for (int ch = 0; ch < 4; ++ch) {
          _tile_loadd(4, xa + 64 * ch, long(xs));
          digit_tile<0>(codes[ch][0]);
          digit_tile<1>(codes[ch][1]);
          if constexpr (kD > 2) digit_tile<2>(codes[ch][2]);
          if constexpr (kD > 3) digit_tile<3>(codes[ch][3]);
        }
        _tile_stored(0, c[0], 64);
        _tile_stored(1, c[1], 64);
        if constexpr (kD > 2) _tile_stored(2, c[2], 64);
        if constexpr (kD > 3) _tile_stored(3, c[3], 64);
        for (int t = 0; t < kTok; ++t) {
          __m512i isum = _mm512_load_si512(c[0] + t * R);
          for (int d = 1; d < kD; ++d)
            isum = _mm512_add_epi32(
                isum, _mm512_slli_epi32(_mm512_load_si512(c[d] + t * R), d * P::kShift));
          const auto& b = *reinterpret_cast<const BlockQ8_K*>(xb + size_t(t) * xs);
          float* a = acc + (m0 + t) * R;
          _mm512_storeu_ps(a, pb.finish(b, isum, _mm512_loadu_ps(a)));
        }
      }
    }
    for (int64_t t = 0; t < n_store; ++t)
      store_rows(_mm512_loadu_ps(acc + t * R), y + t * ldy + p * R, valid);
  }
}

// Full 16-token blocks of Q8_0 x Q8_0: per 32-weight block the reference's sum += float(sumi) *
// (dw * dx), the f32 sums of a token block in registers.
void q8_0_blocks(const uint8_t* wb, int64_t nb, int64_t np, const uint8_t* x, size_t xs,
                 int64_t n16, int64_t n_store, float* y, int64_t ldy, int64_t rows) {
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
      for (int t = 0; t < kTok && m0 + t < n_store; ++t)
        store_rows(acc[t], y + (m0 + t) * ldy + p * R, valid);
    }
  }
}

// Full 16-token blocks of Q5_0 x Q8_0: B is the block's signed codes q - 16 (-16..15), expanded
// once per block (kx16_zmm::Q50) into one B tile that every 16-token block uses; C = the
// reference's sumi, and per block sum += float(sumi) * (dw * dx), the panel's f32 sums in the
// per-thread scratch.
template <int... K>
inline void q5_0_codes(const uint8_t* blk, uint8_t* codes, std::integer_sequence<int, K...>) {
  const __m512i qh = load512(blk + 32);
  (_mm512_store_si512(codes + K * 64,
                      _mm512_sub_epi8(Q50::codes<K>(blk, qh), _mm512_set1_epi8(16))),
   ...);
}

void q5_0_blocks(const uint8_t* wb, int64_t nb, int64_t np, const uint8_t* x, size_t xs,
                 int64_t n16, int64_t n_store, float* y, int64_t ldy, int64_t rows) {
  const Tiles tiles(kConfigK32);
  float* acc = panel_scratch(n16);
  alignas(64) uint8_t codes[8 * 64];
  alignas(64) int32_t c[kTok * R];
  const size_t panel_bytes = size_t(nb) * Q50::kBytes;
  for (int64_t p = 0; p < np; ++p) {
    const int64_t valid = std::min<int64_t>(R, rows - p * R);
    if (valid <= 0) break;
    std::fill(acc, acc + n16 * R, 0.0f);
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* blk = wb + size_t(p) * panel_bytes + size_t(i) * Q50::kBytes;
      q5_0_codes(blk, codes, std::make_integer_sequence<int, 8>{});
      _tile_loadd(2, codes, 64);
      const __m512 dw = f16x16(blk);
      for (int64_t m0 = 0; m0 < n16; m0 += kTok) {
        const uint8_t* xb = x + size_t(m0) * xs + size_t(i) * sizeof(BlockQ8_0);
        _tile_zero(0);
        _tile_loadd(1, xb + offsetof(BlockQ8_0, qs), long(xs));
        _tile_dpbssd(0, 1, 2);
        _tile_stored(0, c, 64);
        for (int t = 0; t < kTok; ++t) {
          uint16_t dx;
          std::memcpy(&dx, xb + size_t(t) * xs + offsetof(BlockQ8_0, d), 2);
          const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(dx)));
          float* a = acc + (m0 + t) * R;
          _mm512_storeu_ps(
              a,
              _mm512_add_ps(_mm512_loadu_ps(a),
                            _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + t * R)), dd)));
        }
      }
    }
    for (int64_t t = 0; t < n_store; ++t)
      store_rows(_mm512_loadu_ps(acc + t * R), y + t * ldy + p * R, valid);
  }
}

// The blocks kernels: x holds n16 token rows (a multiple of 16), outputs for the first n_store.
using BlocksFn = void (*)(const uint8_t*, int64_t, int64_t, const uint8_t*, size_t, int64_t,
                          int64_t, float*, int64_t, int64_t);

// AMX for every block of 16 tokens and for a last partial block of at least kKx16AmxMinTokens
// (its rows copied into a zero-padded 16-row buffer: an all-zero Q8_K / Q8_0 row has d = 0 and
// adds nothing), the AVX-512 kernel for a smaller last block.
void run(BlocksFn blocks, Kx16Fn vnni, const void* w, int64_t nb, int64_t np, const void* x,
         size_t xs, int64_t nt, float* y, int64_t ldy, int64_t rows) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  const int64_t n16 = nt / kTok * kTok, tail = nt - n16;
  if (n16 > 0) blocks(wb, nb, np, xb, xs, n16, n16, y, ldy, rows);
  if (tail == 0) return;
  if (tail < kKx16AmxMinTokens) {
    vnni(w, nb, np, xb + size_t(n16) * xs, xs, tail, y + n16 * ldy, ldy, rows);
    return;
  }
  thread_local std::vector<uint8_t> pad;
  pad.assign(size_t(kTok) * xs, 0);
  std::memcpy(pad.data(), xb + size_t(n16) * xs, size_t(tail) * xs);
  blocks(wb, nb, np, pad.data(), xs, kTok, tail, y + n16 * ldy, ldy, rows);
}

}  // namespace

void kx16_q4_k_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  run(folded_blocks<FoldQ45<Q4K, 2, 3>, 2368>, kx16_q4_k_avx512, w, nb, np, x, xs, nt, y, ldy,
      rows);
}
void kx16_q5_k_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  run(folded_blocks<FoldQ45<Q5K, 3, 2>, 2880>, kx16_q5_k_avx512, w, nb, np, x, xs, nt, y, ldy,
      rows);
}
void kx16_q6_k_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  run(folded_blocks<FoldQ6, 3360>, kx16_q6_k_avx512, w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q8_0_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  run(q8_0_blocks, kx16_q8_0_avx512, w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q5_0_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  run(q5_0_blocks, kx16_q5_0_avx512, w, nb, np, x, xs, nt, y, ldy, rows);
}

}  // namespace fish
