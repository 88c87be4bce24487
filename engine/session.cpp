// Session: the forward pass over a Model; see session.h. The layer graph follows llama.cpp's
// build for each architecture (llama-model.cpp) and scripts/reference_forward.py.
#include "engine/session.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/fault_injection.h"
#include "engine/sampling.h"
#include "kernels/kquant_x16.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/registry.h"
#include "kernels/w4a8.h"

namespace fish {
namespace {

// act_ slot of an activation format.
int act_slot(GgmlType act) {
  switch (act) {
    case GgmlType::q8_0:
      return 0;
    case GgmlType::q8_1:
      return 1;
    case GgmlType::q8_k:
      return 2;
    default:
      return -1;
  }
}

// Bytes of n_tok rows of n values in any of the int8 activation formats, rounded up to whole
// 256-value blocks: Q8_K takes 292 bytes per 256 values, Q8_0 272 and Q8_1 288.
size_t act_capacity(int64_t n, int64_t n_tok) {
  const int64_t blocks256 = (n + 255) / 256;
  return size_t(blocks256 * 292) * size_t(n_tok);
}

// Rows [b, e) of a token-major matrix with `n` columns, applying fn(t) per row, over the pool
// when there is more than one row.
template <typename Fn>
void for_tokens(ThreadPool& pool, int64_t n_tok, Fn&& fn) {
  if (n_tok == 1) {
    fn(int64_t(0));
    return;
  }
  pool.parallel_for(n_tok, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) fn(t);
  });
}

// Rotates pairs of n_heads vectors by the angles in cs (cos, sin per pair).
void apply_rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cs,
                RopeStyle style) {
  const int64_t half = n_rot / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    if (style == RopeStyle::normal) {
      for (int64_t i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c - x1 * s;
        v[2 * i + 1] = x0 * s + x1 * c;
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * c - x1 * s;
        v[i + half] = x0 * s + x1 * c;
      }
    }
  }
}

// The first layer a span in opt.gpu would run for this session (n_layer: no usable span).
int64_t span_first_layer(const SessionOptions& opt, const Model& m) {
  const LayerSpan* sp = opt.gpu ? opt.gpu->span() : nullptr;
  if (!sp || opt.observe_matmul_input || opt.n_batch > sp->max_tok() || opt.n_ctx > sp->n_ctx())
    return m.params().n_layer;
  return sp->first_layer();
}

}  // namespace

std::string_view swa_kv_name(SwaKv m) {
  return m == SwaKv::ring ? "ring" : "full";
}

std::optional<SwaKv> parse_swa_kv(std::string_view name) {
  if (name == "ring") return SwaKv::ring;
  if (name == "full") return SwaKv::full;
  return std::nullopt;
}

std::vector<int64_t> Session::kv_layer_rows(const SessionOptions& opt, const ModelParams& p) {
  std::vector<int64_t> rows(size_t(p.n_layer), opt.n_ctx);
  if (opt.swa_kv == SwaKv::ring) {
    // A batch writes positions [pos0, pos0 + n_batch) before its first query reads
    // [pos0 - window + 1, pos0]: window + n_batch - 1 rows keep them apart.
    const int64_t ring = std::min(opt.n_ctx, p.sliding_window + opt.n_batch);
    for (int64_t il = 0; il < p.n_layer; ++il)
      if (p.is_swa_layer(il)) rows[size_t(il)] = ring;
  }
  return rows;
}

