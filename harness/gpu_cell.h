// The gpu path of one run (a `fish run` / `fish bench` cell, `fish generate`): is a GPU backend
// usable here, and the run's placement (engine/gpu_placement.h) of its GpuRequest on the
// registered backend.
//
// A placement holds device memory until it is destroyed. The request's budget, re-quantisation
// and threads travel with each upload (nothing is set on the shared backend), so two placements
// in one process see only their own, and the next cell starts from zero resident bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/gpu_placement.h"
#include "engine/model.h"

namespace fish {

// Empty when the gpu path can run (the registered backend's device opens); else why not:
// gpu_backend_status() ("vulkan: off: disabled by FISH_GPU=0", ...), or that the build has no
// GPU backend.
std::string gpu_path_unavailable();

// The device's copy bandwidth in GB/s (bytes read + written by a compute shader over 128 MiB,
// 2.5x the H200's L2 and within lavapipe's 128 MiB storage-buffer range;
// ComputeBackend::shader_copy_bytes_per_s), `passes` samples: the reference a gpu row's weight
// GB/s is compared with. Empty when the gpu path cannot run or a measurement fails.
std::vector<double> measure_gpu_copy_GBps(int passes);

class CellPlacement {
 public:
  // Places `model` on the registered backend as `req` asks (engine/config.h gpu_request: the
  // layer cap, the device budget, the re-quantisation of the device copy, the span).
  // Errors: no usable backend, or nothing placed although req.max_layers != 0 (the message is
  // the placement's summary: why the first upload was refused).
  // Precondition: the model outlives the placement.
  static Result<std::unique_ptr<CellPlacement>> place(const Model& model, const GpuRequest& req);
  ~CellPlacement() = default;  // releases the placed weights
  CellPlacement(const CellPlacement&) = delete;
  CellPlacement& operator=(const CellPlacement&) = delete;

  // For SessionOptions::gpu; null when nothing was placed (gpu_layers 0). A session holding it
  // keeps the weights alive: destroy sessions before this object.
  std::shared_ptr<const GpuPlacement> placement() const { return placement_; }
  int64_t gpu_layers() const { return placement_ ? placement_->n_gpu_layers() : 0; }
  // "<placement summary>; <ComputeBackend::describe()>", the row's placement.gpu_detail.
  const std::string& detail() const { return detail_; }
  // The backend's bytes_resident() right after placement, in MiB.
  double vram_MB() const { return vram_MB_; }
  // The backend's bytes_resident() now, in MiB (after runs: placement + matmul scratch).
  double resident_MB() const;

 private:
  CellPlacement() = default;
  std::shared_ptr<GpuPlacement> placement_;
  std::string detail_;
  double vram_MB_ = 0;
};

}  // namespace fish
