// Experiment files: parsing, validation and cell expansion; see experiment.h.
#include "harness/experiment.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/path_checks.h"
#include "base/sha256.h"
#include "engine/model_shapes.h"
#include "engine/synthetic_model.h"
#include "harness/json_strict.h"

namespace fish {
namespace {

using field_detail::describe_json;
using nlohmann::json;

constexpr int64_t kMaxAxisValues = 100000;  // a range string longer than this is a typo

const std::vector<TopLevelKey> kTopLevel = {
    {"schema_version", "required; must be 1"},
    {"name", "required; [A-Za-z0-9_.-]+, names the results files (NAME.jsonl, .csv, .md)"},
    {"description", "optional free text"},
    {"model",
     "required; a GGUF path or a list of them (a list is the outermost sweep axis; relative "
     "paths are resolved against the working directory, then FISH_MODELS_DIR by file name); "
     "\"synthetic:SHAPE:TYPE[:SEED]\" is a fish make-model file, written once into "
     "$FISH_SYNTHETIC_DIR (default ~/.cache/fish/synthetic)"},
    {"defaults", "Config fields for every cell (table below); unset fields keep their default"},
    {"sweep",
     "Config field -> list of values, or an integer range string \"A-B\", \"A-B+STEP\", "
     "\"A-B*FACTOR\"; the cells are the cross product"},
    {"zip", "list of groups (lists of sweep axis names) whose values move together, not crossed"},
    {"exclude",
     "list of rules {axis: value or [values], ...}; a cell matching every key of a rule is "
     "dropped (keys: swept Config fields or model)"},
    {"workload", "what one measurement runs (table below)"},
    {"measure", "the measurement protocol (table below)"},
    {"quality", "quality metrics against a reference configuration (table below)"},
    {"output", "where results go (table below)"},
};

}  // namespace

std::span<const TopLevelKey> experiment_top_level_keys() {
  return kTopLevel;
}

std::span<const FieldSpec<Workload>> workload_fields() {
  static const std::vector<FieldSpec<Workload>> t = {
      {"n_prompt", &Workload::n_prompt, "prompt tokens per prefill measurement", {}, 1, 1 << 20},
      {"n_gen", &Workload::n_gen, "greedy decode steps per measurement", {}, 1, 1 << 20},
      {"seed",
       &Workload::seed,
       "seed of the random prompt tokens (when no text)",
       {},
       0,
       4294967295.0},
      {"text",
       &Workload::text,
       "prompt = the first n_prompt tokens of this text file (repeated if short); empty: random "
       "token ids from seed (synthetic models have no real vocabulary)",
       {}},
  };
  return t;
}

std::span<const FieldSpec<MeasureSpec>> measure_fields() {
  static const std::vector<FieldSpec<MeasureSpec>> t = {
      {"paths",
       &MeasureSpec::paths,
       "compute paths per cell, one row each, measured back to back (gpu needs a Vulkan backend; "
       "without one its rows are status skipped)",
       {"cpu", "gpu"}},
      {"warmup", &MeasureSpec::warmup, "unrecorded repetitions per path first", {}, 0, 1000},
      {"repetitions", &MeasureSpec::repetitions, "recorded repetitions per path", {}, 1, 100000},
      {"interleave",
       &MeasureSpec::interleave,
       "alternate the paths within each repetition (else all of one path, then the next)",
       {}},
      {"order",
       &MeasureSpec::order,
       "the order cells are measured in: interleave (each repetition visits every cell, round r "
       "of all cells before round r + 1; a visit opens the cell afresh after `warmup` unrecorded "
       "repetitions; rows are written in the last round), fixed (plan order, all repetitions of a "
       "cell back to back) or shuffle (fixed's visits in an order drawn from `seed`); "
       "docs/measurement.md#cell-order says what each costs and why interleave is the default",
       {"fixed", "shuffle", "interleave"}},
      {"seed",
       &MeasureSpec::seed,
       "seed of the shuffle order (order shuffle only): the same seed gives the same order",
       {},
       0,
       4294967295.0},
      {"peer_block",
       &MeasureSpec::peer_block,
       "engine llama.cpp cells right after their FISH cell (the same fields but engine / "
       "llama_bench) take turns with its repetitions, this many per llama-bench call (each call "
       "loads the model again); 0: a llama.cpp cell runs all its repetitions in one call after "
       "the FISH cell",
       {},
       0,
       1000},
      {"max_cv",
       &MeasureSpec::max_cv,
       "a speed metric with a coefficient of variation above this gets the validity flag noisy",
       {},
       0,
       100},
      {"stream_MiB",
       &MeasureSpec::stream_MiB,
       "buffer of the stream-read bandwidth measured at the start (>> last-level cache)",
       {},
       1,
       1 << 20},
      {"stream_passes",
       &MeasureSpec::stream_passes,
       "timed passes of the stream read",
       {},
       1,
       1000},
  };
  return t;
}

std::span<const FieldSpec<QualitySpec>> quality_fields() {
  static const std::vector<FieldSpec<QualitySpec>> t = {
      {"metrics",
       &QualitySpec::metrics,
       "top1, kl (mean/p99/max of KL(ref, cell) in nats) and ppl: teacher-forced over the text; "
       "greedy_exact: prompts whose greedy continuation equals the reference's",
       {"top1", "kl", "ppl", "greedy_exact"}},
      {"source",
       &QualitySpec::source,
       "what top1, kl and ppl teacher-force: text (the first n_tokens tokens of text) or greedy "
       "(the reference's greedy continuation of n_tokens tokens after prompt_file's first line)",
       {"text", "greedy"}},
      {"text", &QualitySpec::text, "text for top1, kl and ppl (source text)", {}},
      {"n_tokens",
       &QualitySpec::n_tokens,
       "tokens scored: of the text, or generated (source greedy)",
       {},
       2,
       1 << 20},
      {"prompt_file",
       &QualitySpec::prompt_file,
       "one prompt per line, for greedy_exact (and source greedy: the first)",
       {}},
      {"greedy_tokens",
       &QualitySpec::greedy_tokens,
       "greedy tokens compared per prompt",
       {},
       1,
       4096},
      {"chunk",
       &QualitySpec::chunk,
       "tokens per teacher-forced forward of top1/kl/ppl and per prompt chunk of the greedy "
       "runs (<= 4: a GPU placement runs its matvec kernels, not the tiled ones)",
       {},
       1,
       4096},
  };
  return t;
}

std::span<const FieldSpec<OutputSpec>> output_fields() {
  static const std::vector<FieldSpec<OutputSpec>> t = {
      {"dir", &OutputSpec::dir, "results directory (fish run --out overrides)", {}},
      {"formats",
       &OutputSpec::formats,
       "renderings written next to NAME.jsonl (always written) after the run",
       {"csv", "md"}},
  };
  return t;
}

bool QualitySpec::wants(std::string_view metric) const {
  return std::find(metrics.begin(), metrics.end(), metric) != metrics.end();
}

Result<std::vector<int64_t>> parse_range(std::string_view s) {
  auto bad = [&](std::string_view why) {
    return make_error("bad range \"{}\": {} (expected \"A-B\", \"A-B+STEP\" or \"A-B*FACTOR\")", s,
                      why);
  };
  auto number = [](std::string_view t, int64_t& out) {
    if (t.empty()) return false;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    return ec == std::errc() && p == t.data() + t.size() && out >= 0;
  };
  const size_t dash = s.find('-');
  if (dash == std::string_view::npos) return bad("no '-'");
  const size_t op = s.find_first_of("+*", dash + 1);
  int64_t a = 0, b = 0, step = 1;
  if (!number(s.substr(0, dash), a)) return bad("start is not a non-negative integer");
  if (!number(s.substr(dash + 1, op == std::string_view::npos ? s.npos : op - dash - 1), b))
    return bad("end is not a non-negative integer");
  const bool geometric = op != std::string_view::npos && s[op] == '*';
  if (op != std::string_view::npos && !number(s.substr(op + 1), step))
    return bad("step is not a non-negative integer");
  if (a > b) return bad("start is above end");
  if (!geometric && step < 1) return bad("step must be >= 1");
  if (geometric && step < 2) return bad("factor must be >= 2");
  if (geometric && a < 1) return bad("a geometric range must start at >= 1");
  std::vector<int64_t> v;
  for (int64_t x = a; x <= b; x = geometric ? x * step : x + step) {
    v.push_back(x);
    if (int64_t(v.size()) > kMaxAxisValues) return bad("more than 100000 values");
    if (x > INT64_MAX / 4) break;
  }
  return v;
}

std::string SyntheticModelSpec::file_name() const {
  return fmt::format("{}-{}-s{}.gguf", shape, type, seed);
}

Result<std::optional<SyntheticModelSpec>> parse_synthetic_model(std::string_view model) {
  constexpr std::string_view kPrefix = "synthetic:";
  if (model.substr(0, kPrefix.size()) != kPrefix) return std::optional<SyntheticModelSpec>();
  std::vector<std::string> parts;
  std::string_view rest = model.substr(kPrefix.size());
  while (true) {
    const size_t colon = rest.find(':');
    parts.emplace_back(rest.substr(0, colon));
    if (colon == std::string_view::npos) break;
    rest = rest.substr(colon + 1);
  }
  if (parts.size() < 2 || parts.size() > 3)
    return make_error("\"{}\": expected synthetic:SHAPE:TYPE or synthetic:SHAPE:TYPE:SEED", model);
  SyntheticModelSpec s{parts[0], parts[1], 1};
  if (!find_model_shape(s.shape))
    return make_error("\"{}\": unknown shape \"{}\" (known: {})", model, s.shape,
                      model_shape_names());
  if (!parse_file_type(s.type).ok()) {
    std::string types;
    for (std::string_view t : file_type_names())
      types += fmt::format("{}{}", types.empty() ? "" : ", ", t);
    return make_error("\"{}\": unknown file type \"{}\" (known: {})", model, s.type, types);
  }
  if (parts.size() == 3) {
    auto [p, ec] = std::from_chars(parts[2].data(), parts[2].data() + parts[2].size(), s.seed);
    if (ec != std::errc() || p != parts[2].data() + parts[2].size())
      return make_error("\"{}\": seed \"{}\" is not a non-negative integer", model, parts[2]);
  }
  return std::optional<SyntheticModelSpec>(s);
}

namespace {

// Parses one section through its field table.
template <typename T>
void parse_section(const json& root, const char* key, std::span<const FieldSpec<T>> table,
                   const std::string& label, T& out, std::vector<std::string>& errors) {
  if (!root.contains(key)) return;
  fields_from_json(root[key], table, label + ": " + key, out, errors);
}

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
      return false;
  return true;
}

}  // namespace

