// Model: GGUF metadata -> ModelParams, tensor views and validation; see model.h.
#include "engine/model.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "base/fault_injection.h"
#include "engine/requant.h"
#include "kernels/kquant_x16.h"
#include "kernels/registry.h"
#include "quant/dequantize.h"

namespace fish {

std::string_view arch_name(Arch a) {
  switch (a) {
    case Arch::llama:
      return "llama";
    case Arch::qwen2:
      return "qwen2";
    case Arch::qwen3:
      return "qwen3";
    case Arch::gemma3:
      return "gemma3";
  }
  return "?";
}

namespace {

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// Reads tensors by name with shape checks; errors name the file and the tensor.
class TensorReader {
 public:
  explicit TensorReader(const GgufFile& f) : f_(f) {}

  Result<const GgufTensorInfo*> find(const std::string& name, bool required) const {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (t == nullptr && required)
      return make_error("model: {}: tensor {} is missing (expected for this architecture)",
                        f_.path(), name);
    return t;
  }

  // A matrix of n_out rows x n_in columns (GGUF dims [n_in, n_out]) with a matvec kernel.
  Result<MatrixView> matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
    FISH_ASSIGN_OR_RETURN(const GgufTensorInfo* t, find(name, true));
    return view(*t, n_in, n_out);
  }

  // check_kernel=false for the embeddings of an untied model: only rows are dequantised.
  Result<MatrixView> view(const GgufTensorInfo& t, int64_t n_in, int64_t n_out,
                          bool check_kernel = true) const {
    const bool shape_ok =
        (t.dims.size() == 2 && t.dims[0] == n_in && t.dims[1] == n_out) ||
        (t.dims.size() == 3 && t.dims[0] == n_in && t.dims[1] == n_out && t.dims[2] == 1);
    if (!shape_ok)
      return make_error("model: {}: tensor {} has shape {}, expected [{}, {}]", f_.path(), t.name,
                        dims_str(t.dims), n_in, n_out);
    if (check_kernel && !has_matvec_kernel(t.type))
      return make_error("model: {}: tensor {} has type {}, which has no matvec kernel", f_.path(),
                        t.name, type_name(t.type));
    if (n_in % type_info(t.type).block_elems != 0)
      return make_error("model: {}: tensor {}: row length {} is not a multiple of {}'s block {}",
                        f_.path(), t.name, n_in, type_name(t.type), type_info(t.type).block_elems);
    MatrixView m;
    m.data = t.data;
    m.type = t.type;
    m.n_in = n_in;
    m.n_out = n_out;
    m.n_bytes = size_t(t.n_bytes);
    m.name = t.name;
    return m;
  }

  // A vector of n values (any decodable type), as f32. Empty when absent and not required.
  Result<std::vector<float>> vector(const std::string& name, int64_t n, bool required) const {
    FISH_ASSIGN_OR_RETURN(const GgufTensorInfo* t, find(name, required));
    if (t == nullptr) return std::vector<float>{};
    if (int64_t(t->n_elems) != n || t->dims[0] != n)
      return make_error("model: {}: tensor {} has shape {}, expected [{}]", f_.path(), name,
                        dims_str(t->dims), n);
    std::vector<float> v(static_cast<size_t>(n));
    FISH_TRY(dequantize_row_checked(t->type, t->data, v.data(), n, f_.path() + ": " + name));
    return v;
  }

