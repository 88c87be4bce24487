// `fish bench -m MODEL [-p LIST] [-n LIST] [-pg P,N] [-d LIST] [-t LIST] [-b LIST] [-ngl LIST]
//             [-r N] [-o md|csv|json|jsonl|sql] [--FIELD LIST ...] [--out DIR] [--dry-run]`
//
// llama-bench's idiom over FISH's experiment machinery: the flags become experiment files (one
// per test workload and path group, written into the results directory, so `fish run FILE`
// repeats any of them), run_experiment measures them, and the rows it wrote are printed as one
// table. Tests, as llama-bench names them:
//   pp P        prefill of P prompt tokens (workload n_prompt P, n_gen 1): prefill_tok_s
//   tg N        N decode steps after a 1-token prompt (FISH needs one token to start from)
//   tg N @ d D  N decode steps after a D-token prompt (-d D)
//   pp P+tg N   -pg P,N: one measurement of both; tok/s = (P+N) / (prefill + decode time) per
//               repetition, so the interval is of the combined rate's samples
// FISH's prefill always starts at position 0, so -d applies to tg tests only (said on stderr).
// -ngl 0 runs the cpu path, -ngl N > 0 the gpu path with gpu_layers N (at most N layers on the
// GPU); a list may mix them. Every other Config field is a `--name LIST` flag from the field
// table (e.g. --act int8,f32 --weight-path gguf,w4a8), so `--help` always lists them all.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/env_knobs.h"
#include "harness/cli_fields.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "harness/experiment.h"
#include "harness/interval_label.h"
#include "harness/results_reader.h"
#include "harness/run_command.h"
#include "harness/stats.h"