namespace {

// Dimensions of the cross product: each zip group or lone axis, at the position of its first
// axis; each dimension lists the axes it moves, which share one value index.
std::vector<std::vector<const SweepAxis*>> sweep_dims(const Experiment& e) {
  std::vector<std::vector<const SweepAxis*>> dims;
  std::set<std::string> done;
  for (const SweepAxis& a : e.sweep) {
    if (done.count(a.name)) continue;
    std::vector<const SweepAxis*> dim = {&a};
    done.insert(a.name);
    for (const auto& group : e.zip) {
      if (std::find(group.begin(), group.end(), a.name) == group.end()) continue;
      for (const std::string& other : group) {
        if (done.count(other)) continue;
        for (const SweepAxis& b : e.sweep)
          if (b.name == other) dim.push_back(&b);
        done.insert(other);
      }
    }
    dims.push_back(dim);
  }
  return dims;
}

// "2 models x n_ctx 10 x act+n_threads 3"
std::string sweep_dims_text(const Experiment& e) {
  std::string s = fmt::format("{} model{}", e.models.size(), e.models.size() == 1 ? "" : "s");
  for (const auto& dim : sweep_dims(e)) {
    std::string names;
    for (const SweepAxis* a : dim) names += (names.empty() ? "" : "+") + a->name;
    s += fmt::format(" x {} {}", names, dim[0]->values.size());
  }
  return s;
}

}  // namespace