 private:
  const GgufFile& f_;
};

// A count in [min, 2^31].
Result<int64_t> count(const GgufFile& f, const std::string& key, int64_t min = 1) {
  FISH_ASSIGN_OR_RETURN(int64_t v, f.get_int(key));
  if (v < min || v > (int64_t(1) << 31))
    return make_error("model: {}: {} = {}, expected a count in [{}, 2^31]", f.path(), key, v, min);
  return v;
}

Result<int64_t> optional_count(const GgufFile& f, const std::string& key, int64_t fallback,
                               int64_t min = 1) {
  if (f.find(key) == nullptr) return fallback;
  return count(f, key, min);
}

Result<double> optional_float(const GgufFile& f, const std::string& key, double fallback) {
  if (f.find(key) == nullptr) return fallback;
  return f.get_float(key);
}

Status read_params(const GgufFile& f, ModelParams& p) {
  FISH_ASSIGN_OR_RETURN(std::string arch, f.get_string("general.architecture"));
  if (arch == "llama") {
    p.arch = Arch::llama;
  } else if (arch == "qwen2") {
    p.arch = Arch::qwen2;
  } else if (arch == "qwen3") {
    p.arch = Arch::qwen3;
  } else if (arch == "gemma3") {
    p.arch = Arch::gemma3;
  } else {
    return make_error(
        "model: {}: general.architecture '{}' is not supported (llama, qwen2, qwen3, gemma3)",
        f.path(), arch);
  }
  const std::string k = arch + ".";
  FISH_ASSIGN_OR_RETURN(p.n_layer, count(f, k + "block_count"));
  FISH_ASSIGN_OR_RETURN(p.n_embd, count(f, k + "embedding_length"));
  FISH_ASSIGN_OR_RETURN(p.n_ff, count(f, k + "feed_forward_length"));
  FISH_ASSIGN_OR_RETURN(p.n_head, count(f, k + "attention.head_count"));
  FISH_ASSIGN_OR_RETURN(p.n_head_kv, optional_count(f, k + "attention.head_count_kv", p.n_head));
  if (p.n_head % p.n_head_kv != 0)
    return make_error("model: {}: head_count {} is not a multiple of head_count_kv {}", f.path(),
                      p.n_head, p.n_head_kv);
  if (p.n_embd % p.n_head != 0 && f.find(k + "attention.key_length") == nullptr)
    return make_error("model: {}: embedding_length {} is not a multiple of head_count {}", f.path(),
                      p.n_embd, p.n_head);
  FISH_ASSIGN_OR_RETURN(p.head_dim,
                        optional_count(f, k + "attention.key_length", p.n_embd / p.n_head));
  FISH_ASSIGN_OR_RETURN(int64_t v_dim, optional_count(f, k + "attention.value_length", p.head_dim));
  if (v_dim != p.head_dim)
    return make_error("model: {}: {}attention.value_length {} != key_length {} (not supported)",
                      f.path(), k, v_dim, p.head_dim);
  FISH_ASSIGN_OR_RETURN(p.n_rot, optional_count(f, k + "rope.dimension_count", p.head_dim));
  if (p.n_rot % 2 != 0 || p.n_rot > p.head_dim)
    return make_error("model: {}: {}rope.dimension_count {} must be even and <= head dim {}",
                      f.path(), k, p.n_rot, p.head_dim);
  FISH_ASSIGN_OR_RETURN(p.n_ctx_train, optional_count(f, k + "context_length", 4096));
  FISH_ASSIGN_OR_RETURN(double eps, f.get_float(k + "attention.layer_norm_rms_epsilon"));
  p.norm_eps = float(eps);
  FISH_ASSIGN_OR_RETURN(double base, optional_float(f, k + "rope.freq_base", 10000.0));
  p.rope_base = float(base);
  p.rope_base_swa = p.rope_base;

  // Rope scaling: linear divides positions by the factor; others change the frequencies in ways
  // not implemented here (Llama 3's "llama3" scaling arrives as the rope_freqs tensor instead).
  if (f.find(k + "rope.scaling.type") != nullptr) {
    FISH_ASSIGN_OR_RETURN(std::string type, f.get_string(k + "rope.scaling.type"));
    if (type == "linear") {
      FISH_ASSIGN_OR_RETURN(double factor, f.get_float(k + "rope.scaling.factor"));
      if (!(factor > 0.0))
        return make_error("model: {}: {}rope.scaling.factor {} must be > 0", f.path(), k, factor);
      p.rope_scale = float(1.0 / factor);
    } else if (type != "none") {
      return make_error(
          "model: {}: {}rope.scaling.type '{}' is not supported (none, linear; llama3-style "
          "scaling comes as rope_freqs.weight)",
          f.path(), k, type);
    }
  }

  p.attn_scale = 1.0f / std::sqrt(float(p.head_dim));
  switch (p.arch) {
    case Arch::llama:
      p.rope_style = RopeStyle::normal;
      break;
    case Arch::qwen2:
    case Arch::qwen3:
      p.rope_style = RopeStyle::neox;
      break;
    case Arch::gemma3: {
      p.rope_style = RopeStyle::neox;
      p.embd_scale = std::sqrt(float(p.n_embd));
      // llama.cpp: sliding layers use base 10000 and no scaling; the pattern is 5 sliding + 1
      // global. Gemma 3 27B scales q by 1/sqrt(n_embd / n_head) (its query_pre_attn_scalar).
      FISH_ASSIGN_OR_RETURN(p.sliding_window,
                            optional_count(f, k + "attention.sliding_window", 0, 0));
      FISH_ASSIGN_OR_RETURN(p.swa_period,
                            optional_count(f, k + "attention.sliding_window_pattern", 6));
      p.rope_base_swa = 10000.0f;
      if (p.n_layer == 62) p.attn_scale = 1.0f / std::sqrt(float(p.n_embd / p.n_head));
      if (f.find(k + "final_logit_softcapping") != nullptr && p.sliding_window == 0)
        return make_error(
            "model: {}: gemma3 without sliding window (final logit softcapping) is "
            "not supported",
            f.path());
      break;
    }
  }
  return Status::success();
}

}  // namespace

