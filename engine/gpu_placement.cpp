// place_layers and the handle table of stage 1 offload (gpu_placement.h).
#include "engine/gpu_placement.h"

#include <charconv>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace fish {

std::shared_ptr<GpuPlacement> GpuPlacement::place_layers(const Model& model,
                                                         ComputeBackend& backend,
                                                         int64_t max_layers) {
  std::shared_ptr<GpuPlacement> pl(new GpuPlacement(backend));
  const int64_t n_layer = model.params().n_layer;
  pl->first_layer_ = n_layer;
  std::string stop;  // why placement ended early
  // Uploads a set of matrices, all or none; returns the device bytes they took.
  auto place = [&](std::initializer_list<const MatrixView*> ms, std::string* why) -> bool {
    const uint64_t before = backend.bytes_resident();
    std::vector<std::pair<const MatrixView*, WeightHandle>> done;
    for (const MatrixView* m : ms) {
      if (pl->handles_.count(m)) continue;  // tied output = token_embd, already placed
      auto h = backend.upload(*m);
      if (!h.ok()) {
        *why = h.error().message;
        for (auto& [mm, hh] : done) backend.release(hh);
        return false;
      }
      done.emplace_back(m, h.value());
    }
    for (auto& [m, h] : done) pl->handles_.emplace(m, h);
    pl->bytes_ += backend.bytes_resident() - before;
    return true;
  };
  if (max_layers != 0) {
    std::string why;
    pl->output_ = place({&model.output()}, &why);
    if (!pl->output_) stop = "output: " + why;
  }
  for (int64_t il = n_layer - 1; il >= 0 && stop.empty(); --il) {
    if (max_layers >= 0 && pl->n_layers_ >= max_layers) {
      stop = fmt::format("layer cap {} (gpu_layers / FISH_GPU_LAYERS)", max_layers);
      break;
    }
    const LayerWeights& L = model.layers()[size_t(il)];
    std::string why;
    if (!place({&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}, &why)) {
      stop = fmt::format("layer {}: {}", il, why);
      break;
    }
    ++pl->n_layers_;
    pl->first_layer_ = il;
  }
  pl->summary_ =
      fmt::format("{}{} of {} layers", pl->output_ ? "output + " : "", pl->n_layers_, n_layer);
  if (pl->n_layers_ > 0) pl->summary_ += fmt::format(" ({}..{})", pl->first_layer_, n_layer - 1);
  pl->summary_ += fmt::format(" on the GPU, {:.0f} MB", double(pl->bytes_) / (1 << 20));
  if (!stop.empty() && pl->n_layers_ < n_layer) pl->summary_ += "; stopped at " + stop;
  return pl;
}

GpuPlacement::~GpuPlacement() {
  for (auto& [m, h] : handles_) backend_->release(h);
}

Result<int64_t> gpu_layers_from_env() {
  const char* v = std::getenv("FISH_GPU_LAYERS");
  if (!v || !*v) return int64_t(-1);
  const std::string_view s(v);
  int64_t n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < 0)
    return make_error("FISH_GPU_LAYERS='{}': expected a layer count >= 0", s);
  return n;
}

}  // namespace fish
