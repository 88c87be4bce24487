// fish compare: the join on parameters and the per-metric ratio with CI and Mann-Whitney p.
#include "harness/compare.h"

#include "engine/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "results_fixture.h"

namespace fish {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

ResultSet results(const test::TempDir& dir, const std::string& name,
                  const std::vector<json>& rows) {
  std::vector<json> lines = {test::make_context(rows.at(0)["run_id"], "cmp", 4)};
  lines.insert(lines.end(), rows.begin(), rows.end());
  test::write_jsonl(dir.file(name), lines);
  auto set = read_results_files({dir.file(name)});
  EXPECT_TRUE(set.ok()) << set.error().message;
  return std::move(set).value();
}

TEST(Compare, JoinsOnParametersNotOnCellId) {
  test::TempDir dir;
  json a = test::make_row("aaaaaaaaaaaaaaaa", 0, "cpu", {{"n_threads", 1}}, {});
  json b = test::make_row("bbbbbbbbbbbbbbbb", 3, "cpu", {{"n_threads", 1}}, {});
  b["cell_id"] = "0123456789abcdef";  // e.g. a new harness version: another id, same parameters
  json only_base = test::make_row("aaaaaaaaaaaaaaaa", 1, "cpu", {{"n_threads", 2}}, {});
  json only_head = test::make_row("bbbbbbbbbbbbbbbb", 2, "gpu", {{"n_threads", 1}}, {});
  const ResultSet base = results(dir, "base.jsonl", {a, only_base});
  const ResultSet head = results(dir, "head.jsonl", {b, only_head});
  const RowJoin join = join_rows(base, head).value();
  ASSERT_EQ(join.both.size(), 1u);
  EXPECT_EQ(join.both[0].base->cell_index, 0);
  EXPECT_EQ(join.both[0].head->cell_index, 3);
  ASSERT_EQ(join.only_base.size(), 1u);
  EXPECT_EQ(join.only_base[0]->cell_index, 1);
  ASSERT_EQ(join.only_head.size(), 1u);
  EXPECT_EQ(join.only_head[0]->path, "gpu");
  const std::string md = render_comparison(join);
  EXPECT_THAT(md, HasSubstr("- only in BASE: " + dir.file("base.jsonl") + ":3 (cell 1, cpu)"));
  EXPECT_THAT(md, HasSubstr("- only in HEAD: " + dir.file("head.jsonl") + ":3 (cell 2, gpu)"));
}

TEST(Compare, AConfigFieldARowLacksJoinsAsItsDefault) {
  // The committed CI baseline predates kquant_repack, engine, llama_bench and depth: its rows
  // join the same cells written now (the fields present at their defaults), and not rows with
  // another value of one of them.
  test::TempDir dir;
  const std::string baseline = test::source_dir() + "/results/ci/baseline.jsonl";
  std::ifstream in(baseline);
  ASSERT_TRUE(in) << baseline;
  std::ofstream now(dir.file("now.jsonl")), other(dir.file("other.jsonl"));
  std::string line;
  size_t n_rows = 0;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    if (j["kind"] == "row") {
      ASSERT_FALSE(j["config"].contains("kquant_repack"));
      ++n_rows;
      const Config d;
      j["config"]["kquant_repack"] = d.kquant_repack;
      j["config"]["engine"] = d.engine;
      j["config"]["llama_bench"] = d.llama_bench;
      j["config"]["depth"] = d.depth;
      now << j.dump() << "\n";
      j["config"]["kquant_repack"] = "off";
      other << j.dump() << "\n";
    } else {
      now << line << "\n";
      other << line << "\n";
    }
  }
  now.close();
  other.close();
  ASSERT_GT(n_rows, 0u);
  auto base = read_results_files({baseline});
  ASSERT_TRUE(base.ok()) << base.error().message;
  auto head = read_results_files({dir.file("now.jsonl")});
  ASSERT_TRUE(head.ok()) << head.error().message;
  auto joined = join_rows(*base, *head);
  ASSERT_TRUE(joined.ok()) << joined.error().message;
  EXPECT_EQ(joined->both.size(), n_rows);
  EXPECT_TRUE(joined->only_head.empty());
  auto off = read_results_files({dir.file("other.jsonl")});
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_TRUE(join_rows(*base, *off)->both.empty());
}

