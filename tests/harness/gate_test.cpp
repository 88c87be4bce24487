// fish gate: noise alone does not trip it, a real slowdown beyond the threshold does, a check
// whose sample sizes cannot reach alpha fails as underpowered, quality gates on absolute
// tolerances, lost rows fail, the rules file is validated with JSON paths, and without one every
// shared speed metric is checked.
#include "harness/gate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "results_fixture.h"

namespace fish {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const char* kRules = R"({
  "schema": "fish-gate-rules/1", "alpha": 0.05, "missing": "fail",
  "metrics": {
    "decode_tok_s": {"better": "higher", "max_regression_pct": 5},
    "top1": {"better": "higher", "tolerance": 0.005},
    "kl_mean": {"better": "lower", "tolerance": 0.001}}})";

GateRules rules() {
  return parse_gate_rules(kRules, "rules.json").value();
}

struct Runs {
  test::TempDir dir;
  ResultSet base, head;

  // One cpu row each, n_threads 4, with the given metrics.
  void set(const json& base_metrics, const json& head_metrics) {
    write("base.jsonl", "aaaaaaaaaaaaaaaa", base_metrics);
    write("new.jsonl", "bbbbbbbbbbbbbbbb", head_metrics);
    base = read_results_files({dir.file("base.jsonl")}).value();
    head = read_results_files({dir.file("new.jsonl")}).value();
  }
  void write(const std::string& name, const std::string& run, const json& metrics) {
    test::write_jsonl(dir.file(name), {test::make_context(run, "gate", 1),
                                       test::make_row(run, 0, "cpu", {{"n_threads", 4}}, metrics)});
  }
  GateResult gate(const GateRules& r) { return run_gate(join_rows(base, head).value(), r); }
};

json decode(const std::vector<double>& s) {
  return {{"decode_tok_s", test::speed_metric(s)}};
}

const GateCheck& only_check(const GateResult& r) {
  EXPECT_EQ(r.checks.size(), 1u);
  return r.checks.at(0);
}

TEST(Gate, NoiseAloneDoesNotTrip) {
  // Two runs of the same thing: +-3% jitter, interleaved values.
  Runs runs;
  runs.set(decode({100, 97, 103, 99, 101, 98, 102}), decode({101, 98, 99, 102, 100, 97, 103}));
  const GateResult r = runs.gate(rules());
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(only_check(r).verdict, Verdict::ok);
  EXPECT_GT(only_check(r).p, 0.5);
}

TEST(Gate, SignificantButSmallerThanTheThresholdPasses) {
  // Every new sample is below every base sample (p = 2/252) but the median moved 2.9% < 5%.
  Runs runs;
  runs.set(decode({102, 103, 104, 105, 106}), decode({99, 100, 101, 98, 97}));
  const GateCheck& c = only_check(runs.gate(rules()));
  EXPECT_LT(c.p, 0.05);
  EXPECT_EQ(c.verdict, Verdict::ok);
}

TEST(Gate, ARealSlowdownBeyondTheThresholdTrips) {
  Runs runs;
  runs.set(decode({100, 97, 103, 99, 101}), decode({80, 78, 82, 79, 81}));
  const GateResult r = runs.gate(rules());
  EXPECT_FALSE(r.passed());
  const GateCheck& c = only_check(r);
  EXPECT_EQ(c.verdict, Verdict::regression);
  EXPECT_NEAR(c.p, 2.0 / 252.0, 1e-15);
  EXPECT_EQ(c.change.substr(0, 6), "-20.0%");
  EXPECT_THAT(render_gate(r, rules()),
              HasSubstr("| path cpu | decode_tok_s | 100 | 80 | -20.0% ["));
  EXPECT_THAT(render_gate(r, rules()), HasSubstr("| 0.00794 | 0.00794 | -5% | REGRESSION |"));
  EXPECT_THAT(render_gate(r, rules()), HasSubstr("1 checks, 1 failing"));
}

TEST(Gate, ALargeChangeWithoutEnoughEvidenceIsUnderpoweredAndFails) {
  // 2 vs 2 samples can never reach p < 0.05 (the smallest exact p is 2/6): not a pass.
  Runs runs;
  runs.set(decode({100, 101}), decode({70, 71}));
  const GateResult r = runs.gate(rules());
  const GateCheck& c = only_check(r);
  EXPECT_NEAR(c.p, 1.0 / 3.0, 1e-15);
  EXPECT_NEAR(c.min_p, 1.0 / 3.0, 1e-15);
  EXPECT_EQ(c.verdict, Verdict::underpowered);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.n_underpowered, 1u);
}

