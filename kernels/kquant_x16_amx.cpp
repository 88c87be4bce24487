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
  run(kquant_blocks<Q4K, 2368>, kx16_q4_k_avx512, w, nb, np, x, xs, nt, y, ldy, rows);
}
void kx16_q5_k_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  run(kquant_blocks<Q5K, 2880>, kx16_q5_k_avx512, w, nb, np, x, xs, nt, y, ldy, rows);
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
