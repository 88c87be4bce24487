#include "harness/report_gbench.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/path_checks.h"
#include "harness/stats.h"

namespace fish {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;  // counters are listed in the order the file has them

const char* const kContextKeys[] = {"commit", "build", "compiler", "cpu", "gpu", "os"};
// google-benchmark's own per-run keys: everything else numeric is a user counter.
const std::set<std::string> kSkipKeys = {"name",
                                         "family_index",
                                         "per_family_instance_index",
                                         "run_name",
                                         "run_type",
                                         "repetitions",
                                         "repetition_index",
                                         "threads",
                                         "iterations",
                                         "real_time",
                                         "cpu_time",
                                         "time_unit",
                                         "bytes_per_second",
                                         "items_per_second",
                                         "label",
                                         "aggregate_name",
                                         "aggregate_unit",
                                         "error_occurred",
                                         "error_message"};

// A rate with a metric prefix: 9.51G, 12.3k, 57.0, 0.5 (as BENCHMARKS.md always showed them).
std::string rate(double x) {
  const double a = std::fabs(x);
  if (a >= 1e12) return fmt::format("{:.2f}T", x / 1e12);
  if (a >= 1e9) return fmt::format("{:.2f}G", x / 1e9);
  if (a >= 1e6) return fmt::format("{:.2f}M", x / 1e6);
  if (a >= 1e3) return fmt::format("{:.2f}k", x / 1e3);
  if (a >= 10) return fmt::format("{:.1f}", x);
  return fmt::format("{:.3g}", x);
}

std::string duration(double seconds) {
  for (auto [unit, scale] : {std::pair{"s", 1.0}, std::pair{"ms", 1e-3}, std::pair{"us", 1e-6}})
    if (seconds >= scale) return fmt::format("{:.3g} {}", seconds / scale, unit);
  return fmt::format("{:.3g} ns", seconds / 1e-9);
}

double population_cv(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  if (mean == 0) return 0;
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size())) / mean;
}

// google-benchmark writes the spread of a constant counter (0 / 0) as a bare NaN, which JSON
// lacks: values NaN / Infinity / -Infinity become null (shown as an empty cell).
std::string json_without_nan(const std::string& text) {
  static const std::regex bare(R"((:\s*)-?(NaN|Infinity)(\s*[,}\]]))");
  return std::regex_replace(text, bare, "$1null$3");
}