Session::Session(std::shared_ptr<const Model> model, const SessionOptions& opt)
    : model_(std::move(model)),
      opt_(opt),
      pool_(opt.n_threads),
      kv_(opt.n_ctx, model_->params().kv_dim(), kv_layer_rows(opt, model_->params()),
          span_first_layer(opt, *model_)) {
  span_first_ = kv_.n_alloc_layers();
  if (span_first_ < model_->params().n_layer) {
    span_ = opt_.gpu->claim_span();
    if (span_ == nullptr) {  // another session runs it: stage 1 here
      kv_.allocate_all();
      span_first_ = model_->params().n_layer;
    } else {
      span_->kv_truncate(0);
    }
  }
  const ModelParams& p = model_->params();
  const int64_t B = opt_.n_batch;
  for (int t = 0; t < pool_.size(); ++t) solo_.push_back(std::make_unique<ThreadPool>(1));
  x_.resize(size_t(B * p.n_embd));
  xn_.resize(size_t(B * std::max(p.n_embd, p.q_dim())));
  q_.resize(size_t(B * p.q_dim()));
  k_.resize(size_t(B * p.kv_dim()));
  v_.resize(size_t(B * p.kv_dim()));
  att_.resize(size_t(B * p.q_dim()));
  tmp_.resize(size_t(B * p.n_embd));
  gate_.resize(size_t(B * p.n_ff));
  up_.resize(size_t(B * p.n_ff));
  logits_.resize(size_t(p.n_vocab));
  // Decode: all heads' scores (n_head x n_ctx); prefill: one query group per thread.
  const int64_t group = p.n_head / p.n_head_kv;
  att_scratch_.resize(size_t(std::max<int64_t>(p.n_head, pool_.size() * group) * opt_.n_ctx));
  const int64_t max_in = std::max({p.n_embd, p.q_dim(), p.n_ff});
  if (opt_.act == ActMode::f32) deq_scratch_.resize(size_t(pool_.size()) * size_t(max_in));

  // Activation buffers for the formats this model's matrices pair with.
  kernel_isa_ = opt_.isa;
  auto note = [&](const MatrixView& m) {
    const MatvecKernel& k = matvec_kernel(m.type, opt_.isa);
    kernel_isa_ = std::min(kernel_isa_, k.isa);
    const int s = act_slot(k.act);
    if (s >= 0 && act_[s].empty()) act_[s].resize(act_capacity(max_in, B));
  };
  for (const LayerWeights& L : model_->layers())
    for (const MatrixView* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) note(*m);
  note(model_->output());

  // Inverse RoPE frequencies: base^(-2i/n_rot) * scale / freq_factor[i], in f64 as the reference.
  const std::vector<float>& ff = model_->rope_freq_factors();
  for (int v = 0; v < 2; ++v) {
    const double base = v == 0 ? p.rope_base : p.rope_base_swa;
    const double scale = v == 0 ? p.rope_scale : 1.0;
    inv_freq_[v].resize(size_t(p.n_rot / 2));
    for (int64_t i = 0; i < p.n_rot / 2; ++i) {
      double f = scale * std::pow(base, -2.0 * double(i) / double(p.n_rot));
      if (!ff.empty()) f /= double(ff[size_t(i)]);
      inv_freq_[v][size_t(i)] = f;
    }
    rope_cs_[v].resize(size_t(B * p.n_rot));
  }
}

Session::~Session() {
  if (span_ != nullptr) opt_.gpu->unclaim_span();
}

Status Session::kv_truncate(int64_t n) {
  n = std::max<int64_t>(0, n);
  const ModelParams& p = model_->params();
  // The next query, at position n, reads [n - window + 1, n) from a sliding-window layer.
  const int64_t need = std::max<int64_t>(0, n - p.sliding_window + 1);
  for (int64_t il = 0; il < kv_.n_alloc_layers() && n > 0 && n < n_past(); ++il) {
    if (!kv_.is_ring(il) || need >= kv_.first_held(il)) continue;
    return make_error(
        "session: kv_truncate({}): {} sliding-window layers keep the last {} positions (window {} "
        "+ n_batch {}); n_past {}: position {} attends to {}..{}, the ring holds {}..{} (hint: "
        "roll back at most n_batch positions, reset() and re-run the prefix, or swa_kv full)",
        n, arch_name(p.arch), kv_.rows(il), p.sliding_window, opt_.n_batch, n_past(), n, need,
        n - 1, kv_.first_held(il), n_past() - 1);
  }
  reset_to(n);
  return Status::success();
}

void Session::reset() {
  reset_to(0);
}

void Session::reset_to(int64_t n) {
  kv_.truncate(n);
  if (span_ != nullptr) span_->kv_truncate(n);
  if (int64_t(history_.size()) > n) history_.resize(size_t(n));
}

void Session::span_fallback(int64_t n_valid) {
  ++gpu_fallbacks_;
  span_->kv_truncate(0);
  opt_.gpu->unclaim_span();
  span_ = nullptr;
  span_first_ = model_->params().n_layer;
  kv_.allocate_all();
  // Replay: the span layers' KV for [0, n_valid) exists only on the device; recompute it (and,
  // identically, the CPU layers' rows) without logits.
  const std::vector<int32_t> replay(history_.begin(), history_.begin() + n_valid);
  kv_.clear();
  for (int64_t b = 0; b < n_valid; b += opt_.n_batch) {
    const int64_t nb = std::min(opt_.n_batch, n_valid - b);
    forward_batch(replay.data() + b, nb, b, false, nullptr);
    kv_.set_n_past(b + nb);
  }
}

