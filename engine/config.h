// Config: every knob of one run of the engine, and the one field table that describes it.
//
// The table (config_fields()) is the single list of knobs: each row names the JSON key (which is
// also the result-table column), the Config member, a one-line doc, the allowed values or range.
// Experiment parsing, validation, `fish run --help-fields`, the result rows' "config" object and
// cell ids are all driven by it; adding a knob is one member below plus one table row in
// config.cpp. A field's default is its member initializer here.
//
// The same FieldSpec machinery describes the experiment file's other sections (workload,
// measure, quality, output in harness/experiment.h), so every key of the file is parsed,
// validated and documented the same way.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/session.h"

namespace fish {

struct Config {
  int64_t n_ctx = 4096;      // KV cache positions
  int64_t n_threads = 0;     // 0: FISH_THREADS or all hardware threads
  std::string act = "int8";  // activations: int8 (quantised) | f32 (reference)
  int64_t n_batch = 256;     // prefill tokens per matrix x matrix pass
  std::string isa = "auto";  // kernel ISA cap: auto | scalar | avx2 | avx512
  int64_t requant = 0;       // load-time re-quantisation mode 0..3 (engine/requant.h)
  // Q4_K / Q5_K / Q6_K / Q8_0 matrices repacked at load into the x16 interleaved layout
  // (kernels/kquant_x16.h): auto | on | off | keep (on, and the GGUF pages kept resident).
  std::string kquant_repack = "auto";
  // CPU weight path and its int4 knobs (engine/weight_path.h: WeightPathOptions).
  std::string weight_path = "auto";  // auto | gguf | w4a8 | w4a16 | ref
  int64_t group_size = 64;           // int4 group: 32 | 64 | 128
  std::string zero_point = "asym";   // sym | asym | fp
  bool quantize_head = true;
  bool quantize_embedding = false;
  bool prefill_dequant = true;
  bool direct_dequant = true;
  int64_t dequant_threshold = 8;  // tokens
  // GPU path (stage 1 placement, engine/gpu_placement.h).
  int64_t gpu_layers = -1;     // -1: as many as fit, else a cap (FISH_GPU_LAYERS caps it too)
  int64_t vram_budget_mb = 0;  // 0: the backend's ceiling (FISH_VRAM_BUDGET_MB or 85% of free)
  int64_t gpu_requant = -1;    // device copy's re-quantisation mode 0..3; -1: FISH_GPU_REQUANT
  bool gpu_span = true;        // stage 2 layer span (false: stage 1 per-matmul offload)
  bool gpu_pipeline = true;    // pipelined greedy decode on a whole-model span (layer_span.h)
  // Sliding-window layers' KV (Gemma 3): ring (window + n_batch rows) | full (n_ctx rows).
  std::string swa_kv = "ring";
  // The engine that measures the cell: fish, or llama.cpp's llama-bench as a subprocess
  // (harness/peer_llama.h); llama_bench names its binary (a path or cpu | vulkan | cuda: the
  // scripts/peer/build_llama_cpp.sh build of that backend; empty: FISH_LLAMA_BENCH).
  // -1: decode follows the prompt (FISH's measurement). >= 0: llama-bench's -d: the KV cache
  // holds `depth` positions (an untimed prefill) before the timed prefill and, afresh, before
  // the timed decode.
  int64_t depth = -1;
  std::string engine = "fish";
  std::string llama_bench;
  // Greedy speculative decoding (engine/speculative.h, docs/speculative.md): off | draft (a
  // draft model, draft_model) | lookup (prompt n-gram lookup); draft_n tokens per verify.
  std::string speculative = "off";
  std::string draft_model;  // GGUF path of the draft model ("" = none)
  int64_t draft_n = 4;
};

// Order matches FieldSpec::Member's alternatives.
enum class FieldType { integer, number, boolean, string, string_list };
std::string_view field_type_name(FieldType t);  // "integer", "number", ... as in messages/docs

// A value of an integer field that names something rather than measures it: a mode (requant 2 =
// "q6_k->q4_k") or a sentinel (vram_budget_mb 0 = the backend's budget). Reports draw a field
// with names on a categorical axis: the numbers in order, then the sentinels marked `last`.
struct ValueName {
  int64_t value = 0;
  std::string_view name;
  bool last = false;  // placed after every other value (0 = no limit of the field's own)
};

template <typename T>
struct FieldSpec {
  using Member = std::variant<int64_t T::*, double T::*, bool T::*, std::string T::*,
                              std::vector<std::string> T::*>;
  std::string_view name;  // JSON key and result column
  Member member;
  std::string_view doc;  // one line
  // string / string_list / integer: allowed values (empty: any; integers as decimal text)
  std::vector<std::string_view> allowed;
  double min = -std::numeric_limits<double>::infinity();  // integer / number: inclusive range
  double max = std::numeric_limits<double>::infinity();

