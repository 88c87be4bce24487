// An inference session over a shared, read-only Model: its own KV cache, thread pool and work
// buffers (allocated at creation, so the per-token path does not allocate).
//
// forward(tokens, pos0) runs tokens at positions pos0, pos0+1, ... as one batch per n_batch
// tokens (prefill is matrix x matrix: every weight row is read once per batch), appends their
// keys/values to the cache and returns logits. Activations are quantised per row to the weight
// type's int8 format (Q8_0 / Q8_1 / Q8_K) for quantised weights and stay f32 for F32/F16/BF16
// weights; ActMode::f32 instead dequantises weight rows to f32 and uses f32 dot products
// everywhere (slow; it isolates the architecture from the int8 rounding in tests).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/gpu_placement.h"
#include "engine/kv_cache.h"
#include "engine/memory_budget.h"
#include "engine/model.h"
#include "engine/weight_path.h"
#include "kernels/cpu_features.h"
#include "kernels/registry.h"
#include "kernels/thread_pool.h"

namespace fish {

enum class ActMode { int8, f32 };
enum class LogitsMode { last, all };
// KV storage of sliding-window layers (Gemma 3): ring keeps window + n_batch rows per layer
// (position p at row p % rows), full keeps n_ctx rows like the other layers.
enum class SwaKv { ring, full };
std::string_view swa_kv_name(SwaKv m);                     // "ring" | "full"
std::optional<SwaKv> parse_swa_kv(std::string_view name);  // nullopt when unknown

struct SessionOptions {
  int64_t n_ctx = 4096;  // KV cache positions
  int n_threads = 0;     // 0: default_thread_count() (FISH_THREADS or all hardware threads)
  ActMode act = ActMode::int8;
  int64_t n_batch = 256;  // tokens per prefill batch (longer inputs are chunked)
  // Sliding-window layers' KV: ring holds min(n_ctx, window + n_batch) rows (n_batch - 1 rows of
  // slack let a prefill batch write all its positions before its first query reads its window;
  // the rest is kv_truncate's rollback room), full holds n_ctx.
  SwaKv swa_kv = SwaKv::ring;
  Isa isa = best_isa();  // matvec kernel level (clamped to what the CPU and the table have)
  // Called with every matmul input before the product (x: n_tok rows of w.n_in f32), e.g. to
  // collect activation statistics for an activation-aware fit; empty: never called.
  std::function<void(const MatrixView& w, const float* x, int64_t n_tok)> observe_matmul_input;
  WeightPathOptions weights;  // weight_path and the int4 fields (engine/weight_path.h)
  // GPU offload: matrices placed there run through its backend (stage 1; a failed GPU call
  // falls back to the CPU for that matmul). When the placement holds a layer span (stage 2)
  // that is free, n_batch <= its max_tok and n_ctx <= its n_ctx, the span's layers run through
  // it and the CPU allocates no KV for them; a failed span forward falls back to the CPU for
  // good (gpu_fallbacks()), replaying the earlier positions so no stale KV is used.
  // Null: CPU only.
  std::shared_ptr<const GpuPlacement> gpu;
};

class Session {
 public:
  // Resolves opts.weights.weight_path (ref runs ActMode::f32; w4a8 / w4a16 pack the model's
  // matrices here, once per session). Errors: n_ctx or n_batch < 1; a matrix int4 packing rejects.
  // Errors also: the host memory the session needs (memory_estimate) exceeds what this process
  // can get (host_memory_available), naming both.
  static Result<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model,
                                                 const SessionOptions& opt = {});
  // The host bytes a session of `model` with `opt` allocates (KV of every layer, since a layer
  // span that fails falls back to host KV), before allocating any. `opt.weights.weight_path`
  // must be resolved (not automatic) for the int4 part to count.
  static SessionMemory memory_estimate(const Model& model, const SessionOptions& opt);

  // Runs `tokens` at positions [pos0, pos0 + n). pos0 may be below n_past() (the cache is first
  // truncated to pos0) but not above it. Returns n_vocab logits for the last token, or n x n_vocab
  // (token-major) for LogitsMode::all; the span stays valid until the next forward().
  // Errors: no tokens, a token id outside [0, n_vocab), pos0 > n_past(), pos0 + n > n_ctx.
  Result<std::span<const float>> forward(std::span<const int32_t> tokens, int64_t pos0,
                                         LogitsMode mode = LogitsMode::last);
  // Same, continuing at n_past().
  Result<std::span<const float>> append(std::span<const int32_t> tokens,
                                        LogitsMode mode = LogitsMode::last) {
    return forward(tokens, n_past(), mode);
  }

