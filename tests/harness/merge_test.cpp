// fish merge: shards back into one file, later rows winning, missing cells listed, experiments
// not mixed by accident.
#include "harness/merge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "harness/results_reader.h"
#include "results_fixture.h"

namespace fish {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A row without what differs between runs of the same cell (which run, how long it took).
nlohmann::json comparable(const ResultRow& r) {
  nlohmann::json j = r.json;
  j.erase("run_id");
  j.erase("t_wall_s");
  return j;
}

TEST(Merge, ThreeShardsEqualTheUnshardedRows) {
  test::TempDir dir;
  auto summary = merge_results(
      {test::results_fixture("shard_0_of_3.jsonl"), test::results_fixture("shard_1_of_3.jsonl"),
       test::results_fixture("shard_2_of_3.jsonl")},
      dir.file("merged.jsonl"), false);
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  EXPECT_EQ(summary->n_rows_written, 6u);
  ASSERT_EQ(summary->experiments.size(), 1u);
  EXPECT_TRUE(summary->experiments.begin()->second.missing.empty());

  auto merged = read_results_files({dir.file("merged.jsonl")});
  auto whole = read_results_files({test::results_fixture("sweep.jsonl")});
  ASSERT_TRUE(merged.ok()) << merged.error().message;
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(merged->contexts.size(), 3u);  // one per shard, all kept
  ASSERT_EQ(merged->rows.size(), 6u);      // already unique
  const std::vector<const ResultRow*> a = merged->latest_rows(), b = whole->latest_rows();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]->key(), b[i]->key());
    EXPECT_EQ(comparable(*a[i]), comparable(*b[i])) << "cell " << a[i]->cell_index;
  }
  // Rows are written in cell order whatever the shard order.
  for (size_t i = 0; i < merged->rows.size(); ++i)
    EXPECT_EQ(merged->rows[i].cell_index, static_cast<int64_t>(i));
}

TEST(Merge, ShardOrderDoesNotChangeTheRows) {
  test::TempDir dir;
  ASSERT_TRUE(merge_results({test::results_fixture("shard_2_of_3.jsonl"),
                             test::results_fixture("shard_0_of_3.jsonl"),
                             test::results_fixture("shard_1_of_3.jsonl")},
                            dir.file("a.jsonl"), false)
                  .ok());
  ASSERT_TRUE(merge_results({test::results_fixture("shard_0_of_3.jsonl"),
                             test::results_fixture("shard_1_of_3.jsonl"),
                             test::results_fixture("shard_2_of_3.jsonl")},
                            dir.file("b.jsonl"), false)
                  .ok());
  auto a = read_results_files({dir.file("a.jsonl")});
  auto b = read_results_files({dir.file("b.jsonl")});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->rows.size(), b->rows.size());
  for (size_t i = 0; i < a->rows.size(); ++i) EXPECT_EQ(a->rows[i].text, b->rows[i].text);
}

TEST(Merge, TheLaterRowOfAKeyWinsAndContextsAreKept) {
  test::TempDir dir;
  auto summary = merge_results({test::results_fixture("sweep.jsonl")}, dir.file("m.jsonl"), false);
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  EXPECT_EQ(summary->n_rows_read, 7u);
  EXPECT_EQ(summary->n_replaced, 1u);
  auto m = read_results_files({dir.file("m.jsonl")});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->contexts.size(), 2u);
  ASSERT_EQ(m->rows.size(), 6u);
  EXPECT_EQ(m->rows[1].run_id, "b2b2b2b2b2b2b2b2");  // the resume's re-measurement
  EXPECT_GT(m->rows[1].speed("decode_tok_s")->median, 50);
}

// A context of experiment "e" with its knobs recorded (none set): equal provenance across files.
nlohmann::json recorded_context(const std::string& run) {
  nlohmann::json c = test::make_context(run, "e", 1);
  c["env"] = nlohmann::json::object();
  return c;
}

