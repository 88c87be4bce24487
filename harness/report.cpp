#include "harness/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "base/env_knobs.h"
#include "engine/config.h"
#include "harness/interval_label.h"
#include "harness/metrics.h"
#include "harness/report_gbench.h"
#include "harness/report_peer.h"
#include "harness/report_svg.h"

namespace fish {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string md_escape(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

std::string file_safe(const std::string& s) {
  std::string out;
  for (char c : s)
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-') ? c : '_';
  return out;
}

std::string interval_text(const SpeedMetric& m, const IntervalMix& mix) {
  return interval_cell(short_number(m.median), short_number(m.interval.lo),
                       short_number(m.interval.hi), m.interval.kind, mix);
}

// A metric column of the report (harness/metrics.h): key and title from the table.
struct MetricColumn {
  std::string key;
  std::string title;
};
// The report's columns of the table, in its order: with intervals (samples metrics) or not;
// and the metrics plotted against bits per weight.
std::vector<MetricColumn> metric_columns(bool samples) {
  std::vector<MetricColumn> v;
  for (const MetricField& f : metric_fields())
    if (f.report && f.samples() == samples)
      v.push_back({std::string(f.name), std::string(f.title)});
  return v;
}
std::vector<MetricColumn> quality_plot_metrics() {
  std::vector<MetricColumn> v;
  for (const MetricField& f : metric_fields())
    if (f.plot_vs_bits) v.push_back({std::string(f.name), std::string(f.title)});
  return v;
}

bool has_metric(const ResultRow& r, const std::string& key) {
  const json& m = r.metrics();
  return m.contains(key) && !m[key].is_null();
}

std::string scalar_text(const ResultRow& r, const std::string& key) {
  if (!has_metric(r, key)) return "-";
  const json& v = r.metrics()[key];
  if (v.is_object() && v.contains("n") && v.contains("of"))
    return fmt::format("{}/{}", json_value_text(v["n"]), json_value_text(v["of"]));
  return v.is_number() ? short_number(v.get<double>()) : json_value_text(v);
}

std::string context_text(const ResultContext& c) {
  const json& j = c.json;
  auto s = [&](const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
  };
  std::string commit = s("commit").substr(0, 12);
  // dirty is null where the run had no git checkout (the GPU machine): unknown, not clean.
  if (j.contains("dirty") && j["dirty"].is_boolean() && j["dirty"].get<bool>())
    commit += " (dirty)";
  std::string out = fmt::format("commit {}; {} build, {}", commit.empty() ? "?" : commit,
                                s("build_type"), s("compiler"));
  out += fmt::format("; cpu {}", s("cpu").empty() ? "?" : s("cpu"));
  if (j.contains("n_cpus") && j["n_cpus"].is_number())
    out += fmt::format(" ({} CPUs)", j["n_cpus"].dump());
  std::string gpu = s("gpu").empty() ? "none" : s("gpu");
  if (!s("gpu_driver").empty()) gpu += ", driver " + s("gpu_driver");
  if (!s("vulkan").empty()) gpu += ", Vulkan " + s("vulkan");
  out += "; gpu " + gpu;
  if (!s("os").empty()) out += "; os " + s("os");
  if (j.contains("stream_GBps") && j["stream_GBps"].is_object() &&
      j["stream_GBps"].contains("median") && j["stream_GBps"]["median"].is_number()) {
    const json& st = j["stream_GBps"];
    out += fmt::format("; stream {} GB/s", short_number(st["median"].get<double>()));
    if (const std::optional<Interval> in = summary_interval(st))
      out += fmt::format(" [{}, {}] ({})", short_number(in->lo), short_number(in->hi),
                         interval_title(in->kind));
  }
  return md_escape(out);
}

// How a varying parameter is drawn on an x axis: numbers on a numeric axis, or, for a Config
// field whose values name things (config_value_names: requant modes, the vram_budget_mb 0 of
// "the backend's budget"), one evenly spaced category per value, the numbers in order and the
// sentinels after them. Empty `categories`: numeric (or not plottable when !numeric).
struct XAxis {
  bool numeric = true;                  // every row has a number for it
  std::vector<double> values;           // distinct, in axis order
  std::vector<std::string> categories;  // labels of values (categorical axes only)
  double position(double v) const {     // where v goes: itself, or its category's index
    if (categories.empty()) return v;
    return double(std::find(values.begin(), values.end(), v) - values.begin());
  }
};

const ValueName* value_name(const std::string& field, double v) {
  for (const ValueName& n : config_value_names(field))
    if (double(n.value) == v) return &n;
  return nullptr;
}

XAxis x_axis_of(const std::string& name, const std::vector<std::map<std::string, json>>& axes) {
  XAxis a;
  std::set<double> xs;
  for (const auto& m : axes) {
    auto it = m.find(name);
    if (it == m.end() || !it->second.is_number()) {
      a.numeric = false;
      return a;
    }
    xs.insert(it->second.get<double>());
  }
  const bool named =
      std::any_of(xs.begin(), xs.end(), [&](double v) { return value_name(name, v) != nullptr; });
  for (int pass = 0; pass < 2; ++pass)  // the numbers (and plain names), then the sentinels
    for (double v : xs) {
      const ValueName* n = named ? value_name(name, v) : nullptr;
      if ((n && n->last) != (pass == 1)) continue;
      a.values.push_back(v);
      if (named) a.categories.push_back(n ? std::string(n->name) : short_number(v));
    }
  return a;
}

// A varying parameter's value as a point label or series name: its value name where the Config
// table has one, a model by its file name without .gguf, else the value's text.
std::string axis_value_text(const std::string& name, const json& v) {
  if (v.is_number())
    if (const ValueName* n = value_name(name, v.get<double>())) return std::string(n->name);
  std::string t = json_value_text(v);
  if (name == "model") {
    t = fs::path(t).filename().string();
    if (t.ends_with(".gguf")) t.resize(t.size() - 5);
  }
  return t;
}

// Speed metric against one numeric parameter, one series per combination of the other varying
// parameters.
void add_speed_plots(const std::string& experiment, const std::vector<const ResultRow*>& rows,
                     const std::vector<std::string>& varying,
                     const std::vector<std::map<std::string, json>>& axes,
                     const ReportOptions& options, std::string* md,
                     std::vector<std::pair<std::string, std::string>>* plots) {
  for (const std::string& x_axis : varying) {
    const XAxis ax = x_axis_of(x_axis, axes);
    if (!ax.numeric || ax.values.size() < 3) continue;
    for (const MetricColumn& metric : metric_columns(true)) {
      std::map<std::string, PlotSeries> series;  // by name: deterministic legend order
      IntervalMix mix;
      for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i]->status != "ok") continue;
        const std::optional<SpeedMetric> m = rows[i]->speed(metric.key);
        if (!m) continue;
        mix.add(m->interval.kind, m->n);
        std::string name;
        for (const std::string& v : varying)
          if (v != x_axis)
            name += fmt::format("{}{}={}", name.empty() ? "" : ", ", v,
                                axis_value_text(v, axes[i].at(v)));
        PlotSeries& s = series[name.empty() ? metric.title : name];
        s.name = name.empty() ? metric.title : name;
        s.points.push_back({ax.position(axes[i].at(x_axis).get<double>()), m->median,
                            m->interval.lo, m->interval.hi, ""});
      }
      size_t longest = 0;
      for (const auto& [n, s] : series) longest = std::max(longest, s.points.size());
      if (longest < 2) continue;
      Plot p;
      p.title = fmt::format("{}: {} vs {}", experiment, metric.title, x_axis);
      p.x_label = x_axis;
      p.y_label = plot_interval_label(metric.title, mix);
      p.x_categories = ax.categories;
      p.x_log2 = ax.categories.empty() && ax.values.front() > 0 &&
                 ax.values.back() / ax.values.front() >= 8;
      for (auto& [n, s] : series) {
        std::sort(s.points.begin(), s.points.end(),
                  [](const PlotPoint& a, const PlotPoint& b) { return a.x < b.x; });
        p.series.push_back(std::move(s));
      }
      const std::string file =
          file_safe(fmt::format("{}-{}-vs-{}.svg", experiment, metric.key, x_axis));
      plots->push_back({file, render_svg(p)});
      *md += fmt::format("![{}]({}/{})\n\n", p.title, options.plots_link, file);
    }
  }
}