Result<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model,
                                                 const SessionOptions& opt) {
  if (model == nullptr) return make_error("session: no model");
  if (opt.n_ctx < 1) return make_error("session: n_ctx {} must be >= 1", opt.n_ctx);
  if (opt.n_batch < 1) return make_error("session: n_batch {} must be >= 1", opt.n_batch);
  const WeightPath path = resolve_weight_path(opt.weights.weight_path, *model);
  // ModelLoadOptions::defer_x16: the x16 copies of the matrices this session runs on the CPU
  // with int8 activations (the f32 and reference paths never read them), those its GPU
  // placement does not hold. A GPU matrix that falls back to the CPU later (gpu_fallbacks) runs
  // its GGUF rows.
  const GpuPlacement* gpu = opt.gpu.get();
  const bool reads_x16 = path != WeightPath::ref && opt.act != ActMode::f32;
  auto on_cpu = [gpu](const MatrixView& m) { return gpu == nullptr || gpu->handle(&m) == 0; };
  const bool pack = reads_x16 && model->x16_deferred();
  {
    SessionOptions resolved = opt;
    resolved.weights.weight_path = path;
    SessionMemory need = memory_estimate(*model, resolved);
    if (pack) need.x16 = model->x16_pending_bytes(on_cpu);
    FISH_ASSIGN_OR_RETURN(const HostMemory have, host_memory_available());
    FISH_TRY(check_host_memory(
        need, have, fmt::format("session: n_ctx {}, n_batch {}", opt.n_ctx, opt.n_batch),
        "a smaller n_ctx or n_batch; FISH_RAM_BUDGET_MB sets FISH's own ceiling"));
  }
  inject_fault("session_create");  // tests of the exception boundaries (base/fault_injection.h)
  if (pack) FISH_TRY(model->pack_x16(on_cpu, opt.n_threads));
  std::unique_ptr<Int4Weights> int4;
  if (path == WeightPath::w4a8 || path == WeightPath::w4a16) {
    FISH_ASSIGN_OR_RETURN(int4, Int4Weights::build(*model, path, opt.weights));
  }
  SessionOptions o = opt;
  if (path == WeightPath::ref) o.act = ActMode::f32;
  auto s = std::unique_ptr<Session>(new Session(std::move(model), o));
  s->weight_path_ = path;
  s->int4_ = std::move(int4);
  return s;
}

Result<std::span<const float>> Session::forward(std::span<const int32_t> tokens, int64_t pos0,
                                                LogitsMode mode) {
  return forward_impl(tokens, pos0, mode, nullptr);
}

Result<int32_t> Session::forward_greedy(std::span<const int32_t> tokens, int64_t pos0) {
  int32_t id = 0;
  FISH_TRY(forward_impl(tokens, pos0, LogitsMode::last, &id));
  return id;
}

bool Session::pipelined_decode() const {
  return span_ != nullptr && span_first_ == 0 && int4_ == nullptr && span_->can_decode_greedy();
}

Result<int64_t> Session::decode_greedy(int32_t token, int64_t n,
                                       const std::function<bool(int32_t)>& on_token) {
  const ModelParams& p = model_->params();
  if (token < 0 || token >= p.n_vocab)
    return make_error("session: token {} is outside the vocabulary [0, {})", token, p.n_vocab);
  if (n < 0 || n_past() + n > n_ctx())
    return make_error(
        "session: {} decode steps at position {} exceed n_ctx {} (hint: a larger --n-ctx)", n,
        n_past(), n_ctx());
  int64_t given = 0;
  bool stop = false;
  if (n > 0 && pipelined_decode()) {
    const int64_t pos0 = n_past();
    FISH_TRY(kv_truncate(pos0));
    auto r = span_->decode_greedy(token, pos0, n, [&](int32_t id) {
      history_.push_back(token);  // the token step `given` ran, at pos0 + given
      kv_.set_n_past(pos0 + ++given);
      token = id;
      stop = !on_token(id);
      return !stop;
    });
    if (r.ok() || stop) return given;
    span_fallback(n_past());  // as a failed forward: the rest runs on the CPU
  }
  for (; given < n && !stop; ++given) {
    FISH_ASSIGN_OR_RETURN(token, append_greedy(std::span<const int32_t>(&token, 1)));
    stop = !on_token(token);
  }
  return given;
}