TEST(Compare, RatioOfMediansWithCiAndMannWhitneyFromTheSamples) {
  test::TempDir dir;
  const std::vector<double> base_s = {10, 10.5, 11, 9.5, 10.2};
  std::vector<double> head_s;
  for (double x : base_s) head_s.push_back(2 * x);
  // The rows' own "median" fields are deliberately wrong: compare must use the samples.
  json bm = test::speed_metric(base_s), hm = test::speed_metric(head_s);
  bm["median"] = 1;
  hm["median"] = 1;
  const ResultSet base = results(
      dir, "b.jsonl",
      {test::make_row("aaaaaaaaaaaaaaaa", 0, "cpu", {{"n_threads", 1}}, {{"decode_tok_s", bm}})});
  const ResultSet head = results(
      dir, "h.jsonl",
      {test::make_row("bbbbbbbbbbbbbbbb", 0, "cpu", {{"n_threads", 1}}, {{"decode_tok_s", hm}})});
  const RowJoin join = join_rows(base, head).value();
  ASSERT_EQ(join.both.size(), 1u);
  const std::optional<SpeedComparison> c = compare_speed(join.both[0], "decode_tok_s");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->base_median, 10.2);
  EXPECT_EQ(c->ratio.ratio, 2);
  EXPECT_LE(c->ratio.interval.lo, 2);
  EXPECT_GE(c->ratio.interval.hi, 2);
  EXPECT_EQ(c->ratio.interval.kind, IntervalKind::ci95);       // 5 vs 5 can reach p < 0.05
  EXPECT_GT(c->ratio.interval.lo, 1.5);                        // every pairwise ratio is >= 19/11
  EXPECT_NEAR(c->test.p, 2.0 / 252.0, 1e-15);                  // complete separation of 5 vs 5
  EXPECT_FALSE(compare_speed(join.both[0], "prefill_tok_s"));  // null on both sides
  EXPECT_THAT(render_comparison(join), HasSubstr("| decode_tok_s | 10.2 | 20.4 | 2.000 ["));
}

TEST(Compare, QualityMetricsShowBothValuesAndTheDifference) {
  test::TempDir dir;
  const ResultSet base =
      results(dir, "b.jsonl",
              {test::make_row("aaaaaaaaaaaaaaaa", 0, "cpu", {{"act", "int8"}}, {{"top1", 0.95}})});
  const ResultSet head =
      results(dir, "h.jsonl",
              {test::make_row("bbbbbbbbbbbbbbbb", 0, "cpu", {{"act", "int8"}}, {{"top1", 0.97}})});
  EXPECT_THAT(render_comparison(join_rows(base, head).value()),
              HasSubstr("| top1 | 0.95 | 0.97 | +0.02 (difference) |"));
}

TEST(Compare, CommandPrintsTheTableAndTheUnmatchedRows) {
  const std::string fish = test::binary_dir() + "/fish";
  ASSERT_TRUE(std::filesystem::exists(fish)) << fish << " not built";
  test::TempDir dir;
  const std::string cmd = fish + " compare " + test::results_fixture("sweep.jsonl") + " " +
                          test::results_fixture("shard_0_of_3.jsonl") + "," +
                          test::results_fixture("shard_1_of_3.jsonl") + " > " + dir.file("out") +
                          " 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(dir.file("out"));
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(out, HasSubstr("| act | n_threads | metric | base | head | head/base [interval] |"));
  EXPECT_THAT(out, HasSubstr("| int8 | 1 | decode_tok_s | 40 | 40 | 1.000 ["));
  EXPECT_THAT(out, HasSubstr("sweep.jsonl:4 (cell 2, cpu)"));  // shard 2 was not given
  EXPECT_THAT(out, HasSubstr("4 rows joined, 2 only in BASE, 0 only in HEAD"));
}

