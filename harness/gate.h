// `fish gate BASELINE NEW [--rules FILE]`: the regression gate. Rows are joined as in compare.h.
// A speed metric regresses only when the change is both significant (two-sided Mann-Whitney p <
// alpha on the raw samples) and beyond its practical threshold (the ratio of medians is worse
// than max_regression_pct), so noise alone and tiny real changes both pass. A speed check whose
// sample sizes cannot reach p < alpha whatever the data (3 vs 3: p >= 0.1) is underpowered: it
// could never fail, so it fails the gate itself (unless "underpowered": "ignore"). A scalar
// metric (quality: top1, kl_*, ppl, rel_rms, greedy_exact; or GB/s, memory) regresses when it is
// worse than the baseline by more than its absolute tolerance. A baseline row that is ok but
// missing, failed or without the metric in NEW fails the gate too (unless "missing": "ignore").
// Without a rules file every speed metric of the baseline's joined rows is checked
// (default_gate_rules).
//
// Rules file (JSON; experiments/gate_rules.json holds the CI gate's):
//   {"schema": "fish-gate-rules/1",
//    "alpha": 0.05,                        significance level of the speed test
//    "missing": "fail" | "ignore",         what a row or metric lost in NEW does
//    "underpowered": "fail" | "ignore",    what a speed check too small to reach alpha does
//    "metrics": {
//      "decode_tok_s": {"better": "higher", "max_regression_pct": 10},   speed metrics
//      "top1":         {"better": "higher", "tolerance": 0.005}, ...}}   scalar metrics
// Unknown keys and metric names are errors.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "harness/compare.h"

namespace fish {

struct GateRule {
  std::string metric;
  bool higher_is_better = true;
  bool speed = false;             // a samples metric (prefill_tok_s, decode_tok_s)
  double max_regression_pct = 0;  // speed: allowed worsening of the median ratio, in %
  double tolerance = 0;           // scalar: allowed absolute worsening
};

struct GateRules {
  double alpha = 0.05;
  bool missing_fails = true;
  bool underpowered_fails = true;
  std::vector<GateRule> rules;  // in the file's metric order (sorted by name)
};

// The practical threshold of the rules used without a file: a 10% worse median (asv's default
// factor of 1.1).
inline constexpr double kDefaultMaxRegressionPct = 10;

// The rules `fish gate` uses without a rules file: alpha 0.05, missing and underpowered checks
// fail, and every speed metric some joined baseline row has (the absolute tok/s of each path as
// well as the within-run ratios; one NEW lost then fails as missing), higher is better,
// kDefaultMaxRegressionPct.
GateRules default_gate_rules(const RowJoin& join);

// Warnings for an experiment's measure.repetitions, printed when `fish run` plans it: too few for
// a gate of two such runs to reach alpha (every speed check underpowered), or for a 95% CI of the
// median (tables then show [min, max]). Empty when there is nothing to say.
std::vector<std::string> repetition_warnings(int64_t repetitions, double alpha = 0.05);

// Parses and validates a rules file. Errors name the file and the JSON path with expected vs
// found, e.g. "rules.json: metrics.top1.tolerance: expected a number >= 0, found \"x\"".
Result<GateRules> parse_gate_rules(const std::string& json_text, const std::string& file_name);
Result<GateRules> load_gate_rules(const std::string& path);

enum class Verdict { ok, improved, regression, missing, underpowered };
const char* verdict_name(Verdict v);

struct GateCheck {
  std::string params;  // the row's varying parameters
  std::string metric;
  std::string base, head, change;  // formatted values
  bool speed = false;              // a Mann-Whitney check (p and min_p apply)
  double p = 1;                    // speed checks: Mann-Whitney p; else 1
  double min_p = 0;                // speed checks: the smallest p the two sample sizes allow
  IntervalKind interval = IntervalKind::ci95;  // speed checks: of the change's brackets
  std::string threshold;                       // "-10%" or "±0.005"
  Verdict verdict = Verdict::ok;
};

struct GateResult {
  std::vector<GateCheck> checks;
  // Failing checks: regression, missing (when missing fails), underpowered (when that fails).
  size_t n_regressions = 0;
  size_t n_underpowered = 0;  // underpowered checks, failing or not
  bool passed() const { return n_regressions == 0; }
};

GateResult run_gate(const RowJoin& join, const GateRules& rules);

// The table of every check, then one summary line.
std::string render_gate(const GateResult& result, const GateRules& rules);

// The same for programs (`fish gate --json`, schema "fish-gate/1"):
//   {"schema", "passed", "alpha", "n_checks", "n_failing", "n_underpowered",
//    "checks": [{"params", "metric", "base", "head", "change" (as the table prints them),
//                "speed", "p", "min_p" (speed checks; else null), "interval_kind", "threshold",
//                "verdict": verdict_name (ok, improved, REGRESSION, MISSING, UNDERPOWERED),
//                "fails"}]}
nlohmann::json gate_json(const GateResult& result, const GateRules& rules);

}  // namespace fish