Result<std::span<const int32_t>> Session::forward_greedy_rows(std::span<const int32_t> tokens,
                                                              int64_t pos0) {
  row_ids_.resize(tokens.size());
  FISH_TRY(forward_impl(tokens, pos0, LogitsMode::all, nullptr, row_ids_.data()));
  return std::span<const int32_t>(row_ids_);
}

Result<std::span<const float>> Session::forward_impl(std::span<const int32_t> tokens, int64_t pos0,
                                                     LogitsMode mode, int32_t* token,
                                                     int32_t* rows) {
  const ModelParams& p = model_->params();
  const int64_t n = int64_t(tokens.size());
  if (n == 0) return make_error("session: forward called with no tokens");
  if (pos0 < 0 || pos0 > n_past())
    return make_error(
        "session: forward at position {}, but the cache holds {} positions "
        "(positions must follow on without gaps)",
        pos0, n_past());
  if (pos0 + n > n_ctx())
    return make_error(
        "session: {} tokens at position {} exceed n_ctx {} (hint: a larger "
        "--n-ctx, or kv_truncate)",
        n, pos0, n_ctx());
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[size_t(i)] < 0 || tokens[size_t(i)] >= p.n_vocab)
      return make_error("session: token {} (index {}) is outside the vocabulary [0, {})",
                        tokens[size_t(i)], i, p.n_vocab);
  }
  FISH_TRY(kv_truncate(pos0));
  if (span_ != nullptr) history_.insert(history_.end(), tokens.begin(), tokens.end());
  const bool all = mode == LogitsMode::all;
  const size_t need = size_t(all ? n : 1) * size_t(p.n_vocab);
  if (logits_.size() < need) logits_.resize(need);  // only LogitsMode::all grows it
  for (int64_t b = 0; b < n; b += opt_.n_batch) {
    const int64_t nb = std::min(opt_.n_batch, n - b);
    const bool last = b + nb == n;
    float* out =
        all ? logits_.data() + size_t(b) * size_t(p.n_vocab) : (last ? logits_.data() : nullptr);
    int32_t* id = last ? token : nullptr;
    int32_t* ids = rows != nullptr ? rows + b : nullptr;
    if (!forward_batch(tokens.data() + b, nb, pos0 + b, all, out, id, ids)) {
      span_fallback(pos0 + b);
      forward_batch(tokens.data() + b, nb, pos0 + b, all, out, id, ids);
    }
    kv_.set_n_past(pos0 + b + nb);
  }
  return std::span<const float>(logits_.data(), need);
}

Status Session::teacher_force(
    std::span<const int32_t> tokens,
    const std::function<void(int64_t t, std::span<const float> logits)>& fn, int64_t chunk) {
  reset();
  const int64_t n_vocab = model_->params().n_vocab;
  for (int64_t b = 0; b < int64_t(tokens.size()); b += chunk) {
    const int64_t nb = std::min<int64_t>(chunk, int64_t(tokens.size()) - b);
    FISH_ASSIGN_OR_RETURN(std::span<const float> lg,
                          forward(tokens.subspan(size_t(b), size_t(nb)), b, LogitsMode::all));
    for (int64_t t = 0; t < nb; ++t) fn(b + t, lg.subspan(size_t(t * n_vocab), size_t(n_vocab)));
  }
  return Status::success();
}

void Session::matmul(const MatrixView& w, const float* x, int64_t n, float* y) {
  if (opt_.observe_matmul_input) opt_.observe_matmul_input(w, x, n);
  if (opt_.gpu && gpu_matmul_group({{&w, y}}, x, n)) return;
  if (int4_ != nullptr && int4_->matmul(w, x, n, y, pool_)) return;
  if (opt_.act == ActMode::f32) {
    matmul_f32(w, x, n, y);
    return;
  }
  const MatvecKernel& k = matvec_kernel(w.type, opt_.isa);
  if (w.x16 != nullptr) {  // x16 interleaved copy (kernels/kquant_x16.h)
    kx16_matmul(kx16_kernel(w.type, opt_.isa), w.type, w.x16, w.n_out, w.n_in,
                quantized_input(k, x, n, w.n_in), n, y, pool_);
    return;
  }
  matmul_preq(k, w.data, w.n_out, w.n_in, quantized_input(k, x, n, w.n_in), n, y, pool_);
}