  // Greedy decoding's step: as forward(tokens, pos0) and greedy_token of the last row's logits,
  // without the logits where a GPU layer span runs the output head (layer_span.h forward_head:
  // only the id crosses the bus). Same errors as forward; the id equals greedy_token of the
  // logits forward() returns on the same path (the span's argmax keeps greedy_token's ties).
  Result<int32_t> forward_greedy(std::span<const int32_t> tokens, int64_t pos0);
  Result<int32_t> append_greedy(std::span<const int32_t> tokens) {
    return forward_greedy(tokens, n_past());
  }
  // Greedy decoding of up to n steps from `token` at n_past(): step k runs one token (`token`,
  // then the previous step's id) and passes its greedy id to on_token, which returns false to
  // stop. Returns the ids passed; n_past() grows by as many. The ids equal n append_greedy calls'
  // on the same session. Where a GPU layer span runs the whole model with its head and holds the
  // embedding (layer_span.h decode_greedy; FISH_GPU_PIPELINE, default on) the steps run
  // pipelined on the device; otherwise (and after a span failure, which falls back as a forward
  // does) one append_greedy a step. on_token must not call into this session.
  // Errors: a token outside [0, n_vocab), n_past() + n > n_ctx, those of append_greedy.
  Result<int64_t> decode_greedy(int32_t token, int64_t n,
                                const std::function<bool(int32_t)>& on_token);
  // Whether decode_greedy runs pipelined on the GPU span.
  bool pipelined_decode() const;
  // A speculative verify's step: as forward(tokens, pos0, LogitsMode::all) and the greedy id of
  // every row (ids[t] = greedy_token of row t's logits), without the logits where a GPU layer
  // span runs the output head and takes the rows at once (layer_span.h forward_head_rows: only
  // the ids cross the bus). Same errors as forward; the span stays valid until the next forward.
  Result<std::span<const int32_t>> forward_greedy_rows(std::span<const int32_t> tokens,
                                                       int64_t pos0);

  // Teacher forcing: resets, feeds `tokens` in chunks of `chunk` and calls fn(t, logits) for
  // every position t (logits = the distribution over the token after tokens[0..t]).
  Status teacher_force(std::span<const int32_t> tokens,
                       const std::function<void(int64_t t, std::span<const float> logits)>& fn,
                       int64_t chunk = 64);

  ~Session();
  // Keeps positions < n (prefix caching, speculative rejection); n >= n_past() does nothing.
  // A layer span's device KV is truncated with it. With SwaKv::ring a sliding-window layer only
  // keeps the window + n_batch positions up to the furthest one written, and the next query at
  // n reads [n - window + 1, n): n >= furthest - n_batch always works (furthest = n_past()
  // unless an earlier rollback left written positions behind). Errors: a truncation that needs
  // positions a ring no longer holds names the limit and changes nothing (no silent use of
  // overwritten rows, no hidden replay: the caller re-runs the prefix from a reset(), or uses
  // SwaKv::full to roll back anywhere).
  Status kv_truncate(int64_t n);
  // Empties the cache (never fails).
  void reset();
  // Forgets the GPU span's FISH_GPU_PROFILE totals so far (no span: nothing).
  void reset_profile() {
    if (span_ != nullptr) span_->reset_profile();
  }
  // The most tokens one forward may hold so that every row runs the kernels (and the rounding)
  // of a one-token step, the bound on a speculative verify whose output must equal plain greedy
  // decoding: the GPU backend's decode_exact_tokens() when a placement holds any matrix,
  // kW4A8AmxMinTokens on w4a8 (AMX tiles past it), dequant_threshold on w4a16 (dequantise +
  // GEMM past it); unbounded on the GGUF and reference CPU paths.
  int64_t decode_exact_tokens() const;
  // Whether the GPU layer span runs this session's last layers (stage 2).
  bool span_active() const { return span_ != nullptr; }
  // GPU calls that failed and ran on the CPU instead, since creation (a row's cpu_fallback
  // flag): per-matmul calls that fell back for one matmul, and span forwards that made the
  // session leave the span for good (replaying its KV on the CPU).
  uint64_t gpu_fallbacks() const { return gpu_fallbacks_; }
  int64_t n_past() const { return kv_.n_past(); }
  int64_t n_ctx() const { return kv_.n_ctx(); }
  // Host bytes of the KV cache (layers a GPU span runs keep theirs on the device).
  size_t kv_bytes() const { return kv_.bytes(); }
  const KvCache& kv_cache() const { return kv_; }  // rows per layer, first_held()

  const Model& model() const { return *model_; }
  const SessionOptions& options() const { return opt_; }
  int n_threads() const { return pool_.size(); }
  ThreadPool& pool() { return pool_; }
  // The ISA the model's matvec kernels run at (the lowest over its weight types).
  Isa kernel_isa() const { return kernel_isa_; }
  // The weight path this session runs (never automatic) and its packed weights (w4a8 / w4a16).
  WeightPath weight_path() const { return weight_path_; }
  const Int4Weights* int4_weights() const { return int4_.get(); }

 private:
  Session(std::shared_ptr<const Model> model, const SessionOptions& opt);

