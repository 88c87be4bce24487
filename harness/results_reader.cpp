#include "harness/results_reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "base/path_checks.h"
#include "harness/metrics.h"
#include "harness/row_provenance.h"

namespace fish {
namespace {

using nlohmann::json;

constexpr size_t kMaxProblems = 20;  // listed per file; a count of the rest follows

// Collects the problems of one line; each check names the key and expected vs found.
struct LineCheck {
  const json& obj;
  std::vector<std::string>* problems;

  const json* get(const char* key, json::value_t want, const char* want_name,
                  bool nullable = false) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      problems->push_back(fmt::format("missing key \"{}\" ({})", key, want_name));
      return nullptr;
    }
    if (nullable && it->is_null()) return nullptr;
    const bool ok = want == json::value_t::number_float ? it->is_number() : it->type() == want;
    if (!ok) {
      problems->push_back(
          fmt::format("\"{}\": expected {}, found {}", key, want_name, json_type_name(*it)));
      return nullptr;
    }
    return &*it;
  }
  std::string str(const char* key) {
    const json* j = get(key, json::value_t::string, "string");
    return j ? j->get<std::string>() : std::string();
  }
  int64_t integer(const char* key) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      problems->push_back(fmt::format("missing key \"{}\" (integer)", key));
      return 0;
    }
    if (!it->is_number_integer()) {
      problems->push_back(
          fmt::format("\"{}\": expected integer, found {}", key, json_type_name(*it)));
      return 0;
    }
    return it->get<int64_t>();
  }
  void one_of(const char* key, const std::string& value,
              std::initializer_list<const char*> allowed) {
    if (value.empty() && obj.contains(key) && !obj[key].is_string()) return;  // already reported
    for (const char* a : allowed)
      if (value == a) return;
    std::string list;
    for (const char* a : allowed) list += fmt::format("{}\"{}\"", list.empty() ? "" : "|", a);
    problems->push_back(fmt::format("\"{}\": expected {}, found \"{}\"", key, list, value));
  }
};

bool is_hex(const std::string& s, size_t n) {
  return s.size() == n && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

void check_speed_metric(const std::string& name, const json& m, std::vector<std::string>* p) {
  if (m.is_null()) return;
  if (!m.is_object()) {
    p->push_back(
        fmt::format("metrics.{}: expected object or null, found {}", name, json_type_name(m)));
    return;
  }
  for (const char* k : {"median", "cv"})
    if (!m.contains(k) || !m[k].is_number())
      p->push_back(fmt::format("metrics.{}.{}: expected number", name, k));
  if (!m.contains("n") || !m["n"].is_number_integer())
    p->push_back(fmt::format("metrics.{}.n: expected integer", name));
  const bool ci = m.contains("ci95"), range = m.contains("min_max");
  if (ci == range)
    p->push_back(fmt::format("metrics.{}: expected one of \"ci95\" or \"min_max\", found {}", name,
                             ci ? "both" : "neither"));
  else if (!summary_interval(m))
    p->push_back(
        fmt::format("metrics.{}.{}: expected [lo, hi] numbers", name, ci ? "ci95" : "min_max"));
  if (!m.contains("samples") || !m["samples"].is_array() ||
      !std::all_of(m["samples"].begin(), m["samples"].end(),
                   [](const json& s) { return s.is_number(); }))
    p->push_back(fmt::format("metrics.{}.samples: expected an array of numbers", name));
  else if (m.contains("n") && m["n"].is_number_integer() && !m["samples"].empty() &&
           m["samples"].size() != m["n"].get<size_t>())
    p->push_back(fmt::format("metrics.{}: n is {} but samples holds {}", name,
                             m["n"].get<int64_t>(), m["samples"].size()));
}

void check_metrics(const json& m, std::vector<std::string>* p) {
  for (const std::string& name : speed_metric_names())
    if (m.contains(name)) check_speed_metric(name, m[name], p);
  for (const std::string& name : scalar_metric_names()) {
    if (!m.contains(name) || m[name].is_null()) continue;
    const json& v = m[name];
    if (find_metric(name)->kind == MetricKind::count) {
      if (!v.is_object() || !v.contains("n") || !v.contains("of") || !v["n"].is_number() ||
          !v["of"].is_number())
        p->push_back(
            fmt::format("metrics.{}: expected {{\"n\": number, \"of\": number}} or null", name));
    } else if (!v.is_number()) {
      p->push_back(
          fmt::format("metrics.{}: expected number or null, found {}", name, json_type_name(v)));
    }
  }
}

}  // namespace

const char* json_type_name(const nlohmann::json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "boolean";
  if (j.is_number()) return "number";
  if (j.is_string()) return "string";
  if (j.is_array()) return "array";
  return "object";
}