namespace fish {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Config fields with a llama-bench spelling of their own.
struct BenchAlias {
  const char* flags;
  const char* field;
};
constexpr BenchAlias kAliases[] = {
    {"-t,--threads", "n_threads"},
    {"-b,--batch-size", "n_batch"},
};

struct BenchArgs {
  std::vector<std::string> models;
  std::string n_prompt = "512", n_gen = "128", depth = "0", ngl = "0";
  std::vector<std::string> pg;
  int64_t repetitions = 6;
  std::string output = "md";
  std::string out_dir;
  bool dry_run = false;
  std::map<std::string, std::string> fields;  // Config field -> comma list as given
};

// Comma-separated items, each an integer or a range string (parse_range: "A-B", "A-B+S",
// "A-B*F"); `flag` names the list in errors.
Result<std::vector<int64_t>> int_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) return Error{flag + ": empty item in '" + text + "'"};
    if (item.find_first_not_of("0123456789") == std::string::npos) {
      if (item.size() > 9) return Error{flag + ": " + item + " is too large"};
      out.push_back(std::stoll(item));
    } else {
      auto r = parse_range(item);
      if (!r.ok()) return Error{flag + ": " + r.error().message};
      out.insert(out.end(), r->begin(), r->end());
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// One value list of a Config field, each item checked as the experiment format checks it.
Result<std::vector<json>> field_values(const FieldSpec<Config>& f, const std::string& text,
                                       const std::string& flag) {
  std::vector<std::string> items;
  if (f.type() == FieldType::integer) {
    auto ints = int_list(text, flag);
    if (!ints.ok()) return ints.error();
    for (int64_t v : *ints) items.push_back(std::to_string(v));
  } else {
    size_t start = 0;
    while (true) {
      const size_t comma = text.find(',', start);
      items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos
                                                                    : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  std::vector<json> out;
  const std::string expected = cli_detail::expected_text(f.type(), f.allowed, f.min, f.max);
  for (const std::string& item : items) {
    auto v = cli_detail::flag_json(f.type(), item, flag, expected);
    if (!v.ok()) return v.error();
    Config probe;
    if (Status st = field_set(probe, f, *v, flag); !st.ok()) return st.error();
    out.push_back(*v);
  }
  return out;
}

// A measured test: which workload, which metric of its rows, its label.
struct BenchTest {
  std::string label;  // "pp512", "tg128", "tg128 @ d512", "pp512+tg128"
  int64_t n_prompt = 0, n_gen = 0;
  enum Kind { prefill, decode, combined } kind = prefill;
};

std::string workload_name(int64_t p, int64_t n) { return fmt::format("p{}-n{}", p, n); }

// The tests the flags ask for, and the distinct workloads they need.
Result<std::vector<BenchTest>> plan_tests(const BenchArgs& a) {
  auto ps = int_list(a.n_prompt, "-p");
  if (!ps.ok()) return ps.error();
  auto ns = int_list(a.n_gen, "-n");
  if (!ns.ok()) return ns.error();
  auto ds = int_list(a.depth, "-d");
  if (!ds.ok()) return ds.error();
  std::vector<BenchTest> tests;
  for (int64_t p : *ps)
    if (p > 0) tests.push_back({fmt::format("pp{}", p), p, 1, BenchTest::prefill});
  for (int64_t n : *ns)
    for (int64_t d : *ds)
      if (n > 0)
        tests.push_back({d == 0 ? fmt::format("tg{}", n) : fmt::format("tg{} @ d{}", n, d),
                         std::max<int64_t>(d, 1), n, BenchTest::decode});
  for (const std::string& pg : a.pg) {
    auto pn = int_list(pg, "-pg");
    if (!pn.ok()) return pn.error();
    if (pn->size() != 2 || (*pn)[0] < 1 || (*pn)[1] < 1)
      return Error{"-pg: expected P,N with both at least 1, got '" + pg + "'"};
    tests.push_back({fmt::format("pp{}+tg{}", (*pn)[0], (*pn)[1]), (*pn)[0], (*pn)[1],
                     BenchTest::combined});
  }
  if (tests.empty()) return Error{"no tests: -p, -n and -pg are all 0 or empty"};
  const bool any_pp = std::any_of(tests.begin(), tests.end(),
                                  [](const BenchTest& t) { return t.kind == BenchTest::prefill; });
  if (any_pp && std::any_of(ds->begin(), ds->end(), [](int64_t d) { return d != 0; }))
    std::fprintf(stderr,
                 "fish bench: note: pp tests run at depth 0 only (FISH's prefill starts at "
                 "position 0); -d applies to the tg tests\n");
  return tests;
}

// The experiment JSON of one workload and path group.
json experiment_json(const BenchArgs& a, const std::string& name, int64_t n_prompt, int64_t n_gen,
                     const std::string& path, const std::vector<json>& gpu_layers,
                     const std::map<std::string, std::vector<json>>& sweep) {
  json e = {{"schema_version", kExperimentSchemaVersion},
            {"name", name},
            {"description", "fish bench: " + workload_name(n_prompt, n_gen) + ", " + path +
                                " path (written by fish bench; fish run this file to repeat it)"},
            {"model", a.models},
            {"workload", {{"n_prompt", n_prompt}, {"n_gen", n_gen}}},
            {"measure", {{"paths", {path}}, {"repetitions", a.repetitions}}},
            {"output", {{"dir", a.out_dir}, {"formats", {"csv", "md"}}}}};
  json defaults = json::object(), axes = json::object();
  for (const auto& [field, values] : sweep) {
    if (values.size() == 1)
      defaults[field] = values[0];
    else
      axes[field] = values;
  }
  if (path == "gpu") {
    if (gpu_layers.size() == 1)
      defaults["gpu_layers"] = gpu_layers[0];
    else
      axes["gpu_layers"] = gpu_layers;
  }
  // The KV cache must hold the prompt and the decode steps.
  if (!defaults.contains("n_ctx") && !axes.contains("n_ctx"))
    defaults["n_ctx"] = std::max<int64_t>(Config{}.n_ctx, n_prompt + n_gen);
  e["defaults"] = defaults;
  if (!axes.empty()) e["sweep"] = axes;
  return e;
}

// One printed line: a row of a test.
struct BenchLine {
  const ResultRow* row = nullptr;
  const ResultContext* context = nullptr;
  const BenchTest* test = nullptr;
  std::string status;  // ok, error, skipped
  std::string error;
  double median = 0;
  Interval interval;
  int64_t n = 0;
  std::vector<double> samples;
};

Result<BenchLine> line_of(const ResultSet& set, const ResultRow& r, const BenchTest& t) {
  BenchLine l;
  l.row = &r;
  l.context = &set.context_of(r);
  l.test = &t;
  l.status = r.status;
  l.error = r.error;
  if (r.status != "ok") return l;
  if (t.kind == BenchTest::combined) {
    auto pp = r.speed("prefill_tok_s"), tg = r.speed("decode_tok_s");
    if (!pp || !tg || pp->samples.size() != tg->samples.size() || pp->samples.empty())
      return Error{r.file + ":" + std::to_string(r.line) +
                   ": row has no paired prefill/decode samples"};
    for (size_t i = 0; i < pp->samples.size(); ++i) {
      const double secs = double(t.n_prompt) / pp->samples[i] + double(t.n_gen) / tg->samples[i];
      l.samples.push_back(double(t.n_prompt + t.n_gen) / secs);
    }
    l.median = median(l.samples);
    l.interval = median_interval(l.samples);
    l.n = int64_t(l.samples.size());
  } else {
    auto m = r.speed(t.kind == BenchTest::prefill ? "prefill_tok_s" : "decode_tok_s");
    if (!m)
      return Error{r.file + ":" + std::to_string(r.line) + ": row has no " +
                   (t.kind == BenchTest::prefill ? "prefill_tok_s" : "decode_tok_s")};
    l.median = m->median;
    l.interval = m->interval;
    l.n = m->n;
    l.samples = m->samples;
  }
  return l;
}

// The Config fields whose value differs between lines: the table's parameter columns.
std::vector<std::string> varying_fields(const std::vector<BenchLine>& lines) {
  std::vector<std::string> out;
  for (const auto& f : config_fields()) {
    const std::string name(f.name);
    std::string first;
    bool varies = false;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string v = lines[i].row->config().value(name, json()).dump();
      if (i == 0)
        first = v;
      else if (v != first)
        varies = true;
    }
    if (varies || name == "n_threads") out.push_back(name);
  }
  return out;
}

std::string model_label(const ResultRow& r) { return fs::path(r.model).filename().string(); }

std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

json line_json(const BenchLine& l) {
  json j = {{"model", l.row->model},
            {"model_sha256", l.row->json.value("model_sha256", "")},
            {"path", l.row->path},
            {"test", l.test->label},
            {"n_prompt", l.test->n_prompt},
            {"n_gen", l.test->n_gen},
            {"config", l.row->config()},
            {"cell_id", l.row->cell_id},
            {"status", l.status},
            {"commit", l.context->json.value("commit", json())},
            {"dirty", l.context->json.value("dirty", json())},
            {"cpu", l.context->json.value("cpu", json())},
            {"gpu", l.context->json.value("gpu", json())},
            {"results_file", l.row->file}};
  if (l.status == "ok") {
    j["median_ts"] = l.median;
    j[interval_key(l.interval.kind)] = {l.interval.lo, l.interval.hi};
    j["n"] = l.n;
    j["samples_ts"] = l.samples;
  } else {
    j["error"] = l.error;
  }
  return j;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string sql_text(const json& v) {
  if (v.is_null()) return "NULL";
  if (v.is_number() || v.is_boolean()) return v.is_boolean() ? (v.get<bool>() ? "1" : "0") : v.dump();
  std::string s = value_text(v), out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string render(const std::vector<BenchLine>& lines, const std::string& format) {
  std::string out;
  const std::vector<std::string> fields = varying_fields(lines);
  if (format == "json" || format == "jsonl") {
    json all = json::array();
    for (const BenchLine& l : lines) {
      if (format == "jsonl")
        out += line_json(l).dump() + "\n";
      else
        all.push_back(line_json(l));
    }
    return format == "json" ? all.dump(2) + "\n" : out;
  }
  // Flat columns shared by csv and sql.
  std::vector<std::string> cols = {"model", "path"};
  cols.insert(cols.end(), fields.begin(), fields.end());
  for (const char* c : {"test", "n_prompt", "n_gen", "status", "median_ts", "interval", "lo", "hi",
                        "n", "samples_ts", "error", "commit", "dirty", "cpu", "gpu", "cell_id"})
    cols.push_back(c);
  auto flat = [&](const BenchLine& l) {
    const json j = line_json(l);
    std::vector<json> v = {model_label(*l.row), l.row->path};
    for (const std::string& f : fields) v.push_back(l.row->config().value(f, json()));
    const bool ok = l.status == "ok";
    v.insert(v.end(), {l.test->label, l.test->n_prompt, l.test->n_gen, l.status,
                       ok ? json(l.median) : json(), ok ? json(interval_key(l.interval.kind)) : json(),
                       ok ? json(l.interval.lo) : json(), ok ? json(l.interval.hi) : json(),
                       ok ? json(l.n) : json(), ok ? json(json(l.samples).dump()) : json(),
                       ok ? json() : json(l.error), j["commit"], j["dirty"], j["cpu"], j["gpu"],
                       l.row->cell_id});
    return v;
  };
  if (format == "csv") {
    for (size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + cols[i];
    out += "\n";
    for (const BenchLine& l : lines) {
      const std::vector<json> v = flat(l);
      for (size_t i = 0; i < v.size(); ++i)
        out += (i ? "," : "") + (v[i].is_null() ? std::string() : csv_field(value_text(v[i])));
      out += "\n";
    }
    return out;
  }
  if (format == "sql") {
    out += "CREATE TABLE IF NOT EXISTS fish_bench (";
    for (size_t i = 0; i < cols.size(); ++i) {
      const bool real = cols[i] == "median_ts" || cols[i] == "lo" || cols[i] == "hi";
      const bool integer = cols[i] == "n_prompt" || cols[i] == "n_gen" || cols[i] == "n";
      out += fmt::format("{}{} {}", i ? ", " : "", cols[i],
                         real ? "REAL" : integer ? "INTEGER" : "TEXT");
    }
    out += ");\n";
    for (const BenchLine& l : lines) {
      const std::vector<json> v = flat(l);
      out += "INSERT INTO fish_bench (";
      for (size_t i = 0; i < cols.size(); ++i) out += (i ? ", " : "") + cols[i];
      out += ") VALUES (";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + sql_text(v[i]);
      out += ");\n";
    }
    return out;
  }
  // Markdown, llama-bench's layout with FISH's intervals.
  IntervalMix mix;
  for (const BenchLine& l : lines)
    if (l.status == "ok") mix.add(l.interval.kind, l.n);
  std::vector<std::string> head = {"model", "path"};
  head.insert(head.end(), fields.begin(), fields.end());
  head.insert(head.end(), {"test", "t/s"});
  for (const std::string& h : head) out += "| " + h + " ";
  out += "|\n";
  for (size_t i = 0; i < head.size(); ++i) out += i + 2 >= head.size() ? "|---:" : "|---";
  out += "|\n";
  for (const BenchLine& l : lines) {
    out += "| " + model_label(*l.row) + " | " + l.row->path + " ";
    for (const std::string& f : fields) out += "| " + value_text(l.row->config().value(f, json())) + " ";
    std::string ts;
    if (l.status == "ok")
      ts = interval_cell(fmt::format("{:.2f}", l.median), fmt::format("{:.2f}", l.interval.lo),
                         fmt::format("{:.2f}", l.interval.hi), l.interval.kind, mix);
    else
      ts = l.status + ": " + l.error;
    out += "| " + l.test->label + " | " + ts + " |\n";
  }
  const std::string legend = median_legend("t/s", mix);
  if (!legend.empty()) out += "\n" + legend + "\n";
  if (!lines.empty()) {
    const json& c = lines.front().context->json;
    out += fmt::format("\nfish {} ({}), {}, gpu {}\n", value_text(c.value("commit", json("?"))),
                       c.value("dirty", false) ? "dirty" : "clean",
                       value_text(c.value("cpu", json("?"))),
                       c.value("gpu", json()).is_null() ? "none" : value_text(c["gpu"]));
  }
  return out;
}

std::string default_out_dir() {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
  std::string cache;
  if (auto c = env_value("FISH_CACHE"))
    cache = *c;
  else if (const char* home = std::getenv("HOME"); home && *home)
    cache = std::string(home) + "/.cache/fish";
  else
    cache = "/tmp/fish-cache";
  return (fs::path(cache) / "bench" / stamp).string();
}

int run_bench(BenchArgs a) {
  if (a.models.empty()) {
    std::fprintf(stderr, "fish bench: -m MODEL is required (repeat it for several models)\n");
    return kExitUsage;
  }
  const std::vector<std::string> formats = {"md", "csv", "json", "jsonl", "sql"};
  if (std::find(formats.begin(), formats.end(), a.output) == formats.end()) {
    std::fprintf(stderr, "fish bench: -o %s: unknown format (allowed: md, csv, json, jsonl, sql)\n",
                 a.output.c_str());
    return kExitUsage;
  }
  auto tests = plan_tests(a);
  if (!tests.ok()) {
    std::fprintf(stderr, "fish bench: %s\n", tests.error().message.c_str());
    return kExitUsage;
  }
  // -ngl: 0 is the cpu path, the others the gpu path's gpu_layers.
  auto ngl = int_list(a.ngl, "-ngl");
  if (!ngl.ok()) {
    std::fprintf(stderr, "fish bench: %s\n", ngl.error().message.c_str());
    return kExitUsage;
  }
  std::vector<json> gpu_layers;
  bool cpu_path = false;
  for (int64_t v : *ngl) {
    if (v == 0)
      cpu_path = true;
    else
      gpu_layers.push_back(v);
  }
  std::map<std::string, std::vector<json>> sweep;
  for (const auto& [field, text] : a.fields) {
    const FieldSpec<Config>* f = find_config_field(field);
    auto values = field_values(*f, text, field_flag(field));
    if (!values.ok()) {
      std::fprintf(stderr, "fish bench: %s\n", values.error().message.c_str());
      return kExitUsage;
    }
    sweep[field] = *values;
  }
  if (a.out_dir.empty()) a.out_dir = default_out_dir();
  std::error_code ec;
  fs::create_directories(a.out_dir, ec);
  if (ec) {
    std::fprintf(stderr, "fish bench: cannot create --out %s: %s\n", a.out_dir.c_str(),
                 ec.message().c_str());
    return kExitUsage;
  }
  // One experiment per distinct workload and path group.
  struct Planned {
    std::string name, file;
    int64_t n_prompt, n_gen;
  };
  std::vector<Planned> planned;
  std::vector<std::string> paths;
  if (cpu_path) paths.push_back("cpu");
  if (!gpu_layers.empty()) paths.push_back("gpu");
  for (const BenchTest& t : *tests)
    for (const std::string& path : paths) {
      const std::string name = "bench-" + workload_name(t.n_prompt, t.n_gen) + "-" + path;
      if (std::any_of(planned.begin(), planned.end(),
                      [&](const Planned& p) { return p.name == name; }))
        continue;
      const json e = experiment_json(a, name, t.n_prompt, t.n_gen, path, gpu_layers, sweep);
      const std::string file = (fs::path(a.out_dir) / (name + ".json")).string();
      std::ofstream(file) << e.dump(2) << "\n";
      planned.push_back({name, file, t.n_prompt, t.n_gen});
    }
  int rc = kExitOk;
  for (const Planned& p : planned) {
    RunOptions o;
    o.experiment_path = p.file;
    o.out_dir = a.out_dir;
    o.dry_run = a.dry_run;
    o.resume = true;  // a repeated `fish bench --out DIR` finishes what an earlier one left
    const int r = run_experiment(o);
    if (r == kExitUsage) return r;  // the experiment (so a flag) is wrong: said on stderr
    if (r != kExitOk) rc = r;
  }
  if (a.dry_run) return rc;
  std::vector<std::string> files;
  for (const Planned& p : planned) files.push_back((fs::path(a.out_dir) / (p.name + ".jsonl")).string());
  auto set = read_results_files(files);
  if (!set.ok()) {
    std::fprintf(stderr, "fish bench: %s\n", set.error().message.c_str());
    return kExitUsage;
  }
  std::vector<BenchLine> lines;
  for (const BenchTest& t : *tests)
    for (const ResultRow* r : set->latest_rows()) {
      const json& w = r->workload();
      if (w.value("n_prompt", int64_t(-1)) != t.n_prompt || w.value("n_gen", int64_t(-1)) != t.n_gen)
        continue;
      auto l = line_of(*set, *r, t);
      if (!l.ok()) {
        std::fprintf(stderr, "fish bench: %s\n", l.error().message.c_str());
        return kExitUsage;
      }
      if (l->status != "ok") rc = kExitCellsFailed;
      lines.push_back(*l);
    }
  const std::string text = render(lines, a.output);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fprintf(stderr, "fish bench: rows and experiment files in %s\n", a.out_dir.c_str());
  return rc;
}

}  // namespace

void llama_bench_spellings(std::vector<std::string>& args) {
  if (args.size() < 2 || args[1] != "bench") return;
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "-pg") args[i] = "--pg";
    if (args[i] == "-ngl") args[i] = "--ngl";
  }
}

void add_bench_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Benchmark models in llama-bench's idiom: comma lists (and ranges A-B+S) sweep, each test "
      "is measured as `fish run` measures (paired paths, interleaved repetitions, medians with a "
      "95% CI from 6 repetitions on), and the table goes to stdout. Tests: pp P (prefill of P "
      "tokens), tg N (N decode steps after 1 prompt token; -d D: after D), pp P+tg N (-pg). "
      "-ngl 0 is the cpu path, N > 0 the gpu path with at most N layers on the GPU. The rows are "
      "ordinary results (fish report / compare / gate read them) in --out, beside the "
      "experiment files that `fish run` repeats.\n\nExample:\n  fish bench -m "
      "models/SmolLM2-135M-Instruct.Q4_1.gguf -p 128 -n 64 -t 1,2 -o md");
  cmd->add_option("-m,--model", a->models, "GGUF model, or synthetic:SHAPE:TYPE (repeatable)")
      ->required();
  cmd->add_option("-p,--n-prompt", a->n_prompt, "prefill test lengths (0: none)")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", a->n_gen, "decode test lengths (0: none)")->capture_default_str();
  cmd->add_option("--pg", a->pg, "P,N: a prompt of P then N decode steps, one combined rate "
                                "(repeatable)");
  cmd->add_option("-d,--n-depth", a->depth, "prompt tokens before each tg test")
      ->capture_default_str();
  cmd->add_option("--ngl,--n-gpu-layers", a->ngl, "0: cpu path; N: gpu path, at most N layers")
      ->capture_default_str();
  cmd->add_option("-r,--repetitions", a->repetitions, "recorded repetitions per test (6 or more "
                                                      "give a 95% CI of the median)")
      ->check(CLI::Range(int64_t(1), int64_t(100000)))
      ->capture_default_str();
  cmd->add_option("-o,--output", a->output, "md, csv, json, jsonl or sql, to stdout")
      ->capture_default_str();
  cmd->add_option("--out", a->out_dir,
                  "results directory (default: $FISH_CACHE/bench/UTC-TIMESTAMP); reused, it "
                  "resumes");
  cmd->add_flag("--dry-run", a->dry_run, "list the cells of each test and check the models");
  for (const BenchAlias& al : kAliases) {
    const std::string field = al.field;
    cmd->add_option_function<std::string>(
           al.flags, [a, field](const std::string& v) { a->fields[field] = v; },
           std::string(find_config_field(field)->doc) + " (comma list)")
        ->type_name("LIST");
  }
  for (const auto& f : config_fields()) {
    const std::string field(f.name);
    if (field == "gpu_layers" ||
        std::any_of(std::begin(kAliases), std::end(kAliases),
                    [&](const BenchAlias& al) { return field == al.field; }))
      continue;
    cmd->add_option_function<std::string>(
           field_flag(field), [a, field](const std::string& v) { a->fields[field] = v; },
           std::string(f.doc) + " (comma list)")
        ->type_name(cli_detail::type_text(f.type(), f.allowed, f.min, f.max) + ",...")
        ->group("Config fields");
  }
  cmd->callback([a, exit_code] { *exit_code = run_bench(*a); });
}

}  // namespace fish
