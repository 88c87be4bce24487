// Flags from field-table rows, and fish generate's own table; see cli_fields.h.
#include "harness/cli_fields.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "harness/experiment.h"

namespace fish {
namespace {

// The row `name` of `table`: where a generate knob borrows its range from.
template <typename T>
const FieldSpec<T>& row(std::span<const FieldSpec<T>> table, std::string_view name) {
  const FieldSpec<T>* f = find_field(table, name);
  assert(f != nullptr);
  return *f;
}

}  // namespace

std::span<const FieldSpec<GenerateFields>> generate_fields() {
  const FieldSpec<Workload>& n_gen = row(workload_fields(), "n_gen");
  const FieldSpec<Workload>& seed = row(workload_fields(), "seed");
  const FieldSpec<Config>& n_ctx = row(config_fields(), "n_ctx");
  static const std::vector<FieldSpec<GenerateFields>> t = {
      {"n_predict", &GenerateFields::n_predict, "tokens to generate", {}, n_gen.min, n_gen.max},
      {"n_ctx",
       &GenerateFields::n_ctx,
       "context size (0: prompt + n, at most the training size)",
       {},
       0,
       n_ctx.max},
      {"temp", &GenerateFields::temp, "temperature (0: greedy)", {}, 0, 100},
      {"top_k", &GenerateFields::top_k, "top-k cut (0: none)", {}, 0, 1 << 20},
      {"top_p", &GenerateFields::top_p, "top-p (nucleus) cut (1: none)", {}, 0, 1},
      {"seed", &GenerateFields::seed, "sampling seed", {}, seed.min, seed.max},
  };
  return t;
}

std::vector<ConfigFlag> generate_config_flags() {
  // Rows that describe how fish run measures a cell, or that generate sizes itself.
  static constexpr std::string_view kNotFlags[] = {"n_ctx", "depth", "engine", "llama_bench"};
  // Spellings users had before the flags came from the table; the last spelling of a flag names
  // it in messages, so these come last.
  struct Older {
    std::string_view field, flag;
  };
  static constexpr Older kOlder[] = {{"n_threads", "--threads"}, {"draft_model", "--draft"}};
  std::vector<ConfigFlag> flags;
  for (const FieldSpec<Config>& f : config_fields()) {
    if (std::find(std::begin(kNotFlags), std::end(kNotFlags), f.name) != std::end(kNotFlags))
      continue;
    std::string flag = field_flag(f.name);
    for (const Older& o : kOlder)
      if (o.field == f.name) flag += "," + std::string(o.flag);
    flags.push_back({std::move(flag), f.name});
  }
  return flags;
}

void add_generate_config_flags(CLI::App* cmd, Config* cfg) {
  for (const ConfigFlag& f : generate_config_flags())
    add_field_option(cmd, f.flags, cfg, config_fields(), f.field);
}

std::string field_flag(std::string_view field) {
  std::string flag = "--" + std::string(field);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

SamplingParams sampling_params(const GenerateFields& g) {
  SamplingParams p;
  p.temperature = float(g.temp);
  p.top_k = int(g.top_k);
  p.top_p = float(g.top_p);
  p.seed = uint64_t(g.seed);
  return p;
}

namespace cli_detail {

std::string type_text(FieldType t, std::span<const std::string_view> allowed, double min,
                      double max) {
  if (!allowed.empty()) {
    std::string s;
    for (std::string_view a : allowed) s += fmt::format("{}{}", s.empty() ? "{" : ",", a);
    return s + "}";
  }
  const std::string range = field_detail::range_text(min, max);
  switch (t) {
    case FieldType::integer:
      return range.empty() ? "INT" : "INT " + range;
    case FieldType::number:
      return range.empty() ? "FLOAT" : "FLOAT " + range;
    case FieldType::boolean:
      return "BOOL";
    default:
      return "TEXT";
  }
}

std::string expected_text(FieldType t, std::span<const std::string_view> allowed, double min,
                          double max) {
  if (!allowed.empty()) return " (allowed: " + field_detail::allowed_list(allowed) + ")";
  if (t != FieldType::integer && t != FieldType::number) return "";
  const std::string range = field_detail::range_text(min, max);
  return range.empty() ? "" : " (expected " + range + ")";
}

Result<nlohmann::json> flag_json(FieldType t, const std::string& text, const std::string& flag,
                                 const std::string& expected) {
  switch (t) {
    case FieldType::integer: {
      int64_t x = 0;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
      if (text.empty() || ec != std::errc() || p != text.data() + text.size())
        return make_error("{}: \"{}\" is not an integer{}", flag, text, expected);
      return nlohmann::json(x);
    }
    case FieldType::number: {
      char* end = nullptr;
      const double x = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size())
        return make_error("{}: \"{}\" is not a number{}", flag, text, expected);
      // JSON has no NaN or infinity (nlohmann prints them as null): name them here.
      if (!std::isfinite(x))
        return make_error("{}: {} is not a finite number{}", flag, text, expected);
      return nlohmann::json(x);
    }
    case FieldType::boolean: {
      if (text == "true" || text == "1" || text == "on" || text == "yes")
        return nlohmann::json(true);
      if (text == "false" || text == "0" || text == "off" || text == "no")
        return nlohmann::json(false);
      return make_error("{}: \"{}\" is not a boolean (true or false)", flag, text);
    }
    case FieldType::string:
      return nlohmann::json(text);
    case FieldType::string_list:
      break;
  }
  return make_error("{}: a list is not a flag value", flag);
}

}  // namespace cli_detail
}  // namespace fish