std::optional<Interval> summary_interval(const nlohmann::json& summary) {
  if (!summary.is_object()) return std::nullopt;
  for (const IntervalKind kind : {IntervalKind::ci95, IntervalKind::min_max}) {
    auto it = summary.find(interval_key(kind));
    if (it == summary.end()) continue;
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number() || !(*it)[1].is_number())
      return std::nullopt;
    Interval in{(*it)[0].get<double>(), (*it)[1].get<double>(), kind};
    const auto n = summary.find("n");
    if (n != summary.end() && n->is_number_integer() &&
        n->get<int64_t>() < int64_t(kMinSamplesForMedianCi))
      in.kind = IntervalKind::min_max;  // a legacy "ci95" of too few samples was the range
    return in;
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, nlohmann::json>> ResultRow::params() const {
  std::vector<std::pair<std::string, nlohmann::json>> p;
  p.push_back({"model", std::filesystem::path(model).filename().string()});
  for (const auto& [k, v] : config().items()) p.push_back({k, v});
  for (const auto& [k, v] : workload().items())
    p.push_back({config().contains(k) ? "workload." + k : k, v});
  p.push_back({"path", path});
  return p;
}

const std::vector<std::string>& speed_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const MetricField& f : metric_fields())
      if (f.samples()) v.emplace_back(f.name);
    return v;
  }();
  return names;
}

const std::vector<std::string>& scalar_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const MetricField& f : metric_fields())
      if (!f.samples()) v.emplace_back(f.name);
    return v;
  }();
  return names;
}

std::optional<SpeedMetric> ResultRow::speed(const std::string& name) const {
  auto m = json.find("metrics");
  if (m == json.end() || !m->contains(name) || (*m)[name].is_null()) return std::nullopt;
  const nlohmann::json& s = (*m)[name];
  SpeedMetric r;
  r.median = s["median"].get<double>();
  r.interval = *summary_interval(s);
  r.cv = s["cv"].get<double>();
  r.n = s["n"].get<int64_t>();
  r.samples = s["samples"].get<std::vector<double>>();
  return r;
}

std::optional<double> ResultRow::number(const std::string& name) const {
  auto m = json.find("metrics");
  if (m == json.end() || !m->contains(name) || (*m)[name].is_null()) return std::nullopt;
  const nlohmann::json& v = (*m)[name];
  if (v.is_object()) {  // greedy_exact {n, of}
    const double of = v["of"].get<double>();
    return of > 0 ? v["n"].get<double>() / of : 0.0;
  }
  return v.get<double>();
}

std::vector<const ResultRow*> ResultSet::latest_rows() const {
  // Keyed by experiment too: two experiments may share a cell (same model, config, workload).
  std::map<std::string, std::vector<size_t>> current;  // cell key -> indices of current rows
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<size_t>& kept = current[context_of(rows[i]).experiment + "/" + rows[i].key()];
    const std::string& prov = context_of(rows[i]).provenance_key;
    std::erase_if(kept, [&](size_t k) {
      return context_of(rows[k]).provenance_key == prov || rows[k].status != "ok";
    });
    kept.push_back(i);
  }
  std::vector<const ResultRow*> out;
  for (const auto& [key, kept] : current)
    for (size_t i : kept) out.push_back(&rows[i]);
  std::sort(out.begin(), out.end(), [this](const ResultRow* a, const ResultRow* b) {
    const std::string& ea = context_of(*a).experiment;
    const std::string& eb = context_of(*b).experiment;
    if (ea != eb) return ea < eb;
    if (a->cell_index != b->cell_index) return a->cell_index < b->cell_index;
    if (a->path != b->path) return a->path < b->path;
    if (a->cell_id != b->cell_id) return a->cell_id < b->cell_id;
    return context_of(*a).provenance_key < context_of(*b).provenance_key;
  });
  return out;
}

std::vector<std::vector<const ResultRow*>> ResultSet::cell_variants() const {
  std::map<std::string, std::vector<const ResultRow*>> by_cell;  // in latest_rows order
  std::vector<std::string> order;
  for (const ResultRow* r : latest_rows()) {
    const std::string key = context_of(*r).experiment + "/" + r->key();
    auto [it, fresh] = by_cell.try_emplace(key);
    if (fresh) order.push_back(key);
    it->second.push_back(r);
  }
  std::vector<std::vector<const ResultRow*>> groups;
  for (const std::string& k : order)
    if (by_cell[k].size() > 1) groups.push_back(by_cell[k]);
  return groups;
}

std::string canonical_json(const nlohmann::json& j) {
  return j.dump();
}  // std::map keys: sorted

