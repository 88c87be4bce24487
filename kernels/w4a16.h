// W4A16: packed int4 weights in the seed's layout (quant/int4.h Int4Blocks64) x 16-bit (bf16)
// activations, y[t][o] = sum_k W[o][k] x[t][k]; x row-major f32 n_tok x n_in (rounded to bf16
// once, as a bf16 model's activations are), y row-major f32 n_tok x n_out.
//
// Decode dequantises in registers: per 64-channel block, k by k, codes q (0..15) times x in f32
// lanes (avx2, avx512: FMA) or, with AVX512_BF16, code pairs (k, k+1) as bf16 x activation pairs
// (vdpbf16ps); per group the sums get the channel's scale, and the zero point folds in once per
// group through the activations' group sum:  y += s * sum(q x) - (s z) * sum(x), or for the float
// zero point (w = s q + m)  y += s * sum(q x) + m * sum(x). The tail channels
// of an N that is not a multiple of 64 run the scalar reference in every variant.
//
// Prefill: more than dequant_threshold tokens dequantise the weights once per call, panel by
// panel (64 channels x n_in f32, per thread), and multiply with Eigen's GEMM (bf16 panels would
// halve the panel bytes but Eigen has no bf16 GEMM kernel; f32 keeps the GEMM at full speed).
// direct_dequant reads the panels from the packed layout itself (a deinterleave per call, no
// second copy); otherwise a row-major Int4Rows duplicate is kept and read (more memory, cheaper
// dequantisation). Matrices whose N is not a multiple of 64 always keep the duplicate
// (supports_direct_dequant). prefill_dequant false sends every token through the decode kernel.
// Both dequantisers produce bit-identical panels (w = f32(s) * f32(q - z), fp: f32(q) * f32(s) +
// f32(m)), so direct and duplicate prefill results are bit-identical.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/thread_pool.h"
#include "quant/int4.h"

namespace fish {

struct W4A16Acts {
  int64_t n_tok = 0;
  int64_t n_in = 0;
  int group_size = 0;
  std::vector<uint16_t> bf16;  // [n_tok][n_in] x rounded to bf16
  std::vector<float> f32;      // [n_tok][n_in] the same values as f32
  std::vector<float> gsum;     // [n_tok][n_in/group] sum of the group's f32 values, in k order
};

// Preconditions: n_in % group_size == 0; x finite.
void prepare_w4a16_acts(const float* x, int64_t n_tok, int64_t n_in, int group_size,
                        W4A16Acts& out);

enum class W4A16Isa : int { scalar = 0, avx2, avx512, avx512_bf16 };
inline constexpr int kW4A16IsaCount = 4;
std::string_view w4a16_isa_name(W4A16Isa isa);  // "scalar", "avx2", "avx512", "avx512_bf16"
std::optional<W4A16Isa> parse_w4a16_isa(std::string_view s);
bool w4a16_isa_supported(W4A16Isa isa);  // only scalar under FISH_SCALAR_ONLY
W4A16Isa w4a16_best_isa();               // highest supported at or below best_isa()

// One full 64-channel block x one token: out64[c] = channel (64b + c) . x. qs = the block's
// [n_in][32] bytes; scales / zeros / mins point at channel 64b of group 0 and advance by
// scale_stride (= n_out) per group; zeros nullptr for sym and fp; mins (f16 offsets) non-null
// only for fp, and then zeros is ignored.
using W4A16BlockFn = void (*)(int64_t n_in, int group_size, const uint8_t* qs,
                              const uint16_t* scales, const uint8_t* zeros, const uint16_t* mins,
                              int64_t scale_stride, const uint16_t* x_bf16, const float* x_f32,
                              const float* x_gsum, float* out64);
W4A16BlockFn w4a16_block_kernel(W4A16Isa isa);  // precondition: w4a16_isa_supported(isa)

void w4a16_block_ref(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                     const uint8_t* zeros, const uint16_t* mins, int64_t scale_stride,
                     const uint16_t* x_bf16, const float* x_f32, const float* x_gsum, float* out64);
void w4a16_block_avx2(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                      const uint8_t* zeros, const uint16_t* mins, int64_t scale_stride,
                      const uint16_t* x_bf16, const float* x_f32, const float* x_gsum,
                      float* out64);
void w4a16_block_avx512(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                        const uint8_t* zeros, const uint16_t* mins, int64_t scale_stride,
                        const uint16_t* x_bf16, const float* x_f32, const float* x_gsum,
                        float* out64);
void w4a16_block_avx512bf16(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                            const uint8_t* zeros, const uint16_t* mins, int64_t scale_stride,
                            const uint16_t* x_bf16, const float* x_f32, const float* x_gsum,
                            float* out64);

struct W4A16Options {
  bool prefill_dequant = true;    // false: batches run the decode kernel token by token
  bool direct_dequant = true;     // false: keep and read a row-major duplicate
  int64_t dequant_threshold = 8;  // token counts above this take the dequantise + GEMM path
};

// The packed weights plus, when the options need it, the row-major duplicate.
struct W4A16Weights {
  Int4Blocks64 packed;
  std::optional<Int4Rows> duplicate;

  size_t bytes() const { return packed.bytes() + (duplicate ? duplicate->bytes() : 0); }
};

// Keeps the duplicate iff prefill_dequant and (!direct_dequant or !supports_direct_dequant()).
W4A16Weights make_w4a16_weights(Int4Blocks64 packed, const W4A16Options& opt);

// Dequantise channels [c0, c0 + n) into an f32 panel: from the packed layout (direct: k-major
// [n_in][64], the layout's own order; precondition: supports_direct_dequant(), c0 % 64 == 0,
// n == 64) or from the row-major duplicate (channel-major [n][n_in]).
void dequantize_w4a16_panel_direct(const Int4Blocks64& w, int64_t c0, int64_t n, float* panel);
void dequantize_w4a16_panel_rows(const Int4Rows& w, int64_t c0, int64_t n, float* panel);

// The decode kernel of `isa` over 64-channel blocks [b0, b1) of w (block full_blocks() is the
// tail, when there is one) x every token of x, into y (n_tok rows of w.n_out). The unit of work the
// decode path splits across threads. Precondition: x prepared with w's group size.
void w4a16_blocks(const Int4Blocks64& w, const W4A16Acts& x, int64_t b0, int64_t b1, float* y,
                  W4A16Isa isa);
inline int64_t w4a16_block_count(const Int4Blocks64& w) {
  return (w.n_out + kInt4BlockChannels - 1) / kInt4BlockChannels;
}

// y = x W^T, n_tok rows. Preconditions: w4a16_isa_supported(isa); a prefill call (n_tok >
// dequant_threshold, prefill_dequant) on weights made with other options than `opt` asserts when
// it would need a duplicate that is not there.
void matmul_w4a16(const W4A16Weights& w, const float* x, int64_t n_tok, float* y, ThreadPool& pool,
                  const W4A16Options& opt = {}, W4A16Isa isa = w4a16_best_isa());

}  // namespace fish
