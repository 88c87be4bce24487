// W4A8: packed int4 weights (quant/int4.h Int4Vnni16) x int8 activations, y[t][o] = sum_k W[o][k]
// x[t][k], x row-major f32 n_tok x n_in, y row-major f32 n_tok x n_out.
//
// Activations are quantised per group of the weights' group size: a_scale = max|x| / 127,
// a = round(x / a_scale) in -127..127, and a_sum = a_scale * sum(a) per group. For one weight
// row and group g (w = s (q - z)), with idot = sum q * a exact in int32:
//   y += (s * a_scale) * idot  -  (s * z) * a_sum
// and for the float zero point (w = s q + m):  y += (s * a_scale) * idot  +  m * a_sum,
// so the zero point (8 for sym, per group for asym, f16 m for fp) folds in once per group, outside
// the inner loop; the codes q (0..15) are the unsigned operand of u8 x s8 products (vpdpbusd, or
// AVX2 pmaddubsw where 2 * 15 * 127 cannot saturate int16: activations are never the unsigned
// side). Variants differ only by float summation order (integer sums are exact everywhere):
//   scalar       the reference (w4a8.cpp)
//   avx2         pmaddubsw + pmaddwd, 8 rows per ymm (w4a8_avx2.cpp)
//   avx_vnni     VEX vpdpbusd ymm (w4a8_avxvnni.cpp)
//   avx512_vnni  EVEX vpdpbusd zmm, 16 rows per vector (w4a8_avx512.cpp)
//   amx          prefill (n_tok > kW4A8AmxMinTokens) on AMX-INT8 tiles (w4a8_amx.cpp); fewer
//                tokens run avx512_vnni. Used only after the CPUID + XCR0 + palette checks and
//                the kernel's tile permission (kernels/amx.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/thread_pool.h"
#include "quant/int4.h"

namespace fish {

inline constexpr int64_t kW4A8AmxMinTokens = 4;  // AMX needs > 4 rows (seed: "prefill M > 4")

struct W4A8Acts {
  int64_t n_tok = 0;
  int64_t n_in = 0;
  int group_size = 0;
  std::vector<int8_t> qs;     // [n_tok rounded up to 16][n_in]; padding rows 0 (AMX tile rows)
  std::vector<float> scales;  // [n_tok][n_in/group]
  std::vector<float> sums;    // [n_tok][n_in/group]: scale * sum of the group's codes
};

// Scalar (auto-vectorised) quantiser shared by every variant: O(n_tok * n_in), negligible next
// to the matmul. Preconditions: n_in % group_size == 0, group_size in 32/64/128, x finite.
void quantize_w4a8_acts(const float* x, int64_t n_tok, int64_t n_in, int group_size, W4A8Acts& out);

enum class W4A8Isa : int { scalar = 0, avx2, avx_vnni, avx512_vnni, amx };
inline constexpr int kW4A8IsaCount = 5;
std::string_view w4a8_isa_name(W4A8Isa isa);  // "scalar", "avx2", "avx_vnni", ...
std::optional<W4A8Isa> parse_w4a8_isa(std::string_view s);
// The CPU + OS run it and this build has it (only scalar under FISH_SCALAR_ONLY; amx also needs
// amx_int8_usable()).
bool w4a8_isa_supported(W4A8Isa isa);
// Highest supported variant at or below best_isa() (FISH_ISA lowers it): amx, avx512_vnni,
// avx_vnni, avx2, scalar.
W4A8Isa w4a8_best_isa();

// One 16-row tile x one token: out[r] = row (16t + r) . activation row. qs / scales / zeros / mins
// are the tile's (Int4Vnni16 tile_qs / tile_scales / tile_zeros / tile_mins; zeros nullptr for sym
// and fp, mins non-null only for fp, then zeros is ignored); aq, a_scales, a_sums the token's row
// of W4A8Acts.
using W4A8TileFn = void (*)(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                            const uint8_t* zeros, const uint16_t* mins, const int8_t* aq,
                            const float* a_scales, const float* a_sums, float* out16);
// Precondition: w4a8_isa_supported(isa); amx gives its decode kernel (avx512_vnni).
W4A8TileFn w4a8_tile_kernel(W4A8Isa isa);

void w4a8_tile_ref(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                   const uint8_t* zeros, const uint16_t* mins, const int8_t* aq,
                   const float* a_scales, const float* a_sums, float* out16);
void w4a8_tile_avx2(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                    const uint8_t* zeros, const uint16_t* mins, const int8_t* aq,
                    const float* a_scales, const float* a_sums, float* out16);
void w4a8_tile_avxvnni(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                       const uint8_t* zeros, const uint16_t* mins, const int8_t* aq,
                       const float* a_scales, const float* a_sums, float* out16);
void w4a8_tile_avx512(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                      const uint8_t* zeros, const uint16_t* mins, const int8_t* aq,
                      const float* a_scales, const float* a_sums, float* out16);

// AMX: tiles [t_begin, t_end) x all n_tok tokens; y[t][o] for o < n_out only. aq has n_tok
// rounded up to 16 rows (W4A8Acts::qs); acc_scratch holds n_tok * 16 floats. Precondition:
// amx_int8_usable(). Loads its tile configuration on entry (so on every thread that calls it) and
// releases the tiles on return.
void w4a8_tiles_amx(const uint8_t* qs, const uint16_t* scales, const uint8_t* zeros,
                    const uint16_t* mins, int64_t n_in, int group_size, int64_t n_out,
                    int64_t t_begin, int64_t t_end, const int8_t* aq, const float* a_scales,
                    const float* a_sums, int64_t n_tok, float* y, float* acc_scratch);

// Tiles [t0, t1) of w x every token of x through the tile kernel of `isa` (not AMX), into y
// (n_tok rows of w.n_out). The unit of work matmul_w4a8_preq splits across threads; callers that
// run several matrices in one dispatch (the engine's q/k/v at decode) split the same way.
void w4a8_tiles(const Int4Vnni16& w, const W4A8Acts& x, int64_t t0, int64_t t1, float* y,
                W4A8Isa isa);

// y = x W^T. Preconditions: x.n_in == w.n_in, x.group_size == w.fmt.group_size,
// w4a8_isa_supported(isa); y holds n_tok * w.n_out floats and does not alias anything.
// Rows are split across the pool in 16-row tiles.
void matmul_w4a8_preq(const Int4Vnni16& w, const W4A8Acts& x, float* y, ThreadPool& pool,
                      W4A8Isa isa = w4a8_best_isa());
// Quantises x (n_tok x w.n_in) into a thread-local buffer, then matmul_w4a8_preq.
void matmul_w4a8(const Int4Vnni16& w, const float* x, int64_t n_tok, float* y, ThreadPool& pool,
                 W4A8Isa isa = w4a8_best_isa());

}  // namespace fish