// `n` distinct decode samples around `centre` within +-5%, high and low interleaved.
std::vector<double> jittered(double centre, int n, int phase = 0) {
  std::vector<double> s;
  for (int i = 0; i < n; ++i)
    s.push_back(centre * (1 + 0.05 * (((i + phase) % 5) - 2) / 2.0 + 0.001 * (i + phase)));
  return s;
}

TEST(Gate, AHalvedDecodeAtThreeRepetitionsDoesNotPass) {
  // 3 vs 3: the smallest possible p is 2 / C(6, 3) = 0.1 > alpha, so even a 50% slowdown
  // cannot be called a regression; the check is underpowered, and that fails the gate.
  Runs runs;
  runs.set(decode(jittered(100, 3)), decode(jittered(50, 3)));
  const GateResult r = runs.gate(rules());
  const GateCheck& c = only_check(r);
  EXPECT_NEAR(c.p, 0.1, 1e-15);
  EXPECT_NEAR(c.min_p, 0.1, 1e-15);
  EXPECT_EQ(c.verdict, Verdict::underpowered);
  EXPECT_FALSE(r.passed());
  const std::string md = render_gate(r, rules());
  EXPECT_THAT(md, HasSubstr("| UNDERPOWERED |"));
  EXPECT_THAT(md, HasSubstr("1 underpowered"));
  EXPECT_THAT(md, HasSubstr("[min, max] of the pairwise sample ratios"));  // no CI at 3 vs 3
  // Rules may accept underpowered checks (e.g. a smoke run); then it passes, still listed.
  GateRules lenient = rules();
  lenient.underpowered_fails = false;
  EXPECT_TRUE(runs.gate(lenient).passed());
  EXPECT_EQ(runs.gate(lenient).n_underpowered, 1u);
}

TEST(Gate, AHalvedDecodeAtEightRepetitionsFailsAsARegression) {
  Runs runs;
  runs.set(decode(jittered(100, 8)), decode(jittered(50, 8)));
  const GateResult r = runs.gate(rules());
  const GateCheck& c = only_check(r);
  EXPECT_NEAR(c.p, 2.0 / 12870.0, 1e-15);  // complete separation of 8 vs 8
  EXPECT_EQ(c.verdict, Verdict::regression);
  EXPECT_EQ(c.interval, IntervalKind::ci95);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.n_underpowered, 0u);
}

TEST(Gate, FivePercentJitterAtEightRepetitionsPasses) {
  Runs runs;
  runs.set(decode(jittered(100, 8)), decode(jittered(100, 8, 2)));
  const GateResult r = runs.gate(rules());
  EXPECT_EQ(only_check(r).verdict, Verdict::ok);
  EXPECT_TRUE(r.passed()) << render_gate(r, rules());
}

TEST(Gate, WithoutARulesFileEverySpeedMetricOfTheBaselineIsChecked) {
  Runs runs;
  runs.set({{"decode_tok_s", test::speed_metric(jittered(100, 8))},
            {"prefill_tok_s", test::speed_metric(jittered(900, 8))},
            {"decode_vs_cpu", test::speed_metric(jittered(2, 8))},
            {"top1", 0.9}},
           {{"decode_tok_s", test::speed_metric(jittered(50, 8))},
            {"prefill_tok_s", test::speed_metric(jittered(900, 8, 1))}});
  const RowJoin join = join_rows(runs.base, runs.head).value();
  const GateRules d = default_gate_rules(join);
  std::vector<std::string> metrics;
  for (const GateRule& rule : d.rules) {
    metrics.push_back(rule.metric);
    EXPECT_TRUE(rule.speed && rule.higher_is_better);
    EXPECT_EQ(rule.max_regression_pct, kDefaultMaxRegressionPct);
  }
  // top1 is not a speed; decode_vs_cpu is, and NEW lost it.
  EXPECT_EQ(metrics, (std::vector<std::string>{"prefill_tok_s", "decode_tok_s", "decode_vs_cpu"}));
  const GateResult r = run_gate(join, d);
  ASSERT_EQ(r.checks.size(), 3u);
  EXPECT_EQ(r.checks[0].verdict, Verdict::ok);
  EXPECT_EQ(r.checks[1].verdict, Verdict::regression);
  EXPECT_EQ(r.checks[2].verdict, Verdict::missing);
}