const void* Session::quantized_input(const MatvecKernel& k, const float* x, int64_t n,
                                     int64_t n_in) {
  const int s = act_slot(k.act);
  if (s < 0) return x;  // f32 activations
  if (!(act_valid_ & (1u << s))) {
    assert(act_[s].size() >= k.act_row_bytes(n_in) * size_t(n));
    quantize_activations(k, x, n, n_in, act_[s].data(), pool_);
    act_valid_ |= 1u << s;
  }
  return act_[s].data();
}

bool Session::gpu_matmul_group(std::initializer_list<MatmulOp> ops, const float* x, int64_t n) {
  ComputeBackend::MatmulOp gops[4];
  assert(ops.size() <= 4);
  size_t i = 0;
  for (const MatmulOp& op : ops) {
    const WeightHandle h = opt_.gpu->handle(op.w);
    if (h == 0) return false;
    gops[i++] = {h, op.y};
  }
  if (opt_.gpu->backend().matmul_group({gops, i}, x, n).ok()) return true;
  ++gpu_fallbacks_;
  return false;
}

void Session::matmul_group(std::initializer_list<MatmulOp> ops, const float* x, int64_t n) {
  if (opt_.gpu && gpu_matmul_group(ops, x, n)) return;
  if (int4_ != nullptr && n == 1 && ops.size() <= 4) {  // w4a8 / w4a16 decode: one dispatch
    const MatrixView* ws[4];
    float* ys[4];
    size_t i = 0;
    for (const MatmulOp& op : ops) {
      ws[i] = op.w;
      ys[i++] = op.y;
    }
    if (int4_->matvec_group({ws, i}, {ys, i}, x, pool_)) return;
  }
  if (n > 1 || opt_.act == ActMode::f32 || pool_.size() == 1 || int4_ != nullptr) {
    for (const MatmulOp& op : ops) matmul(*op.w, x, n, op.y);
    return;
  }
  if (opt_.observe_matmul_input)
    for (const MatmulOp& op : ops) opt_.observe_matmul_input(*op.w, x, n);
  constexpr int kMaxOps = 4;
  assert(ops.size() <= size_t(kMaxOps));
  const MatvecKernel* kern[kMaxOps];
  Kx16Fn kx16[kMaxOps];  // non-null: the op runs on its x16 copy, split by 16-row panels
  const void* xq[kMaxOps];
  // Units: rows (GGUF) or panels (x16), row_b bytes each.
  size_t row_b[kMaxOps], first_byte[kMaxOps + 1];
  int64_t units[kMaxOps];
  first_byte[0] = 0;
  int i = 0;
  for (const MatmulOp& op : ops) {
    kern[i] = &matvec_kernel(op.w->type, opt_.isa);
    xq[i] = quantized_input(*kern[i], x, 1, op.w->n_in);
    kx16[i] = op.w->x16 != nullptr ? kx16_kernel(op.w->type, opt_.isa) : nullptr;
    if (kx16[i] != nullptr) {
      row_b[i] = size_t(op.w->n_in / kx16_block_elems(op.w->type)) * kx16_block_bytes(op.w->type);
      units[i] = (op.w->n_out + kKx16Rows - 1) / kKx16Rows;
    } else {
      row_b[i] = row_bytes(op.w->type, op.w->n_in);
      units[i] = op.w->n_out;
    }
    first_byte[i + 1] = first_byte[i] + row_b[i] * size_t(units[i]);
    ++i;
  }
  const int n_ops = i;
  const size_t total = first_byte[n_ops];
  const int T = pool_.size();
  pool_.parallel_for(T, [&](int64_t tb, int64_t te, int th) {
    for (int64_t t = tb; t < te; ++t) {
      // This thread's bytes [lo, hi); a row belongs to the thread holding its first byte.
      const size_t lo = total * size_t(t) / size_t(T), hi = total * size_t(t + 1) / size_t(T);
      int j = 0;
      for (const MatmulOp& op : ops) {
        const int64_t rows = units[j];
        auto row_at = [&](size_t byte) {
          if (byte <= first_byte[j]) return int64_t(0);
          return std::min(rows, int64_t((byte - first_byte[j] + row_b[j] - 1) / row_b[j]));
        };
        const int64_t r0 = row_at(lo), r1 = row_at(hi);
        if (r1 > r0 && kx16[j] != nullptr) {  // panels [r0, r1) of the x16 copy
          const int64_t row0 = r0 * kKx16Rows;
          kx16[j](static_cast<const uint8_t*>(op.w->x16) + size_t(r0) * row_b[j],
                  op.w->n_in / kx16_block_elems(op.w->type), r1 - r0, xq[j],
                  kern[j]->act_row_bytes(op.w->n_in), 1, op.y + row0, op.w->n_out,
                  std::min(op.w->n_out - row0, (r1 - r0) * kKx16Rows));
        } else if (r1 > r0)
          matmul_preq(*kern[j], static_cast<const uint8_t*>(op.w->data) + size_t(r0) * row_b[j],
                      r1 - r0, op.w->n_in, xq[j], 1, op.y + r0, *solo_[size_t(th)]);
        ++j;
      }
    }
  });
}