Result<std::shared_ptr<const Model>> Model::load(const std::string& path,
                                                 const ModelLoadOptions& opt) {
  inject_fault("model_load");  // tests of the exception boundaries (base/fault_injection.h)
  FISH_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(path));
  return from_gguf(std::move(file), opt);
}

Result<std::shared_ptr<const Model>> Model::from_gguf(GgufFile file, const ModelLoadOptions& opt) {
  std::shared_ptr<Model> m(new Model());
  m->file_ = std::move(file);
  const GgufFile& f = m->file_;
  ModelParams& p = m->p_;
  FISH_TRY(read_params(f, p));
  TensorReader tr(f);

  // Embeddings: [n_embd, n_vocab]; n_vocab comes from the tensor (vocab_size is optional).
  FISH_ASSIGN_OR_RETURN(const GgufTensorInfo* te, tr.find("token_embd.weight", true));
  if (te->dims.size() != 2 || te->dims[0] != p.n_embd)
    return make_error("model: {}: tensor token_embd.weight has shape {}, expected [{}, n_vocab]",
                      f.path(), dims_str(te->dims), p.n_embd);
  p.n_vocab = te->dims[1];
  if (type_info(te->type).dequantize_row == nullptr)
    return make_error("model: {}: tensor token_embd.weight has type {}, which FISH cannot decode",
                      f.path(), type_name(te->type));
  FISH_ASSIGN_OR_RETURN(const GgufTensorInfo* out, tr.find("output.weight", false));
  p.tied_output = out == nullptr;
  FISH_ASSIGN_OR_RETURN(m->token_embd_, tr.view(*te, p.n_embd, p.n_vocab, p.tied_output));

  if (out != nullptr) {
    FISH_ASSIGN_OR_RETURN(m->output_, tr.view(*out, p.n_embd, p.n_vocab));
  } else {
    m->output_ = m->token_embd_;
  }
  FISH_ASSIGN_OR_RETURN(m->output_norm_, tr.vector("output_norm.weight", p.n_embd, true));
  FISH_ASSIGN_OR_RETURN(m->rope_freqs_, tr.vector("rope_freqs.weight", p.n_rot / 2, false));

  const bool qk_norm = p.arch == Arch::qwen3 || p.arch == Arch::gemma3;
  const bool post_norms = p.arch == Arch::gemma3;
  const bool qkv_bias = p.arch == Arch::qwen2;
  m->layers_.resize(size_t(p.n_layer));
  for (int64_t il = 0; il < p.n_layer; ++il) {
    LayerWeights& L = m->layers_[size_t(il)];
    const std::string b = "blk." + std::to_string(il) + ".";
    FISH_ASSIGN_OR_RETURN(L.attn_norm, tr.vector(b + "attn_norm.weight", p.n_embd, true));
    FISH_ASSIGN_OR_RETURN(L.wq, tr.matrix(b + "attn_q.weight", p.n_embd, p.q_dim()));
    FISH_ASSIGN_OR_RETURN(L.wk, tr.matrix(b + "attn_k.weight", p.n_embd, p.kv_dim()));
    FISH_ASSIGN_OR_RETURN(L.wv, tr.matrix(b + "attn_v.weight", p.n_embd, p.kv_dim()));
    FISH_ASSIGN_OR_RETURN(L.wo, tr.matrix(b + "attn_output.weight", p.q_dim(), p.n_embd));
    FISH_ASSIGN_OR_RETURN(L.bq, tr.vector(b + "attn_q.bias", p.q_dim(), qkv_bias));
    FISH_ASSIGN_OR_RETURN(L.bk, tr.vector(b + "attn_k.bias", p.kv_dim(), qkv_bias));
    FISH_ASSIGN_OR_RETURN(L.bv, tr.vector(b + "attn_v.bias", p.kv_dim(), qkv_bias));
    if (qk_norm) {
      FISH_ASSIGN_OR_RETURN(L.q_norm, tr.vector(b + "attn_q_norm.weight", p.head_dim, true));
      FISH_ASSIGN_OR_RETURN(L.k_norm, tr.vector(b + "attn_k_norm.weight", p.head_dim, true));
    }
    if (post_norms) {
      FISH_ASSIGN_OR_RETURN(L.post_attn_norm,
                            tr.vector(b + "post_attention_norm.weight", p.n_embd, true));
      FISH_ASSIGN_OR_RETURN(L.post_ffn_norm, tr.vector(b + "post_ffw_norm.weight", p.n_embd, true));
    }
    FISH_ASSIGN_OR_RETURN(L.ffn_norm, tr.vector(b + "ffn_norm.weight", p.n_embd, true));
    FISH_ASSIGN_OR_RETURN(L.gate, tr.matrix(b + "ffn_gate.weight", p.n_embd, p.n_ff));
    FISH_ASSIGN_OR_RETURN(L.up, tr.matrix(b + "ffn_up.weight", p.n_embd, p.n_ff));
    FISH_ASSIGN_OR_RETURN(L.down, tr.matrix(b + "ffn_down.weight", p.n_ff, p.n_embd));
    L.swa = p.is_swa_layer(il);
    L.rope_base = L.swa ? p.rope_base_swa : p.rope_base;
    L.rope_scale = L.swa ? 1.0f : p.rope_scale;
  }
  if (opt.requant != 0) {
    ThreadPool pool(opt.n_threads);
    FISH_ASSIGN_OR_RETURN(RequantResult rq, requantize_gguf(f, opt.requant, pool, opt.importance));
    m->requant_ = std::make_shared<const RequantResult>(std::move(rq));
    auto repoint = [&](MatrixView& mv) {
      if (const RequantTensor* t = m->requant_->find(mv.name)) {
        mv.data = t->data.data();
        mv.type = t->to;
        mv.n_bytes = t->bytes_to;
      }
    };
    repoint(m->token_embd_);
    repoint(m->output_);
    for (LayerWeights& L : m->layers_)
      for (MatrixView* mv : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) repoint(*mv);
  }
  if (opt.kquant_repack) FISH_TRY(m->repack_kquants(opt));
  for (const LayerWeights& L : m->layers_)
    for (const MatrixView* mv : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down})
      m->weight_bytes_per_token_ += mv->n_bytes;
  m->weight_bytes_per_token_ += m->output_.n_bytes;
  m->total_weight_bytes_ =
      m->weight_bytes_per_token_ + (p.tied_output ? 0 : m->token_embd_.n_bytes);
  return std::shared_ptr<const Model>(std::move(m));
}

