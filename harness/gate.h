// `fish gate BASELINE NEW --rules FILE`: the regression gate. Rows are joined as in compare.h.
// A speed metric regresses only when the change is both significant (two-sided Mann-Whitney p <
// alpha on the raw samples) and beyond its practical threshold (the ratio of medians is worse
// than max_regression_pct), so noise alone and tiny real changes both pass. A scalar metric
// (quality: top1, kl_*, ppl, rel_rms, greedy_exact; or GB/s, memory) regresses when it is worse
// than the baseline by more than its absolute tolerance. A baseline row that is ok but missing,
// failed or without the metric in NEW fails the gate too (unless "missing": "ignore").
//
// Rules file (JSON; experiments/gate_rules.json is the default):
//   {"schema": "fish-gate-rules/1",
//    "alpha": 0.05,                        significance level of the speed test
//    "missing": "fail" | "ignore",         what a row or metric lost in NEW does
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
  std::vector<GateRule> rules;  // in the file's metric order (sorted by name)
};

// Parses and validates a rules file. Errors name the file and the JSON path with expected vs
// found, e.g. "rules.json: metrics.top1.tolerance: expected a number >= 0, found \"x\"".
Result<GateRules> parse_gate_rules(const std::string& json_text, const std::string& file_name);
Result<GateRules> load_gate_rules(const std::string& path);

enum class Verdict { ok, improved, regression, missing };
const char* verdict_name(Verdict v);

struct GateCheck {
  std::string params;  // the row's varying parameters
  std::string metric;
  std::string base, head, change;  // formatted values
  double p = 1;                    // speed checks: Mann-Whitney p; else 1
  std::string threshold;           // "-10%" or "±0.005"
  Verdict verdict = Verdict::ok;
};

struct GateResult {
  std::vector<GateCheck> checks;
  size_t n_regressions = 0;  // regression or (when missing fails) missing
  bool passed() const { return n_regressions == 0; }
};

GateResult run_gate(const RowJoin& join, const GateRules& rules);

// The table of every check, then one summary line.
std::string render_gate(const GateResult& result, const GateRules& rules);

}  // namespace fish