void Session::matmul_f32(const MatrixView& w, const float* x, int64_t n, float* y) {
  const DequantizeRowFn deq = type_info(w.type).dequantize_row;
  const VecDotFn dot = matvec_kernel(GgmlType::f32, opt_.isa).vec_dot;
  const size_t w_row = row_bytes(w.type, w.n_in);
  const int64_t stride = int64_t(deq_scratch_.size()) / pool_.size();
  pool_.parallel_for(w.n_out, [&](int64_t b, int64_t e, int th) {
    float* row = deq_scratch_.data() + th * stride;
    for (int64_t r = b; r < e; ++r) {
      deq(static_cast<const uint8_t*>(w.data) + size_t(r) * w_row, row, w.n_in);
      for (int64_t t = 0; t < n; ++t) y[t * w.n_out + r] = dot(w.n_in, row, x + t * w.n_in);
    }
  });
}

bool Session::forward_batch(const int32_t* tokens, int64_t n, int64_t pos0, bool all_logits,
                            float* logits, int32_t* token, int32_t* rows) {
  const ModelParams& p = model_->params();
  const int64_t E = p.n_embd, Q = p.q_dim(), KV = p.kv_dim(), F = p.n_ff, hd = p.head_dim;
  const float eps = p.norm_eps;

  for (int64_t t = 0; t < n; ++t) {
    if (int4_ == nullptr || !int4_->embed(tokens[t], x_.data() + t * E)) {
      model_->embed(tokens[t], x_.data() + t * E);
    }
  }
  // cos/sin per token for each RoPE variant the model uses.
  const int n_var = p.sliding_window > 0 ? 2 : 1;
  for (int v = 0; v < n_var; ++v) {
    for (int64_t t = 0; t < n; ++t) {
      float* cs = rope_cs_[v].data() + t * p.n_rot;
      for (int64_t i = 0; i < p.n_rot / 2; ++i) {
        const double a = double(pos0 + t) * inv_freq_[v][size_t(i)];
        cs[2 * i] = float(std::cos(a));
        cs[2 * i + 1] = float(std::sin(a));
      }
    }
  }

  for (int64_t il = 0; il < span_first_; ++il) {
    const LayerWeights& L = model_->layers()[size_t(il)];
    // --- attention block ---
    for_tokens(pool_, n, [&](int64_t t) {
      rmsnorm(x_.data() + t * E, L.attn_norm.data(), xn_.data() + t * E, E, eps);
    });
    invalidate_act();
    matmul_group({{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}}, xn_.data(), n);
    const float* cs_base = rope_cs_[L.swa ? 1 : 0].data();
    float* kc = kv_.k(il);
    float* vc = kv_.v(il);
    for_tokens(pool_, n, [&](int64_t t) {
      float* q = q_.data() + t * Q;
      float* k = k_.data() + t * KV;
      float* v = v_.data() + t * KV;
      if (!L.bq.empty()) {
        add(q, L.bq.data(), q, Q);
        add(k, L.bk.data(), k, KV);
        add(v, L.bv.data(), v, KV);
      }
      if (!L.q_norm.empty()) {
        for (int64_t h = 0; h < p.n_head; ++h)
          rmsnorm(q + h * hd, L.q_norm.data(), q + h * hd, hd, eps);
        for (int64_t h = 0; h < p.n_head_kv; ++h)
          rmsnorm(k + h * hd, L.k_norm.data(), k + h * hd, hd, eps);
      }
      const float* cs = cs_base + t * p.n_rot;
      apply_rope(q, p.n_head, hd, p.n_rot, cs, p.rope_style);
      apply_rope(k, p.n_head_kv, hd, p.n_rot, cs, p.rope_style);
      const int64_t row = kv_.row(il, pos0 + t);
      std::memcpy(kc + row * KV, k, size_t(KV) * sizeof(float));
      std::memcpy(vc + row * KV, v, size_t(KV) * sizeof(float));
    });
    attention(il, n, pos0);
    invalidate_act();
    matmul(L.wo, att_.data(), n, tmp_.data());
    for_tokens(pool_, n, [&](int64_t t) {
      float* o = tmp_.data() + t * E;
      float* x = x_.data() + t * E;
      if (!L.post_attn_norm.empty()) rmsnorm(o, L.post_attn_norm.data(), o, E, eps);
      add(x, o, x, E);
      rmsnorm(x, L.ffn_norm.data(), xn_.data() + t * E, E, eps);
    });
    // --- feed-forward block ---
    invalidate_act();
    matmul_group({{&L.gate, gate_.data()}, {&L.up, up_.data()}}, xn_.data(), n);
    const bool gelu = p.arch == Arch::gemma3;
    for_tokens(pool_, n, [&](int64_t t) {
      float* g = gate_.data() + t * F;
      const float* u = up_.data() + t * F;
      if (gelu) {
        gelu_tanh_mul(g, u, g, F);
      } else {
        silu_mul(g, u, g, F);
      }
    });
    invalidate_act();
    matmul(L.down, gate_.data(), n, tmp_.data());
    for_tokens(pool_, n, [&](int64_t t) {
      float* o = tmp_.data() + t * E;
      float* x = x_.data() + t * E;
      if (!L.post_ffn_norm.empty()) rmsnorm(o, L.post_ffn_norm.data(), o, E, eps);
      add(x, o, x, E);
    });
  }

  // The span's output head over every row (a verify): only the ids come back.
  if (rows != nullptr && span_ != nullptr && span_->has_head() && n <= span_->head_rows())
    return span_->forward_head_rows(x_.data(), n, pos0, rows).ok();
  // The span's output head (last-row logits): the logits, or for a greedy step only the id, come
  // back instead of x.
  if (span_ != nullptr && span_->has_head() && !all_logits && logits != nullptr) {
    int32_t id = 0;
    if (!span_->forward_head(x_.data(), n, pos0, token ? nullptr : logits, &id).ok()) return false;
    if (token) *token = id;
    return true;
  }
  if (span_ != nullptr && !span_->forward(x_.data(), n, pos0).ok()) return false;  // x untouched

  if (logits == nullptr) return true;  // a middle chunk of a last-logits forward
  const int64_t first = all_logits ? 0 : n - 1;
  const int64_t n_rows = n - first;
  for_tokens(pool_, n_rows, [&](int64_t t) {
    rmsnorm(x_.data() + (first + t) * E, model_->output_norm().data(), xn_.data() + t * E, E, eps);
  });
  invalidate_act();
  matmul(model_->output(), xn_.data(), n_rows, logits);
  if (token) *token = greedy_token(std::span<const float>(logits, size_t(p.n_vocab)));
  for (int64_t t = 0; rows != nullptr && t < n_rows; ++t)
    rows[t] = greedy_token(std::span<const float>(logits + t * p.n_vocab, size_t(p.n_vocab)));
  return true;
}

