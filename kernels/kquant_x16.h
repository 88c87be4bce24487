// Interleaved ("x16") weights: Q4_K / Q5_K / Q6_K (and Q8_0, Q5_0) matrices repacked at load so
// that one pass over a Q8_K activation row yields 16 row sums (decode), and a register-blocked GEMM
// of 8 rows x up to 4 tokens per tile runs on the same bytes (prefill; 16 rows x 16 tokens on AMX
// tiles where the CPU has them: kquant_x16_amx.cpp). docs/cpu-kernels.md has the
// diagram; in short, a matrix becomes ceil(n_out / 16) panels of 16 rows, each panel the n_in /
// 256 super-blocks of its rows one after another, and one panel super-block holds the 16 rows'
// fields side by side with every 32-bit lane = 4 consecutive weights of one row:
//
//   Q4_K (2368 B = 16 x 144 + 64): d[16] f16 | dmin[16] f16 | sc[8 sub][16 rows] u8 |
//        mn[8 sub][16 rows] u8 | qs[4 chunk][8 quad][16 rows][4 B]
//   Q5_K (2880 B = 16 x 176 + 64): as Q4_K, then qh[8 quad][16 rows][4 B] before qs
//   Q6_K (3360 B = 16 x 210):      d[16] f16 | sc[16 sub][16 rows] i8 | ql[2 half][2][8 quad]
//        [16 rows][4 B] | qh[2 half][8 quad][16 rows][4 B]
//   Q8_0 (544 B = 16 x 34, a "super-block" of 32 weights): d[16] f16 | qs[8 quad][16 rows][4 B]
//   Q5_0 (352 B = 16 x 22, 32 weights): d[16] f16 | qh[16 rows][4 B] (bits transposed, below) |
//        qs[4 quad][16 rows][4 B]
//
// qs / ql / qh bytes are GGUF's own bytes of the row, moved (byte j of a row's 32-byte group goes
// to quad j/4, byte j%4); the 6-bit Q4_K / Q5_K scales and mins are stored unpacked (one byte
// each, 4 bytes more per row and super-block than GGUF's 12-byte packing: +2.8% for Q4_K,
// +2.3% Q5_K). A Q5_0 row's 32 fifth bits (GGUF qh, bit j = weight j) are permuted so that bit k
// of byte b is weight 4k + b's: the bits of weights 4k .. 4k + 3 (one activation quad) sit at the
// same bit k of the lane's 4 bytes, one shift and mask away; Q5_0 takes exactly GGUF's bytes.
// The repacking is lossless: kx16_unpack_row gives back the GGUF bytes of any row.
// The rows of the last panel past n_out are zero bytes (d = 0): computed and dropped.
//
// Arithmetic: per row and super-block the integer sums (sum_s sc_s * dot_s, the min / offset
// terms through Q8_K's bsums) are exact int32, then scaled in f32 with the very operations and
// order of the scalar reference (kernels/vec_dot_ref.cpp: dall = db * d; sum += dall * isum -
// dmin * summs, no FMA contraction), so every output is BITWISE EQUAL to vec_dot_*_q8_k_ref
// (vec_dot_q8_0_q8_0_ref, vec_dot_q5_0_q8_0_ref) of the GGUF row, for any thread count and token
// blocking (the per-row AVX2 / AVX-512 kernels differ from the reference by float summation
// order; these do not).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/thread_pool.h"
#include "quant/q8_0.h"
#include "quant/q8_k.h"
#include "quant/types.h"