// Points of one series at the same place (requant modes that change nothing: same bits, same
// top-1) drawn once with one label ("requant 0, 2, 3"), so no label is printed over another.
PlotSeries merge_coincident(PlotSeries s) {
  std::vector<PlotPoint> out;
  std::vector<std::vector<std::string>> labels;  // of the points merged into out[i]
  for (PlotPoint& p : s.points) {
    auto same = std::find_if(out.begin(), out.end(), [&](const PlotPoint& q) {
      return short_number(q.x) == short_number(p.x) && short_number(q.y) == short_number(p.y);
    });
    if (same != out.end()) {
      labels[size_t(same - out.begin())].push_back(p.label);
      continue;
    }
    labels.push_back({p.label});
    out.push_back(std::move(p));
  }
  // Where every label of a place is "FIELD VALUE ..." of one field: the field once and the
  // values' first words ("requant 0, 2, 3"; the names are on the speed plots' axes and in the
  // tables); else the labels joined.
  for (size_t i = 0; i < out.size(); ++i) {
    if (labels[i].size() < 2) continue;
    std::string field, values, joined;
    bool one_field = true;
    for (const std::string& l : labels[i]) {
      const size_t sp = l.find(' ');
      const std::string f = l.substr(0, sp);
      const std::string v =
          sp == std::string::npos ? "" : l.substr(sp + 1, l.find(' ', sp + 1) - sp - 1);
      if (field.empty()) field = f;
      one_field = one_field && f == field && !v.empty();
      values += (values.empty() ? "" : ", ") + v;
      joined += (joined.empty() ? "" : "; ") + l;
    }
    out[i].label = one_field ? field + " " + values : joined;
  }
  s.points = std::move(out);
  return s;
}

