// The gpu path of a fish run cell; see gpu_cell.h.
#include "harness/gpu_cell.h"

#include <algorithm>

#include "engine/compute_backend.h"
#if FISH_HAVE_VULKAN
#include "engine/vulkan/vulkan_backend.h"
#endif

namespace fish {

namespace {
#if FISH_HAVE_VULKAN
// The registered backend as the Vulkan one (the only kind with a per-run budget), or nullptr.
vk::VulkanBackend* registered_vulkan() {
  return dynamic_cast<vk::VulkanBackend*>(gpu_backend());
}
#endif
}  // namespace

std::string gpu_path_unavailable() {
#if FISH_HAVE_VULKAN
  if (vk::VulkanBackend* b = registered_vulkan()) {
    const Status st = b->open();
    if (st.ok() && gpu_backend() == b) return "";
    return b->status();
  }
  return gpu::vulkan_status();
#else
  return "no Vulkan backend in this build (configure with -DFISH_VULKAN=ON)";
#endif
}

std::vector<double> measure_gpu_copy_GBps(int passes) {
  std::vector<double> v;
#if FISH_HAVE_VULKAN
  if (!gpu_path_unavailable().empty()) return v;
  vk::VulkanBackend* b = registered_vulkan();
  for (int i = 0; b != nullptr && i < passes; ++i) {
    auto r = b->shader_copy_bytes_per_s(uint64_t(128) << 20, 10);
    if (!r.ok()) return {};
    v.push_back(r.value() / 1e9);
  }
#else
  (void)passes;
#endif
  return v;
}

Result<std::unique_ptr<CellPlacement>> CellPlacement::place(const Model& model,
                                                            const Config& config) {
  if (std::string why = gpu_path_unavailable(); !why.empty()) return make_error("gpu: {}", why);
  ComputeBackend* backend = gpu_backend();
  FISH_ASSIGN_OR_RETURN(int64_t env_cap, gpu_layers_from_env());
  int64_t cap = config.gpu_layers;
  if (env_cap >= 0) cap = cap < 0 ? env_cap : std::min(cap, env_cap);
  std::unique_ptr<CellPlacement> cp(new CellPlacement());
#if FISH_HAVE_VULKAN
  if (config.vram_budget_mb > 0) {
    vk::VulkanBackend* vb = registered_vulkan();
    if (!vb) return make_error("gpu: vram_budget_mb needs the Vulkan backend");
    FISH_TRY(vb->set_run_budget(uint64_t(config.vram_budget_mb) << 20));
    cp->budget_set_ = true;
  }
  if (config.gpu_requant >= 0) {
    vk::VulkanBackend* vb = registered_vulkan();
    if (!vb) return make_error("gpu: gpu_requant needs the Vulkan backend");
    FISH_TRY(vb->set_run_requant(int(config.gpu_requant)));
    cp->requant_set_ = true;
  }
  if (vk::VulkanBackend* vb = registered_vulkan()) vb->set_requant_threads(int(config.n_threads));
#endif
  if (cap != 0) {
    // Stage 2 span over the placed layers unless gpu_span is false or FISH_GPU_SPAN=0 (docs/gpu.md
    // "Stage 2 spans").
    SpanRequest span = span_request_from_env(config.n_ctx, config.n_batch);
    if (!config.gpu_span) span.n_ctx = 0;
    std::shared_ptr<GpuPlacement> pl = GpuPlacement::place_layers(model, *backend, cap, span);
    cp->detail_ = pl->summary();
    if (pl->bytes() == 0) return make_error("gpu placement: nothing placed: {}", pl->summary());
    cp->placement_ = std::move(pl);
  } else {
    cp->detail_ = "gpu_layers 0: nothing placed";
  }
#if FISH_HAVE_VULKAN
  if (vk::VulkanBackend* vb = registered_vulkan()) cp->detail_ += "; " + vb->describe();
#endif
  cp->vram_MB_ = double(backend->bytes_resident()) / double(1 << 20);
  return cp;
}

double CellPlacement::resident_MB() const {
  ComputeBackend* b = gpu_backend();
  return b ? double(b->bytes_resident()) / double(1 << 20) : 0.0;
}

CellPlacement::~CellPlacement() {
  placement_.reset();
#if FISH_HAVE_VULKAN
  if (budget_set_)
    if (vk::VulkanBackend* b = registered_vulkan()) (void)b->set_run_budget(std::nullopt);
  if (requant_set_)
    if (vk::VulkanBackend* b = registered_vulkan()) (void)b->set_run_requant(std::nullopt);
#endif
}

}  // namespace fish