  FieldType type() const { return FieldType(member.index()); }
};

// The Config table, in column order.
std::span<const FieldSpec<Config>> config_fields();
// The values of Config field `name` that name something (ValueName; empty for most fields).
std::span<const ValueName> config_value_names(std::string_view name);
// nullptr when `name` is not a Config field.
const FieldSpec<Config>* find_config_field(std::string_view name);

// Config -> SessionOptions (CPU only: the GPU placement is made by the caller, it needs the loaded
// model and the backend). Errors: an isa this CPU (or a FISH_SCALAR_ONLY build) cannot run,
// naming the best it can; a weight_path / group_size / zero_point outside the table's values.
Result<SessionOptions> session_options(const Config& c);

// Config -> what the gpu path asks of the backend: gpu_layers capped by FISH_GPU_LAYERS,
// vram_budget_mb (0: the backend's ceiling), gpu_requant (-1: FISH_GPU_REQUANT), n_threads for
// re-quantising uploads, and a span over n_ctx positions and n_batch tokens unless gpu_span is
// false or FISH_GPU_SPAN=0. Errors: FISH_GPU_LAYERS is not a non-negative integer.
// Precondition: c's fields are within the table's ranges (parsing checks them).
Result<GpuRequest> gpu_request(const Config& c);

// One run resolved from its Config, once, for every command that runs the engine (fish run and
// fish bench cells, fish generate): how to load the model, the session's options and, on the
// gpu path, what to place. Placement (it needs the loaded model) fills session.gpu.
struct SessionPlan {
  ModelLoadOptions load;
  SessionOptions session;
  std::optional<GpuRequest> gpu;  // nullopt: the cpu path
  // The session's context, and the span's with it (a command that sizes n_ctx from its prompt).
  void set_n_ctx(int64_t n_ctx);
};
// The plan of a cpu path run, or with gpu_path its gpu_request too.
// Errors: as model_load_options, session_options and (gpu_path) gpu_request.
Result<SessionPlan> plan_session(const Config& c, bool gpu_path);

// Config -> the model load options (requant; kquant_repack; n_threads for the conversion). Cells
// whose load options differ need their own model load. Errors: requant outside 0..3, a
// kquant_repack outside the table's values. kquant_repack auto is on where the kernels' ISA
// (Config isa, FISH_ISA) is avx2 or avx512 and weight_path is auto or gguf; at avx512 it leaves
// Q8_0 matrices on their per-row kernels (faster decode there: docs/cpu-kernels.md).
Result<ModelLoadOptions> model_load_options(const Config& c);

// --- Field-table machinery (templates: the experiment sections use it too) ---

// The JSON value of one field.
template <typename T>
nlohmann::json field_get(const T& obj, const FieldSpec<T>& f) {
  return std::visit([&](auto m) { return nlohmann::json(obj.*m); }, f.member);
}

// Every field of `obj`, keyed by name (nlohmann's object keeps keys sorted).
template <typename T>
nlohmann::json fields_to_json(const T& obj, std::span<const FieldSpec<T>> table) {
  nlohmann::json j = nlohmann::json::object();
  for (const FieldSpec<T>& f : table) j[std::string(f.name)] = field_get(obj, f);
  return j;
}

namespace field_detail {
std::string describe_json(const nlohmann::json& v);  // `"abc"` / `1.5` / `a list`, for messages
std::string allowed_list(std::span<const std::string_view> allowed);  // "int8, f32"
std::string range_text(double min, double max);                       // ">= 1", "0 to 100"
}  // namespace field_detail

// Checks `v` against the field (type, allowed values, range) and stores it. `path` names the
// place in messages: "quickstart.json: defaults.n_ctx: wrong type: expected integer, found
// string \"4k\"". Integers accept only JSON integers; numbers accept integers too.
template <typename T>
Status field_set(T& obj, const FieldSpec<T>& f, const nlohmann::json& v, const std::string& path) {
  using field_detail::describe_json;
  auto wrong_type = [&] {
    std::string hint = v.is_array() && f.type() != FieldType::string_list
                           ? " (a list is a sweep axis: put it under \"sweep\")"
                           : "";
    return make_error("{}: wrong type: expected {}, found {}{}", path, field_type_name(f.type()),
                      describe_json(v), hint);
  };
  auto check_allowed = [&](const std::string& s) -> Status {
    if (f.allowed.empty()) return Status::success();
    for (std::string_view a : f.allowed)
      if (a == s) return Status::success();
    return make_error("{}: {} is not allowed (allowed: {})", path, v.dump(),
                      field_detail::allowed_list(f.allowed));
  };
  auto check_range = [&](double x) -> Status {
    if (x >= f.min && x <= f.max) return Status::success();
    return make_error("{}: {} is out of range (expected {})", path, describe_json(v),
                      field_detail::range_text(f.min, f.max));
  };
  switch (f.type()) {
    case FieldType::integer: {
      if (!v.is_number_integer()) return wrong_type();
      const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)
                            ? INT64_MAX
                            : v.get<int64_t>();
      FISH_TRY(check_range(double(x)));
      FISH_TRY(check_allowed(std::to_string(x)));
      obj.*std::get<0>(f.member) = x;
      return Status::success();
    }
    case FieldType::number: {
      if (!v.is_number()) return wrong_type();
      const double x = v.get<double>();
      FISH_TRY(check_range(x));
      obj.*std::get<1>(f.member) = x;
      return Status::success();
    }
    case FieldType::boolean:
      if (!v.is_boolean()) return wrong_type();
      obj.*std::get<2>(f.member) = v.get<bool>();
      return Status::success();
    case FieldType::string: {
      if (!v.is_string()) return wrong_type();
      const std::string s = v.get<std::string>();
      FISH_TRY(check_allowed(s));
      obj.*std::get<3>(f.member) = s;
      return Status::success();
    }
    case FieldType::string_list: {
      if (!v.is_array()) return wrong_type();
      std::vector<std::string> out;
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string())
          return make_error("{}[{}]: wrong type: expected string, found {}", path, i,
                            describe_json(v[i]));
        const std::string s = v[i].get<std::string>();
        if (!f.allowed.empty()) {
          bool found = false;
          for (std::string_view a : f.allowed) found |= a == s;
          if (!found)
            return make_error("{}[{}]: \"{}\" is not allowed (allowed: {})", path, i, s,
                              field_detail::allowed_list(f.allowed));
        }
        out.push_back(s);
      }
      obj.*std::get<4>(f.member) = std::move(out);
      return Status::success();
    }
  }
  return make_error("{}: unhandled field type", path);
}

