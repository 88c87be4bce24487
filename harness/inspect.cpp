#include "harness/inspect.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace fish {
namespace {

nlohmann::ordered_json value_json(const GgufValue& v, size_t max_items);

nlohmann::ordered_json array_json(const GgufArray& a, size_t max_items) {
  if (a.items.size() <= max_items) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const GgufValue& x : a.items) out.push_back(value_json(x, max_items));
    return out;
  }
  nlohmann::ordered_json head = nlohmann::ordered_json::array();
  for (size_t i = 0; i < std::min<size_t>(4, a.items.size()); ++i)
    head.push_back(value_json(a.items[i], max_items));
  return {{"type", gguf_value_type_name(a.elem_type)}, {"count", a.items.size()}, {"head", head}};
}

nlohmann::ordered_json value_json(const GgufValue& v, size_t max_items) {
  return std::visit(
      [&](const auto& x) -> nlohmann::ordered_json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::shared_ptr<GgufArray>>) {
          return array_json(*x, max_items);
        } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
          return int(x);
        } else {
          return x;
        }
      },
      v.v);
}

std::string string_or(const GgufFile& f, std::string_view key, std::string fallback) {
  auto r = f.get_string(key);
  return r.ok() ? r.value() : fallback;
}

size_t array_len(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find(key);
  const GgufArray* a = v ? v->as_array() : nullptr;
  return a ? a->items.size() : 0;
}

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", b);
}

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += fmt::format("{}{}", i ? " x " : "", dims[i]);
  return s;
}

struct Totals {
  size_t n_tensors = 0;
  uint64_t n_elems = 0;
  uint64_t n_bytes = 0;
};

std::map<std::string, Totals> totals_by_type(const GgufFile& f) {
  std::map<std::string, Totals> t;
  for (const GgufTensorInfo& ti : f.tensors()) {
    Totals& x = t[std::string(type_name(ti.type))];
    x.n_tensors += 1;
    x.n_elems += ti.n_elems;
    x.n_bytes += ti.n_bytes;
  }
  return t;
}

}  // namespace

std::string json_text(const nlohmann::ordered_json& j, int indent) {
  // GGUF strings are bytes: invalid UTF-8 is replaced rather than failing the whole dump.
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

nlohmann::ordered_json inspect_json(const GgufFile& f, size_t max_array_items) {
  nlohmann::ordered_json j;
  j["file"] = f.path();
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  j["architecture"] = string_or(f, "general.architecture", "");
  j["tokenizer"] = {{"model", string_or(f, "tokenizer.ggml.model", "")},
                    {"pre", string_or(f, "tokenizer.ggml.pre", "")},
                    {"vocab_size", array_len(f, "tokenizer.ggml.tokens")}};
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (const GgufKv& kv : f.metadata()) meta[kv.key] = value_json(kv.value, max_array_items);
  j["metadata"] = meta;
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  uint64_t n_elems = 0, n_bytes = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    tensors.push_back({{"name", t.name},
                       {"type", type_name(t.type)},
                       {"dims", t.dims},
                       {"n_elems", t.n_elems},
                       {"n_bytes", t.n_bytes},
                       {"offset", t.offset},
                       {"file_offset", f.data_offset() + t.offset}});
    n_elems += t.n_elems;
    n_bytes += t.n_bytes;
  }
  j["tensors"] = tensors;
  nlohmann::ordered_json totals = nlohmann::ordered_json::object();
  for (const auto& [name, t] : totals_by_type(f))
    totals[name] = {{"n_tensors", t.n_tensors}, {"n_elems", t.n_elems}, {"n_bytes", t.n_bytes}};
  j["totals"] = totals;
  j["n_elems"] = n_elems;
  j["n_bytes"] = n_bytes;
  j["bits_per_weight"] = n_elems ? 8.0 * double(n_bytes) / double(n_elems) : 0.0;
  return j;
}

std::string inspect_text(const GgufFile& f) {
  std::string out;
  const std::string arch = string_or(f, "general.architecture", "(none)");
  out += fmt::format("file          {}\n", f.path());
  out += fmt::format("gguf          v{}, alignment {}, data at byte {}\n", f.version(),
                     f.alignment(), f.data_offset());
  out += fmt::format("name          {}\n", string_or(f, "general.name", "(none)"));
  out += fmt::format("architecture  {}\n", arch);
  // Hyper-parameters: every scalar key under the architecture's prefix.
  const std::string prefix = arch + ".";
  for (const GgufKv& kv : f.metadata()) {
    if (kv.key.rfind(prefix, 0) != 0) continue;
    out += fmt::format("  {:<40} {}\n", kv.key.substr(prefix.size()),
                       json_text(value_json(kv.value, 8)));
  }
  out += fmt::format("tokenizer     {} (pre {}), vocabulary {}, {} merges\n",
                     string_or(f, "tokenizer.ggml.model", "(none)"),
                     string_or(f, "tokenizer.ggml.pre", "(none)"),
                     array_len(f, "tokenizer.ggml.tokens"), array_len(f, "tokenizer.ggml.merges"));
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_space_prefix"}) {
    if (const GgufValue* v = f.find(key))
      out += fmt::format("  {:<40} {}\n", std::string_view(key).substr(15),
                         json_text(value_json(*v, 8)));
  }

  out += fmt::format("\n{:<36} {:<6} {:>22} {:>12} {:>14}\n", "tensor", "type", "shape", "bytes",
                     "offset");
  uint64_t n_elems = 0, n_bytes = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    out += fmt::format("{:<36} {:<6} {:>22} {:>12} {:>14}\n", t.name, type_name(t.type),
                       dims_string(t.dims), t.n_bytes, t.offset);
    n_elems += t.n_elems;
    n_bytes += t.n_bytes;
  }
  out += fmt::format("\n{:<8} {:>8} {:>16} {:>12} {:>8}\n", "type", "tensors", "elements", "bytes",
                     "bpw");
  for (const auto& [name, t] : totals_by_type(f)) {
    out += fmt::format("{:<8} {:>8} {:>16} {:>12} {:>8.3f}\n", name, t.n_tensors, t.n_elems,
                       human_bytes(double(t.n_bytes)),
                       t.n_elems ? 8.0 * double(t.n_bytes) / double(t.n_elems) : 0.0);
  }
  out += fmt::format("{:<8} {:>8} {:>16} {:>12} {:>8.3f}\n", "total", f.tensors().size(), n_elems,
                     human_bytes(double(n_bytes)),
                     n_elems ? 8.0 * double(n_bytes) / double(n_elems) : 0.0);
  return out;
}

}  // namespace fish
