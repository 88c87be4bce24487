// The interface through which the engine offloads matrix multiplications to an accelerator
// (the Vulkan backend in engine/vulkan/ implements it), and the one registered instance.
//
// A backend holds weight matrices in its own memory: upload() copies one MatrixView there and
// returns a handle; matmul()/matmul_group() then compute y = W x for n_tok f32 activation rows,
// synchronously. Handles stay valid until release(). Implementations are safe to call from
// several threads (calls are serialised).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/result.h"
#include "engine/layer_span.h"
#include "engine/model.h"
#include "quant/types.h"

namespace fish {

// A weight resident in a backend; 0 is never a valid handle.
using WeightHandle = uint64_t;

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  // Whether weights of type t can be uploaded and multiplied. May open the device (first
  // query); false when the device cannot be opened.
  virtual bool supports(GgmlType t) = 0;

  // Copies w (n_out rows of n_in values of w.type) into device memory.
  // Errors (message names w.name): unsupported type, a shape the kernels cannot take, an
  // allocation the budget refuses (says how much is asked, resident and allowed), a device error.
  // A failed upload leaves the backend as it was.
  virtual Result<WeightHandle> upload(const MatrixView& w) = 0;

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

  // Bytes the backend may still allocate now (device memory free on the live budget, capped by
  // the backend's own ceiling); 0 when the device cannot be opened.
  virtual uint64_t memory_free() = 0;
  // Device bytes this backend holds (weights and scratch buffers).
  virtual uint64_t bytes_resident() const = 0;
  // Frees a weight's device memory; scratch buffers go with the last weight. 0 is ignored.
  virtual void release(WeightHandle w) = 0;

  // Stage 2: a layer span over weights already uploaded here (engine/layer_span.h), holding
  // its KV cache, arena and parameters in device memory until destroyed (before the backend).
  // Errors (nothing allocated): the backend has no span support, an architecture feature, type or
  // shape the span ops cannot take, the budget refuses the KV + arena.
  virtual Result<std::unique_ptr<LayerSpan>> span_create(const SpanDesc& desc) {
    (void)desc;
    return make_error("span: this backend runs no layer spans");
  }
};

// The registered GPU backend, or nullptr (never registered, disabled by FISH_GPU=0, or it failed
// to open and unregistered itself; the engine then runs CPU-only).
ComputeBackend* gpu_backend();
// Registers b (nullptr unregisters). The registry does not own b.
void set_gpu_backend(ComputeBackend* b);

}  // namespace fish