// nullptr when absent.
template <typename T>
const FieldSpec<T>* find_field(std::span<const FieldSpec<T>> table, std::string_view name) {
  for (const FieldSpec<T>& f : table)
    if (f.name == name) return &f;
  return nullptr;
}

// Applies every key of the JSON object `j` to `out`. Each problem (not an object, unknown key,
// bad value) is appended to `errors` as one message naming `path`.key; valid keys still apply.
template <typename T>
void fields_from_json(const nlohmann::json& j, std::span<const FieldSpec<T>> table,
                      const std::string& path, T& out, std::vector<std::string>& errors) {
  if (!j.is_object()) {
    errors.push_back(fmt::format("{}: wrong type: expected an object, found {}", path,
                                 field_detail::describe_json(j)));
    return;
  }
  for (const auto& [key, v] : j.items()) {
    const FieldSpec<T>* f = find_field(table, key);
    if (!f) {
      std::vector<std::string_view> names;
      for (const FieldSpec<T>& g : table) names.push_back(g.name);
      errors.push_back(fmt::format("{}.{}: unknown key (known: {})", path, key,
                                   field_detail::allowed_list(names)));
      continue;
    }
    Status st = field_set(out, *f, v, path + "." + key);
    if (!st.ok()) errors.push_back(st.error().message);
  }
}

// A Markdown table of the fields: key, type, default (from `defaults`), allowed values, doc.
template <typename T>
std::string fields_help(std::span<const FieldSpec<T>> table, const T& defaults) {
  std::string out = "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
  for (const FieldSpec<T>& f : table) {
    std::string allowed = field_detail::allowed_list(f.allowed);
    if ((f.type() == FieldType::integer && f.allowed.empty()) || f.type() == FieldType::number)
      allowed = field_detail::range_text(f.min, f.max);
    if (f.type() == FieldType::boolean) allowed = "true, false";
    out += fmt::format("| `{}` | {} | `{}` | {} | {} |\n", f.name, field_type_name(f.type()),
                       field_get(defaults, f).dump(), allowed.empty() ? "any" : allowed, f.doc);
  }
  return out;
}

}  // namespace fish
