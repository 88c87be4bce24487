// The gpu path of a run; see gpu_cell.h. It sees the GPU only through ComputeBackend.
#include "harness/gpu_cell.h"

#include "engine/compute_backend.h"

namespace fish {

std::string gpu_path_unavailable() {
  ComputeBackend* b = gpu_backend();
  if (!b) return gpu_backend_status();
  const Status st = b->open();  // a backend that fails to open unregisters itself
  return st.ok() && gpu_backend() == b ? "" : b->status();
}

std::vector<double> measure_gpu_copy_GBps(int passes) {
  std::vector<double> v;
  if (!gpu_path_unavailable().empty()) return v;
  ComputeBackend* b = gpu_backend();
  for (int i = 0; i < passes; ++i) {
    auto r = b->shader_copy_bytes_per_s(uint64_t(128) << 20, 10);
    if (!r.ok()) return {};
    v.push_back(r.value() / 1e9);
  }
  return v;
}

Result<std::unique_ptr<CellPlacement>> CellPlacement::place(const Model& model,
                                                            const GpuRequest& req) {
  if (std::string why = gpu_path_unavailable(); !why.empty()) return make_error("gpu: {}", why);
  ComputeBackend* backend = gpu_backend();
  std::unique_ptr<CellPlacement> cp(new CellPlacement());
  if (req.max_layers != 0) {
    std::shared_ptr<GpuPlacement> pl = GpuPlacement::place_layers(model, *backend, req);
    cp->detail_ = pl->summary();
    if (pl->bytes() == 0) return make_error("gpu placement: nothing placed: {}", pl->summary());
    cp->placement_ = std::move(pl);
  } else {
    cp->detail_ = "gpu_layers 0: nothing placed";
  }
  if (const std::string d = backend->describe(); !d.empty()) cp->detail_ += "; " + d;
  cp->vram_MB_ = double(backend->bytes_resident()) / double(1 << 20);
  return cp;
}

double CellPlacement::resident_MB() const {
  ComputeBackend* b = gpu_backend();
  return b ? double(b->bytes_resident()) / double(1 << 20) : 0.0;
}

}  // namespace fish