Status Model::repack_kquants(const ModelLoadOptions& opt) {
  // The matrices to pack, one per distinct tensor (a tied head is the embedding's view), and
  // their offsets in one arena: a decode step streams it whole, so it goes on huge pages. The
  // arena is mapped now and touched only where a matrix is packed.
  std::vector<MatrixView*> views;
  if (!p_.tied_output) views.push_back(&output_);
  for (LayerWeights& L : layers_)
    for (MatrixView* mv : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down})
      views.push_back(mv);
  if (p_.tied_output) views.push_back(&token_embd_);
  std::unordered_map<const void*, size_t> first;  // GGUF bytes -> index in x16_jobs_
  size_t total = 0;
  for (MatrixView* mv : views) {
    if (!kx16_supported(mv->type) || mv->n_in % kx16_block_elems(mv->type) != 0) continue;
    if (mv->type == GgmlType::q8_0 && !opt.repack_q8_0) continue;
    if (auto it = first.find(mv->data); it != first.end()) {
      x16_jobs_[it->second].also.push_back(mv);
      continue;
    }
    const size_t bytes = kx16_matrix_bytes(mv->type, mv->n_out, mv->n_in);
    first[mv->data] = x16_jobs_.size();
    // A tied head's copy serves the output matmul: the output view decides where it runs.
    const MatrixView* decide = mv == &token_embd_ ? &output_ : mv;
    x16_jobs_.push_back({mv, decide, {}, total, bytes, false});
    if (mv == &token_embd_) x16_jobs_.back().also.push_back(&output_);  // the tied head's view
    total += (bytes + 4095) / 4096 * 4096;                              // each matrix page aligned
  }
  if (x16_jobs_.empty()) return {};
  FISH_ASSIGN_OR_RETURN(const bool huge, huge_pages_wanted());
  FISH_ASSIGN_OR_RETURN(x16_, HugeBuffer::allocate(total, huge));
  keep_gguf_ = opt.keep_gguf;
  repack_.huge_requested = x16_.huge_requested();
  repack_.deferred = int(x16_jobs_.size());
  if (opt.defer_x16) return {};
  return pack_x16([](const MatrixView&) { return true; }, opt.n_threads);
}

