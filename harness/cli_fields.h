// Command-line flags driven by the field tables (engine/config.h, harness/experiment.h): a flag
// of fish generate and friends reads its type, range, allowed values and default from the same
// row the experiment format uses, so `--n-batch 10000000` and `"n_batch": 10000000` are refused
// with the same range: "--n-batch: 10000000 is out of range (expected 1 to 65536)". NaN and
// infinities are refused by name ("--temp: nan is not a finite number (expected 0 to 100)").
//
// fish generate's own knobs (tokens to generate, context, sampling) are one more table,
// generate_fields(), whose n_predict / n_ctx / seed ranges are copied from the workload and
// Config rows they mean.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/config.h"
#include "engine/sampling.h"

namespace fish {

struct GenerateFields {
  int64_t n_predict = 32;  // tokens to generate
  int64_t n_ctx = 0;       // 0: prompt + n_predict, at most the training context
  double temp = 0.0;       // 0: greedy
  int64_t top_k = 40;      // 0: no top-k cut
  double top_p = 0.95;     // 1: no nucleus cut
  int64_t seed = 0;
};
std::span<const FieldSpec<GenerateFields>> generate_fields();
SamplingParams sampling_params(const GenerateFields& g);

namespace cli_detail {
// The JSON value `text` stands for as a value of field type `t` (integer, number, boolean,
// string); errors name `flag`, what is wrong and `expected` (" (expected 0 to 100)" or empty).
Result<nlohmann::json> flag_json(FieldType t, const std::string& text, const std::string& flag,
                                 const std::string& expected);
// The help's value column: "INT 1 to 65536", "{int8,f32}", "FLOAT 0 to 100", "BOOL", "TEXT".
std::string type_text(FieldType t, std::span<const std::string_view> allowed, double min,
                      double max);
// " (expected 1 to 65536)", " (allowed: int8, f32)" or "" for a row without bounds.
std::string expected_text(FieldType t, std::span<const std::string_view> allowed, double min,
                          double max);
}  // namespace cli_detail

// Adds the option `flags` (CLI11 spelling, e.g. "-n,--n-predict") bound to the member of `*obj`
// that row `name` of `table` describes: its text is checked as field_set checks JSON and stored;
// the help shows `doc` (the row's doc when empty) and, as the default, the value *obj holds now.
// Precondition: the row exists and `obj` outlives the parse.
template <typename T>
CLI::Option* add_field_option(CLI::App* cmd, const std::string& flags, T* obj,
                              std::span<const FieldSpec<T>> table, std::string_view name,
                              std::string doc = "") {
  const FieldSpec<T>* f = find_field(table, name);
  assert(f != nullptr);
  const std::string flag = flags.substr(flags.rfind(',') + 1);
  CLI::Option* o = cmd->add_option_function<std::string>(
      flags,
      [obj, f, flag](const std::string& text) {
        const std::string expected =
            cli_detail::expected_text(f->type(), f->allowed, f->min, f->max);
        Result<nlohmann::json> v = cli_detail::flag_json(f->type(), text, flag, expected);
        if (!v.ok()) throw CLI::ValidationError(v.error().message);
        if (Status st = field_set(*obj, *f, v.value(), flag); !st.ok())
          throw CLI::ValidationError(st.error().message);
      },
      doc.empty() ? std::string(f->doc) : doc);
  const nlohmann::json def = field_get(*obj, *f);  // the value before parsing is the default
  o->default_str(def.is_string() ? def.get<std::string>() : def.dump());
  o->type_name(cli_detail::type_text(f->type(), f->allowed, f->min, f->max));
  return o;
}

// One flag of a command bound to a field-table row: CLI11 spelling, row name, help (empty: the
// row's doc).
struct FieldFlag {
  const char* flags;
  const char* field;
  const char* doc;
};

// add_field_option for each of `flags`, in order.
template <typename T>
void add_field_options(CLI::App* cmd, T* obj, std::span<const FieldSpec<T>> table,
                       std::span<const FieldFlag> flags) {
  for (const FieldFlag& f : flags) add_field_option(cmd, f.flags, obj, table, f.field, f.doc);
}

// The flag of a field-table row: "--n-batch" for n_batch (fish bench and fish generate).
std::string field_flag(std::string_view field);

// A command-line flag generated from a Config row: CLI11 spelling and the row's name.
struct ConfigFlag {
  std::string flags;  // "--n-batch", "--n-threads,--threads"
  std::string_view field;
};
// fish generate's Config flags: one per config_fields() row, in table order, spelled
// `--<name with - for _>` (n_threads also `--threads`, its older spelling), except the rows a
// single generation has no use for: n_ctx (generate's own --n-ctx sizes the context from the
// prompt), depth, engine and llama_bench (fish run's measurement). A new Config field is a new
// flag with its row's doc, range and default.
std::vector<ConfigFlag> generate_config_flags();
// add_field_option for each of generate_config_flags(), bound to *cfg (fish generate's flags).
void add_generate_config_flags(CLI::App* cmd, Config* cfg);

}  // namespace fish
