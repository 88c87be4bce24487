// Stage 2 GPU offload (seed 000 "Span execution"): a contiguous range of layers run entirely
// on a compute backend — norms, projections, bias, q/k norm, RoPE, attention over a
// device-resident f16 KV cache, FFN, residuals — one submit per forward, x crossing the bus
// once each way. The engine sees only this interface (no Vulkan types); a backend creates spans
// through ComputeBackend::span_create.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/model.h"

namespace fish {

using WeightHandle = uint64_t;

// What a span needs to run layers [first_layer, first_layer + layers.size()) of a model.
struct SpanDesc {
  struct Layer {
    const LayerWeights* w = nullptr;  // norms, biases, flags; the matrices through the handles
    WeightHandle wq = 0, wk = 0, wv = 0, wo = 0, gate = 0, up = 0, down = 0;
  };
  const ModelParams* params = nullptr;
  int64_t first_layer = 0;
  std::vector<Layer> layers;
  // RoPE inverse frequencies per variant (0: global layers, 1: sliding layers), n_rot / 2 each,
  // as the CPU computes them (rope_inv_freq); the span tabulates cos/sin for [0, n_ctx) once.
  std::vector<double> inv_freq[2];
  int64_t n_ctx = 0;       // positions the device KV may grow to
  int64_t kv_reserve = 0;  // positions allocated at creation (0: n_ctx); grows by kv_reserve()
  int64_t max_tok = 256;   // tokens per forward (the arena holds this many residual rows)
  // The output head (only for a span ending at the model's last layer): the final norm's weight
  // and the output matrix's handle; 0 / null: no head (forward_head then errs). A backend may
  // still decline the head (has_head(); Vulkan: FISH_VK_HEAD=0).
  WeightHandle output = 0;
  const std::vector<float>* output_norm = nullptr;
  // The token embedding (token_embd, n_vocab rows of n_embd, in its GGUF type) for a span that
  // runs the whole model with its head: greedy decode steps then embed their token on the device
  // and run back to back (decode_greedy). 0: none (FISH_GPU_PIPELINE=0, a partial placement).
  WeightHandle embed = 0;
};

class LayerSpan {
 public:
  virtual ~LayerSpan() = default;