uint64_t Model::x16_pending_bytes(const std::function<bool(const MatrixView&)>& cpu) const {
  std::lock_guard<std::mutex> lock(x16_mu_);
  uint64_t b = 0;
  for (const X16Job& j : x16_jobs_)
    if (!j.done && cpu(*j.decide)) b += j.bytes;
  return b;
}

bool Model::x16_deferred() const {
  std::lock_guard<std::mutex> lock(x16_mu_);
  return repack_.deferred > 0;
}

Status Model::pack_x16(const std::function<bool(const MatrixView&)>& cpu, int n_threads) const {
  std::lock_guard<std::mutex> lock(x16_mu_);
  if (repack_.deferred == 0) return {};
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<ThreadPool> pool;
  const MappedFile* map = file_.mapping();
  for (X16Job& j : x16_jobs_) {
    if (j.done || !cpu(*j.decide)) continue;
    if (!pool) pool = std::make_unique<ThreadPool>(n_threads);
    MatrixView& mv = *j.mv;
    uint8_t* dst = x16_.data() + j.off;
    const int64_t panels = (mv.n_out + kKx16Rows - 1) / kKx16Rows;
    pool->parallel_for(panels, [&](int64_t p0, int64_t p1, int) {
      kx16_pack(mv.type, mv.data, mv.n_out, mv.n_in, dst, p0, p1);
    });
    j.done = true;
    --repack_.deferred;
    ++repack_.matrices;
    repack_.packed_bytes += j.bytes;
    repack_.gguf_bytes += mv.n_bytes;
    const auto* d = static_cast<const uint8_t*>(mv.data);
    if (!keep_gguf_ && map != nullptr && d >= map->data() &&
        d + mv.n_bytes <= map->data() + map->size()) {
      map->evict(size_t(d - map->data()), mv.n_bytes);
      repack_.released_bytes += mv.n_bytes;
    }
    mv.x16 = dst;
    for (MatrixView* v : j.also) v->x16 = dst;
  }
  if (!pool) return {};  // nothing packed this time
  repack_.huge_bytes = x16_.huge_bytes();
  repack_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {};
}

std::string KquantRepackStats::describe() const {
  return fmt::format(
      "{} matrices, {:.1f} MB x16 (GGUF {:.1f} MB, {:.1f} MB released), {}, {:.2f} s{}", matrices,
      double(packed_bytes) / 1e6, double(gguf_bytes) / 1e6, double(released_bytes) / 1e6,
      huge_requested ? fmt::format("{:.1f} MB on huge pages", double(huge_bytes) / 1e6)
                     : std::string("huge pages off"),
      seconds,
      deferred > 0 ? fmt::format("; {} left as GGUF rows (on the GPU)", deferred) : std::string());
}

void Model::embed(int32_t token, float* out) const {
  const size_t row = row_bytes(token_embd_.type, p_.n_embd);
  if (token_embd_.x16 != nullptr) {  // the GGUF row from the x16 copy (its pages are released)
    thread_local std::vector<uint8_t> buf;
    buf.resize(row);
    kx16_unpack_row(token_embd_.type, token_embd_.x16, p_.n_embd, token, buf.data());
    type_info(token_embd_.type).dequantize_row(buf.data(), out, p_.n_embd);
  } else {
    const auto* src = static_cast<const uint8_t*>(token_embd_.data) + size_t(token) * row;
    type_info(token_embd_.type).dequantize_row(src, out, p_.n_embd);
  }
  if (p_.embd_scale != 1.0f)
    for (int64_t i = 0; i < p_.n_embd; ++i) out[i] *= p_.embd_scale;
}

}  // namespace fish