namespace fish {

constexpr int64_t kKx16Rows = 16;

// q4_k, q5_k, q6_k (x Q8_K activations), q8_0 and q5_0 (x Q8_0).
bool kx16_supported(GgmlType t);
// The activations are Q8_0 rows (q8_0, q5_0), else Q8_K.
bool kx16_q8_0_act(GgmlType t);
// Weights per panel super-block: 256 (K-quants) or 32 (q8_0, q5_0); n_in must be a multiple.
int64_t kx16_block_elems(GgmlType t);
// Bytes of one panel super-block (16 rows x 256 weights); 0 when !kx16_supported(t).
size_t kx16_block_bytes(GgmlType t);
// Bytes of the repacked matrix: ceil(n_out / 16) panels x (n_in / block_elems) blocks.
size_t kx16_matrix_bytes(GgmlType t, int64_t n_out, int64_t n_in);

// GGUF rows (n_out rows of n_in weights, row_bytes(t, n_in) apart) -> the x16 layout in `dst`
// (kx16_matrix_bytes bytes). Panels [p0, p1) only, so the work can be split (each panel's bytes
// depend on its 16 rows alone). Preconditions: kx16_supported(t), n_in % block_elems == 0.
void kx16_pack(GgmlType t, const void* w, int64_t n_out, int64_t n_in, void* dst, int64_t p0,
               int64_t p1);
// The GGUF bytes of row `row` (row_bytes(t, n_in) bytes into dst): the inverse of kx16_pack.
void kx16_unpack_row(GgmlType t, const void* packed, int64_t n_in, int64_t row, void* dst);

// The tile kernel: panels [0, n_panels) of `w` (consecutive panels, nb super-blocks each) x
// n_tok activation rows (Q8_K, or Q8_0 for q8_0 / q5_0; x_stride bytes apart, nb blocks each):
// y[t * ldy + r] for the panels' rows r (relative to the first panel) below rows_valid. n_tok
// any >= 1.
using Kx16Fn = void (*)(const void* w, int64_t nb, int64_t n_panels, const void* x, size_t x_stride,
                        int64_t n_tok, float* y, int64_t ldy, int64_t rows_valid);

// Kernel for `t` at the highest ISA level <= isa the CPU supports (scalar, avx2, avx512 = AVX-512
// VNNI: kquant_x16_avx512.cpp). *got (if given) receives the level. At avx512, where
// kx16_amx_usable() and allow_amx, it is the AMX variant (kquant_x16_amx.cpp: prefill on AMX tiles,
// the AVX-512 kernel below kKx16AmxMinTokens tokens); *got_amx (if given) says which.
Kx16Fn kx16_kernel(GgmlType t, Isa isa, Isa* got = nullptr, bool allow_amx = true,
                   bool* got_amx = nullptr);

// The x16 AMX kernels may run: amx_int8_usable() (kernels/amx.h: CPU, OS state, this process's
// tile permission; false when FISH_AMX=0 or under FISH_SCALAR_ONLY).
bool kx16_amx_usable();
// The AMX variants run every block of 16 tokens on tiles, and the last partial block too when it
// has at least this many tokens (zero-padded); a smaller one, and so decode, runs the AVX-512
// kernel. The crossover measured: docs/cpu-kernels.md.
constexpr int64_t kKx16AmxMinTokens = 12;

void kx16_q4_k_ref(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows);
void kx16_q5_k_ref(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows);
void kx16_q6_k_ref(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows);
void kx16_q4_k_avx2(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                    float* y, int64_t ldy, int64_t rows);
void kx16_q5_k_avx2(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                    float* y, int64_t ldy, int64_t rows);
void kx16_q6_k_avx2(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                    float* y, int64_t ldy, int64_t rows);
void kx16_q4_k_avx512(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                      float* y, int64_t ldy, int64_t rows);
void kx16_q5_k_avx512(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                      float* y, int64_t ldy, int64_t rows);
void kx16_q6_k_avx512(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                      float* y, int64_t ldy, int64_t rows);
void kx16_q8_0_avx512(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                      float* y, int64_t ldy, int64_t rows);
// AMX-INT8 variants (kquant_x16_amx.cpp). Precondition: kx16_amx_usable().
void kx16_q4_k_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows);
void kx16_q5_k_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows);
void kx16_q6_k_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows);
void kx16_q8_0_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows);
void kx16_q8_0_ref(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows);
void kx16_q8_0_avx2(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                    float* y, int64_t ldy, int64_t rows);
void kx16_q5_0_ref(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows);
void kx16_q5_0_avx2(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                    float* y, int64_t ldy, int64_t rows);
void kx16_q5_0_avx512(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                      float* y, int64_t ldy, int64_t rows);
void kx16_q5_0_amx(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows);

// How far ahead (bytes) the AVX-512 K-quant / Q5_0 kernels prefetch the panel bytes in decode (one
// token). The setting is FISH_KX16_PREFETCH's bytes where set (every format; 0 turns it off),
// else kKx16PrefetchAuto: kKx16PrefetchQ4K for Q4_K and kKx16PrefetchDefault for the others
// (measured: docs/cpu-kernels.md). The setter is for A/B benchmarks in one process
// (bench/kquant_bench.cpp's x16_nopf rows).
constexpr size_t kKx16PrefetchDefault = 8192;
constexpr size_t kKx16PrefetchQ4K = 1024;
constexpr size_t kKx16PrefetchAuto = SIZE_MAX;
size_t kx16_prefetch_bytes();  // the setting (kKx16PrefetchAuto: the per-format distances)
void kx16_set_prefetch_bytes(size_t bytes);
// The distance a format's decode prefetches at under the setting.
inline size_t kx16_prefetch_distance(bool q4_k) {
  const size_t s = kx16_prefetch_bytes();
  return s != kKx16PrefetchAuto ? s : q4_k ? kKx16PrefetchQ4K : kKx16PrefetchDefault;
}

// 16 x the sum of the 32 int8 values of every block of n_tok Q8_0 rows (x_stride bytes apart, nb
// blocks each): out[t * nb + i], in a per-thread buffer valid until the next call on the thread.
// The Q5_0 kernels start each block's dot at minus this, so that it sums (q - 16) x exactly.
const int32_t* kx16_q8_0_sums16(const void* x, size_t x_stride, int64_t n_tok, int64_t nb);

// y[t][o] = W x[t] for the whole repacked matrix, activations already quantised (Q8_K, or Q8_0
// for q8_0 / q5_0: n_tok rows of n_in / block_elems blocks, contiguous). Panels are split across
// the pool's threads (decode: each thread streams its own contiguous bytes); prefill walks panel
// chunks that stay in L2 against all tokens, 4 tokens per tile.
void kx16_matmul(Kx16Fn kernel, GgmlType t, const void* w, int64_t n_out, int64_t n_in,
                 const void* xq, int64_t n_tok, float* y, ThreadPool& pool);

}  // namespace fish
