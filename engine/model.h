// A transformer loaded from GGUF: architecture hyper-parameters from the metadata and views of the
// weight tensors in the mapped file. Loaded once, then shared read-only by any number of sessions.
//
// Architectures (general.architecture) and what differs between them:
//   llama   RMSNorm, normal RoPE (adjacent pairs; the converter permuted q/k rows for it), SwiGLU,
//           tied or untied output; Llama 3 rope_freqs.weight (per-pair frequency divisors) and
//           rope.scaling.type linear where present.
//   qwen2   llama + q/k/v biases, NeoX RoPE.
//   qwen3   llama + per-head q/k RMSNorm before RoPE, NeoX RoPE.
//   gemma3  embeddings x sqrt(n_embd), per-head q/k RMSNorm, post-attention and post-FFN RMSNorm,
//           GeGLU (tanh GELU), NeoX RoPE, tied output; every layer but each 6th is a
//           sliding-window layer with RoPE base 10000 (global layers: rope.freq_base, and linear
//           rope scaling where present). Norm weights already hold Gemma's (1 + w).
// As llama.cpp (llama-model.cpp) builds these graphs; scripts/reference_forward.py is the
// independent numpy version the tests compare with.
//
// Errors (load): unknown architecture, a missing key or tensor, a tensor whose shape or type does
// not fit the hyper-parameters, an unsupported rope scaling; messages name the file and the
// key or tensor and say expected vs found.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/huge_buffer.h"
#include "base/result.h"
#include "engine/gguf.h"
#include "kernels/ops.h"
#include "quant/types.h"

namespace fish {

enum class Arch { llama, qwen2, qwen3, gemma3 };
std::string_view arch_name(Arch a);

// A weight matrix: n_out rows of n_in values of `type`, row-major, in the mapped file.
struct MatrixView {
  const void* data = nullptr;
  GgmlType type = GgmlType::f32;
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t n_bytes = 0;
  std::string name;  // tensor name, for messages
  // The x16 interleaved copy (kernels/kquant_x16.h) of a Q4_K / Q5_K / Q6_K / Q8_0 / Q5_0 matrix
  // when the model was loaded with kquant_repack, else nullptr. `data` stays valid either way (the
  // file mapping): without keep_gguf its pages were released after packing and come back from
  // the file only if something reads them (GPU upload, int4 repacking, the f32 path).
  const void* x16 = nullptr;
};

struct ModelParams {
  Arch arch = Arch::llama;
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;  // key_length; value_length must equal it
  int64_t n_rot = 0;     // rope.dimension_count (<= head_dim)
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  float norm_eps = 1e-5f;
  float rope_base = 10000.0f;      // global layers
  float rope_scale = 1.0f;         // global layers: 1 / rope.scaling.factor (linear)
  float rope_base_swa = 10000.0f;  // sliding-window layers
  RopeStyle rope_style = RopeStyle::normal;
  float attn_scale = 1.0f;     // q.k multiplier
  float embd_scale = 1.0f;     // token embeddings are multiplied by this (gemma: sqrt(n_embd))
  int64_t sliding_window = 0;  // 0: none; keys with q_pos - k_pos >= window are masked
  int64_t swa_period = 0;      // gemma3: layer il is sliding when il % period < period - 1
  bool tied_output = false;

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  bool is_swa_layer(int64_t il) const {
    return sliding_window > 0 && swa_period > 0 && il % swa_period < swa_period - 1;
  }
};

struct LayerWeights {
  std::vector<float> attn_norm;   // n_embd
  MatrixView wq, wk, wv, wo;      // wq: q_dim x n_embd, wk/wv: kv_dim x n_embd, wo: n_embd x q_dim
  std::vector<float> bq, bk, bv;  // qwen2 biases (empty otherwise)
  std::vector<float> q_norm, k_norm;  // per-head norms, head_dim (qwen3, gemma3; empty otherwise)
  std::vector<float> post_attn_norm;  // gemma3
  std::vector<float> ffn_norm;        // n_embd
  MatrixView gate, up, down;          // gate/up: n_ff x n_embd, down: n_embd x n_ff
  std::vector<float> post_ffn_norm;   // gemma3
  bool swa = false;
  float rope_base = 10000.0f;
  float rope_scale = 1.0f;
};

struct RequantResult;
struct RequantImportance;

struct ModelLoadOptions {
  // Re-quantisation mode 0..3 (engine/requant.h): the matmul weights it names are converted in
  // memory at load (the file is untouched) and the views point at the copies.
  int requant = 0;
  int n_threads = 0;  // threads for re-quantisation; 0: default_thread_count()
  // Per-tensor input-column importance for an activation-aware fq3 fit (engine/requant.h), or
  // nullptr for the plain fit. Only read during load.
  const RequantImportance* importance = nullptr;
  // Repack every Q4_K / Q5_K / Q6_K / Q8_0 / Q5_0 matrix (layers and head) into the x16 layout at
  // load (after requant), the packed copy replacing the GGUF bytes in memory (their mapped pages
  // released) unless keep_gguf. Config field kquant_repack (engine/config.h) sets these.
  bool kquant_repack = false;
  bool keep_gguf = false;
  // With kquant_repack: plan the x16 arena at load (mapped, untouched) but pack no matrix until
  // Model::pack_x16 names it. Session::create names the matrices its GPU placement leaves on
  // the CPU, so a matrix that only runs on the device keeps its GGUF bytes alone: no copy, no
  // host memory for one, no packing time. fish run and fish generate set it for gpu paths.
  bool defer_x16 = false;
  bool repack_q8_0 = true;  // false: Q8_0 matrices stay GGUF rows (tests; no Config sets it)
};

// What load-time x16 repacking did (Model::kquant_repack()).
struct KquantRepackStats {
  int matrices = 0;             // matrices repacked
  int deferred = 0;             // matrices planned but not packed (defer_x16: none ran on the CPU)
  uint64_t packed_bytes = 0;    // bytes of the x16 copies
  uint64_t gguf_bytes = 0;      // GGUF bytes of the same matrices
  uint64_t released_bytes = 0;  // mapped GGUF bytes handed back to the kernel (0 with keep_gguf)
  double seconds = 0.0;         // packing time (all threads)
  bool huge_requested = false;  // the copies asked for transparent huge pages (FISH_HUGEPAGES)
  uint64_t huge_bytes = 0;      // bytes of them on huge pages right after packing
  // "112 matrices, 812.4 MB x16 (GGUF 795.3 MB, 795.3 MB released), 810.0 MB on huge pages,
  // 0.61 s", then "; N left as GGUF rows (on the GPU)" where matrices were deferred
  std::string describe() const;
};

class Model {
 public:
  // Opens and validates a GGUF. Every matrix must have a matvec kernel (kernels/registry.h).
  // Errors also: a requant mode outside 0..3.
  static Result<std::shared_ptr<const Model>> load(const std::string& path,
                                                   const ModelLoadOptions& opt = {});
  // Same over an already opened file (the Model keeps it).
  static Result<std::shared_ptr<const Model>> from_gguf(GgufFile file,
                                                        const ModelLoadOptions& opt = {});
  // What load-time re-quantisation did (per tensor error, time); nullptr when requant was 0.
  const RequantResult* requant() const { return requant_.get(); }
  // What x16 repacking did so far (read it between forwards: pack_x16 updates it).
  const KquantRepackStats& kquant_repack() const { return repack_; }
  // ModelLoadOptions::defer_x16: packs the planned matrices not packed yet whose use runs on the
  // CPU by `cpu` (a tied head: the output view decides) on n_threads threads (0: the default),
  // releasing their GGUF pages unless keep_gguf, and points their views' x16 at the copies.
  // Idempotent. Not concurrent with a forward of this model (sessions run one at a time in fish
  // run and fish generate). Without deferred matrices a no-op.
  Status pack_x16(const std::function<bool(const MatrixView&)>& cpu, int n_threads) const;
  // Bytes of the copies pack_x16(cpu, ...) would make now (host memory checks).
  uint64_t x16_pending_bytes(const std::function<bool(const MatrixView&)>& cpu) const;
  bool x16_deferred() const;