TEST(Gate, RunPlanningWarnsWhenRepetitionsCannotReachAlphaOrACi) {
  const std::vector<std::string> three = repetition_warnings(3);
  ASSERT_EQ(three.size(), 2u);
  EXPECT_THAT(three[0], HasSubstr("p = 0.1 at best"));
  EXPECT_THAT(three[0], HasSubstr("use >= 4"));
  EXPECT_THAT(three[1], HasSubstr("[min, max]"));
  EXPECT_THAT(three[1], HasSubstr("75%"));
  const std::vector<std::string> five = repetition_warnings(5);
  ASSERT_EQ(five.size(), 1u);  // powered (2 / C(10, 5)), but no CI of the median
  EXPECT_THAT(five[0], HasSubstr("93.75%"));
  EXPECT_TRUE(repetition_warnings(6).empty());
}

TEST(Gate, ASpeedUpIsReportedAsImproved) {
  Runs runs;
  runs.set(decode({100, 97, 103, 99, 101}), decode({120, 118, 122, 119, 121}));
  const GateResult r = runs.gate(rules());
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(only_check(r).verdict, Verdict::improved);
}

TEST(Gate, QualityGatesOnAbsoluteTolerances) {
  Runs runs;
  // top1 higher is better: a 0.004 drop is within 0.005.
  runs.set({{"top1", 0.95}}, {{"top1", 0.946}});
  EXPECT_EQ(only_check(runs.gate(rules())).verdict, Verdict::ok);
  runs.set({{"top1", 0.95}}, {{"top1", 0.94}});
  EXPECT_EQ(only_check(runs.gate(rules())).verdict, Verdict::regression);
  runs.set({{"top1", 0.95}}, {{"top1", 0.945}});  // exactly the tolerance: passes
  EXPECT_EQ(only_check(runs.gate(rules())).verdict, Verdict::ok);
  // kl_mean lower is better: +0.002 fails, -0.002 improves.
  runs.set({{"kl_mean", 0.003}}, {{"kl_mean", 0.005}});
  EXPECT_EQ(only_check(runs.gate(rules())).verdict, Verdict::regression);
  runs.set({{"kl_mean", 0.003}}, {{"kl_mean", 0.001}});
  EXPECT_EQ(only_check(runs.gate(rules())).verdict, Verdict::improved);
}

TEST(Gate, AMetricOrRowLostInTheNewRunFailsUnlessIgnored) {
  Runs runs;
  runs.set({{"top1", 0.95}}, {});
  GateResult r = runs.gate(rules());
  EXPECT_EQ(only_check(r).verdict, Verdict::missing);
  EXPECT_FALSE(r.passed());
  GateRules lenient = rules();
  lenient.missing_fails = false;
  EXPECT_TRUE(runs.gate(lenient).passed());

  // The new run's row failed.
  json failed = test::make_row("bbbbbbbbbbbbbbbb", 0, "cpu", {{"n_threads", 4}}, {});
  failed["status"] = "error";
  failed["error"] = "session: out of memory";
  test::write_jsonl(runs.dir.file("new.jsonl"),
                    {test::make_context("bbbbbbbbbbbbbbbb", "gate", 1), failed});
  runs.head = read_results_files({runs.dir.file("new.jsonl")}).value();
  r = runs.gate(rules());
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(only_check(r).head, "error: session: out of memory");
}

TEST(Gate, RulesAreValidatedWithTheirJsonPath) {
  auto r = parse_gate_rules(R"({"schema": "fish-gate-rules/1", "alfa": 0.1, "metrics": {
      "decode_tok_s": {"better": "up", "max_regression_pct": -1},
      "top1": {"better": "higher", "max_regression_pct": 5},
      "tok_s": {"better": "higher", "tolerance": 1}}})",
                            "r.json");
  ASSERT_FALSE(r.ok());
  const std::string& m = r.error().message;
  EXPECT_THAT(m, HasSubstr("r.json: 6 problem(s)"));
  EXPECT_THAT(m, HasSubstr("alfa: unknown key"));
  EXPECT_THAT(
      m, HasSubstr("metrics.decode_tok_s.better: expected \"higher\"|\"lower\", found \"up\""));
  EXPECT_THAT(m, HasSubstr("metrics.decode_tok_s.max_regression_pct: expected a number >= 0"));
  EXPECT_THAT(m, HasSubstr("metrics.top1.max_regression_pct: unknown key (expected \"better\", "
                           "\"tolerance\")"));
  EXPECT_THAT(m, HasSubstr("metrics.top1: missing key \"tolerance\""));
  EXPECT_THAT(m, HasSubstr("metrics.tok_s: unknown metric (known: prefill_tok_s|decode_tok_s|"));
  EXPECT_FALSE(parse_gate_rules("{", "x.json").ok());
  auto u = parse_gate_rules(R"({"underpowered": "pass", "metrics": {}})", "u.json");
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(u.error().message, HasSubstr("underpowered: expected \"fail\"|\"ignore\""));
  EXPECT_FALSE(parse_gate_rules(R"({"underpowered": "ignore", "metrics": {}})", "u.json")
                   ->underpowered_fails);
  auto dup =
      parse_gate_rules(R"({"schema": "fish-gate-rules/1", "alpha": 0.1, "alpha": 0.5})", "d.json");
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.error().message, HasSubstr("gate rules: d.json: alpha: duplicate key"));
}

