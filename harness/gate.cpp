#include "harness/gate.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/path_checks.h"
#include "harness/json_strict.h"
#include "harness/report_svg.h"

namespace fish {
namespace {

using nlohmann::json;

bool is_speed_metric(const std::string& m) {
  const auto& s = speed_metric_names();
  return std::find(s.begin(), s.end(), m) != s.end();
}

bool is_scalar_metric(const std::string& m) {
  const auto& s = scalar_metric_names();
  return std::find(s.begin(), s.end(), m) != s.end();
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::ok:
      return "ok";
    case Verdict::improved:
      return "improved";
    case Verdict::regression:
      return "REGRESSION";
    case Verdict::missing:
      return "MISSING";
  }
  return "?";
}

Result<GateRules> parse_gate_rules(const std::string& json_text, const std::string& file_name) {
  if (Status st = check_json_strict(json_text, file_name); !st.ok())
    return make_error("gate rules: {}", st.error().message);
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error("gate rules: {}: not valid JSON", file_name);
  if (!j.is_object())
    return make_error("gate rules: {}: expected an object, found {}", file_name, json_type_name(j));
  std::vector<std::string> problems;
  auto problem = [&](std::string path, std::string what) {
    problems.push_back(fmt::format("{}: {}", path, what));
  };
  GateRules rules;
  for (const auto& [k, v] : j.items()) {
    if (k == "schema") {
      if (v != "fish-gate-rules/1")
        problem("schema", fmt::format("expected \"fish-gate-rules/1\", found {}", v.dump()));
    } else if (k == "alpha") {
      if (!v.is_number() || v.get<double>() <= 0 || v.get<double>() >= 1)
        problem("alpha", fmt::format("expected a number in (0, 1), found {}", v.dump()));
      else
        rules.alpha = v.get<double>();
    } else if (k == "missing") {
      if (v != "fail" && v != "ignore")
        problem("missing", fmt::format("expected \"fail\"|\"ignore\", found {}", v.dump()));
      else
        rules.missing_fails = v == "fail";
    } else if (k == "metrics") {
      if (!v.is_object()) {
        problem("metrics", fmt::format("expected an object, found {}", json_type_name(v)));
        continue;
      }
      for (const auto& [name, spec] : v.items()) {
        const std::string path = "metrics." + name;
        GateRule r;
        r.metric = name;
        r.speed = is_speed_metric(name);
        if (!r.speed && !is_scalar_metric(name)) {
          std::string known;
          for (const auto& n : speed_metric_names()) known += (known.empty() ? "" : "|") + n;
          for (const auto& n : scalar_metric_names()) known += "|" + n;
          problem(path, fmt::format("unknown metric (known: {})", known));
          continue;
        }
        if (!spec.is_object()) {
          problem(path, fmt::format("expected an object, found {}", json_type_name(spec)));
          continue;
        }
        const char* threshold = r.speed ? "max_regression_pct" : "tolerance";
        bool has_better = false, has_threshold = false;
        for (const auto& [field, fv] : spec.items()) {
          if (field == "better") {
            has_better = true;
            if (fv != "higher" && fv != "lower")
              problem(path + ".better",
                      fmt::format("expected \"higher\"|\"lower\", found {}", fv.dump()));
            else
              r.higher_is_better = fv == "higher";
          } else if (field == threshold) {
            has_threshold = true;
            if (!fv.is_number() || fv.get<double>() < 0)
              problem(path + "." + field,
                      fmt::format("expected a number >= 0, found {}", fv.dump()));
            else
              (r.speed ? r.max_regression_pct : r.tolerance) = fv.get<double>();
          } else {
            problem(path + "." + field,
                    fmt::format("unknown key (expected \"better\", \"{}\")", threshold));
          }
        }
        if (!has_better) problem(path, "missing key \"better\" (\"higher\"|\"lower\")");
        if (!has_threshold) problem(path, fmt::format("missing key \"{}\"", threshold));
        rules.rules.push_back(r);
      }
    } else {
      problem(k, "unknown key (expected schema, alpha, missing, metrics)");
    }
  }
  if (!j.contains("metrics")) problem("metrics", "missing (the rules per metric)");
  if (!problems.empty()) {
    std::string msg = fmt::format("gate rules: {}: {} problem(s):", file_name, problems.size());
    for (const std::string& p : problems) msg += "\n  " + p;
    return Error{msg};
  }
  return rules;
}

Result<GateRules> load_gate_rules(const std::string& path) {
  auto text = read_regular_file(path, kMaxJsonFileBytes, "a gate rules file");
  if (!text.ok()) return make_error("gate rules: {}", text.error().message);
  return parse_gate_rules(text.value(), path);
}

GateResult run_gate(const RowJoin& join, const GateRules& rules) {
  GateResult result;
  std::vector<std::string> names = join.varying;
  if (names.empty()) names.push_back("path");
  auto add = [&](GateCheck c) {
    if (c.verdict == Verdict::regression || (c.verdict == Verdict::missing && rules.missing_fails))
      ++result.n_regressions;
    result.checks.push_back(std::move(c));
  };
  for (const JoinedRow& j : join.both) {
    const std::string params = params_text(j, names);
    if (j.base->status != "ok") continue;  // nothing to regress from
    if (j.head->status != "ok") {
      add({params, "row", "ok",
           j.head->status + (j.head->error.empty() ? "" : ": " + j.head->error), "", 1, "",
           Verdict::missing});
      continue;
    }
    for (const GateRule& rule : rules.rules) {
      GateCheck c;
      c.params = params;
      c.metric = rule.metric;
      if (rule.speed) {
        const bool in_base = j.base->speed(rule.metric).has_value();
        const std::optional<SpeedComparison> s = compare_speed(j, rule.metric);
        if (!s) {
          if (!in_base) continue;  // the baseline did not measure it
          c.base = short_number(j.base->speed(rule.metric)->median);
          c.head = "absent";
          c.verdict = Verdict::missing;
          add(std::move(c));
          continue;
        }
        const double ratio = s->ratio.ratio;
        // Worsening in %: a slowdown for higher-is-better rates, a growth for lower-is-better.
        const double worse_pct = (rule.higher_is_better ? 1 - ratio : ratio - 1) * 100;
        c.base = short_number(s->base_median);
        c.head = short_number(s->head_median);
        c.change = fmt::format("{:+.1f}% [{:+.1f}%, {:+.1f}%]", (ratio - 1) * 100,
                               (s->ratio.ci95.lo - 1) * 100, (s->ratio.ci95.hi - 1) * 100);
        c.p = s->test.p;
        c.threshold = fmt::format("{}{}%", rule.higher_is_better ? "-" : "+",
                                  short_number(rule.max_regression_pct));
        const bool significant = s->test.p < rules.alpha;
        if (significant && worse_pct > rule.max_regression_pct)
          c.verdict = Verdict::regression;
        else if (significant && -worse_pct > rule.max_regression_pct)
          c.verdict = Verdict::improved;
        add(std::move(c));
      } else {
        const std::optional<double> b = j.base->number(rule.metric),
                                    h = j.head->number(rule.metric);
        if (!b) continue;
        c.base = short_number(*b);
        c.threshold =
            fmt::format("{}{}", rule.higher_is_better ? "-" : "+", short_number(rule.tolerance));
        if (!h) {
          c.head = "absent";
          c.verdict = Verdict::missing;
          add(std::move(c));
          continue;
        }
        c.head = short_number(*h);
        c.change = fmt::format("{:+.4g}", *h - *b);
        const double worse = rule.higher_is_better ? *b - *h : *h - *b;
        // A tiny epsilon so a change of exactly the tolerance, after float rounding, passes.
        const double eps = 1e-12 * std::max({1.0, std::fabs(*b), std::fabs(*h)});
        if (worse > rule.tolerance + eps)
          c.verdict = Verdict::regression;
        else if (-worse > rule.tolerance + eps)
          c.verdict = Verdict::improved;
        add(std::move(c));
      }
    }
  }
  for (const ResultRow* r : join.only_base) {  // rows NEW lost, after the joined ones
    if (r->status != "ok") continue;
    const JoinedRow lost{r, nullptr, row_params(*r)};
    add({params_text(lost, names), "row", "ok", "absent", "", 1, "", Verdict::missing});
  }
  return result;
}

std::string render_gate(const GateResult& result, const GateRules& rules) {
  std::string md =
      "| parameters | metric | base | new | change [95% CI] | p | threshold | verdict |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (const GateCheck& c : result.checks) {
    std::string p = c.p < 1 || !c.change.empty() ? fmt::format("{:.3g}", c.p) : "";
    if (c.change.find('%') == std::string::npos) p = "";  // scalar checks have no test
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", c.params, c.metric, c.base,
                      c.head, c.change, p, c.threshold, verdict_name(c.verdict));
  }
  md += fmt::format(
      "\n{} checks, {} failing (speed: significant at alpha {} and beyond the threshold; "
      "scalars: beyond the absolute tolerance; missing rows/metrics {}): {}\n",
      result.checks.size(), result.n_regressions, rules.alpha,
      rules.missing_fails ? "fail" : "are ignored", result.passed() ? "PASS" : "FAIL");
  return md;
}

}  // namespace fish
