// Config field table and the non-template helpers of the field machinery; see config.h.
#include "engine/config.h"

#include "kernels/cpu_features.h"

namespace fish {

std::string_view field_type_name(FieldType t) {
  switch (t) {
    case FieldType::integer:
      return "integer";
    case FieldType::number:
      return "number";
    case FieldType::boolean:
      return "boolean";
    case FieldType::string:
      return "string";
    case FieldType::string_list:
      return "list of strings";
  }
  return "?";
}

std::span<const FieldSpec<Config>> config_fields() {
  // One row per knob: name, member, doc, allowed values, range. Keep in column order.
  static const std::vector<FieldSpec<Config>> table = {
      {"n_ctx", &Config::n_ctx, "KV cache positions (must hold n_prompt + n_gen)", {}, 1, 1 << 20},
      {"n_threads",
       &Config::n_threads,
       "CPU threads (0: FISH_THREADS or all hardware threads)",
       {},
       0,
       4096},
      {"act",
       &Config::act,
       "activations: int8 (quantised per row, integer dots) or f32 (dequantised weights, f32 "
       "dots; the reference)",
       {"int8", "f32"}},
      {"n_batch", &Config::n_batch, "prefill tokens per matrix x matrix pass", {}, 1, 1 << 16},
      {"isa",
       &Config::isa,
       "CPU kernel ISA: auto (best the CPU runs, capped by FISH_ISA) or a level; a level the CPU "
       "cannot run fails the cell",
       {"auto", "scalar", "avx2", "avx512"}},
  };
  return table;
}

const FieldSpec<Config>* find_config_field(std::string_view name) {
  return find_field(config_fields(), name);
}

Result<SessionOptions> session_options(const Config& c) {
  SessionOptions o;
  o.n_ctx = c.n_ctx;
  o.n_threads = int(c.n_threads);
  o.n_batch = c.n_batch;
  if (c.act == "int8") {
    o.act = ActMode::int8;
  } else if (c.act == "f32") {
    o.act = ActMode::f32;
  } else {
    return make_error("config: act \"{}\" is not allowed (allowed: int8, f32)", c.act);
  }
  if (c.isa == "auto") {
    o.isa = best_isa();
  } else {
    std::optional<Isa> isa = parse_isa_name(c.isa);
    if (!isa)
      return make_error("config: isa \"{}\" is not allowed (allowed: auto, scalar, avx2, avx512)",
                        c.isa);
    if (!isa_supported(*isa))
      return make_error("config: isa {}: this CPU/build cannot run it (best here: {})", c.isa,
                        isa_name(best_isa()));
    o.isa = *isa;
  }
  return o;
}

namespace field_detail {

std::string describe_json(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::string:
      return "string " + v.dump();
    case nlohmann::json::value_t::array:
      return v.empty() ? "an empty list" : "a list";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "boolean " + v.dump();
    default:
      return v.dump();
  }
}

std::string allowed_list(std::span<const std::string_view> allowed) {
  std::string s;
  for (std::string_view a : allowed) s += fmt::format("{}{}", s.empty() ? "" : ", ", a);
  return s;
}

std::string range_text(double min, double max) {
  const bool has_min = std::isfinite(min), has_max = std::isfinite(max);
  // Integral bounds print as integers (4294967295, not 4.294967295e+09).
  auto text = [](double x) {
    return x == std::floor(x) && std::fabs(x) < 1e18 ? fmt::format("{:.0f}", x)
                                                     : fmt::format("{}", x);
  };
  if (has_min && has_max) return text(min) + " to " + text(max);
  if (has_min) return ">= " + text(min);
  if (has_max) return "<= " + text(max);
  return "";
}

}  // namespace field_detail
}  // namespace fish
