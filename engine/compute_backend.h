// The interface through which the engine offloads matrix multiplications to an accelerator
// (the Vulkan backend in engine/vulkan/ implements it), and the one registered instance.
//
// A backend holds weight matrices in its own memory: upload() copies one MatrixView there and
// returns a handle; matmul()/matmul_group() then compute y = W x for n_tok f32 activation rows,
// synchronously. Handles stay valid until release(). Implementations are safe to call from
// several threads (calls are serialised).
//
// What a run asks of the device (its memory ceiling, re-quantisation, threads) is an argument of
// the call that needs it (UploadOptions), never a setting on the shared backend: two runs in one
// process see only their own (docs/gpu.md "One plan, passed down").
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "base/result.h"
#include "engine/layer_span.h"
#include "engine/model.h"
#include "quant/types.h"

namespace fish {

// A weight resident in a backend; 0 is never a valid handle.
using WeightHandle = uint64_t;

// What one upload (and the memory_free() question before it) is placed under. Defaults: the
// backend's own settings from the environment.
struct UploadOptions {
  // FISH's ceiling on its own device bytes for this upload and for what the weight later needs
  // (matmul scratch, a span over it): the weight remembers it. nullopt: the backend's ceiling
  // (FISH_VRAM_BUDGET_MB or 85% of free at open); FISH_VRAM_BUDGET_MB caps a run's ceiling too.
  std::optional<uint64_t> budget_bytes;
  // Re-quantisation of the device copy (0..kRequantModeMax, kernels/requant.h); nullopt:
  // FISH_GPU_REQUANT. The CPU copy is untouched.
  std::optional<int> requant;
  int n_threads = 0;  // a re-quantising upload's threads; 0: FISH_THREADS or every hardware thread
  bool operator==(const UploadOptions&) const = default;
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  // Whether weights of type t can be uploaded and multiplied. May open the device (first
  // query); false when the device cannot be opened.
  virtual bool supports(GgmlType t) = 0;

  // Copies w (n_out rows of n_in values of w.type) into device memory, under `opt`.
  // Errors (message names w.name): unsupported type, a shape the kernels cannot take, a
  // re-quantisation mode outside 0..kRequantModeMax, an allocation the budget refuses (says how
  // much is asked, resident and allowed), a device error. A failed upload leaves the backend as
  // it was.
  virtual Result<WeightHandle> upload(const MatrixView& w, const UploadOptions& opt = {}) = 0;

  // y[t][0..n_out) = W x[t] for t < n_tok; x: n_tok rows of n_in f32, y: n_tok rows of n_out.
  // Preconditions: w is a live handle of this backend, n_tok >= 1, x and y hold n_tok rows.
  // Errors: a device error (the results in y are then undefined).
  virtual Status matmul(WeightHandle w, const float* x, int64_t n_tok, float* y) = 0;

  // Several weights over the same input (q/k/v, gate/up) in one submit.
  // Preconditions: as matmul for every op; all weights have the same n_in.
  struct MatmulOp {
    WeightHandle w;
    float* y;
  };
  virtual Status matmul_group(std::span<const MatmulOp> ops, const float* x, int64_t n_tok) = 0;

  // Bytes the backend may still allocate now under opt.budget_bytes (device memory free on the
  // live budget, capped by the ceiling); 0 when the device cannot be opened.
  virtual uint64_t memory_free(const UploadOptions& opt = {}) = 0;
  // Device bytes this backend holds (weights and scratch buffers).
  virtual uint64_t bytes_resident() const = 0;
  // Frees a weight's device memory; scratch buffers go with the last weight. 0 is ignored.
  virtual void release(WeightHandle w) = 0;

  // Stage 2: a layer span over weights already uploaded here (engine/layer_span.h), holding
  // its KV cache, arena and parameters in device memory until destroyed (before the backend).
  // Errors (nothing allocated): the backend has no span support, an architecture feature, type or
  // shape the span ops cannot take, the budget refuses the KV + arena.
  // The span allocates under the tightest budget its weights were uploaded under.
  virtual Result<std::unique_ptr<LayerSpan>> span_create(const SpanDesc& desc) {
    (void)desc;
    return make_error("span: this backend runs no layer spans");
  }

  // Opens the device if not yet; later calls return the same outcome. A backend that fails to
  // open unregisters itself (gpu_backend() becomes nullptr). Errors: why it cannot open.
  virtual Status open() { return Status::success(); }
  // One line: the device and its state, or why it is off ("vulkan: off: <reason>").
  virtual std::string status() const { return "gpu backend"; }
  // One line for stats: device, resident weights by type, spans; empty when not open.
  virtual std::string describe() const { return {}; }
  // Device copy bandwidth, the reference for kernel GB/s: a compute shader copying `bytes`
  // `reps` times; bytes read + written per second. Errors: the backend has none, a device error.
  virtual Result<double> shader_copy_bytes_per_s(uint64_t bytes, int reps) {
    (void)bytes, (void)reps;
    return make_error("gpu: this backend has no copy bandwidth measurement");
  }
  // The most tokens a matmul may hold and still run, row by row, the arithmetic of a one-token
  // matmul (bitwise the same y rows): a speculative verify's bound for output identical to plain
  // greedy decoding. Unbounded unless a backend switches kernels (and rounding) with n_tok.
  virtual int64_t decode_exact_tokens() const { return std::numeric_limits<int64_t>::max(); }
};

// The registered GPU backend, or nullptr (never registered, disabled by FISH_GPU=0, or it failed
// to open and unregistered itself; the engine then runs CPU-only).
ComputeBackend* gpu_backend();
// Registers b (nullptr unregisters). The registry does not own b.
void set_gpu_backend(ComputeBackend* b);
// Unregisters and records why there is no backend (a failed open, FISH_GPU=0), as
// gpu_backend_status() will say it.
void set_gpu_backend_off(std::string why);
// The registered backend's status(), or why none is registered ("vulkan: off: disabled by
// FISH_GPU=0", the reason its open failed, or that none was registered in this build).
std::string gpu_backend_status();

}  // namespace fish