Result<Experiment> parse_experiment(std::string_view text, std::string_view label_sv,
                                    int64_t max_cells) {
  const std::string label(label_sv);
  FISH_TRY(check_json_strict(text, label));
  json root;
  nlohmann::ordered_json ordered;
  try {
    root = json::parse(text);
    ordered = nlohmann::ordered_json::parse(text);
  } catch (const json::parse_error& e) {
    return make_error("{}: not valid JSON: {}", label, e.what());
  }
  if (!root.is_object())
    return make_error("{}: wrong type: expected a JSON object at the top level, found {}", label,
                      describe_json(root));

  Experiment e;
  e.file_path = label;
  std::vector<std::string> errors;
  auto err = [&](std::string msg) { errors.push_back(std::move(msg)); };

  for (const auto& [key, v] : root.items()) {
    (void)v;
    bool known = false;
    for (const TopLevelKey& k : kTopLevel) known |= k.name == key;
    if (!known) {
      std::string names;
      for (const TopLevelKey& k : kTopLevel)
        names += fmt::format("{}{}", names.empty() ? "" : ", ", k.name);
      err(fmt::format("{}: {}: unknown key (known: {})", label, key, names));
    }
  }

  // schema_version, name, description
  if (!root.contains("schema_version")) {
    err(fmt::format("{}: schema_version: missing (expected 1)", label));
  } else if (!root["schema_version"].is_number_integer() ||
             root["schema_version"].get<int64_t>() != kExperimentSchemaVersion) {
    err(fmt::format("{}: schema_version: expected {}, found {}", label, kExperimentSchemaVersion,
                    describe_json(root["schema_version"])));
  }
  if (!root.contains("name")) {
    err(fmt::format("{}: name: missing (expected a string of [A-Za-z0-9_.-])", label));
  } else if (!root["name"].is_string() || !valid_name(root["name"].get<std::string>())) {
    err(fmt::format("{}: name: expected a non-empty string of [A-Za-z0-9_.-], found {}", label,
                    describe_json(root["name"])));
  } else {
    e.name = root["name"].get<std::string>();
  }
  if (root.contains("description")) {
    if (root["description"].is_string())
      e.description = root["description"].get<std::string>();
    else
      err(fmt::format("{}: description: wrong type: expected string, found {}", label,
                      describe_json(root["description"])));
  }

  // model
  if (!root.contains("model")) {
    err(fmt::format("{}: model: missing (expected a GGUF path or a list of them)", label));
  } else {
    const json& m = root["model"];
    if (m.is_string()) {
      e.models.push_back(m.get<std::string>());
      auto syn = parse_synthetic_model(e.models.back());
      if (!syn.ok()) err(fmt::format("{}: model: {}", label, syn.error().message));
    } else if (m.is_array()) {
      if (m.empty()) err(fmt::format("{}: model: empty sweep (a list needs at least one)", label));
      for (size_t i = 0; i < m.size(); ++i) {
        if (!m[i].is_string())
          err(fmt::format("{}: model[{}]: wrong type: expected string, found {}", label, i,
                          describe_json(m[i])));
        else
          e.models.push_back(m[i].get<std::string>());
      }
      std::set<std::string> seen(e.models.begin(), e.models.end());
      for (size_t i = 0; i < e.models.size(); ++i) {
        auto syn = parse_synthetic_model(e.models[i]);
        if (!syn.ok()) err(fmt::format("{}: model[{}]: {}", label, i, syn.error().message));
      }
      if (seen.size() != e.models.size())
        err(fmt::format("{}: model: a path is listed twice", label));
    } else {
      err(fmt::format("{}: model: wrong type: expected a string or a list, found {}", label,
                      describe_json(m)));
    }
  }

  // defaults
  if (root.contains("defaults"))
    fields_from_json(root["defaults"], config_fields(), label + ": defaults", e.defaults, errors);

  // sweep, in file order
  if (root.contains("sweep")) {
    if (!ordered["sweep"].is_object()) {
      err(fmt::format("{}: sweep: wrong type: expected an object, found {}", label,
                      describe_json(root["sweep"])));
    } else {
      for (const auto& [key, ov] : ordered["sweep"].items()) {
        const std::string path = fmt::format("{}: sweep.{}", label, key);
        const FieldSpec<Config>* f = find_config_field(key);
        if (!f) {
          std::vector<std::string_view> names;
          for (const auto& g : config_fields()) names.push_back(g.name);
          err(fmt::format("{}: unknown key (known: {})", path, field_detail::allowed_list(names)));
          continue;
        }
        const json v = json::parse(ov.dump());
        SweepAxis axis{key, {}};
        if (v.is_string() && f->type() == FieldType::integer) {
          auto r = parse_range(v.get<std::string>());
          if (!r.ok()) {
            err(fmt::format("{}: {}", path, r.error().message));
            continue;
          }
          for (int64_t x : r.value()) axis.values.push_back(x);
        } else if (v.is_array()) {
          axis.values.assign(v.begin(), v.end());
        } else {
          err(fmt::format("{}: wrong type: expected a list{}, found {}", path,
                          f->type() == FieldType::integer ? " or a range string \"A-B+STEP\"" : "",
                          describe_json(v)));
          continue;
        }
        if (axis.values.empty()) {
          err(fmt::format("{}: empty sweep (an axis needs at least one value)", path));
          continue;
        }
        bool ok = true;
        std::set<std::string> seen;
        for (size_t i = 0; i < axis.values.size(); ++i) {
          Config scratch;
          Status st = field_set(scratch, *f, axis.values[i], fmt::format("{}[{}]", path, i));
          if (!st.ok()) {
            err(st.error().message);
            ok = false;
          } else if (!seen.insert(axis.values[i].dump()).second) {
            err(fmt::format("{}[{}]: {} is listed twice", path, i, axis.values[i].dump()));
            ok = false;
          }
        }
        if (ok) e.sweep.push_back(std::move(axis));
      }
    }
  }
  auto find_axis = [&](const std::string& name) -> const SweepAxis* {
    for (const SweepAxis& a : e.sweep)
      if (a.name == name) return &a;
    return nullptr;
  };

  // zip
  if (root.contains("zip")) {
    const json& z = root["zip"];
    std::set<std::string> used;
    if (!z.is_array()) {
      err(fmt::format("{}: zip: wrong type: expected a list of lists of axis names, found {}",
                      label, describe_json(z)));
    } else {
      for (size_t g = 0; g < z.size(); ++g) {
        const std::string path = fmt::format("{}: zip[{}]", label, g);
        if (!z[g].is_array() || z[g].size() < 2) {
          err(fmt::format("{}: expected a list of at least 2 sweep axis names, found {}", path,
                          describe_json(z[g])));
          continue;
        }
        std::vector<std::string> group;
        size_t len = 0;
        bool ok = true;
        for (size_t i = 0; i < z[g].size(); ++i) {
          const json& n = z[g][i];
          const SweepAxis* a = n.is_string() ? find_axis(n.get<std::string>()) : nullptr;
          if (!a) {
            err(fmt::format("{}[{}]: {} is not a sweep axis", path, i, describe_json(n)));
            ok = false;
            continue;
          }
          if (!used.insert(a->name).second) {
            err(fmt::format("{}[{}]: axis {} is already in a zip group", path, i, a->name));
            ok = false;
          }
          if (group.empty()) {
            len = a->values.size();
          } else if (a->values.size() != len) {
            err(fmt::format("{}: axes of unequal length ({} has {} values, {} has {})", path,
                            group[0], len, a->name, a->values.size()));
            ok = false;
          }
          group.push_back(a->name);
        }
        if (ok) e.zip.push_back(std::move(group));
      }
    }
  }

  // exclude
  if (root.contains("exclude")) {
    const json& x = root["exclude"];
    if (!x.is_array()) {
      err(fmt::format("{}: exclude: wrong type: expected a list of objects, found {}", label,
                      describe_json(x)));
    } else {
      for (size_t r = 0; r < x.size(); ++r) {
        const std::string path = fmt::format("{}: exclude[{}]", label, r);
        if (!x[r].is_object() || x[r].empty()) {
          err(fmt::format("{}: expected a non-empty object {{axis: value or [values]}}, found {}",
                          path, describe_json(x[r])));
          continue;
        }
        bool ok = true;
        for (const auto& [key, v] : x[r].items()) {
          std::vector<json> axis_values;
          if (key == "model") {
            for (const std::string& m : e.models) axis_values.push_back(m);
            if (e.models.size() < 2) {
              err(fmt::format("{}.model: model is not swept (a single model)", path));
              ok = false;
              continue;
            }
          } else if (const SweepAxis* a = find_axis(key)) {
            axis_values = a->values;
          } else {
            err(fmt::format("{}.{}: not a sweep axis (exclude keys: the swept fields{})", path, key,
                            e.models.size() > 1 ? " or model" : ""));
            ok = false;
            continue;
          }
          const std::vector<json> wanted =
              v.is_array() ? std::vector<json>(v.begin(), v.end()) : std::vector<json>{v};
          if (wanted.empty()) {
            err(fmt::format("{}.{}: an empty list matches nothing", path, key));
            ok = false;
          }
          for (const json& w : wanted) {
            if (std::find(axis_values.begin(), axis_values.end(), w) == axis_values.end()) {
              std::string vals;
              for (const json& av : axis_values)
                vals += fmt::format("{}{}", vals.empty() ? "" : ", ", av.dump());
              err(fmt::format("{}.{}: {} is not a value of the axis (values: {})", path, key,
                              w.dump(), vals));
              ok = false;
            }
          }
        }
        if (ok) e.exclude.push_back(x[r]);
      }
    }
  }

  parse_section(root, "workload", workload_fields(), label, e.workload, errors);
  parse_section(root, "measure", measure_fields(), label, e.measure, errors);
  parse_section(root, "output", output_fields(), label, e.output, errors);
  e.quality.reference = e.defaults;
  if (root.contains("quality")) {
    json q = root["quality"];
    if (q.is_object() && q.contains("reference")) {
      json r = q["reference"];
      if (r.is_object() && r.contains("model")) {
        const json& m = r["model"];
        if (!m.is_string() || m.get<std::string>().empty()) {
          err(
              fmt::format("{}: quality.reference.model: expected a GGUF path or "
                          "synthetic:SHAPE:TYPE, got {}",
                          label, m.dump()));
        } else if (m.get<std::string>().rfind("synthetic:", 0) == 0 &&
                   !parse_synthetic_model(m.get<std::string>()).ok()) {
          err(fmt::format("{}: quality.reference.model: {}", label,
                          parse_synthetic_model(m.get<std::string>()).error().message));
        } else {
          e.quality.reference_model = m.get<std::string>();
        }
        r.erase("model");
      }
      fields_from_json(r, config_fields(), label + ": quality.reference", e.quality.reference,
                       errors);
      q.erase("reference");
    }
    fields_from_json(q, quality_fields(), label + ": quality", e.quality, errors);
  }
  if (root.contains("measure") && root["measure"].is_object() && root["measure"].contains("seed") &&
      e.measure.order != "shuffle")
    err(fmt::format("{}: measure.seed: only used by order shuffle (order is {})", label,
                    e.measure.order));
  if (e.measure.paths.empty())
    err(fmt::format("{}: measure.paths: empty (allowed: cpu, gpu)", label));
  {
    std::set<std::string> p(e.measure.paths.begin(), e.measure.paths.end());
    if (p.size() != e.measure.paths.size())
      err(fmt::format("{}: measure.paths: a path is listed twice", label));
  }

  // The cross product is counted, not built: a 10^10-cell sweep is refused at once.
  if (errors.empty() && count_cells(e) > uint64_t(max_cells))
    err(
        fmt::format("{}: sweep: {} cells ({}), over the limit of {} cells (fish run --max-cells N "
                    "raises it)",
                    label, count_cells(e), sweep_dims_text(e), max_cells));
  else if (errors.empty() && expand_cells(e).empty())
    err(fmt::format("{}: exclude: empty sweep: the exclude rules remove every cell", label));
  if (!errors.empty()) {
    std::string msg =
        fmt::format("{}: {} problem{}:", label, errors.size(), errors.size() == 1 ? "" : "s");
    for (const std::string& m : errors) msg += "\n  " + m;
    return Error{msg + "\n(fish run --help-fields lists every key)"};
  }
  return e;
}