TEST(Merge, InputOrderDecidesWhichDuplicateWins) {
  // Two runs of one cell under equal provenance (same binary, machine, knobs): a re-measurement.
  test::TempDir dir;
  const nlohmann::json cfg = {{"n_threads", 1}};
  test::write_jsonl(dir.file("old.jsonl"),
                    {recorded_context("1111111111111111"),
                     test::make_row("1111111111111111", 0, "cpu", cfg,
                                    {{"decode_tok_s", test::speed_metric({1, 1, 1})}})});
  test::write_jsonl(dir.file("new.jsonl"),
                    {recorded_context("2222222222222222"),
                     test::make_row("2222222222222222", 0, "cpu", cfg,
                                    {{"decode_tok_s", test::speed_metric({2, 2, 2})}})});
  ASSERT_TRUE(
      merge_results({dir.file("old.jsonl"), dir.file("new.jsonl")}, dir.file("a.jsonl"), false)
          .ok());
  ASSERT_TRUE(
      merge_results({dir.file("new.jsonl"), dir.file("old.jsonl")}, dir.file("b.jsonl"), false)
          .ok());
  EXPECT_EQ(read_results_files({dir.file("a.jsonl")})->rows[0].speed("decode_tok_s")->median, 2);
  EXPECT_EQ(read_results_files({dir.file("b.jsonl")})->rows[0].speed("decode_tok_s")->median, 1);
}

TEST(Merge, RefusesOneCellFromTwoFilesWithoutRecordedKnobs) {
  // Files written before knobs were recorded: which knobs each ran under is unknown, so the two
  // rows are not taken for a re-measurement of one another.
  test::TempDir dir;
  const nlohmann::json cfg = {{"n_threads", 1}};
  for (const char* run : {"1111111111111111", "2222222222222222"})
    test::write_jsonl(
        dir.file(std::string(run) + ".jsonl"),
        {test::make_context(run, "e", 1),
         test::make_row(run, 0, "cpu", cfg, {{"decode_tok_s", test::speed_metric({1, 1, 1})}})});
  auto m = merge_results({dir.file("1111111111111111.jsonl"), dir.file("2222222222222222.jsonl")},
                         dir.file("m.jsonl"), false);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.error().message, HasSubstr("knobs unrecorded ("));
}

TEST(Merge, ListsCellsNoShardCovered) {
  test::TempDir dir;
  auto summary = merge_results(
      {test::results_fixture("shard_0_of_3.jsonl"), test::results_fixture("shard_1_of_3.jsonl")},
      dir.file("m.jsonl"), false);
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  ASSERT_EQ(summary->experiments.size(), 1u);
  EXPECT_EQ(summary->experiments.begin()->first, "fixture_sweep (cdcdcdcdcdcd)");
  EXPECT_EQ(summary->experiments.begin()->second.n_cells, 6);
  EXPECT_THAT(summary->experiments.begin()->second.missing, ElementsAre(2, 5));
}

TEST(Merge, RefusesDifferentExperimentsUnlessForced) {
  test::TempDir dir;
  const std::vector<std::string> in = {test::results_fixture("shard_0_of_3.jsonl"),
                                       test::results_fixture("quality.jsonl")};
  auto refused = merge_results(in, dir.file("m.jsonl"), false);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message,
              HasSubstr("quality.jsonl:1: experiment_sha256 efefefefefef"));
  EXPECT_THAT(refused.error().message, HasSubstr("--force"));
  EXPECT_EQ(dir.n_entries(), 0u);  // nothing written
  auto forced = merge_results(in, dir.file("m.jsonl"), true);
  ASSERT_TRUE(forced.ok()) << forced.error().message;
  EXPECT_EQ(forced->experiments.size(), 2u);
}

TEST(Merge, OutputMayBeOneOfTheInputs) {
  test::TempDir dir;
  test::write_jsonl(dir.file("a.jsonl"),
                    test::read_jsonl(test::results_fixture("shard_0_of_3.jsonl")));
  ASSERT_TRUE(merge_results({dir.file("a.jsonl"), test::results_fixture("shard_1_of_3.jsonl")},
                            dir.file("a.jsonl"), false)
                  .ok());
  auto m = read_results_files({dir.file("a.jsonl")});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->rows.size(), 4u);
  EXPECT_EQ(dir.n_entries(), 1u);  // no temporary left behind
}

