// The gpu path of one `fish run` cell: is a GPU backend usable here, and the cell's stage 1
// placement (engine/gpu_placement.h) under its gpu_layers and vram_budget_mb.
//
// A placement holds device memory until it is destroyed; the per-cell budget and re-quantisation
// mode stay set on the backend until then, and the destructor restores the backend's own, so the
// next cell (and the next budget) starts from zero resident bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/config.h"
#include "engine/gpu_placement.h"
#include "engine/model.h"

namespace fish {

// Empty when the gpu path can run (the registered backend's device opens); else why not:
// vulkan_status() ("vulkan: off: disabled by FISH_GPU=0", ...), or that the build has no Vulkan.
std::string gpu_path_unavailable();

// The device's copy bandwidth in GB/s (bytes read + written by a compute shader over 128 MiB,
// 2.5x the H200's L2 and within lavapipe's 128 MiB storage-buffer range;
// VulkanBackend::shader_copy_bytes_per_s), `passes` samples: the reference a gpu row's weight
// GB/s is compared with. Empty when the gpu path cannot run or a measurement fails.
std::vector<double> measure_gpu_copy_GBps(int passes);

class CellPlacement {
 public:
  // Places `model` on the registered backend: at most config.gpu_layers layers (-1: no cap;
  // FISH_GPU_LAYERS lowers it further), under a ceiling of config.vram_budget_mb MiB (0: the
  // backend's), the device copy re-quantised by config.gpu_requant (-1: FISH_GPU_REQUANT).
  // Errors: no usable backend, FISH_GPU_LAYERS invalid, a budget the backend cannot take, or
  // nothing placed although gpu_layers != 0 (the message is the placement's summary: why the
  // first upload was refused).
  // Precondition: the model outlives the placement.
  static Result<std::unique_ptr<CellPlacement>> place(const Model& model, const Config& config);
  ~CellPlacement();  // releases the placed weights, then restores the backend's ceiling
  CellPlacement(const CellPlacement&) = delete;
  CellPlacement& operator=(const CellPlacement&) = delete;

  // For SessionOptions::gpu; null when nothing was placed (gpu_layers 0). A session holding it
  // keeps the weights alive: destroy sessions before this object.
  std::shared_ptr<const GpuPlacement> placement() const { return placement_; }
  int64_t gpu_layers() const { return placement_ ? placement_->n_gpu_layers() : 0; }
  // "<placement summary>; <VulkanBackend::describe()>" (what vulkan_describe() prints for the
  // start-up backend), the row's placement.gpu_detail.
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
  bool budget_set_ = false;
  bool requant_set_ = false;  // config.gpu_requant >= 0 set the backend's run mode
};

}  // namespace fish
