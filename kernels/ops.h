// Element-wise and attention kernels of the forward pass, on f32 rows.
//
// Each op has a scalar `_ref` (the definition, used by tests) and a dispatching entry point that
// runs the best variant for best_isa() (SIMD variants for the exp-heavy and bandwidth-heavy ops:
// silu_mul, gelu_tanh_mul, softmax, rmsnorm, attention's dot products and V sums). SIMD variants
// match the reference to a few ulp (vectorised exp: ~2 ulp; different summation order).
// Unless stated, output may alias an input element-for-element (in-place use is fine).
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/thread_pool.h"

namespace fish {

// y = x / sqrt(mean(x^2) + eps) * w; w == nullptr means no weight (all ones). GGUF conversion
// already folds Gemma's (1 + w) into the stored weight.
void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps);
void rmsnorm_ref(const float* x, const float* w, float* y, int64_t n, float eps);

// RoPE, in place, on n_heads consecutive vectors of head_dim floats, rotating the first n_rot
// (even, <= head_dim) dims of each by angle pos * freq_scale * freq_base^(-2i/n_rot) for pair i:
//   normal (llama, GGML mode 0): pairs (2i, 2i+1) are adjacent;
//   neox   (gemma, GPT-NeoX, GGML mode 2): pair i is (i, i + n_rot/2).
enum class RopeStyle { normal, neox };
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base,
          RopeStyle style, float freq_scale = 1.0f);
void rope_ref(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
              float freq_base, RopeStyle style, float freq_scale = 1.0f);

// In place: x = exp(x - max) / sum. n >= 1.
void softmax(float* x, int64_t n);
void softmax_ref(float* x, int64_t n);

// SwiGLU: y = silu(gate) * up = gate / (1 + exp(-gate)) * up.
void silu_mul(const float* gate, const float* up, float* y, int64_t n);
void silu_mul_ref(const float* gate, const float* up, float* y, int64_t n);

// GeGLU (tanh approximation, as ggml_gelu): y = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) *
// up.
void gelu_tanh_mul(const float* gate, const float* up, float* y, int64_t n);
void gelu_tanh_mul_ref(const float* gate, const float* up, float* y, int64_t n);

void add(const float* a, const float* b, float* y, int64_t n);  // y = a + b
void mul(const float* a, const float* b, float* y, int64_t n);  // y = a * b
void scale(const float* x, float s, float* y, int64_t n);       // y = s * x

// Attention of ONE query token over an f32 KV cache, with grouped-query heads.
//   q:   n_head * head_dim floats (head h at q + h*head_dim)
//   k,v: rows of kv_stride floats per cache position; position p, KV head g at
//        k + r*kv_stride + g*head_dim (so kv_stride >= n_kv_head * head_dim), with row r = p, or
//        r = p % kv_rows for a ring of kv_rows rows (a sliding-window layer's cache)
//   Query head h reads KV head h / (n_head / n_kv_head) (n_head % n_kv_head == 0).
//   Positions [kv_begin, kv_end) are attended (a causal/sliding window is the caller's range).
//   out: n_head * head_dim floats, out_h = sum_p softmax_p(scale * q_h . k_p) v_p.
// scratch: n_head * (kv_end - kv_begin) floats. Heads are split across `pool` (may be null).
struct AttentionShape {
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  int64_t kv_stride = 0;  // floats between cache rows
  int64_t kv_rows = 0;    // > 0: ring storage, position p at row p % kv_rows; 0: row p
};
void attention_one_query(const float* q, const float* k, const float* v, const AttentionShape& s,
                         int64_t kv_begin, int64_t kv_end, float scale, float* out, float* scratch,
                         ThreadPool* pool);
void attention_one_query_ref(const float* q, const float* k, const float* v,
                             const AttentionShape& s, int64_t kv_begin, int64_t kv_end, float scale,
                             float* out, float* scratch);

// ---- SIMD variants behind the dispatchers (defined in ops_avx2.cpp / ops_avx512.cpp; call only
// when isa_supported() says so). axpy: y += a * x. ----
void silu_mul_avx2(const float* gate, const float* up, float* y, int64_t n);
void silu_mul_avx512(const float* gate, const float* up, float* y, int64_t n);
void gelu_tanh_mul_avx2(const float* gate, const float* up, float* y, int64_t n);
void gelu_tanh_mul_avx512(const float* gate, const float* up, float* y, int64_t n);
void softmax_avx2(float* x, int64_t n);
void softmax_avx512(float* x, int64_t n);
void axpy_avx2(int64_t n, float a, const float* x, float* y);
void axpy_avx512(int64_t n, float a, const float* x, float* y);
// Query heads [h_begin, h_end) of attention_one_query, bitwise what it computes with the AVX-512
// dot / softmax / axpy, faster (ops_avx512.cpp); false (nothing done) for a head_dim other than
// 64, 128 or 256.
bool attend_heads_avx512(const float* q, const float* k, const float* v, const AttentionShape& s,
                         int64_t kv_begin, int64_t kv_end, float scale, float* out, float* scratch,
                         int64_t h_begin, int64_t h_end);

}  // namespace fish