TEST(Gate, TheCommittedDefaultRulesParse) {
  auto r = load_gate_rules(test::source_dir() + "/experiments/gate_rules.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->alpha, 0.05);
  EXPECT_GE(r->rules.size(), 4u);
}

TEST(Gate, CommandExitsThreeOnARegressionAndZeroOtherwise) {
  const std::string fish = test::binary_dir() + "/fish";
  ASSERT_TRUE(std::filesystem::exists(fish)) << fish << " not built";
  Runs runs;
  std::ofstream(runs.dir.file("rules.json")) << kRules;
  const std::string cmd = fish + " gate " + runs.dir.file("base.jsonl") + " " +
                          runs.dir.file("new.jsonl") + " --rules " + runs.dir.file("rules.json") +
                          " > /dev/null 2>&1";
  runs.set(decode({100, 97, 103, 99, 101}), decode({80, 78, 82, 79, 81}));
  int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  runs.set(decode({100, 97, 103, 99, 101}), decode({101, 98, 99, 102, 100}));
  status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Gate, JsonCarriesEveryCheckWithItsVerdictAndTheOutcome) {
  Runs runs;
  runs.set(decode(jittered(100, 8)), decode(jittered(50, 8)));
  const GateResult r = runs.gate(rules());
  const json j = gate_json(r, rules());
  EXPECT_EQ(j["schema"], "fish-gate/1");
  EXPECT_EQ(j["passed"], false);
  EXPECT_EQ(j["n_failing"], 1);
  ASSERT_EQ(j["checks"].size(), 1u);
  const json& c = j["checks"][0];
  EXPECT_EQ(c["metric"], "decode_tok_s");
  EXPECT_EQ(c["verdict"], "REGRESSION");
  EXPECT_EQ(c["fails"], true);
  EXPECT_NEAR(c["p"].get<double>(), 2.0 / 12870.0, 1e-15);
  EXPECT_EQ(c["interval_kind"], "ci95");
  // An underpowered check fails only while the rules say so, and the JSON says which.
  runs.set(decode({100, 101, 99}), decode({50, 51, 49}));
  GateRules lenient = rules();
  lenient.underpowered_fails = false;
  const json k = gate_json(runs.gate(lenient), lenient);
  EXPECT_EQ(k["passed"], true);
  EXPECT_EQ(k["checks"][0]["verdict"], "UNDERPOWERED");
  EXPECT_EQ(k["checks"][0]["fails"], false);
}

TEST(Gate, CommandPrintsJsonWithTheSameExitCode) {
  const std::string fish = test::binary_dir() + "/fish";
  ASSERT_TRUE(std::filesystem::exists(fish)) << fish << " not built";
  Runs runs;
  std::ofstream(runs.dir.file("rules.json")) << kRules;
  runs.set(decode({100, 97, 103, 99, 101}), decode({80, 78, 82, 79, 81}));
  const std::string cmd = fish + " gate " + runs.dir.file("base.jsonl") + " " +
                          runs.dir.file("new.jsonl") + " --rules " + runs.dir.file("rules.json") +
                          " --json > " + runs.dir.file("out.json") + " 2>/dev/null";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  std::ifstream in(runs.dir.file("out.json"));
  const json j = json::parse(in);  // the whole of stdout is one JSON document
  EXPECT_EQ(j["passed"], false);
  EXPECT_EQ(j["checks"][0]["verdict"], "REGRESSION");
}

}  // namespace
}  // namespace fish