TEST(Merge, ABadInputFailsWithItsLine) {
  test::TempDir dir;
  auto r = merge_results({test::results_fixture("bad.jsonl")}, dir.file("m.jsonl"), false);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("bad.jsonl:3: not valid JSON"));
}

TEST(Merge, CommandExitsTwoWhenCellsAreMissing) {
  const std::string fish = test::binary_dir() + "/fish";
  ASSERT_TRUE(std::filesystem::exists(fish)) << fish << " not built";
  test::TempDir dir;
  const std::string base = fish + " merge " + dir.file("m.jsonl") + " ";
  const std::string s0 = test::results_fixture("shard_0_of_3.jsonl"),
                    s1 = test::results_fixture("shard_1_of_3.jsonl"),
                    s2 = test::results_fixture("shard_2_of_3.jsonl");
  auto exit_code = [&](const std::string& args) {
    const int status = std::system((base + args + " 2> " + dir.file("err")).c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(exit_code(s0 + " " + s1 + " " + s2), 0);
  EXPECT_EQ(exit_code(s0 + " " + s1), 2);
  std::ifstream err(dir.file("err"));
  const std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("fixture_sweep (cdcdcdcdcdcd): 2 of 6 cells missing: 2,5"));
  EXPECT_EQ(exit_code(s0 + " " + test::results_fixture("quality.jsonl")), 1);
}

// The real CLI: `fish run --shard i/3` three times, `fish merge`, against one unsharded run of
// the same experiment (8 cells on a synthetic 2-layer model).
TEST(Merge, ThreeRealShardsOfFishRunEqualTheUnshardedRun) {
  const std::string fish = test::binary_dir() + "/fish";
  ASSERT_TRUE(std::filesystem::exists(fish)) << fish << " not built";
  test::TempDir dir;
  const std::string quiet = " > " + dir.file("log") + " 2>&1";
  ASSERT_EQ(std::system((fish + " make-model --shape tiny --type q4_0 --out " +
                         dir.file("tiny.gguf") + quiet)
                            .c_str()),
            0);
  std::ofstream(dir.file("exp.json")) << nlohmann::json{
      {"schema_version", 1},
      {"name", "shards"},
      {"model", dir.file("tiny.gguf")},
      {"sweep", {{"act", {"int8", "f32"}}, {"n_threads", {1, 2}}, {"n_ctx", {64, 128}}}},
      {"workload", {{"n_prompt", 8}, {"n_gen", 4}}},
      {"measure",
       {{"paths", {"cpu"}},
        {"warmup", 0},
        {"repetitions", 2},
        {"stream_MiB", 64},
        {"stream_passes", 1}}},
      {"output", {{"dir", dir.file("unused")}}}};
  const std::string run = fish + " run " + dir.file("exp.json") + " --out ";
  ASSERT_EQ(std::system((run + dir.file("whole") + quiet).c_str()), 0);
  std::vector<std::string> shards;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(
        std::system(
            (run + dir.file("sharded") + " --shard " + std::to_string(i) + "/3" + quiet).c_str()),
        0);
    shards.push_back(dir.file("sharded/shards.shard-" + std::to_string(i) + "-of-3.jsonl"));
  }
  auto summary = merge_results(shards, dir.file("merged.jsonl"), false);
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  EXPECT_TRUE(summary->experiments.begin()->second.missing.empty());
  auto merged = read_results_files({dir.file("merged.jsonl")});
  auto whole = read_results_files({dir.file("whole/shards.jsonl")});
  ASSERT_TRUE(merged.ok()) << merged.error().message;
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  ASSERT_EQ(whole->rows.size(), 8u);
  ASSERT_EQ(merged->rows.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const ResultRow &a = merged->rows[i], &b = whole->rows[i];
    EXPECT_EQ(a.key(), b.key());
    EXPECT_EQ(a.cell_index, b.cell_index);
    EXPECT_EQ(a.status, b.status);
    EXPECT_EQ(a.config(), b.config());
    EXPECT_EQ(a.workload(), b.workload());
  }
  EXPECT_EQ(merged->contexts.size(), 3u);
}

}  // namespace
}  // namespace fish