Result<Experiment> load_experiment(const std::string& path, int64_t max_cells) {
  FISH_ASSIGN_OR_RETURN(const std::string text,
                        read_regular_file(path, kMaxJsonFileBytes, "an experiment file"));
  FISH_ASSIGN_OR_RETURN(Experiment e, parse_experiment(text, path, max_cells));
  e.file_path = path;
  e.file_sha256 = sha256_hex(text);
  return e;
}

uint64_t count_cells(const Experiment& e) {
  uint64_t n = e.models.size();
  for (const auto& dim : sweep_dims(e))
    if (__builtin_mul_overflow(n, uint64_t(dim[0]->values.size()), &n)) return UINT64_MAX;
  return n;
}

std::vector<Cell> expand_cells(const Experiment& e) {
  const std::vector<std::vector<const SweepAxis*>> dims = sweep_dims(e);
  std::vector<Cell> cells;
  for (size_t mi = 0; mi < e.models.size(); ++mi) {
    std::vector<size_t> idx(dims.size(), 0);
    while (true) {
      Cell c;
      c.model_index = mi;
      c.config = e.defaults;
      for (size_t d = 0; d < dims.size(); ++d)
        for (const SweepAxis* a : dims[d]) {
          const json& v = a->values[idx[d]];
          Status st = field_set(c.config, *find_config_field(a->name), v, a->name);
          assert(st.ok());  // validated by parse_experiment
          (void)st;
          c.axes.emplace_back(a->name, v);
        }
      // Axes back in file order for display.
      std::vector<std::pair<std::string, json>> ordered_axes;
      for (const SweepAxis& a : e.sweep)
        for (const auto& kv : c.axes)
          if (kv.first == a.name) ordered_axes.push_back(kv);
      c.axes = std::move(ordered_axes);

      bool excluded = false;
      for (const json& rule : e.exclude) {
        bool all = true;
        for (const auto& [key, v] : rule.items()) {
          json value;
          if (key == "model") {
            value = e.models[mi];
          } else {
            for (const auto& kv : c.axes)
              if (kv.first == key) value = kv.second;
          }
          const bool hit =
              v.is_array() ? std::find(v.begin(), v.end(), value) != v.end() : v == value;
          all = all && hit;
        }
        excluded = excluded || all;
      }
      if (!excluded) {
        c.index = int64_t(cells.size());
        cells.push_back(std::move(c));
      }
      // Odometer: the last dimension moves fastest; stop when every dimension wrapped.
      bool carry = true;
      for (size_t d = dims.size(); d > 0 && carry;) {
        --d;
        carry = ++idx[d] >= dims[d][0]->values.size();
        if (carry) idx[d] = 0;
      }
      if (carry) break;
    }
  }
  return cells;
}