// Quality metrics against bits per weight (or weight MB per token), one series per path, points
// labelled with the row's non-numeric varying parameters.
void add_quality_plots(const std::string& experiment, const std::vector<const ResultRow*>& rows,
                       const std::vector<std::string>& varying,
                       const std::vector<std::map<std::string, json>>& axes,
                       const ReportOptions& options, std::string* md,
                       std::vector<std::pair<std::string, std::string>>* plots) {
  // x: bits per weight when rows report it; else the weight bytes each decoded token reads
  // (weight_GBps / decode tok/s), which for one model shape is proportional to it.
  const bool have_bpw = std::any_of(
      rows.begin(), rows.end(), [](const ResultRow* r) { return r->number("bits_per_weight"); });
  auto x_of = [&](const ResultRow& r) -> std::optional<double> {
    if (have_bpw) return r.number("bits_per_weight");
    const std::optional<double> gbps = r.number("weight_GBps");
    const std::optional<SpeedMetric> decode = r.speed("decode_tok_s");
    if (!gbps || !decode || decode->median <= 0) return std::nullopt;
    return *gbps * 1e3 / decode->median;  // GB/s / (tok/s) * 1e3 = MB per token
  };
  const std::string x_label = have_bpw ? "bits per weight" : "weight MB read per token";
  std::set<std::string> xs;  // distinct at the precision shown (the MB/token are recomputed)
  for (const ResultRow* r : rows)
    if (r->status == "ok" && x_of(*r)) xs.insert(short_number(*x_of(*r)));
  if (xs.size() < 2) return;
  for (const MetricColumn& metric : quality_plot_metrics()) {
    std::map<std::string, PlotSeries> series;
    size_t n_points = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const ResultRow& r = *rows[i];
      const std::optional<double> x = x_of(r), y = r.number(metric.key);
      if (r.status != "ok" || !x || !y) continue;
      // Series: the path, and the model where models vary; labels: the other varying
      // parameters that name something (strings, named values such as requant modes).
      std::string label, name = r.path;
      for (const std::string& v : varying) {
        if (v == "path") continue;
        const json& val = axes[i].at(v);
        if (v == "model") {
          name += " " + axis_value_text(v, val);
        } else if (!val.is_number() || value_name(v, val.get<double>())) {
          label += (label.empty() ? "" : ", ") + (val.is_number() ? v + " " : std::string()) +
                   axis_value_text(v, val);
        }
      }
      PlotSeries& s = series[name];
      s.name = name;
      s.points.push_back({*x, *y, *y, *y, label});
      ++n_points;
    }
    if (n_points < 2) continue;
    Plot p;
    p.title = fmt::format("{}: {} vs {}", experiment, metric.title, x_label);
    p.x_label = x_label;
    p.y_label = metric.title;
    p.lines = false;
    p.y_from_zero = false;
    for (auto& [n, s] : series) {
      std::sort(s.points.begin(), s.points.end(),
                [](const PlotPoint& a, const PlotPoint& b) { return a.x < b.x; });
      p.series.push_back(merge_coincident(std::move(s)));
    }
    const std::string file = file_safe(
        fmt::format("{}-{}-vs-{}.svg", experiment, metric.key, have_bpw ? "bpw" : "weight_MB"));
    plots->push_back({file, render_svg(p)});
    *md += fmt::format("![{}]({}/{})\n\n", p.title, options.plots_link, file);
  }
}

