// Results files: append + fsync per row, resume, CSV/Markdown renderings; see results_writer.h.
#include "harness/results_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/path_checks.h"
#include "engine/config.h"
#include "harness/interval_label.h"
#include "harness/metrics.h"
#include "harness/results_reader.h"

namespace fish {

std::string results_file_name(const std::string& experiment, int shard_index, int shard_count) {
  if (shard_count <= 1) return experiment + ".jsonl";
  return fmt::format("{}.shard-{}-of-{}.jsonl", experiment, shard_index, shard_count);
}

Result<std::unique_ptr<ResultsWriter>> ResultsWriter::open(const std::string& path, bool resume) {
  std::unique_ptr<ResultsWriter> w(new ResultsWriter());
  w->path_ = path;
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    return make_error("results: {}: cannot create directory {}: {}", path, parent.string(),
                      ec.message());

  std::string text;
  if (std::filesystem::exists(path)) {
    auto r = read_regular_file(path, kMaxResultsFileBytes, "a results file");
    if (!r.ok()) return make_error("results: {}", r.error().message);
    text = std::move(r.value());
  }
  if (!text.empty() && !resume)
    return make_error(
        "results: {} exists with {} bytes; pass --resume to continue it (finished cells are "
        "skipped) or --out to write elsewhere",
        path, text.size());
  if (resume && !text.empty()) {
    const size_t last_nl = text.rfind('\n');
    const size_t keep = last_nl == std::string::npos ? 0 : last_nl + 1;
    if (keep < text.size()) {
      w->truncated_bytes_ = text.size() - keep;
      if (::truncate(path.c_str(), off_t(keep)) != 0)
        return make_error("results: {}: cannot cut the partial last line: {}", path,
                          std::strerror(errno));
      text.resize(keep);
    }
    std::istringstream lines(text);
    std::string line;
    int line_no = 0;
    while (std::getline(lines, line)) {
      ++line_no;
      if (line.empty()) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object())
        return make_error("results: {}:{}: not a JSON object; move the file aside to start over",
                          path, line_no);
      if (j.value("kind", "") == "context")
        w->experiment_shas_.push_back(j.value("experiment_sha256", ""));
      if (j.value("kind", "") != "row") continue;
      w->status_[{j.value("cell_id", ""), j.value("path", "")}] = j.value("status", "");
    }
  }
  w->fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (w->fd_ < 0)
    return make_error("results: {}: cannot open for appending: {}", path, std::strerror(errno));
  return w;
}

size_t ResultsWriter::n_finished() const {
  size_t n = 0;
  for (const auto& [key, s] : status_) n += s == "ok" || s == "error";
  return n;
}

ResultsWriter::~ResultsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status ResultsWriter::append(const nlohmann::json& line) {
  const std::string s = line.dump() + "\n";
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd_, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error("results: {}: write failed: {}", path_, std::strerror(errno));
    done += size_t(n);
  }
  if (::fsync(fd_) != 0)
    return make_error("results: {}: fsync failed: {}", path_, std::strerror(errno));
  if (line.value("kind", "") == "row") {
    status_[{line.value("cell_id", ""), line.value("path", "")}] = line.value("status", "");
  }
  return Status::success();
}