nlohmann::json workload_json(const Workload& w) {
  json j{{"n_prompt", w.n_prompt},
         {"n_gen", w.n_gen},
         {"seed", w.seed},
         {"prompt_source", w.text.empty() ? std::string("random") : "text:" + w.text}};
  return j;
}

nlohmann::json quality_json(const QualitySpec& q) {
  if (q.metrics.empty()) return nullptr;
  json j = fields_to_json(q, quality_fields());
  if (q.source == "text") j.erase("source");
  if (q.chunk == QualitySpec{}.chunk) j.erase("chunk");
  j["reference"] = cell_id_config(q.reference);
  // Only when set, so the cells of every experiment without it keep their ids.
  if (!q.reference_model.empty()) j["reference"]["model"] = q.reference_model;
  return j;
}

nlohmann::json cell_id_config(const Config& c) {
  json j = fields_to_json(c, config_fields());
  // Fields added after the committed results (the peer-engine fields, kquant_repack, the
  // speculative fields, gpu_pipeline) are hashed only away from their defaults: every earlier
  // cell keeps its id (joins, --resume, the CI baseline).
  if (c.depth == Config{}.depth) j.erase("depth");
  if (c.gpu_pipeline == Config{}.gpu_pipeline) j.erase("gpu_pipeline");
  if (c.engine == Config{}.engine) j.erase("engine");
  if (c.llama_bench == Config{}.llama_bench) j.erase("llama_bench");
  if (c.kquant_repack == Config{}.kquant_repack) j.erase("kquant_repack");
  for (const char* k : {"speculative", "draft_model", "draft_n"})
    if (j[k] == field_get(Config{}, *find_config_field(k))) j.erase(k);
  return j;
}