// Where one cell of the section has rows of different provenance (results_reader.h
// latest_rows), the provenance fields that tell them apart become columns like parameters: each
// row's value (or "unset") goes into its axes and the field names after `names`. Returns those
// field names (none when every cell has one row).
std::vector<std::string> add_variant_axes(const ResultSet& set,
                                          const std::vector<const ResultRow*>& rows,
                                          std::vector<std::string>* names,
                                          std::vector<std::map<std::string, json>>* axes) {
  std::map<std::string, std::vector<size_t>> by_cell;  // cell_id/path -> indices into rows
  for (size_t i = 0; i < rows.size(); ++i) by_cell[rows[i]->key()].push_back(i);
  std::set<std::string> fields;
  for (const auto& [key, idx] : by_cell)
    for (size_t a : idx)
      for (size_t b : idx) {
        const auto& pa = set.context_of(*rows[a]).provenance;
        const auto& pb = set.context_of(*rows[b]).provenance;
        for (const auto& [f, v] : pa)
          if (!pb.count(f) || pb.at(f) != v) fields.insert(f);
        for (const auto& [f, v] : pb)
          if (!pa.count(f)) fields.insert(f);
      }
  std::vector<std::string> out(fields.begin(), fields.end());
  for (const std::string& f : out) {
    if (std::find(names->begin(), names->end(), f) == names->end()) names->push_back(f);
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& p = set.context_of(*rows[i]).provenance;
      (*axes)[i][f] = p.count(f) ? json(p.at(f)) : json("unset");
    }
  }
  return out;
}

