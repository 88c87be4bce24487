#include "harness/gate.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/path_checks.h"
#include "harness/interval_label.h"
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

nlohmann::json gate_json(const GateResult& result, const GateRules& rules) {
  json checks = json::array();
  for (const GateCheck& c : result.checks) {
    const bool fails = c.verdict == Verdict::regression ||
                       (c.verdict == Verdict::missing && rules.missing_fails) ||
                       (c.verdict == Verdict::underpowered && rules.underpowered_fails);
    checks.push_back({{"params", c.params},
                      {"metric", c.metric},
                      {"base", c.base},
                      {"head", c.head},
                      {"change", c.change},
                      {"speed", c.speed},
                      {"p", c.speed ? json(c.p) : json()},
                      {"min_p", c.speed ? json(c.min_p) : json()},
                      {"interval_kind", c.speed ? json(interval_key(c.interval)) : json()},
                      {"threshold", c.threshold},
                      {"verdict", verdict_name(c.verdict)},
                      {"fails", fails}});
  }
  return {{"schema", "fish-gate/1"},
          {"passed", result.passed()},
          {"alpha", rules.alpha},
          {"n_checks", result.checks.size()},
          {"n_failing", result.n_regressions},
          {"n_underpowered", result.n_underpowered},
          {"checks", std::move(checks)}};
}

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
    case Verdict::underpowered:
      return "UNDERPOWERED";
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
    } else if (k == "missing" || k == "underpowered") {
      if (v != "fail" && v != "ignore")
        problem(k, fmt::format("expected \"fail\"|\"ignore\", found {}", v.dump()));
      else
        (k == "missing" ? rules.missing_fails : rules.underpowered_fails) = v == "fail";
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
      problem(k, "unknown key (expected schema, alpha, missing, underpowered, metrics)");
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

GateRules default_gate_rules(const RowJoin& join) {
  GateRules rules;
  for (const std::string& m : speed_metric_names()) {
    const bool in_base = std::any_of(join.both.begin(), join.both.end(), [&](const JoinedRow& j) {
      return j.base->speed(m).has_value();
    });
    if (in_base) rules.rules.push_back({m, true, true, kDefaultMaxRegressionPct, 0});
  }
  return rules;
}

std::vector<std::string> repetition_warnings(int64_t repetitions, double alpha) {
  std::vector<std::string> w;
  const size_t n = size_t(std::max<int64_t>(repetitions, 0));
  const double min_p = mann_whitney_min_p(n, n);
  if (min_p >= alpha) {
    size_t enough = n;
    while (mann_whitney_min_p(enough, enough) >= alpha) ++enough;
    w.push_back(fmt::format(
        "measure.repetitions {}: fish gate of two such runs can reach p = {:.3g} at best, never "
        "alpha {}: every speed check would be underpowered and fail the gate (use >= {})",
        repetitions, min_p, alpha, enough));
  }
  if (n < kMinSamplesForMedianCi)
    w.push_back(fmt::format(
        "measure.repetitions {}: fewer than {} allow no 95% CI of the median; tables show [min, "
        "max] instead (it covers the median with probability {:.4g}%)",
        repetitions, kMinSamplesForMedianCi, 100 * min_max_coverage(n)));
  return w;
}

namespace {

// A speed metric of a joined pair against its rule; nullopt when the baseline did not measure it.
std::optional<GateCheck> speed_check(const JoinedRow& j, const GateRule& rule,
                                     const GateRules& rules) {
  GateCheck c;
  c.metric = rule.metric;
  c.speed = true;
  const std::optional<SpeedMetric> base = j.base->speed(rule.metric);
  if (!base) return std::nullopt;
  const std::optional<SpeedComparison> s = compare_speed(j, rule.metric);
  if (!s) {
    c.base = short_number(base->median);
    c.head = "absent";
    c.verdict = Verdict::missing;
    return c;
  }
  const double ratio = s->ratio.ratio;
  // Worsening in %: a slowdown for higher-is-better rates, a growth for lower-is-better.
  const double worse_pct = (rule.higher_is_better ? 1 - ratio : ratio - 1) * 100;
  const Interval& in = s->ratio.interval;
  c.base = short_number(s->base_median);
  c.head = short_number(s->head_median);
  c.change = fmt::format("{:+.1f}% [{:+.1f}%, {:+.1f}%]", (ratio - 1) * 100, (in.lo - 1) * 100,
                         (in.hi - 1) * 100);
  c.interval = in.kind;
  c.p = s->test.p;
  c.min_p = mann_whitney_min_p(s->n_head, s->n_base);
  c.threshold = fmt::format("{}{}%", rule.higher_is_better ? "-" : "+",
                            short_number(rule.max_regression_pct));
  const bool significant = s->test.p < rules.alpha;
  if (c.min_p >= rules.alpha)
    c.verdict = Verdict::underpowered;  // no data could have made it significant
  else if (significant && worse_pct > rule.max_regression_pct)
    c.verdict = Verdict::regression;
  else if (significant && -worse_pct > rule.max_regression_pct)
    c.verdict = Verdict::improved;
  return c;
}

// A scalar metric of a joined pair against its absolute tolerance; nullopt when the baseline
// did not measure it.
std::optional<GateCheck> scalar_check(const JoinedRow& j, const GateRule& rule) {
  GateCheck c;
  c.metric = rule.metric;
  const std::optional<double> b = j.base->number(rule.metric), h = j.head->number(rule.metric);
  if (!b) return std::nullopt;
  c.base = short_number(*b);
  c.threshold =
      fmt::format("{}{}", rule.higher_is_better ? "-" : "+", short_number(rule.tolerance));
  if (!h) {
    c.head = "absent";
    c.verdict = Verdict::missing;
    return c;
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
  return c;
}

}  // namespace

GateResult run_gate(const RowJoin& join, const GateRules& rules) {
  GateResult result;
  std::vector<std::string> names = join.varying;
  if (names.empty()) names.push_back("path");
  auto add = [&](GateCheck c) {
    if (c.verdict == Verdict::underpowered) ++result.n_underpowered;
    if (c.verdict == Verdict::regression ||
        (c.verdict == Verdict::missing && rules.missing_fails) ||
        (c.verdict == Verdict::underpowered && rules.underpowered_fails))
      ++result.n_regressions;
    result.checks.push_back(std::move(c));
  };
  auto lost = [](std::string params, std::string head) {
    GateCheck c;
    c.params = std::move(params);
    c.metric = "row";
    c.base = "ok";
    c.head = std::move(head);
    c.verdict = Verdict::missing;
    return c;
  };
  for (const JoinedRow& j : join.both) {
    const std::string params = params_text(j, names);
    if (j.base->status != "ok") continue;  // nothing to regress from
    if (j.head->status != "ok") {
      add(lost(params, j.head->status + (j.head->error.empty() ? "" : ": " + j.head->error)));
      continue;
    }
    for (const GateRule& rule : rules.rules) {
      std::optional<GateCheck> c = rule.speed ? speed_check(j, rule, rules) : scalar_check(j, rule);
      if (!c) continue;
      c->params = params;
      add(std::move(*c));
    }
  }
  for (const ResultRow* r : join.only_base) {  // rows NEW lost, after the joined ones
    if (r->status != "ok") continue;
    const JoinedRow gone{r, nullptr, row_params(*r)};
    add(lost(params_text(gone, names), "absent"));
  }
  return result;
}

std::string render_gate(const GateResult& result, const GateRules& rules) {
  IntervalMix mix;
  for (const GateCheck& c : result.checks)
    if (c.speed && !c.change.empty()) mix.add(c.interval, 0);
  std::string md =
      "| parameters | metric | base | new | change [interval] | p | min p | threshold | verdict "
      "|\n|---|---|---|---|---|---|---|---|---|\n";
  for (const GateCheck& c : result.checks) {
    const bool tested = c.speed && !c.change.empty();
    std::string change = c.change;
    if (tested && c.interval == IntervalKind::min_max && mix.mixed()) change += " (min-max)";
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", c.params, c.metric,
                      c.base, c.head, change, tested ? fmt::format("{:.3g}", c.p) : "",
                      tested ? fmt::format("{:.3g}", c.min_p) : "", c.threshold,
                      verdict_name(c.verdict));
  }
  md += "\n";
  if (!mix.empty()) md += ratio_legend(mix) + "\n";
  md += fmt::format(
      "{} checks, {} failing (speed: significant at alpha {} and beyond the threshold; "
      "scalars: beyond the absolute tolerance; missing rows/metrics {}; {} underpowered, "
      "whose sample sizes cannot reach p < alpha (min p >= alpha), {}): {}\n",
      result.checks.size(), result.n_regressions, rules.alpha,
      rules.missing_fails ? "fail" : "are ignored", result.n_underpowered,
      rules.underpowered_fails ? "failing: raise measure.repetitions" : "ignored by the rules",
      result.passed() ? "PASS" : "FAIL");
  return md;
}

}  // namespace fish