  // One batch of n <= n_batch tokens at positions [pos0, pos0 + n); logits rows go to `logits`
  // (n rows for all, 1 for last).
  // Returns false when the span forward failed (nothing of this batch is then trusted).
  // token (last-row logits only): also its greedy id; with a span head that runs it the logits
  // are then not computed (logits is left as is).
  // rows (all_logits only): also every row's greedy id; with a span head that takes the n rows
  // the logits are then not computed.
  bool forward_batch(const int32_t* tokens, int64_t n, int64_t pos0, bool all_logits, float* logits,
                     int32_t* token = nullptr, int32_t* rows = nullptr);
  // forward(), forward_greedy() and forward_greedy_rows(): token null, or the greedy id of the
  // last row; rows null, or (LogitsMode::all) every row's greedy id.
  Result<std::span<const float>> forward_impl(std::span<const int32_t> tokens, int64_t pos0,
                                              LogitsMode mode, int32_t* token,
                                              int32_t* rows = nullptr);
  // After a failed span forward: CPU (or stage 1) for the span's layers from now on, with KV
  // for every layer rebuilt by replaying tokens [0, n_valid) of history_.
  void span_fallback(int64_t n_valid);
  // Drops positions >= n without checks (reset, or a truncation kv_truncate checked).
  void reset_to(int64_t n);
  // Rows per layer for the KV cache: n_ctx, or the ring's for sliding-window layers.
  static std::vector<int64_t> kv_layer_rows(const SessionOptions& opt, const ModelParams& p);
  void attention(int64_t il, int64_t n, int64_t pos0);

  // y[t][0..n_out) = W x[t] for t < n. `x` feeds several matmuls: its quantised forms are kept
  // in act_ until invalidate_act() (call it whenever x's contents change).
  void matmul(const MatrixView& w, const float* x, int64_t n, float* y);
  void invalidate_act() { act_valid_ = 0; }
  // Several matrices over the same input (q/k/v, gate/up). For one token (decode) they run as one
  // pool dispatch, the threads splitting the matrices' bytes evenly: decode pays ~200 dispatches
  // per token otherwise, and each is a barrier.
  struct MatmulOp {
    const MatrixView* w;
    float* y;
  };
  void matmul_group(std::initializer_list<MatmulOp> ops, const float* x, int64_t n);
  const void* quantized_input(const MatvecKernel& k, const float* x, int64_t n, int64_t n_in);
  void matmul_f32(const MatrixView& w, const float* x, int64_t n, float* y);
  // The GPU path of matmul_group: true when every op ran on opt_.gpu's backend.
  bool gpu_matmul_group(std::initializer_list<MatmulOp> ops, const float* x, int64_t n);

  std::shared_ptr<const Model> model_;
  SessionOptions opt_;
  ThreadPool pool_;
  std::vector<std::unique_ptr<ThreadPool>> solo_;  // one inline (1-thread) pool per pool thread
  KvCache kv_;
  LayerSpan* span_ = nullptr;     // claimed from opt_.gpu; runs layers [span_first_, n_layer)
  int64_t span_first_ = 0;        // n_layer when there is no span
  std::vector<int32_t> history_;  // tokens at positions [0, n_past()) while a span runs
  Isa kernel_isa_ = Isa::scalar;
  WeightPath weight_path_ = WeightPath::gguf;
  std::unique_ptr<Int4Weights> int4_;  // w4a8 / w4a16 only

  // Work buffers for n_batch tokens (row-major, token-major).
  std::vector<float> x_;            // residual stream, n_embd
  std::vector<float> xn_;           // normed input of a matmul group, max(n_embd, q_dim)
  std::vector<float> q_;            // q_dim
  std::vector<float> k_;            // kv_dim
  std::vector<float> v_;            // kv_dim
  std::vector<float> att_;          // q_dim
  std::vector<float> tmp_;          // n_embd
  std::vector<float> gate_;         // n_ff
  std::vector<float> up_;           // n_ff
  std::vector<float> logits_;       // n_vocab per returned row
  std::vector<int32_t> row_ids_;    // forward_greedy_rows' ids
  std::vector<float> att_scratch_;  // scores: n_head x n_ctx, or per thread group x n_ctx
  std::vector<float> deq_scratch_;  // f32 mode: per thread one dequantised weight row
  // Quantised activations, one buffer per activation format (q8_0, q8_1, q8_k); bit i of
  // act_valid_ says buffer i holds the current matmul input.
  std::vector<uint8_t> act_[3];
  unsigned act_valid_ = 0;
  uint64_t gpu_fallbacks_ = 0;  // see gpu_fallbacks()
  // RoPE: per variant (0 global, 1 sliding) the inverse frequencies (n_rot / 2) and, for the
  // current batch, cos/sin pairs per token (n_batch x n_rot).
  std::vector<double> inv_freq_[2];
  std::vector<float> rope_cs_[2];
};

}  // namespace fish