Status read_text(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("report: {}: cannot open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return Status::success();
}

// The command that reproduces a section's runs, one per distinct (file version, knobs, commit):
// the knobs that change results as the context recorded them, then fish run on the file.
std::string reproduce_text(const ResultSet& set,
                           const std::function<bool(const ResultContext&)>& in_section) {
  std::vector<std::string> lines;
  for (const ResultContext& c : set.contexts) {
    if (!in_section(c)) continue;
    const json& j = c.json;
    std::string knobs;
    const bool recorded = j.contains("env") && j["env"].is_object();
    if (recorded)
      for (const auto& [k, v] : j["env"].items()) {
        const EnvKnob* knob = find_env_knob(k);
        if (knob && knob->effect == KnobEffect::results && v.is_string())
          knobs += fmt::format("{}={} ", k, v.get<std::string>());
      }
    const std::string file = j.value("experiment_file", std::string("?"));
    std::string line = fmt::format("`{}fish run {}`", knobs, file);
    if (!file.empty() && file[0] == '/')
      line += " (the file was outside the repository: not reproducible from it)";
    else
      line += fmt::format(" with the file of sha256 {}", c.experiment_sha256.substr(0, 12));
    const std::string commit = j.value("commit", std::string()).substr(0, 12);
    if (!commit.empty()) line += fmt::format(" (as of commit {})", commit);
    if (!recorded) line += "; the run's FISH_* knobs were not recorded";
    if (j.contains("env_restored_from") && j["env_restored_from"].is_string())
      line += "; knobs restored from " + j["env_restored_from"].get<std::string>();
    if (std::find(lines.begin(), lines.end(), line) == lines.end()) lines.push_back(line);
  }
  if (lines.empty()) return "";
  if (lines.size() == 1) return "Reproduce: " + md_escape(lines[0]) + ".\n\n";
  std::string out = "Reproduce:\n";
  for (const std::string& l : lines) out += "- " + md_escape(l) + "\n";
  return out + "\n";
}

}  // namespace