  const ModelParams& params() const { return p_; }
  const GgufFile& gguf() const { return file_; }
  const std::string& path() const { return file_.path(); }

  const MatrixView& token_embd() const { return token_embd_; }  // n_vocab rows of n_embd
  const MatrixView& output() const { return output_; }          // token_embd's view when tied
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  // Llama 3 per-pair frequency divisors (n_rot / 2), empty when absent.
  const std::vector<float>& rope_freq_factors() const { return rope_freqs_; }

  // Bytes of weights one decode step reads: every layer matrix plus the output matrix (norms
  // and the one embedding row are negligible and not counted).
  uint64_t weight_bytes_per_token() const { return weight_bytes_per_token_; }
  // All matrix bytes in the file, embeddings included.
  uint64_t total_weight_bytes() const { return total_weight_bytes_; }

  // Writes the f32 embedding of `token` (n_embd values, embd_scale applied).
  void embed(int32_t token, float* out) const;

 private:
  Model() = default;
  // Plans the x16 arena (ModelLoadOptions::kquant_repack) and, unless defer_x16, packs every
  // matrix (pack_x16). Errors: the arena cannot be allocated; a bad FISH_HUGEPAGES.
  Status repack_kquants(const ModelLoadOptions& opt);
  // One x16 copy to make: the view that owns it, the view whose placement decides it (a tied
  // head's output view), the other views of the same bytes, its place in the arena.
  struct X16Job {
    MatrixView* mv;
    const MatrixView* decide;
    std::vector<MatrixView*> also;
    size_t off, bytes;
    bool done;
  };
  GgufFile file_;
  ModelParams p_;
  MatrixView token_embd_, output_;
  std::vector<float> output_norm_;
  std::vector<float> rope_freqs_;
  std::vector<LayerWeights> layers_;
  uint64_t weight_bytes_per_token_ = 0;
  uint64_t total_weight_bytes_ = 0;
  std::shared_ptr<const RequantResult> requant_;  // owns the re-quantised weights the views use
  HugeBuffer x16_;  // the x16 copies the views' x16 point at, one arena
  // pack_x16's state: a const Model fills the x16 copies its views point at (a cache of the
  // GGUF bytes, the same values) when a session first runs them on the CPU.
  mutable std::vector<X16Job> x16_jobs_;
  mutable std::mutex x16_mu_;
  mutable KquantRepackStats repack_;
  bool keep_gguf_ = false;
};

}  // namespace fish