void Session::attention(int64_t il, int64_t n, int64_t pos0) {
  const ModelParams& p = model_->params();
  const LayerWeights& L = model_->layers()[size_t(il)];
  const int64_t Q = p.q_dim(), hd = p.head_dim;
  const float* kc = kv_.k(il);
  const float* vc = kv_.v(il);
  const int64_t window = L.swa ? p.sliding_window : 0;
  auto kv_begin = [&](int64_t pos) {
    return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
  };

  if (n == 1) {  // decode: heads split across the pool
    AttentionShape s{p.n_head, p.n_head_kv, hd, p.kv_dim(), kv_.rows(il)};
    attention_one_query(q_.data(), kc, vc, s, kv_begin(pos0), pos0 + 1, p.attn_scale, att_.data(),
                        att_scratch_.data(), &pool_);
    return;
  }
  // Prefill: one unit = one token x one KV head (its group of query heads). Units are ordered
  // first, last, second, second-to-last, ... so the static split gives every thread a similar
  // mix of short (early) and long (late) causal ranges.
  const int64_t group = p.n_head / p.n_head_kv;
  const int64_t n_units = n * p.n_head_kv;
  const int64_t scratch_stride = group * n_ctx();
  AttentionShape s{group, 1, hd, p.kv_dim(), kv_.rows(il)};
  pool_.parallel_for(n_units, [&](int64_t b, int64_t e, int th) {
    float* scratch = att_scratch_.data() + th * scratch_stride;
    for (int64_t u = b; u < e; ++u) {
      const int64_t z = u / p.n_head_kv, g = u % p.n_head_kv;
      const int64_t t = (z % 2 == 0) ? z / 2 : n - 1 - z / 2;
      const int64_t pos = pos0 + t;
      const int64_t qoff = t * Q + g * group * hd;
      attention_one_query(q_.data() + qoff, kc + g * hd, vc + g * hd, s, kv_begin(pos), pos + 1,
                          p.attn_scale, att_.data() + qoff, scratch, nullptr);
    }
  });
}