// BENCHMARKS.md's promise: a section's committed run is the baseline of a fresh one. The
// requant_modes experiment (CPU, committed from the dev machine) cut to one cell of one model
// and 3 repetitions: the fresh row joins the committed one and fish compare prints its ratios.
TEST(Compare, AFreshRunOfACommittedCpuSectionJoinsTheCommittedRun) {
  const std::string model = test::model_path(test::kSmolLm2);
  if (model.empty()) GTEST_SKIP() << test::kSmolLm2 << " not in FISH_MODELS_DIR (setup.sh)";
  const std::string fish = test::binary_dir() + "/fish";
  ASSERT_TRUE(std::filesystem::exists(fish)) << fish << " not built";
  const std::string committed =
      test::source_dir() + "/results/experiments/requant_modes-dev-2core/requant_modes.jsonl";
  std::ifstream in(test::source_dir() + "/experiments/requant_modes.json");
  ASSERT_TRUE(in);
  nlohmann::json e = nlohmann::json::parse(in);
  e["model"] = model;
  e["sweep"]["requant"] = {0};
  e["measure"]["warmup"] = 0;
  e["measure"]["repetitions"] = 3;
  e["measure"]["stream_MiB"] = 64;
  test::TempDir dir;
  std::ofstream(dir.file("requant_modes.json")) << e.dump();
  const std::string run = fish + " run " + dir.file("requant_modes.json") + " --out " +
                          dir.file("out") + " > " + dir.file("run.log") + " 2>&1";
  ASSERT_EQ(std::system(run.c_str()), 0) << test::read_file(dir.file("run.log"));
  const std::string cmp = fish + " compare " + committed + " " +
                          dir.file("out/requant_modes.jsonl") + " > " + dir.file("out.txt") +
                          " 2>&1";
  const int status = std::system(cmp.c_str());
  const std::string out = test::read_file(dir.file("out.txt"));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_THAT(out, HasSubstr("1 rows joined, 7 only in BASE, 0 only in HEAD"));
  EXPECT_THAT(out, HasSubstr("| decode_tok_s |"));
  EXPECT_THAT(out, HasSubstr("| top1 |"));
}

TEST(Compare, CommandPrintsJsonWithTheJoinedRowsRatiosAndTheUnmatched) {
  const std::string fish = test::binary_dir() + "/fish";
  ASSERT_TRUE(std::filesystem::exists(fish)) << fish << " not built";
  test::TempDir dir;
  const std::string cmd = fish + " compare " + test::results_fixture("sweep.jsonl") + " " +
                          test::results_fixture("shard_0_of_3.jsonl") + "," +
                          test::results_fixture("shard_1_of_3.jsonl") + " --json > " +
                          dir.file("out.json") + " 2>/dev/null";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(dir.file("out.json"));
  const nlohmann::json j = nlohmann::json::parse(in);  // stdout is one JSON document
  EXPECT_EQ(j["schema"], "fish-compare/1");
  EXPECT_EQ(j["joined"].size(), 4u);
  EXPECT_EQ(j["only_base"].size(), 2u);
  EXPECT_EQ(j["only_head"].size(), 0u);
  EXPECT_THAT(j["only_base"][0]["label"].get<std::string>(), HasSubstr("sweep.jsonl:"));
  bool found = false;
  for (const nlohmann::json& e : j["joined"])
    for (const nlohmann::json& s : e["speed"])
      if (s["metric"] == "decode_tok_s" && e["params"]["act"] == "int8" &&
          e["params"]["n_threads"] == 1) {
        found = true;
        EXPECT_DOUBLE_EQ(s["ratio"].get<double>(), 1.0);
        EXPECT_EQ(s["interval"].size(), 2u);
        EXPECT_TRUE(s["p"].is_number());
      }
  EXPECT_TRUE(found) << j.dump(1);
}

TEST(Compare, SplitsCommaSeparatedFileLists) {
  EXPECT_EQ(split_paths("a.jsonl,b.jsonl"), (std::vector<std::string>{"a.jsonl", "b.jsonl"}));
  EXPECT_EQ(split_paths("a.jsonl"), (std::vector<std::string>{"a.jsonl"}));
  EXPECT_EQ(split_paths("a,,b,"), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace fish