std::string cell_id(const Experiment& e, const Cell& c, std::string_view model_sha256) {
  const json j = {
      {"harness_version", std::string(kHarnessVersion)}, {"model", e.models[c.model_index]},
      {"model_sha256", std::string(model_sha256)},       {"config", cell_id_config(c.config)},
      {"workload", workload_json(e.workload)},           {"quality", quality_json(e.quality)}};
  return sha256_hex(j.dump()).substr(0, 16);
}

std::string experiment_format_help() {
  std::string out =
      "An experiment file is a JSON object (schema_version 1). Unknown keys are errors; every "
      "problem is reported with its JSON path and the expected or allowed values.\n\n"
      "| key | meaning |\n|---|---|\n";
  for (const TopLevelKey& k : kTopLevel) out += fmt::format("| `{}` | {} |\n", k.name, k.doc);
  out += "\n#### Config fields (`defaults`, `sweep`, `quality.reference`)\n\n";
  out += fields_help(config_fields(), Config{});
  out += "\n#### `workload`\n\n" + fields_help(workload_fields(), Workload{});
  out += "\n#### `measure`\n\n" + fields_help(measure_fields(), MeasureSpec{});
  out += "\n#### `quality`\n\n" + fields_help(quality_fields(), QualitySpec{});
  out +=
      "| `reference` | object | `{}` | Config fields | the reference configuration (defaults + "
      "these), run on the cpu path once per model |\n"
      "| `reference.model` | string | `\"\"` | GGUF path or synthetic:SHAPE:TYPE | the model the "
      "reference runs on (same vocabulary and tokenizer, e.g. a q8_0 or f16 file of the scored "
      "model); empty: each cell's own model |\n";
  out += "\n#### `output`\n\n" + fields_help(output_fields(), OutputSpec{});
  return out;
}

}  // namespace fish
