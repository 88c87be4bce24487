// Stage 1 GPU offload (seed 000 "What runs where"): which of a model's matrices are resident in
// a ComputeBackend. A Session given a placement (SessionOptions::gpu) runs the projections of
// the placed layers and the output projection through the backend's matmul_group, one
// synchronous submit per group; attention, norms and the KV cache stay on the CPU.
//
// place_layers: the output projection first, then the last layers backwards while they fit
// (all seven projections of a layer or none), so the GPU layers are one contiguous range ending
// at the last layer. What fits is what the backend accepts: upload() and bytes_resident()
// deltas, not file sizes. A layer with a type the backend does not support, or a refused
// upload, ends the placement; the rest runs on the CPU. What the run asks (layer cap, device
// budget, re-quantisation, span) comes in as one GpuRequest, resolved from the run's Config
// (engine/config.h gpu_request) and passed to every upload: nothing is set on the backend.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "base/result.h"
#include "engine/compute_backend.h"
#include "engine/model.h"

namespace fish {

// Stage 2: what a placement reserves for a layer span over its GPU layers (engine/layer_span.h).
struct SpanRequest {
  int64_t n_ctx = 0;         // positions the span's KV may grow to; 0: no span (stage 1 only)
  int64_t max_tok = 256;     // tokens per span forward (the session's n_batch)
  int64_t kv_reserve = 256;  // positions the KV starts with (it grows on demand up to n_ctx)
  // The token embedding on the device for a whole-model span's pipelined greedy decode
  // (layer_span.h decode_greedy; Config gpu_pipeline, FISH_GPU_PIPELINE).
  bool pipeline = true;
  bool operator==(const SpanRequest&) const = default;
};
// The request for a session of n_ctx positions and n_batch tokens per batch; n_ctx 0 (no span)
// when FISH_GPU_SPAN is 0/off/false/no, pipeline false when FISH_GPU_PIPELINE is.
SpanRequest span_request_from_env(int64_t n_ctx, int64_t n_batch);

// Everything a placement asks of the GPU, as values (docs/gpu.md "One plan, passed down").
struct GpuRequest {
  int64_t max_layers = -1;  // layer cap; -1: as many as fit, 0: nothing placed
  UploadOptions upload;     // every upload's (and memory_free's) budget, re-quantisation, threads
  SpanRequest span{};       // span.n_ctx 0: no span (stage 1 only)
  bool operator==(const GpuRequest&) const = default;
};

class GpuPlacement {
 public:
  // At most req.max_layers layers (< 0: no cap), every matrix uploaded under req.upload. Never
  // fails: a failed upload ends the placement (the reason is in summary()). The backend must
  // outlive the placement; the model must stay loaded.
  // With req.span.n_ctx > 0 every layer placed must leave room for the span's KV + arena +
  // params (span_bytes_estimate) under req.upload's budget; the span is then created over the
  // placed layers, and when the backend refuses it for memory, retried with one layer fewer each
  // time (the released layers go back to the CPU). A span the backend declines for other reasons
  // (an architecture feature, a type) leaves the layers to stage 1.
  // When every layer and the output are placed and req.span.pipeline is on (default), the span
  // also gets the token embedding for its pipelined greedy decode (layer_span.h decode_greedy):
  // a tied output's copy as it is, an untied model's token_embd uploaded in its GGUF type (never
  // re-quantised: the rows must equal the CPU's) where it fits beside the span's KV + arena.
  static std::shared_ptr<GpuPlacement> place_layers(const Model& model, ComputeBackend& backend,
                                                    const GpuRequest& req = {});
  ~GpuPlacement();  // destroys the span, then releases every uploaded matrix
  GpuPlacement(const GpuPlacement&) = delete;
  GpuPlacement& operator=(const GpuPlacement&) = delete;

  // The backend handle of one of the model's matrices (by address), 0 when it stays on the CPU.
  WeightHandle handle(const MatrixView* w) const {
    auto it = handles_.find(w);
    return it == handles_.end() ? 0 : it->second;
  }
  ComputeBackend& backend() const { return *backend_; }
  int64_t n_gpu_layers() const { return n_layers_; }
  int64_t first_gpu_layer() const { return first_layer_; }  // n_layer when none
  bool output_on_gpu() const { return output_; }
  // The span over layers first_gpu_layer().. (null: none). One session at a time runs it:
  // claim_span() returns it once until unclaim_span() (a second session gets null -> stage 1).
  const LayerSpan* span() const { return span_.get(); }
  LayerSpan* claim_span() const {
    return span_ && !span_claimed_.exchange(true) ? span_.get() : nullptr;
  }
  void unclaim_span() const { span_claimed_ = false; }
  uint64_t bytes() const { return bytes_; }  // device bytes of the placed matrices + span
  // "output + 12 of 30 layers (12..29) on the GPU, 104 MB; layer 11: <why it stopped>".
  const std::string& summary() const { return summary_; }

 private:
  explicit GpuPlacement(ComputeBackend& b) : backend_(&b) {}
  ComputeBackend* backend_;
  std::unordered_map<const MatrixView*, WeightHandle> handles_;
  int64_t n_layers_ = 0, first_layer_ = 0;
  bool output_ = false;
  // The token embedding on the device for a whole-model span's pipelined greedy decode
  // (SpanDesc::embed; the output's handle when tied), 0: none.
  WeightHandle embed_ = 0;
  uint64_t bytes_ = 0;
  std::string summary_;
  std::unique_ptr<LayerSpan> span_;
  mutable std::atomic<bool> span_claimed_{false};
};

// FISH_GPU_LAYERS as a layer cap: -1 when unset. Errors: not a non-negative integer.
Result<int64_t> gpu_layers_from_env();

}  // namespace fish