std::string render_experiment_section(const ResultSet& set,
                                      const std::vector<const ResultRow*>& rows,
                                      const ReportOptions& options,
                                      std::vector<std::pair<std::string, std::string>>* plots,
                                      const std::string& version_sha) {
  const ResultContext& first_ctx = set.context_of(*rows.front());
  const std::string& name = first_ctx.experiment;
  // One version of an experiment file of several: its own heading and plot names.
  const std::string experiment =
      version_sha.empty() ? name : name + "-" + version_sha.substr(0, 12);
  auto in_section = [&](const ResultContext& c) {
    return c.experiment == name && (version_sha.empty() || c.experiment_sha256 == version_sha);
  };
  std::string md = version_sha.empty() ? fmt::format("### {}\n\n", md_escape(name))
                                       : fmt::format("### {}, file version {}\n\n", md_escape(name),
                                                     version_sha.substr(0, 12));

  // Contexts of this experiment: identical descriptions merged, runs listed.
  std::vector<std::string> descs;
  std::map<std::string, std::vector<std::string>> runs_of;
  std::set<std::string> files;
  int64_t n_cells = 0;
  for (const ResultContext& c : set.contexts) {
    if (!in_section(c)) continue;
    const std::string d = context_text(c);
    if (!runs_of.count(d)) descs.push_back(d);
    std::string run = fmt::format("{} {}", c.run_id.substr(0, 8), c.json.value("started_utc", ""));
    if (c.shard_count > 1) run += fmt::format(" shard {}/{}", c.shard_index, c.shard_count);
    runs_of[d].push_back(run);
    files.insert(fmt::format("`{}` (sha256 {})", c.json.value("experiment_file", "?"),
                             c.experiment_sha256.substr(0, 12)));
    n_cells = std::max(n_cells, c.n_cells);
  }
  std::string file_list;
  for (const std::string& f : files) file_list += (file_list.empty() ? "" : ", ") + f;
  std::map<std::string, int> by_status;
  std::set<int64_t> covered;
  for (const ResultRow* r : rows) {
    ++by_status[r->status];
    covered.insert(r->cell_index);
  }
  std::string counts;
  for (const auto& [s, n] : by_status)
    counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, s);
  md += fmt::format("Experiment file {}: {} of {} cells, {} rows ({}).", file_list, covered.size(),
                    n_cells, rows.size(), counts);
  std::string missing;
  for (int64_t i = 0; i < n_cells; ++i)
    if (!covered.count(i)) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", i);
  if (!missing.empty()) md += fmt::format(" Cells without a row: {}.", missing);
  md += "\n\n";
  md += reproduce_text(set, in_section);
  auto runs_text = [&](const std::string& d) {
    std::string runs;
    for (const std::string& r : runs_of[d]) runs += (runs.empty() ? "" : ", ") + r;
    return runs;
  };
  if (descs.size() == 1) {
    md += fmt::format("Context: {}; runs {}.\n\n", descs.front(), runs_text(descs.front()));
  } else {
    md += "Contexts:\n";
    for (const std::string& d : descs) md += fmt::format("- {}; runs {}\n", d, runs_text(d));
    md += "\n";
  }

  // Parameters: which vary (table key columns) and which are fixed (one line).
  std::vector<std::map<std::string, json>> axes;
  std::vector<std::string> names;  // first-seen order
  for (const ResultRow* r : rows) {
    std::map<std::string, json> a;
    for (auto& [k, v] : r->params()) {
      if (std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
      a[k] = v;
    }
    axes.push_back(std::move(a));
  }
  const std::vector<std::string> variant_fields = add_variant_axes(set, rows, &names, &axes);
  std::vector<std::string> varying;
  std::string fixed;
  for (const std::string& n : names) {
    std::set<std::string> values;
    for (auto& a : axes) values.insert(a.count(n) ? a[n].dump() : "null");
    for (auto& a : axes) a.try_emplace(n, json());  // absent reads as null from here on
    if (values.size() > 1)
      varying.push_back(n);
    else
      fixed += fmt::format("{}{} {}", fixed.empty() ? "" : ", ", n, json_value_text(axes[0][n]));
  }
  if (!fixed.empty()) md += fmt::format("Fixed: {}.\n\n", md_escape(fixed));
  if (!variant_fields.empty()) {
    std::string list;
    for (const std::string& f : variant_fields) list += (list.empty() ? "" : ", ") + f;
    md += fmt::format(
        "Some cells were measured under different provenance; their rows are shown side by side, "
        "told apart by: {}.\n\n",
        md_escape(list));
  }

  std::vector<MetricColumn> speed_cols, scalar_cols;
  for (const MetricColumn& c : metric_columns(true))
    if (std::any_of(rows.begin(), rows.end(),
                    [&](const ResultRow* r) { return has_metric(*r, c.key); }))
      speed_cols.push_back(c);
  for (const MetricColumn& c : metric_columns(false))
    if (std::any_of(rows.begin(), rows.end(),
                    [&](const ResultRow* r) { return has_metric(*r, c.key); }))
      scalar_cols.push_back(c);
  const bool show_layers = std::any_of(rows.begin(), rows.end(), [](const ResultRow* r) {
    const json& p = r->json.value("placement", json::object());
    return p.is_object() && p.value("gpu_layers", json(0)).is_number() &&
           p.value("gpu_layers", json(0)).get<double>() != 0;
  });
  auto notes_of = [](const ResultRow& r) {
    std::string n = r.status == "ok" ? "" : r.status;
    if (r.json.contains("validity") && r.json["validity"].is_array())
      for (const json& v : r.json["validity"])
        if (v.is_string()) n += (n.empty() ? "" : ", ") + v.get<std::string>();
    return n;
  };
  const bool show_notes = std::any_of(rows.begin(), rows.end(),
                                      [&](const ResultRow* r) { return !notes_of(*r).empty(); });

  std::vector<std::string> header = varying;
  if (show_layers) header.push_back("GPU layers");
  for (const MetricColumn& c : speed_cols) header.push_back(c.title);
  for (const MetricColumn& c : scalar_cols) header.push_back(c.title);
  if (show_notes) header.push_back("notes");
  if (header.empty()) header.push_back("path");  // a single-row experiment still gets a table
  for (const std::string& h : header) md += "| " + md_escape(h) + " ";
  md += "|\n|";
  for (size_t i = 0; i < header.size(); ++i) md += "---|";
  md += "\n";
  IntervalMix mix;  // of every speed interval the table shows
  for (const ResultRow* r : rows)
    for (const MetricColumn& c : speed_cols)
      if (const std::optional<SpeedMetric> m = r->speed(c.key)) mix.add(m->interval.kind, m->n);
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = *rows[i];
    std::vector<std::string> cells;
    for (const std::string& v : varying) cells.push_back(json_value_text(axes[i][v]));
    if (show_layers)
      cells.push_back(
          json_value_text(r.json.value("placement", json::object()).value("gpu_layers", json())));
    for (const MetricColumn& c : speed_cols) {
      const std::optional<SpeedMetric> m = r.speed(c.key);
      cells.push_back(m ? interval_text(*m, mix) : "-");
    }
    for (const MetricColumn& c : scalar_cols) cells.push_back(scalar_text(r, c.key));
    if (show_notes) cells.push_back(notes_of(r));
    if (cells.empty()) cells.push_back(r.path);
    for (const std::string& c : cells) md += "| " + md_escape(c) + " ";
    md += "|\n";
  }
  md += "\n";
  if (!mix.empty()) md += median_legend("Speeds", mix) + "\n\n";
  for (const ResultRow* r : rows)
    if (r->status == "error")
      md += fmt::format("- cell {} ({}): {}\n", r->cell_index, r->path, md_escape(r->error));
  std::map<std::pair<std::string, std::string>, int> skipped;  // (path, reason) -> rows
  for (const ResultRow* r : rows)
    if (r->status == "skipped") ++skipped[{r->path, r->error}];
  for (const auto& [what, n] : skipped)
    md += fmt::format("- skipped ({}, {} row{}): {}\n", what.first, n, n == 1 ? "" : "s",
                      what.second.empty() ? "no reason given" : md_escape(what.second));
  if (by_status.count("error") || !skipped.empty()) md += "\n";
  md += render_peer_ratios(rows);

  if (!options.plots_dir.empty()) {
    add_speed_plots(experiment, rows, varying, axes, options, &md, plots);
    add_quality_plots(experiment, rows, varying, axes, options, &md, plots);
  }
  return md;
}

