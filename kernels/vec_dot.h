// Dot products of one weight row with one activation row, per weight type and ISA, and the
// activation quantisers they pair with. The engine, tests and benches reach these through
// registry.h (matvec_kernel); this header is the list of what exists.
//
// Pairing (as ggml): q4_0, q5_0, q8_0 weights x q8_0 activations; q4_1, q5_1 x q8_1 (its s =
// d*sum(q) folds the weight minimum into one multiply); q2_k..q6_k x q8_k (bsums fold the
// sub-block minimums / offsets), and so does FISH's fq3; f32, f16, bf16 weights x f32 activations.
//
// Every function: n = elements in the row (a multiple of the weight type's block size; any n >= 0
// for the float types); w and x point at n elements' worth of blocks; returns the f32 dot product.
// Scalar `_ref` versions define the result; SIMD versions differ only by float summation order
// (integer partial sums are exact in every variant).
//
// Names: vec_dot_<weight>_<activation>_<isa>. The _avx2 / _avx512 functions are defined in files
// compiled for that ISA: call them only when isa_supported() says so.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/q4_0.h"
#include "quant/q4_1.h"
#include "quant/q5_0.h"
#include "quant/q5_1.h"
#include "quant/q8_0.h"
#include "quant/q8_k.h"

namespace fish {

using VecDotFn = float (*)(int64_t n, const void* w, const void* x);
// Four activation rows (tokens) against one weight row, for prefill: out[t] = vec_dot(n, w, x +
// t * x_stride bytes), t = 0..3, bitwise equal to four calls of the same ISA's vec_dot (the weight
// codes are decoded once and used four times; per-token arithmetic is unchanged).
using VecDotX4Fn = void (*)(int64_t n, const void* w, const void* x, size_t x_stride, float* out);
// n_rows weight rows (w_stride bytes apart) against one activation row, for decode: out[r] =
// vec_dot(n, w + r * w_stride bytes, x), bitwise equal to the same ISA's vec_dot.
using VecDotRowsFn = void (*)(int64_t n, const void* w, size_t w_stride, int64_t n_rows,
                              const void* x, float* out);
// f32 row -> activation blocks (n a multiple of the block size).
using QuantizeActFn = void (*)(const float* x, void* y, int64_t n);

// ---- activation quantisers (scalar: quant/q8_0.h, quant/q8_k.h `_ref`); bit-exact with them ----
void quantize_row_q8_0_avx2(const float* x, void* y, int64_t n);
void quantize_row_q8_0_avx512(const float* x, void* y, int64_t n);
void quantize_row_q8_1_avx2(const float* x, void* y, int64_t n);
void quantize_row_q8_1_avx512(const float* x, void* y, int64_t n);
void quantize_row_q8_k_avx2(const float* x, void* y, int64_t n);
void quantize_row_q8_k_avx512(const float* x, void* y, int64_t n);

// ---- scalar references (vec_dot_ref.cpp) ----
float vec_dot_q4_0_q8_0_ref(int64_t n, const void* w, const void* x);
float vec_dot_q4_1_q8_1_ref(int64_t n, const void* w, const void* x);
float vec_dot_q5_0_q8_0_ref(int64_t n, const void* w, const void* x);
float vec_dot_q5_1_q8_1_ref(int64_t n, const void* w, const void* x);
float vec_dot_q8_0_q8_0_ref(int64_t n, const void* w, const void* x);
float vec_dot_q2_k_q8_k_ref(int64_t n, const void* w, const void* x);
float vec_dot_q3_k_q8_k_ref(int64_t n, const void* w, const void* x);
float vec_dot_q4_k_q8_k_ref(int64_t n, const void* w, const void* x);
float vec_dot_q5_k_q8_k_ref(int64_t n, const void* w, const void* x);
float vec_dot_fq3_q8_k_ref(int64_t n, const void* w, const void* x);
float vec_dot_q6_k_q8_k_ref(int64_t n, const void* w, const void* x);
float vec_dot_f32_f32_ref(int64_t n, const void* w, const void* x);
float vec_dot_f16_f32_ref(int64_t n, const void* w, const void* x);
float vec_dot_bf16_f32_ref(int64_t n, const void* w, const void* x);
// FISH's GGUF int4 types (vec_dot_fish_i4.cpp; scalar only, see there).
float vec_dot_fish_i4_g32_q8_0_ref(int64_t n, const void* w, const void* x);
float vec_dot_fish_i4_g64_q8_0_ref(int64_t n, const void* w, const void* x);
float vec_dot_fish_i4_g128_q8_0_ref(int64_t n, const void* w, const void* x);
float vec_dot_fish_i4fp_g32_q8_0_ref(int64_t n, const void* w, const void* x);
float vec_dot_fish_i4fp_g64_q8_0_ref(int64_t n, const void* w, const void* x);
float vec_dot_fish_i4fp_g128_q8_0_ref(int64_t n, const void* w, const void* x);

// ---- AVX2 + FMA + F16C (vec_dot_avx2.cpp, vec_dot_k_avx2.cpp) ----
float vec_dot_q4_0_q8_0_avx2(int64_t n, const void* w, const void* x);
float vec_dot_q4_1_q8_1_avx2(int64_t n, const void* w, const void* x);
float vec_dot_q5_0_q8_0_avx2(int64_t n, const void* w, const void* x);
float vec_dot_q5_1_q8_1_avx2(int64_t n, const void* w, const void* x);
float vec_dot_q8_0_q8_0_avx2(int64_t n, const void* w, const void* x);
float vec_dot_q2_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float vec_dot_q3_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float vec_dot_q4_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float vec_dot_q5_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float vec_dot_fq3_q8_k_avx2(int64_t n, const void* w, const void* x);
float vec_dot_q6_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float vec_dot_f32_f32_avx2(int64_t n, const void* w, const void* x);
float vec_dot_f16_f32_avx2(int64_t n, const void* w, const void* x);
float vec_dot_bf16_f32_avx2(int64_t n, const void* w, const void* x);

void vec_dot_q4_0_q8_0_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q4_1_q8_1_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q5_0_q8_0_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q5_1_q8_1_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q8_0_q8_0_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q4_k_q8_k_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q5_k_q8_k_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q6_k_q8_k_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_fq3_q8_k_x4_avx2(int64_t n, const void* w, const void* x, size_t s, float* out);

// ---- AVX-512 F/BW/VL/DQ + VNNI (vec_dot_avx512.cpp, vec_dot_k_avx512.cpp) ----
float vec_dot_q4_0_q8_0_avx512(int64_t n, const void* w, const void* x);
float vec_dot_q4_1_q8_1_avx512(int64_t n, const void* w, const void* x);
float vec_dot_q5_0_q8_0_avx512(int64_t n, const void* w, const void* x);
float vec_dot_q5_1_q8_1_avx512(int64_t n, const void* w, const void* x);
float vec_dot_q8_0_q8_0_avx512(int64_t n, const void* w, const void* x);
float vec_dot_q2_k_q8_k_avx512(int64_t n, const void* w, const void* x);
float vec_dot_q3_k_q8_k_avx512(int64_t n, const void* w, const void* x);
float vec_dot_q4_k_q8_k_avx512(int64_t n, const void* w, const void* x);
float vec_dot_q5_k_q8_k_avx512(int64_t n, const void* w, const void* x);
float vec_dot_fq3_q8_k_avx512(int64_t n, const void* w, const void* x);
float vec_dot_q6_k_q8_k_avx512(int64_t n, const void* w, const void* x);
float vec_dot_f32_f32_avx512(int64_t n, const void* w, const void* x);
float vec_dot_f16_f32_avx512(int64_t n, const void* w, const void* x);
float vec_dot_bf16_f32_avx512(int64_t n, const void* w, const void* x);
void vec_dot_q4_0_q8_0_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q4_1_q8_1_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q5_0_q8_0_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q5_1_q8_1_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q8_0_q8_0_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q4_k_q8_k_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q5_k_q8_k_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q6_k_q8_k_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_fq3_q8_k_x4_avx512(int64_t n, const void* w, const void* x, size_t s, float* out);
void vec_dot_q4_0_q8_0_rows_avx512(int64_t n, const void* w, size_t ws, int64_t nr, const void* x,
                                   float* out);
void vec_dot_q4_1_q8_1_rows_avx512(int64_t n, const void* w, size_t ws, int64_t nr, const void* x,
                                   float* out);
void vec_dot_q5_0_q8_0_rows_avx512(int64_t n, const void* w, size_t ws, int64_t nr, const void* x,
                                   float* out);
void vec_dot_q5_1_q8_1_rows_avx512(int64_t n, const void* w, size_t ws, int64_t nr, const void* x,
                                   float* out);
void vec_dot_q8_0_q8_0_rows_avx512(int64_t n, const void* w, size_t ws, int64_t nr, const void* x,
                                   float* out);

}  // namespace fish