  // Runs the span's layers on x (n_tok rows of n_embd f32, the residual stream entering
  // first_layer) at positions [pos0, pos0 + n_tok) and writes the residual leaving the last
  // layer back into x, every row (a multi-token verify gets every token's row). Positions
  // >= pos0 are dropped from the device KV first, then the new ones appended; the KV grows
  // (kv_reserve) when needed. One submit, one fence.
  // Errors (x untouched): n_tok outside [1, max_tok], pos0 > kv_length() (a gap), pos0 + n_tok >
  // n_ctx, the KV cannot grow (budget), a device error.
  virtual Status forward(float* x, int64_t n_tok, int64_t pos0) = 0;
  // As forward, then the output head over the last row in the same submit: rmsnorm with the
  // final norm weight and the output matrix, and the argmax of those logits (ties to the lower
  // id, NaN as engine/sampling's greedy_token ranks it) into *token. When `logits` is not null
  // the n_vocab logits come back into it too; x does not come back (only the id, or the id and
  // the logits, cross the bus). Errors: as forward; no head (has_head() false).
  virtual Status forward_head(const float* x, int64_t n_tok, int64_t pos0, float* logits,
                              int32_t* token) {
    (void)x, (void)n_tok, (void)pos0, (void)logits, (void)token;
    return make_error("span: no output head");
  }
  // As forward_head, the head over every row: tokens[t] = the greedy id of row t, t < n_tok (a
  // speculative verify: only the ids cross the bus). Errors: as forward_head; n_tok above
  // head_rows().
  virtual Status forward_head_rows(const float* x, int64_t n_tok, int64_t pos0, int32_t* tokens) {
    (void)x, (void)n_tok, (void)pos0, (void)tokens;
    return make_error("span: no output head");
  }
  // Whether forward_head runs (the span holds the last layer, its desc named the output head and
  // the backend took it).
  virtual bool has_head() const { return false; }
  // Rows forward_head_rows takes (0: none).
  virtual int64_t head_rows() const { return 0; }
  // Pipelined greedy decoding: n steps from `token` at position pos0, each step's token the
  // previous step's greedy id, ids kept on the device (the embedding row looked up there) and
  // step k + 1 queued before step k's id is read, so the GPU runs the steps back to back instead
  // of idling while the host reads an id and submits the next step. on_token(id) gets step k's
  // id (the token after position pos0 + k) in order; false stops the decode (a step already
  // queued runs, and its position is dropped). Returns the ids given to on_token. The ids and
  // the KV equal n forward_head steps' on the same span (bit-exact embedding rows, the same
  // kernels). on_token runs with the device held: it must not call into this span or its
  // backend. Errors: as forward_head, and no pipelined decode here (can_decode_greedy false);
  // on an error, positions from pos0 + (ids given) on are dropped.
  virtual Result<int64_t> decode_greedy(int32_t token, int64_t pos0, int64_t n,
                                        const std::function<bool(int32_t)>& on_token) {
    (void)token, (void)pos0, (void)n, (void)on_token;
    return make_error("span: no pipelined greedy decode");
  }
  // Whether decode_greedy runs (the span holds every layer, the head and the embedding, and the
  // backend took them; see the backend's kernels() for why not).
  virtual bool can_decode_greedy() const { return false; }
  // Keeps positions < n valid (n >= kv_length() changes nothing).
  virtual void kv_truncate(int64_t n) = 0;
  // Makes room for n positions (<= n_ctx) on the device, keeping the valid ones.
  // Errors: n > n_ctx, the budget refuses the larger cache (the old one is kept).
  virtual Status kv_reserve(int64_t n) = 0;
  virtual int64_t kv_length() const = 0;    // valid positions
  virtual int64_t kv_capacity() const = 0;  // positions allocated
  virtual int64_t n_layers() const = 0;
  virtual int64_t first_layer() const = 0;
  virtual int64_t max_tok() const = 0;    // tokens per forward
  virtual int64_t n_ctx() const = 0;      // positions the KV may grow to
  virtual uint64_t kv_bytes() const = 0;  // device bytes of the KV cache
  virtual uint64_t bytes() const = 0;     // device bytes of KV, arena, params
  // FISH_GPU_PROFILE=2: per-stage GPU time summed over the forwards so far, e.g.
  // "span profile: 12 forwards, 34.1 ms: matvec 30.2 ms 88.6% (84 steps), ..." (a step: the
  // dispatches between two timestamps); empty when not profiling.
  virtual std::string profile() const = 0;
  // Forgets the profile's totals so far (fish generate --warmup: the profile is then the timed
  // forwards' alone).
  virtual void reset_profile() {}
  // The attention kernels the span runs (prefill chunks; decode and short verifies) and how its
  // forwards are recorded, for the run's description, e.g. "attention: prefill flash_cm 64 x 32,
  // decode split-K (fused from 1024 keys); recorded ahead"; empty where it has nothing to say.
  virtual std::string kernels() const { return {}; }
};

// Inverse RoPE frequencies of a variant (0 global, 1 sliding-window layers):
// scale * base^(-2i/n_rot) / freq_factor[i], i < n_rot / 2, in f64 (as Session's table).
std::vector<double> rope_inv_freq(const Model& m, int variant);

// Device bytes a span of n_layers needs beyond its weights at kv_positions: KV (f16) + arena +
// params (an estimate the placement reserves before placing layers).
uint64_t span_bytes_estimate(const ModelParams& p, int64_t n_layers, int64_t kv_positions,
                             int64_t max_tok, int64_t n_ctx);

}  // namespace fish
