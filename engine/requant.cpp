// Model-level re-quantisation: candidate selection, per-tensor conversion and summaries
// (engine/requant.h).
#include "engine/requant.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "kernels/requant.h"

namespace fish {

namespace {
constexpr std::string_view kLayerMatrices[] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                               "ffn_gate", "ffn_up", "ffn_down"};

bool is_layer_matrix(std::string_view name) {
  if (!name.starts_with("blk.")) return false;
  name.remove_prefix(4);
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return false;
  for (char c : name.substr(0, dot))
    if (c < '0' || c > '9') return false;
  name.remove_prefix(dot + 1);
  for (std::string_view m : kLayerMatrices)
    if (name.size() == m.size() + 7 && name.starts_with(m) && name.ends_with(".weight"))
      return true;
  return false;
}
}  // namespace

bool is_requant_candidate(const GgufFile& f, const GgufTensorInfo& t) {
  if (t.dims.size() < 2) return false;
  if (t.name == "output.weight") return true;
  if (t.name == "token_embd.weight") return f.find_tensor("output.weight") == nullptr;
  return is_layer_matrix(t.name);
}

const std::vector<float>* RequantImportance::find(std::string_view name) const {
  for (const auto& [n, v] : columns)
    if (n == name) return &v;
  return nullptr;
}

namespace {

// Every candidate for which target(type) names a type, converted (or listed as skipped).
template <typename Target>
Result<RequantResult> requantize_candidates(const GgufFile& f, RequantResult res, Target target,
                                            ThreadPool& pool, const RequantImportance* importance) {
  using Clock = std::chrono::steady_clock;
  res.n_threads = pool.size();
  for (const GgufTensorInfo& t : f.tensors()) {
    if (!is_requant_candidate(f, t)) continue;
    const std::optional<GgmlType> to = target(t.type);
    if (!to) continue;
    RequantTensor r;
    r.name = t.name;
    r.from = t.type;
    r.to = *to;
    r.n_in = t.dims[0];
    r.n_rows = t.n_rows();
    r.bytes_from = size_t(t.n_bytes);
    const int64_t block = type_info(*to).block_elems;
    if (r.n_in % block != 0) {
      r.to = r.from;
      r.bytes_to = r.bytes_from;
      r.skipped = fmt::format("row length {} is not a multiple of {}'s block {}", r.n_in,
                              type_name(*to), block);
      res.tensors.push_back(std::move(r));
      continue;
    }
    const float* imp = nullptr;
    if (importance != nullptr && *to == GgmlType::fq3) {
      if (const std::vector<float>* cols = importance->find(t.name)) {
        if (int64_t(cols->size()) != r.n_in)
          return make_error("requant: {}: importance has {} columns, tensor {} has {}", f.path(),
                            cols->size(), t.name, r.n_in);
        imp = cols->data();
      }
    }
    r.bytes_to = size_t(r.n_rows) * row_bytes(*to, r.n_in);
    r.data.resize(r.bytes_to);
    const auto t0 = Clock::now();
    const RequantError e =
        requantize_rows(t.type, t.data, *to, r.data.data(), r.n_rows, r.n_in, pool, imp);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.relative_rms = e.relative_rms();
    res.seconds += r.seconds;
    res.n_weights += r.n_rows * r.n_in;
    res.tensors.push_back(std::move(r));
  }
  return res;
}

}  // namespace

Result<RequantResult> requantize_gguf(const GgufFile& f, int mode, ThreadPool& pool,
                                      const RequantImportance* importance) {
  if (mode < 0 || mode > kRequantModeMax)
    return make_error(
        "requant: mode {} is not one of 0..{} (0 off, 1 all -> fq3, 2 q6_k -> q4_k, "
        "3 q4_k -> fq3 and q6_k -> q4_k)",
        mode, kRequantModeMax);
  RequantResult res;
  res.mode = mode;
  return requantize_candidates(
      f, std::move(res), [mode](GgmlType t) { return requant_target(mode, t); }, pool, importance);
}

Result<RequantResult> requantize_gguf_to(const GgufFile& f, GgmlType to, ThreadPool& pool) {
  if (type_info(to).quantize_row == nullptr)
    return make_error("requant: {} cannot be written (no quantiser for it)", type_name(to));
  RequantResult res;
  res.to = to;
  return requantize_candidates(
      f, std::move(res),
      [to](GgmlType t) -> std::optional<GgmlType> {
        if (t == to || type_info(t).dequantize_row == nullptr) return std::nullopt;
        return to;
      },
      pool, nullptr);
}

std::vector<RequantPairSummary> RequantResult::summary() const {
  std::vector<RequantPairSummary> out;
  for (const RequantTensor& t : tensors) {
    if (!t.skipped.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const RequantPairSummary& s) {
      return s.from == t.from && s.to == t.to;
    });
    if (it == out.end()) {
      out.push_back({t.from, t.to, 0, INFINITY, 0, -INFINITY, 0, 0});
      it = out.end() - 1;
    }
    it->count += 1;
    it->rms_min = std::min(it->rms_min, t.relative_rms);
    it->rms_max = std::max(it->rms_max, t.relative_rms);
    it->rms_mean += t.relative_rms;
    it->bytes_from += t.bytes_from;
    it->bytes_to += t.bytes_to;
  }
  for (RequantPairSummary& s : out) s.rms_mean /= double(s.count);
  return out;
}

std::string RequantResult::describe() const {
  std::string s;
  for (const RequantPairSummary& p : summary()) {
    s += fmt::format("{}{} x {}->{} {:.0f} MB (from {:.0f})", s.empty() ? "" : ", ", p.count,
                     type_name(p.from), type_name(p.to), double(p.bytes_to) / 1e6,
                     double(p.bytes_from) / 1e6);
  }
  return s.empty() ? "nothing re-quantised" : s;
}

Status write_requantized_gguf(const GgufFile& f, const RequantResult& rq, const std::string& path) {
  GgufWriter w(f.alignment());
  for (const GgufKv& kv : f.metadata()) w.set(kv.key, kv.value);
  if (rq.to) {
    w.set("fish.requant.to", gguf_str(std::string(type_name(*rq.to))));
  } else {
    w.set("fish.requant.mode", gguf_u32(uint32_t(rq.mode)));
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    if (const RequantTensor* r = rq.find(t.name)) {
      w.add_tensor(t.name, r->to, t.dims, std::span<const uint8_t>(r->data));
    } else {
      w.add_tensor(t.name, t.type, t.dims, std::span<const uint8_t>(t.data, size_t(t.n_bytes)));
    }
  }
  return w.write(path);
}

const RequantTensor* RequantResult::find(std::string_view name) const {
  for (const RequantTensor& t : tensors)
    if (t.name == name && t.skipped.empty()) return &t;
  return nullptr;
}

}  // namespace fish