Status read_results_file(const std::string& path, ResultSet* set) {
  if (Status st = check_input_file(path, kMaxResultsFileBytes, "a results file"); !st.ok())
    return make_error("results: {}", st.error().message);
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("results: {}: cannot open (does the file exist?)", path);
  std::vector<std::string> problems;
  size_t n_problems = 0;
  std::map<std::string, size_t> run_contexts;  // run_id -> context index, for this file
  const size_t first_context = set->contexts.size(), first_row = set->rows.size(),
               first_warning = set->warnings.size();
  std::string text;
  int line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    if (text.empty() || text == "\r") continue;  // blank lines carry nothing
    std::vector<std::string> line_problems;
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() && in.eof()) {  // no newline after it: a torn write, not a bad row
      set->warnings.push_back(fmt::format(
          "{}:{}: ignored a partial last line (no newline, not valid JSON: a writer killed "
          "mid-line?)",
          path, line_no));
    } else if (j.is_discarded()) {
      line_problems.push_back("not valid JSON");
    } else if (!j.is_object()) {
      line_problems.push_back(fmt::format("expected a JSON object, found {}", json_type_name(j)));
    } else {
      LineCheck c{j, &line_problems};
      const std::string kind = c.str("kind");
      if (kind == "context") {
        ResultContext ctx;
        ctx.file = path;
        ctx.line = line_no;
        const std::string schema = c.str("schema");
        if (!schema.empty() && schema != kResultsSchema)
          line_problems.push_back(
              fmt::format("\"schema\": expected \"{}\", found \"{}\"", kResultsSchema, schema));
        ctx.run_id = c.str("run_id");
        ctx.experiment = c.str("experiment");
        ctx.experiment_sha256 = c.str("experiment_sha256");
        ctx.n_cells = c.integer("n_cells");
        if (const json* shard = c.get("shard", json::value_t::object, "object {index, count}")) {
          LineCheck s{*shard, &line_problems};
          ctx.shard_index = static_cast<int>(s.integer("index"));
          ctx.shard_count = static_cast<int>(s.integer("count"));
        }
        if (line_problems.empty()) {
          ctx.provenance = provenance_fields(j, path);
          ctx.provenance_key = provenance_key(ctx.provenance);
          ctx.json = std::move(j);
          ctx.text = text;
          run_contexts[ctx.run_id] = set->contexts.size();
          set->contexts.push_back(std::move(ctx));
        }
      } else if (kind == "row") {
        ResultRow row;
        row.file = path;
        row.line = line_no;
        row.run_id = c.str("run_id");
        row.cell_id = c.str("cell_id");
        if (!row.cell_id.empty() && !is_hex(row.cell_id, 16))
          line_problems.push_back(fmt::format(
              "\"cell_id\": expected 16 lowercase hex digits, found \"{}\"", row.cell_id));
        row.cell_index = c.integer("cell_index");
        row.path = c.str("path");
        c.one_of("path", row.path, {"cpu", "gpu"});
        row.status = c.str("status");
        c.one_of("status", row.status, {"ok", "error", "skipped"});
        if (const json* e = c.get("error", json::value_t::string, "string or null", true))
          row.error = e->get<std::string>();
        if (row.status == "error" && row.error.empty())
          line_problems.push_back("status \"error\" needs a non-empty \"error\" message");
        row.model = c.str("model");
        c.get("config", json::value_t::object, "object");
        c.get("workload", json::value_t::object, "object");
        if (const json* m = c.get("metrics", json::value_t::object, "object"))
          check_metrics(*m, &line_problems);
        auto ctx = run_contexts.find(row.run_id);
        if (line_problems.empty() && ctx == run_contexts.end()) {
          line_problems.push_back(
              run_contexts.empty()
                  ? std::string("row before any context line")
                  : fmt::format("run_id \"{}\" has no context line earlier in the file",
                                row.run_id));
        }
        if (line_problems.empty()) {
          row.context = ctx->second;
          row.json = std::move(j);
          row.text = text;
          set->rows.push_back(std::move(row));
        }
      } else if (!kind.empty()) {
        line_problems.push_back(
            fmt::format("\"kind\": expected \"context\"|\"row\", found \"{}\"", kind));
      }
    }
    for (const std::string& p : line_problems) {
      if (problems.size() < kMaxProblems)
        problems.push_back(fmt::format("{}:{}: {}", path, line_no, p));
      ++n_problems;
    }
  }
  if (n_problems == 0 && set->contexts.size() == first_context)
    problems.push_back(fmt::format("{}: no context line (not a fish-results/1 file?)", path));
  if (problems.empty()) return Status::success();
  set->contexts.resize(first_context);
  set->rows.resize(first_row);
  set->warnings.resize(first_warning);
  std::string msg = fmt::format("results: {} problem(s):", std::max(n_problems, problems.size()));
  for (const std::string& p : problems) msg += "\n  " + p;
  if (n_problems > problems.size())
    msg += fmt::format("\n  ... and {} more", n_problems - problems.size());
  return Error{msg};
}

Result<ResultSet> read_results_files(const std::vector<std::string>& paths) {
  ResultSet set;
  for (const std::string& p : paths) FISH_TRY(read_results_file(p, &set));
  return set;
}

}  // namespace fish
