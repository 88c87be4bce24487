// The CI gate's committed pieces (results/ci/baseline.jsonl, experiments/gate_rules.json) catch
// what they are for: the baseline against itself and against a copy with +-5% jitter passes; a
// copy whose within-run speeds are halved, or with top-1 dropped by 0.1, fails. And the
// baseline is what experiments/ci_gate.json measures: only machine-independent speed metrics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/compare.h"
#include "harness/experiment.h"
#include "harness/gate.h"
#include "results_fixture.h"

namespace fish {
namespace {

using nlohmann::json;

std::string baseline_path() {
  return test::source_dir() + "/results/ci/baseline.jsonl";
}

GateRules committed_rules() {
  auto r = load_gate_rules(test::source_dir() + "/experiments/gate_rules.json");
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? r.value() : GateRules{};
}

// The baseline's lines with `edit(row)` applied to every ok row, written to `dir`/new.jsonl.
template <class Edit>
ResultSet edited_baseline(const test::TempDir& dir, Edit edit) {
  std::vector<json> lines = test::read_jsonl(baseline_path());
  for (json& l : lines)
    if (l["kind"] == "row" && l["status"] == "ok") edit(l);
  test::write_jsonl(dir.file("new.jsonl"), lines);
  auto set = read_results_files({dir.file("new.jsonl")});
  EXPECT_TRUE(set.ok()) << set.error().message;
  return set.ok() ? std::move(set.value()) : ResultSet{};
}

// Multiplies a speed metric's samples (and its summary) by f(i) for sample i.
template <class F>
void scale_speed(json& m, F f) {
  if (!m.is_object()) return;
  std::vector<double> s = m["samples"].get<std::vector<double>>();
  for (size_t i = 0; i < s.size(); ++i) s[i] *= f(i);
  m = test::speed_metric(s);
}

GateResult gate_against_baseline(const ResultSet& head) {
  auto base = read_results_files({baseline_path()});
  EXPECT_TRUE(base.ok()) << base.error().message;
  return run_gate(join_rows(base.value(), head).value(), committed_rules());
}

size_t count_verdict(const GateResult& r, Verdict v, const std::string& metric) {
  size_t n = 0;
  for (const GateCheck& c : r.checks) n += c.verdict == v && c.metric == metric;
  return n;
}

TEST(CiGate, TheBaselineCoversBothModelsOnBothPathsWithEveryGatedMetric) {
  auto base = read_results_files({baseline_path()});
  ASSERT_TRUE(base.ok()) << base.error().message;
  ASSERT_EQ(base->contexts.size(), 1u);
  EXPECT_EQ(base->contexts[0].experiment, "ci_gate");
  std::set<std::string> keys;
  for (const ResultRow* r : base->latest_rows()) {
    EXPECT_EQ(r->status, "ok") << r->error;
    keys.insert(std::filesystem::path(r->model).filename().string() + "/" + r->path);
    for (const char* m : {"prefill_pct_stream", "decode_pct_stream"})
      EXPECT_TRUE(r->speed(m)) << r->path << " lacks " << m;
    for (const char* m : {"top1", "kl_mean", "greedy_exact"})
      EXPECT_TRUE(r->number(m)) << r->path << " lacks " << m;
    if (r->path == "gpu") {
      EXPECT_TRUE(r->speed("decode_vs_cpu"));
      // The gate's GPU rows are the GPU placement: every layer and the output.
      EXPECT_THAT(r->json["placement"]["gpu_detail"].get<std::string>(),
                  ::testing::HasSubstr("output + "));
      EXPECT_EQ(r->json["validity"].dump().find("cpu_fallback"), std::string::npos);
    }
  }
  EXPECT_EQ(keys, (std::set<std::string>{
                      "SmolLM2-135M-Instruct.Q4_1.gguf/cpu", "SmolLM2-135M-Instruct.Q4_1.gguf/gpu",
                      "gemma-3-270m-q4_k_m.gguf/cpu", "gemma-3-270m-q4_k_m.gguf/gpu"}));
}

TEST(CiGate, TheRulesGateOnlyPairedWithinRunSpeedRatios) {
  // Absolute tok/s of a CI machine says nothing against the machine the baseline came from; %
  // of the stream measured once per run moved 2x between two runs of the same build on the
  // loaded dev machine (its stream read 2.7 vs 5.2 GB/s), so only the paired gpu/cpu ratios gate.
  for (const GateRule& r : committed_rules().rules) {
    for (const char* m : {"decode_tok_s", "prefill_tok_s", "weight_GBps", "weight_GBps_pct_stream",
                          "decode_pct_stream", "prefill_pct_stream"})
      EXPECT_NE(r.metric, m);
  }
}

TEST(CiGate, TheBaselinePassesAgainstItselfAndAgainstFivePercentJitter) {
  test::TempDir dir;
  EXPECT_TRUE(gate_against_baseline(edited_baseline(dir, [](json&) {})).passed());
  const ResultSet jittered = edited_baseline(dir, [](json& row) {
    for (const std::string& m : speed_metric_names())
      scale_speed(row["metrics"][m], [](size_t i) { return i % 2 ? 1.05 : 0.95; });
  });
  const GateResult r = gate_against_baseline(jittered);
  EXPECT_TRUE(r.passed()) << render_gate(r, committed_rules());
}

TEST(CiGate, HalfSpeedFails) {
  // Every within-run speed halved (what a real regression of the engine or the GPU path does to
  // them; the rules' practical threshold is 40%, wide enough for lavapipe sharing the CPU's two
  // cores with the CPU path): the gate fails, on the speed checks alone.
  test::TempDir dir;
  const ResultSet slower = edited_baseline(dir, [](json& row) {
    for (const std::string& m : speed_metric_names())
      scale_speed(row["metrics"][m], [](size_t) { return 0.5; });
  });
  const GateResult r = gate_against_baseline(slower);
  EXPECT_FALSE(r.passed());
  size_t speed_regressions = 0;
  for (const char* m :
       {"prefill_pct_stream", "decode_pct_stream", "prefill_vs_cpu", "decode_vs_cpu"})
    speed_regressions += count_verdict(r, Verdict::regression, m);
  EXPECT_EQ(speed_regressions, r.n_regressions) << render_gate(r, committed_rules());
  EXPECT_GE(speed_regressions, 1u);
}

TEST(CiGate, TopOneDroppedFails) {
  test::TempDir dir;
  const ResultSet dropped = edited_baseline(dir, [](json& row) {
    json& t = row["metrics"]["top1"];
    if (t.is_number()) t = t.get<double>() - 0.1;
  });
  const GateResult r = gate_against_baseline(dropped);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(count_verdict(r, Verdict::regression, "top1"), 4u) << render_gate(r, committed_rules());
}

TEST(CiGate, AGpuPathThatStoppedRunningFails) {
  // In CI the gpu rows run on lavapipe; a build that lost the GPU path writes skipped rows.
  test::TempDir dir;
  const ResultSet skipped = edited_baseline(dir, [](json& row) {
    if (row["path"] != "gpu") return;
    row["status"] = "skipped";
    row["error"] = "vulkan: off";
  });
  EXPECT_FALSE(gate_against_baseline(skipped).passed());
}

TEST(CiGate, TheExperimentMeasuresBothModelsOnBothPathsWithTheGreedyReference) {
  auto e = load_experiment(test::source_dir() + "/experiments/ci_gate.json");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->models.size(), 2u);
  EXPECT_EQ(e->measure.paths, (std::vector<std::string>{"gpu", "cpu"}));
  EXPECT_EQ(e->quality.source, "greedy");
  EXPECT_GE(e->measure.repetitions, 6);  // Mann-Whitney needs samples to call anything
}

TEST(CiGate, EveryGatedSpeedCheckCanReachAlpha) {
  // The run's repetitions against the baseline's samples: the smallest possible p is below
  // alpha, so no speed check is underpowered (one would fail the gate by construction).
  auto e = load_experiment(test::source_dir() + "/experiments/ci_gate.json");
  ASSERT_TRUE(e.ok()) << e.error().message;
  const GateRules rules = committed_rules();
  EXPECT_TRUE(rules.underpowered_fails);
  auto base = read_results_files({baseline_path()});
  ASSERT_TRUE(base.ok()) << base.error().message;
  for (const ResultRow* r : base->latest_rows()) {
    for (const GateRule& rule : rules.rules) {
      if (!rule.speed || !r->speed(rule.metric)) continue;
      EXPECT_LT(
          mann_whitney_min_p(size_t(e->measure.repetitions), r->speed(rule.metric)->samples.size()),
          rules.alpha)
          << r->path << " " << rule.metric;
    }
  }
  const ResultSet same = edited_baseline(test::TempDir{}, [](json&) {});
  EXPECT_EQ(gate_against_baseline(same).n_underpowered, 0u);
}

}  // namespace
}  // namespace fish