Result<ReportFiles> render_report(const std::vector<std::string>& inputs,
                                  const ReportOptions& options) {
  std::vector<std::string> results, gbench, run_dirs;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec))
      run_dirs.push_back(in);
    else if (fs::path(in).extension() == ".jsonl")
      results.push_back(in);
    else if (fs::path(in).extension() == ".json")
      gbench.push_back(in);
    else
      return make_error(
          "report: {}: unknown input (expected a results .jsonl file, a google-benchmark .json "
          "file or a folder of command runs)",
          in);
  }
  std::sort(gbench.begin(), gbench.end());
  std::sort(run_dirs.begin(), run_dirs.end());
  FISH_ASSIGN_OR_RETURN(ResultSet set, read_results_files(results));

  ReportFiles out;
  out.warnings = set.warnings;
  out.markdown =
      "# FISH benchmarks\n\n"
      "Generated by `fish report` (`scripts/render_benchmarks.py` lists the inputs) from the\n"
      "results committed under `results/`; do not edit by hand. Experiment tables show only the\n"
      "parameters that vary (the fixed ones are listed above each table); speeds are medians with\n"
      "an interval in brackets that the line under each table names: the order-statistic 95% CI\n"
      "of the median where a row has >= 6 repetitions, else [min, max] (too few for a CI).\n"
      "Benchmark times are medians over repetitions with [min, max] and the coefficient of\n"
      "variation; rates are medians of per-repetition rates. Every section names the commit,\n"
      "build, CPU, GPU and OS it was measured on (docs/measurement.md).\n\n";
  const std::vector<const ResultRow*> rows = set.latest_rows();
  if (!rows.empty()) out.markdown += "## Experiments\n\n";
  for (size_t i = 0; i < rows.size();) {
    size_t j = i;
    const std::string& name = set.context_of(*rows[i]).experiment;
    while (j < rows.size() && set.context_of(*rows[j]).experiment == name) ++j;
    const std::vector<const ResultRow*> group(rows.begin() + static_cast<long>(i),
                                              rows.begin() + static_cast<long>(j));
    // Rows of several versions of the experiment file (cells added, renamed, a workload
    // changed) are different experiments: one section per version, the newest run's first.
    std::map<std::string, std::vector<const ResultRow*>> by_version;
    std::map<std::string, std::string> newest;  // version -> latest started_utc of its rows
    for (const ResultRow* r : group) {
      const ResultContext& c = set.context_of(*r);
      by_version[c.experiment_sha256].push_back(r);
      newest[c.experiment_sha256] =
          std::max(newest[c.experiment_sha256], c.json.value("started_utc", std::string()));
    }
    if (by_version.size() == 1) {
      out.markdown += render_experiment_section(set, group, options, &out.plots);
    } else {
      std::vector<std::string> versions;
      for (const auto& [v, rs] : by_version) versions.push_back(v);
      std::stable_sort(
          versions.begin(), versions.end(),
          [&](const std::string& a, const std::string& b) { return newest[a] > newest[b]; });
      for (const std::string& v : versions)
        out.markdown += render_experiment_section(set, by_version[v], options, &out.plots, v);
    }
    i = j;
  }
  if (!gbench.empty() || rows.empty()) out.markdown += "## Microbenchmarks (google-benchmark)\n\n";
  if (gbench.empty() && rows.empty()) out.markdown += "No results committed yet.\n\n";
  for (const std::string& g : gbench) {
    FISH_ASSIGN_OR_RETURN(std::string section, render_gbench_section(g));
    out.markdown += section;
  }
  if (!run_dirs.empty()) out.markdown += "## Command runs\n\n";
  for (const std::string& d : run_dirs) {
    FISH_ASSIGN_OR_RETURN(std::string section, render_command_runs_section(d));
    out.markdown += section;
  }
  while (out.markdown.size() > 1 && out.markdown.ends_with("\n\n")) out.markdown.pop_back();
  return out;
}