namespace {

using nlohmann::json;

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// A number for a table: integers as is; others with `digits` significant digits, but never in
// exponent form for magnitudes in [1e-4, 1e15) (tok/s of 15930, not 1.593e+04).
std::string num(const json& v, int digits) {
  if (v.is_null()) return "";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    const double x = v.get<double>(), ax = std::fabs(x);
    if (ax == 0) return "0";
    if (ax < 1e-4 || ax >= 1e15) return fmt::format("{:.{}g}", x, digits);
    const int int_digits = ax >= 1 ? int(std::floor(std::log10(ax))) + 1 : 0;
    const int lead_zeros = ax < 1 ? -int(std::floor(std::log10(ax))) - 1 : 0;
    const int decimals = std::max(0, digits - int_digits + lead_zeros);
    std::string s = fmt::format("{:.{}f}", x, decimals);
    if (s.find('.') != std::string::npos) {  // drop trailing zeros as %g does
      while (s.back() == '0') s.pop_back();
      if (s.back() == '.') s.pop_back();
    }
    return s;
  }
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// A number for CSV: the shortest text that reads back as the same double.
std::string exact(const json& v) {
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  return num(v, 17);
}

std::string value_text(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

const json& metric(const ResultRow& r, const char* key) {
  static const json null_json;
  const json& m = r.json.contains("metrics") ? r.json["metrics"] : null_json;
  return m.is_object() && m.contains(key) ? m[key] : null_json;
}

std::string count_text(const json& g) {
  if (!g.is_object()) return "";
  return fmt::format("{}/{}", g.value("n", 0), g.value("of", 0));
}

std::string joined(const json& list) {
  std::string s;
  if (list.is_array())
    for (const json& v : list) {
      if (!s.empty()) s += ' ';
      s += value_text(v);
    }
  return s;
}

// CSV columns of a samples metric: NAME (median), NAME_lo, NAME_hi, NAME_interval, NAME_cv,
// NAME_n.
constexpr const char* kSamplesParts[] = {"", "_lo", "_hi", "_interval", "_cv", "_n"};

}  // namespace

Result<std::string> render_csv(const std::string& jsonl_path) {
  ResultSet set;
  FISH_TRY(read_results_file(jsonl_path, &set));
  std::vector<std::string> cols = {"experiment", "cell_index", "cell_id",
                                   "path",       "status",     "model"};
  for (const auto& f : config_fields()) cols.emplace_back(f.name);
  for (const MetricField& f : metric_fields()) {
    if (!f.samples()) {
      cols.emplace_back(f.name);
      continue;
    }
    for (const char* part : kSamplesParts) cols.push_back(std::string(f.name) + part);
  }
  for (const char* c : {"validity", "t_wall_s", "error"}) cols.emplace_back(c);
  // What was run and by what: a CSV row read alone still names its workload and provenance.
  for (const char* c : {"n_prompt", "n_gen", "commit", "dirty", "cpu", "gpu", "run_id"})
    cols.emplace_back(c);
  std::string out;
  for (size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + cols[i];
  out += "\n";
  for (const ResultRow* r : set.latest_rows()) {
    std::vector<std::string> v = {set.context_of(*r).experiment,
                                  std::to_string(r->cell_index),
                                  r->cell_id,
                                  r->path,
                                  r->status,
                                  r->model};
    const json& cfg = r->json.contains("config") ? r->json["config"] : json();
    for (const auto& f : config_fields()) {
      const std::string k(f.name);
      v.push_back(cfg.is_object() && cfg.contains(k) ? value_text(cfg[k]) : "");
    }
    for (const MetricField& f : metric_fields()) {
      const std::string name(f.name);
      if (f.kind == MetricKind::count) {
        v.push_back(count_text(metric(*r, name.c_str())));
        continue;
      }
      if (!f.samples()) {
        v.push_back(exact(metric(*r, name.c_str())));
        continue;
      }
      const std::optional<SpeedMetric> m = r->speed(name);
      v.push_back(m ? exact(m->median) : "");
      v.push_back(m ? exact(m->interval.lo) : "");
      v.push_back(m ? exact(m->interval.hi) : "");
      v.push_back(m ? interval_key(m->interval.kind) : "");  // ci95 | min_max
      v.push_back(m ? exact(m->cv) : "");
      v.push_back(m ? exact(m->n) : "");
    }
    v.push_back(joined(r->json.value("validity", json::array())));
    v.push_back(exact(r->json.value("t_wall_s", json())));
    v.push_back(r->error);
    const json& w = r->json.contains("workload") ? r->json["workload"] : json();
    for (const char* k : {"n_prompt", "n_gen"})
      v.push_back(w.is_object() && w.contains(k) ? value_text(w[k]) : "");
    const json& c = set.context_of(*r).json;
    for (const char* k : {"commit", "dirty", "cpu", "gpu"})
      v.push_back(c.contains(k) && !c[k].is_null() ? value_text(c[k]) : "");
    v.push_back(r->run_id);
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      out += csv_field(v[i]);
    }
    out += '\n';
  }
  return out;
}

Result<std::string> render_markdown(const std::string& jsonl_path) {
  ResultSet set;
  FISH_TRY(read_results_file(jsonl_path, &set));
  const std::vector<const ResultRow*> rows = set.latest_rows();
  // Config fields (and the model) that take more than one value among the rows.
  std::vector<std::string> varying;
  std::set<std::string> models;
  for (const ResultRow* r : rows) models.insert(r->model);
  for (const auto& f : config_fields()) {
    std::set<std::string> values;
    for (const ResultRow* r : rows)
      if (r->json.contains("config") && r->json["config"].contains(std::string(f.name)))
        values.insert(r->json["config"][std::string(f.name)].dump());
    if (values.size() > 1) varying.emplace_back(f.name);
  }
  auto any = [&](const char* key) {
    for (const ResultRow* r : rows)
      if (!metric(*r, key).is_null()) return true;
    return false;
  };
  // The report's metric columns that some row has, in table order.
  std::vector<const MetricField*> columns;
  for (const MetricField& f : metric_fields())
    if (f.report && any(std::string(f.name).c_str())) columns.push_back(&f);

  std::string out;
  if (!set.contexts.empty()) {
    const json& c = set.contexts.back().json;
    out += fmt::format("Experiment `{}` — commit {}, {}, {} CPUs, GPU {}, stream read {} GB/s\n\n",
                       c.value("experiment", ""), value_text(c.value("commit", json())),
                       value_text(c.value("cpu", json())), num(c.value("n_cpus", json()), 4),
                       c.value("gpu", json()).is_null() ? "none" : value_text(c["gpu"]),
                       c.contains("stream_GBps") && c["stream_GBps"].is_object()
                           ? num(c["stream_GBps"]["median"], 3)
                           : "?");
  }
  std::vector<std::string> head = {"#"};
  if (models.size() > 1) head.emplace_back("model");
  for (const std::string& f : varying) head.push_back(f);
  for (const char* h : {"path", "status"}) head.emplace_back(h);
  for (const MetricField* f : columns) head.emplace_back(f->title);
  head.emplace_back("validity / error");
  for (const std::string& h : head) out += "| " + h + " ";
  out += "|\n";
  for (size_t i = 0; i < head.size(); ++i) out += "|---";
  out += "|\n";
  IntervalMix mix;  // of every speed interval in the table
  for (const ResultRow* r : rows)
    for (const MetricField* f : columns)
      if (f->samples())
        if (const std::optional<SpeedMetric> m = r->speed(std::string(f->name)))
          mix.add(m->interval.kind, m->n);
  auto speed = [&](const ResultRow& r, const std::string& key) {
    const std::optional<SpeedMetric> m = r.speed(key);
    if (!m) return std::string();
    return interval_cell(num(m->median, 4), num(m->interval.lo, 4), num(m->interval.hi, 4),
                         m->interval.kind, mix);
  };
  for (const ResultRow* r : rows) {
    std::vector<std::string> v = {std::to_string(r->cell_index)};
    if (models.size() > 1) v.push_back(std::filesystem::path(r->model).filename().string());
    for (const std::string& f : varying) v.push_back(value_text(r->json["config"][f]));
    v.push_back(r->path);
    v.push_back(r->status);
    for (const MetricField* f : columns) {
      const std::string name(f->name);
      if (f->samples())
        v.push_back(speed(*r, name));
      else if (f->kind == MetricKind::count)
        v.push_back(count_text(metric(*r, name.c_str())));
      else
        v.push_back(num(metric(*r, name.c_str()), 4));
    }
    std::string note = joined(r->json.value("validity", json::array()));
    if (!r->error.empty()) {
      if (!note.empty()) note += "; ";
      note += r->error;
    }
    std::string escaped;
    for (char c : note) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
    v.push_back(escaped);
    for (const std::string& x : v) out += "| " + x + " ";
    out += "|\n";
  }
  if (!mix.empty()) out += "\n" + median_legend("Speeds", mix) + "\n";
  return out;
}

}  // namespace fish
