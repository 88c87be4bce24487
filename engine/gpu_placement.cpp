// place_layers and the handle table of stage 1 offload (gpu_placement.h).
#include "engine/gpu_placement.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "base/env_knobs.h"

namespace fish {

namespace {

// A span over layers [first, n_layer) of the placement's handles.
SpanDesc span_desc(const Model& model, const GpuPlacement& pl, int64_t first,
                   const SpanRequest& req, WeightHandle embed) {
  SpanDesc d;
  d.params = &model.params();
  d.first_layer = first;
  for (int64_t il = first; il < model.params().n_layer; ++il) {
    const LayerWeights& L = model.layers()[size_t(il)];
    d.layers.push_back({&L, pl.handle(&L.wq), pl.handle(&L.wk), pl.handle(&L.wv), pl.handle(&L.wo),
                        pl.handle(&L.gate), pl.handle(&L.up), pl.handle(&L.down)});
  }
  d.inv_freq[0] = rope_inv_freq(model, 0);
  if (model.params().sliding_window > 0) d.inv_freq[1] = rope_inv_freq(model, 1);
  d.n_ctx = req.n_ctx;
  d.kv_reserve = std::min(req.kv_reserve, req.n_ctx);
  d.max_tok = req.max_tok;
  if (pl.output_on_gpu()) {  // the span runs the output head too (layer_span.h forward_head)
    d.output = pl.handle(&model.output());
    d.output_norm = &model.output_norm();
  }
  if (first == 0) d.embed = embed;
  return d;
}

}  // namespace

SpanRequest span_request_from_env(int64_t n_ctx, int64_t n_batch) {
  SpanRequest r;
  // A bad value leaves spans on here; commands and fish run rows refuse it (base/env_knobs.h).
  const Result<bool> on = env_switch("FISH_GPU_SPAN", true);
  r.n_ctx = on.ok() && !on.value() ? 0 : n_ctx;
  r.max_tok = n_batch;
  const Result<bool> pipeline = env_switch("FISH_GPU_PIPELINE", true);
  r.pipeline = !pipeline.ok() || pipeline.value();
  return r;
}

std::shared_ptr<GpuPlacement> GpuPlacement::place_layers(const Model& model,
                                                         ComputeBackend& backend,
                                                         const GpuRequest& req) {
  const int64_t max_layers = req.max_layers;
  const SpanRequest& span = req.span;
  std::shared_ptr<GpuPlacement> pl(new GpuPlacement(backend));
  const ModelParams& p = model.params();
  const int64_t n_layer = p.n_layer;
  pl->first_layer_ = n_layer;
  std::string stop;  // why placement ended early
  // Uploads a set of matrices, all or none; returns the device bytes they took.
  auto place = [&](std::initializer_list<const MatrixView*> ms, std::string* why) -> bool {
    const uint64_t before = backend.bytes_resident();
    std::vector<std::pair<const MatrixView*, WeightHandle>> done;
    for (const MatrixView* m : ms) {
      if (pl->handles_.count(m)) continue;  // tied output = token_embd, already placed
      auto h = backend.upload(*m, req.upload);
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
  // Releases layer il's matrices (the lowest GPU layer) back to the CPU.
  auto unplace = [&](int64_t il) {
    const LayerWeights& L = model.layers()[size_t(il)];
    const uint64_t before = backend.bytes_resident();
    for (const MatrixView* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) {
      auto it = pl->handles_.find(m);
      if (it == pl->handles_.end()) continue;
      backend.release(it->second);
      pl->handles_.erase(it);
    }
    pl->bytes_ -= std::min(pl->bytes_, before - backend.bytes_resident());
    --pl->n_layers_;
    pl->first_layer_ = il + 1;
  };
  const bool want_span = span.n_ctx > 0;
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
    if (want_span) {  // the span's KV + arena for the layers so far must still fit
      const uint64_t need = span_bytes_estimate(
          p, pl->n_layers_, std::min(span.kv_reserve, span.n_ctx), span.max_tok, span.n_ctx);
      if (const uint64_t left = backend.memory_free(req.upload); left < need) {
        unplace(il);
        stop = fmt::format(
            "layer {}: the span's KV + arena ({:.0f} MB) would not fit in the {:.0f} MB left "
            "under the backend's ceiling (FISH_VRAM_BUDGET_MB / vram_budget_mb)",
            il, double(need) / (1 << 20), double(left) / (1 << 20));
        break;
      }
    }
  }
  std::string span_note;
  // The pipelined greedy decode's token embedding (gpu_placement.h): a tied output's copy unless
  // re-quantised (the span checks), else token_embd in its GGUF type where it fits beside the
  // span's KV + arena.
  uint64_t embed_bytes = 0;  // an untied token_embd uploaded for it
  if (want_span && span.pipeline && pl->output_ && pl->n_layers_ == n_layer) {
    if (p.tied_output) {
      pl->embed_ = pl->handle(&model.output());
    } else {
      const uint64_t need = span_bytes_estimate(p, n_layer, std::min(span.kv_reserve, span.n_ctx),
                                                span.max_tok, span.n_ctx);
      UploadOptions exact = req.upload;
      exact.requant = 0;
      if (backend.memory_free(req.upload) >= need + model.token_embd().n_bytes) {
        const uint64_t before = backend.bytes_resident();
        if (auto h = backend.upload(model.token_embd(), exact); h.ok()) {
          pl->embed_ = h.value();
          pl->handles_.emplace(&model.token_embd(), pl->embed_);
          embed_bytes = backend.bytes_resident() - before;
          pl->bytes_ += embed_bytes;
        }
      }
    }
  }
  auto drop_embed = [&] {
    backend.release(pl->embed_);
    pl->handles_.erase(&model.token_embd());
    pl->bytes_ -= embed_bytes;
    pl->embed_ = 0;
    embed_bytes = 0;
  };
  auto desc = [&](int64_t first) { return span_desc(model, *pl, first, span, pl->embed_); };
  if (want_span && pl->n_layers_ > 0) {
    auto s = backend.span_create(desc(pl->first_layer_));
    if (!s.ok() && embed_bytes > 0) {  // the embedding goes before any layer does
      drop_embed();
      s = backend.span_create(desc(pl->first_layer_));
    }
    if (!s.ok()) {
      // Declined for memory or for what the span ops take? A one-layer span tells them apart.
      auto one = backend.span_create(desc(n_layer - 1));
      if (one.ok() && pl->n_layers_ > 1) {
        one.value().reset();
        while (!s.ok() && pl->n_layers_ > 1) {
          unplace(pl->first_layer_);
          s = backend.span_create(desc(pl->first_layer_));
        }
      }
      if (!s.ok()) span_note = "; no span: " + s.error().message;
    }
    if (s.ok()) {
      pl->span_ = std::move(s).value();
      span_note = fmt::format("; span {} layers, KV {:.0f} MB f16 ({} of {} positions)",
                              pl->span_->n_layers(), double(pl->span_->kv_bytes()) / (1 << 20),
                              pl->span_->kv_capacity(), pl->span_->n_ctx());
      pl->bytes_ += pl->span_->bytes();
      if (pl->span_->can_decode_greedy())
        span_note += embed_bytes > 0
                         ? fmt::format(", pipelined greedy decode (token_embd {:.0f} MB)",
                                       double(embed_bytes) / (1 << 20))
                         : ", pipelined greedy decode (the tied output's rows)";
    }
  }
  if (embed_bytes > 0 && (pl->span_ == nullptr || !pl->span_->can_decode_greedy())) {
    drop_embed();  // the span did not take it (its kernels() says why)
  }
  pl->summary_ =
      fmt::format("{}{} of {} layers", pl->output_ ? "output + " : "", pl->n_layers_, n_layer);
  if (pl->n_layers_ > 0) pl->summary_ += fmt::format(" ({}..{})", pl->first_layer_, n_layer - 1);
  pl->summary_ += fmt::format(" on the GPU, {:.0f} MB", double(pl->bytes_) / (1 << 20));
  pl->summary_ += span_note;
  if (!stop.empty() && pl->n_layers_ < n_layer) pl->summary_ += "; stopped at " + stop;
  return pl;
}

GpuPlacement::~GpuPlacement() {
  span_.reset();  // before the weights it binds
  for (auto& [m, h] : handles_) backend_->release(h);
}

Result<int64_t> gpu_layers_from_env() {
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> n, env_int("FISH_GPU_LAYERS"));
  return n ? *n : int64_t(-1);
}

}  // namespace fish