Result<std::vector<std::string>> write_report(const ReportFiles& files,
                                              const std::string& markdown_path,
                                              const ReportOptions& options, bool check) {
  std::vector<std::pair<std::string, const std::string*>> wanted;  // (path, content)
  if (!markdown_path.empty()) wanted.push_back({markdown_path, &files.markdown});
  std::set<std::string> plot_paths;
  for (const auto& [name, svg] : files.plots) {
    const std::string p = (fs::path(options.plots_dir) / name).string();
    plot_paths.insert(p);
    wanted.push_back({p, &svg});
  }
  std::vector<std::string> stale;
  std::vector<std::string> strays;  // *.svg in plots_dir that this report no longer makes
  std::error_code ec;
  if (!options.plots_dir.empty() && fs::is_directory(options.plots_dir, ec))
    for (const auto& e : fs::directory_iterator(options.plots_dir, ec))
      if (e.path().extension() == ".svg" && !plot_paths.count(e.path().string()))
        strays.push_back(e.path().string());
  std::sort(strays.begin(), strays.end());
  for (const auto& [path, content] : wanted) {
    std::string current;
    const bool exists = read_text(path, &current).ok();
    if (exists && current == *content) continue;
    if (check) {
      stale.push_back(exists ? path + " (differs)" : path + " (missing)");
      continue;
    }
    if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path(), ec);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << *content;
    if (!f.flush()) return make_error("report: {}: cannot write", path);
  }
  for (const std::string& s : strays) {
    if (check)
      stale.push_back(s + " (no longer generated)");
    else
      fs::remove(s, ec);
  }
  return stale;
}

}  // namespace fish