std::string value_text(const ojson& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace

Result<std::string> render_gbench_section(const std::string& path) {
  auto text = read_regular_file(path, kMaxResultsFileBytes, "a google-benchmark JSON file");
  if (!text.ok()) return make_error("report: {}", text.error().message);
  ojson data = ojson::parse(json_without_nan(text.value()), nullptr, /*allow_exceptions=*/false);
  if (data.is_discarded() || !data.is_object())
    return make_error("report: {}: not a JSON object (expected google-benchmark output)", path);
  if (!data.contains("benchmarks") || !data["benchmarks"].is_array())
    return make_error("report: {}: no \"benchmarks\" array (not google-benchmark output?)", path);
  const ojson ctx = data.value("context", ojson::object());

  std::vector<std::string> order, errors;
  std::map<std::string, std::vector<const ojson*>> runs;
  for (const ojson& b : data["benchmarks"]) {
    if (b.value("error_occurred", false)) {
      errors.push_back(fmt::format("{}: {}", b.value("name", std::string("?")),
                                   b.value("error_message", std::string("error"))));
      continue;
    }
    if (b.value("run_type", std::string()) != "iteration") continue;
    const std::string key = b.value("run_name", b.value("name", std::string("?")));
    if (!runs.count(key)) order.push_back(key);
    runs[key].push_back(&b);
  }
  std::string out = fmt::format("### {}\n\n", fs::path(path).stem().string());
  std::string line;
  for (const char* k : kContextKeys)
    if (ctx.contains(k))
      line += fmt::format("{}{} {}", line.empty() ? "" : "; ", k, value_text(ctx[k]));
  const std::string date = ctx.contains("date") ? value_text(ctx["date"]) : "?";
  out += line.empty()
             ? fmt::format("Context: host {}, run {}.\n\n",
                           ctx.contains("host_name") ? value_text(ctx["host_name"]) : "?", date)
             : fmt::format("Context: {}; run {}.\n\n", line, date);
  // The command: scripts/run_bench.sh on the executable's name (google-benchmark records neither
  // the filter nor the repetitions flag; the n column says how many repetitions ran).
  if (ctx.contains("executable") && ctx["executable"].is_string()) {
    std::string exe = fs::path(ctx["executable"].get<std::string>()).filename().string();
    if (exe.rfind("fish_", 0) == 0) exe = exe.substr(5);
    out += fmt::format(
        "Reproduce: `scripts/run_bench.sh {}` (the run's --benchmark_filter is not recorded).\n\n",
        exe);
  }
  std::vector<std::string> counters;
  for (const std::string& key : order)
    for (const auto& [name, v] : runs[key].front()->items())
      if (!kSkipKeys.count(name) && v.is_number() &&
          std::find(counters.begin(), counters.end(), name) == counters.end())
        counters.push_back(name);
  std::vector<std::string> header = {"benchmark", "n", "time (median [min, max])", "CV", "bytes/s"};
  header.insert(header.end(), counters.begin(), counters.end());
  for (const std::string& h : header) out += "| " + h + " ";
  out += "|\n|";
  for (size_t i = 0; i < header.size(); ++i) out += "---|";
  out += "\n";
  for (const std::string& key : order) {
    const std::vector<const ojson*>& reps = runs[key];
    const std::string unit = reps.front()->value("time_unit", std::string("ns"));
    const double scale = unit == "s" ? 1.0 : unit == "ms" ? 1e-3 : unit == "us" ? 1e-6 : 1e-9;
    std::vector<double> t;
    for (const ojson* r : reps) t.push_back(r->value("real_time", 0.0) * scale);
    out += fmt::format("| {} | {} | {} [{}, {}] | {:.1f}% |", key, reps.size(), duration(median(t)),
                       duration(*std::min_element(t.begin(), t.end())),
                       duration(*std::max_element(t.begin(), t.end())), population_cv(t) * 100);
    std::vector<double> bps;
    for (const ojson* r : reps)
      if (r->contains("bytes_per_second")) bps.push_back((*r)["bytes_per_second"].get<double>());
    out += bps.empty() ? "  |" : fmt::format(" {}B/s |", rate(median(bps)));
    for (const std::string& c : counters) {
      std::vector<double> v;
      for (const ojson* r : reps)
        if (r->contains(c) && (*r)[c].is_number()) v.push_back((*r)[c].get<double>());
      out += v.empty() ? "  |" : fmt::format(" {} |", rate(median(v)));
    }
    out += "\n";
  }
  if (!errors.empty()) {
    out += "\n";
    for (const std::string& e : errors) out += "- error: " + e + "\n";
  }
  out += "\n";
  return out;
}

namespace {

// A run folder's README.md inside its "### NAME" section: headings four levels down (a title
// "# T" becomes "**T**"). whole = false: the title and the first paragraph only.
std::string readme_text(const std::string& readme, bool whole) {
  std::istringstream in(readme);
  std::string line, out;
  bool in_paragraph = false, done_first = false, after_title = false;
  while (std::getline(in, line)) {
    if (!whole && done_first) break;
    const bool blank = line.find_first_not_of(" \t\r") == std::string::npos;
    if (after_title && blank) continue;
    after_title = false;
    if (line.rfind("# ", 0) == 0) {
      out += "**" + line.substr(2) + "**\n\n";
      after_title = true;
      continue;
    }
    if (line.rfind('#', 0) == 0) {
      if (!whole) break;
      out += "###" + line + "\n";
      continue;
    }
    if (blank) {
      if (in_paragraph) done_first = true;
      in_paragraph = false;
      out += "\n";
      continue;
    }
    in_paragraph = true;
    out += line + "\n";
  }
  while (out.size() > 1 && out.ends_with("\n\n")) out.pop_back();
  return out + "\n";
}

}  // namespace

Result<std::string> render_command_runs_section(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return make_error("report: {}: not a folder", dir);
  const std::string heading = fmt::format("### {}\n\n", fs::path(dir).filename().string());
  std::string out = heading;
  std::map<std::string, std::string> ctx;
  if (std::ifstream c(fs::path(dir) / "context.txt"); c) {
    std::string l;
    while (std::getline(c, l)) {
      const size_t eq = l.find('=');
      if (eq != std::string::npos) ctx[l.substr(0, eq)] = l.substr(eq + 1);
    }
    std::string line;
    for (const char* k : kContextKeys)
      if (ctx.count(k)) line += fmt::format("{}{} {}", line.empty() ? "" : "; ", k, ctx[k]);
    out += "Context: " + line + ".\n\n";
  }
  std::vector<std::string> files;
  std::vector<std::string> tables;  // *.md but README.md: result tables, included as they are
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".txt") files.push_back(e.path().string());
    if (e.path().extension() == ".md" && e.path().filename() != "README.md")
      tables.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::sort(tables.begin(), tables.end());
  std::string lines;
  for (const std::string& f : files) {
    const std::string name = fs::path(f).filename().string();
    if (name == "context.txt" || name == "machine.txt") continue;
    std::ifstream in(f);
    std::string l;
    while (std::getline(in, l)) {
      if (l.rfind("fish ", 0) != 0 && l.find("Elapsed") == std::string::npos) continue;
      const size_t b = l.find_first_not_of(" \t\r"), e = l.find_last_not_of(" \t\r");
      lines += name + ": " + (b == std::string::npos ? "" : l.substr(b, e - b + 1)) + "\n";
    }
  }
  // README.md says what was run and why: its title and first paragraph lead the section; where
  // the folder holds no outputs it is the whole record, included with its headings below ours.
  std::string readme;
  if (std::ifstream in(fs::path(dir) / "README.md"); in) {
    std::stringstream text;
    text << in.rdbuf();
    readme = text.str();
  }
  const bool readme_only = lines.empty() && tables.empty();
  if (!readme.empty()) out.insert(heading.size(), readme_text(readme, readme_only));
  if (!lines.empty() || (tables.empty() && readme.empty())) out += "```\n" + lines + "```\n\n";
  for (const std::string& t : tables) {
    std::ifstream in(t);
    std::stringstream text;
    text << in.rdbuf();
    std::string body = text.str();
    while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) body.pop_back();
    out += body + "\n\n";
  }
  return out;
}

}  // namespace fish