namespace {

// a * b, saturating: a library caller may pass any n_ctx; the estimate must still say "too much".
uint64_t mul_sat(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
uint64_t add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

}  // namespace

SessionMemory Session::memory_estimate(const Model& model, const SessionOptions& opt) {
  const ModelParams& p = model.params();
  const uint64_t B = uint64_t(std::max<int64_t>(1, opt.n_batch));
  const uint64_t T = uint64_t(opt.n_threads > 0 ? opt.n_threads : default_thread_count());
  const uint64_t f = sizeof(float);
  SessionMemory m;
  // The constructor's allocations, one line each (kv_, att_scratch_, the work buffers, act_).
  uint64_t kv_rows = 0;
  for (int64_t r : kv_layer_rows(opt, p)) kv_rows = add_sat(kv_rows, uint64_t(r));
  m.kv = mul_sat(mul_sat(kv_rows, uint64_t(p.kv_dim())), 2 * f);
  const uint64_t group = uint64_t(p.n_head / std::max<int64_t>(1, p.n_head_kv));
  m.scores = mul_sat(mul_sat(std::max(uint64_t(p.n_head), T * group), uint64_t(opt.n_ctx)), f);
  const int64_t max_in = std::max({p.n_embd, p.q_dim(), p.n_ff});
  const uint64_t per_token = uint64_t(2 * p.n_embd + std::max(p.n_embd, p.q_dim()) + 2 * p.q_dim() +
                                      2 * p.kv_dim() + 2 * p.n_ff + 2 * p.n_rot);
  m.buffers = add_sat(mul_sat(mul_sat(B, per_token), f), uint64_t(p.n_vocab) * f);
  m.buffers = add_sat(m.buffers, mul_sat(3, act_capacity(max_in, int64_t(B))));
  if (opt.act == ActMode::f32 || opt.weights.weight_path == WeightPath::ref)
    m.buffers = add_sat(m.buffers, T * uint64_t(max_in) * f);
  // w4a8 / w4a16: 4 bits a weight plus an f16 scale and zero per group; w4a16 without
  // direct_dequant keeps a row-major duplicate.
  const WeightPath wp = opt.weights.weight_path;
  if (wp == WeightPath::w4a8 || wp == WeightPath::w4a16) {
    double elems = 0;
    for (const LayerWeights& L : model.layers())
      for (const MatrixView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down})
        elems += double(v->n_in) * double(v->n_out);
    if (opt.weights.quantize_head) elems += double(model.output().n_in) * model.output().n_out;
    const double per_weight = 0.5 + 4.0 / double(std::max(1, opt.weights.fmt.group_size));
    const double dup = wp == WeightPath::w4a16 && !opt.weights.direct_dequant ? 2.0 : 1.0;
    m.int4 = uint64_t(elems * per_weight * dup);
  }
  return m;
}

int64_t Session::decode_exact_tokens() const {
  int64_t n = std::numeric_limits<int64_t>::max();
  if (weight_path_ == WeightPath::w4a8) n = std::min(n, kW4A8AmxMinTokens);
  if (weight_path_ == WeightPath::w4a16) n = std::min(n, opt_.weights.dequant_threshold);
  if (opt_.gpu && (opt_.gpu->n_gpu_layers() > 0 || opt_.gpu->output_on_gpu()))
    n = std::min(n, opt_.gpu->backend().decode_exact_tokens());
  return std::max<int64_t>(n, 1);
}

}  // namespace fish
