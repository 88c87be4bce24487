// Stage 1 GPU offload (seed 000 "What runs where"): which of a model's matrices are resident in
// a ComputeBackend. A Session given a placement (SessionOptions::gpu) runs the projections of
// the placed layers and the output projection through the backend's matmul_group, one
// synchronous submit per group; attention, norms and the KV cache stay on the CPU.
//
// place_layers: the output projection first, then the last layers backwards while they fit
// (all seven projections of a layer or none), so the GPU layers are one contiguous range ending
// at the last layer. What fits is what the backend accepts: upload() and bytes_resident()
// deltas, not file sizes. A layer with a type the backend does not support, or a refused
// upload, ends the placement; the rest runs on the CPU. FISH_GPU_LAYERS=N caps the layer count.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "base/result.h"
#include "engine/compute_backend.h"
#include "engine/model.h"

namespace fish {

class GpuPlacement {
 public:
  // max_layers < 0: no cap. Never fails: a failed upload ends the placement (the reason is in
  // summary()). The backend must outlive the placement; the model must stay loaded.
  static std::shared_ptr<GpuPlacement> place_layers(const Model& model, ComputeBackend& backend,
                                                    int64_t max_layers = -1);
  ~GpuPlacement();  // releases every uploaded matrix
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
  uint64_t bytes() const { return bytes_; }  // device bytes of the placed matrices
  // "output + 12 of 30 layers (12..29) on the GPU, 104 MB; layer 11: <why it stopped>".
  const std::string& summary() const { return summary_; }

 private:
  explicit GpuPlacement(ComputeBackend& b) : backend_(&b) {}
  ComputeBackend* backend_;
  std::unordered_map<const MatrixView*, WeightHandle> handles_;
  int64_t n_layers_ = 0, first_layer_ = 0;
  bool output_ = false;
  uint64_t bytes_ = 0;
  std::string summary_;
};

// FISH_GPU_LAYERS as a layer cap: -1 when unset. Errors: not a non-negative integer.
Result<int64_t> gpu_layers_from_env();

}  // namespace fish
