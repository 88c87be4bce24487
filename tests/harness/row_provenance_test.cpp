// One cell measured twice: a re-measurement under equal provenance replaces the earlier row; under
// a different commit, machine or FISH_* knob both rows stay, report shows them side by side, and
// compare, gate and merge refuse to pick one. End to end: two `fish run`s of one experiment, one
// with FISH_ISA=scalar.
#include "harness/row_provenance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "harness/compare.h"
#include "harness/merge.h"
#include "harness/report.h"
#include "harness/results_reader.h"
#include "results_fixture.h"

namespace fish {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

json context_with_env(const std::string& run, const json& env) {
  json c = test::make_context(run, "e", 1);
  c["env"] = env;
  return c;
}

json decode_row(const std::string& run, double tok_s) {
  return test::make_row(run, 0, "cpu", {{"n_threads", 1}},
                        {{"decode_tok_s", test::speed_metric({tok_s, tok_s + 1, tok_s - 1})}});
}

TEST(RowProvenance, NamesCommitBuildMachineAndTheMeasurementKnobs) {
  json c = context_with_env("1111111111111111",
                            {{"FISH_VK_ATTN_SPLIT", "0"}, {"FISH_MODELS_DIR", "/m"}});
  c["dirty"] = true;
  c["dirty_diff_sha256"] = std::string(64, 'e');
  const auto f = provenance_fields(c, "a.jsonl");
  EXPECT_EQ(f.at("commit"), "0123456789ab-dirty.eeeeeeee");
  EXPECT_EQ(f.at("build"), "Release -O3");
  EXPECT_EQ(f.at("cpu"), "Fixture CPU x2 (2 CPUs)");
  EXPECT_EQ(f.at("gpu"), "none");
  EXPECT_EQ(f.at("FISH_VK_ATTN_SPLIT"), "0");
  EXPECT_FALSE(f.count("FISH_MODELS_DIR"));  // where models are found is not a measurement knob
  EXPECT_FALSE(f.count("knobs"));
  json other = c;
  other["env"] = json::object();
  other["commit"] = "89abcdef0123" + std::string(28, '0');
  EXPECT_EQ(provenance_difference(f, provenance_fields(other, "b.jsonl")),
            "FISH_VK_ATTN_SPLIT 0 vs unset, commit 0123456789ab-dirty.eeeeeeee vs "
            "89abcdef0123-dirty.eeeeeeee");
  EXPECT_EQ(provenance_difference(f, f), "");
}

TEST(RowProvenance, ContextsWithoutRecordedKnobsAreTiedToTheirFile) {
  const json legacy = test::make_context("1111111111111111", "e", 1);  // no "env"
  EXPECT_EQ(provenance_fields(legacy, "a.jsonl").at("knobs"), "unrecorded (a.jsonl)");
  EXPECT_NE(provenance_key(provenance_fields(legacy, "a.jsonl")),
            provenance_key(provenance_fields(legacy, "b.jsonl")));
}

struct TwoRuns {
  test::TempDir dir;
  ResultSet set;
  // One file: a run, then a second run of the same cell with `env2`, `status2`.
  void write(const json& env1, const json& env2, const std::string& status2 = "ok",
             double tok2 = 20) {
    json r2 = decode_row("2222222222222222", tok2);
    r2["status"] = status2;
    if (status2 != "ok") r2["error"] = "broke";
    test::write_jsonl(dir.file("e.jsonl"), {context_with_env("1111111111111111", env1),
                                            decode_row("1111111111111111", 10),
                                            context_with_env("2222222222222222", env2), r2});
    set = read_results_files({dir.file("e.jsonl")}).value();
  }
};

TEST(LatestRows, AReMeasurementUnderEqualProvenanceReplacesTheEarlierRow) {
  TwoRuns t;
  t.write({{"FISH_ISA", "avx2"}}, {{"FISH_ISA", "avx2"}});
  ASSERT_EQ(t.set.latest_rows().size(), 1u);
  EXPECT_EQ(t.set.latest_rows()[0]->run_id, "2222222222222222");
  EXPECT_TRUE(t.set.cell_variants().empty());
}

TEST(LatestRows, ADifferentKnobKeepsBothMeasurements) {
  TwoRuns t;
  t.write(json::object(), {{"FISH_ISA", "scalar"}});
  ASSERT_EQ(t.set.latest_rows().size(), 2u);
  ASSERT_EQ(t.set.cell_variants().size(), 1u);
  EXPECT_EQ(t.set.cell_variants()[0].size(), 2u);
}

TEST(LatestRows, AFailedAttemptIsReplacedByAnyLaterRowButAFailureAfterAnOkRowIsKept) {
  TwoRuns t;
  t.write(json::object(), {{"FISH_ISA", "scalar"}}, "error");
  EXPECT_EQ(t.set.latest_rows().size(), 2u);  // ok under one provenance, error under another
  // An error row, then an ok row under other knobs: the ok row is the cell's measurement.
  json bad = decode_row("1111111111111111", 10);
  bad["status"] = "error";
  bad["error"] = "broke";
  test::write_jsonl(t.dir.file("f.jsonl"),
                    {context_with_env("1111111111111111", json::object()), bad,
                     context_with_env("2222222222222222", {{"FISH_ISA", "scalar"}}),
                     decode_row("2222222222222222", 20)});
  const ResultSet s = read_results_files({t.dir.file("f.jsonl")}).value();
  ASSERT_EQ(s.latest_rows().size(), 1u);
  EXPECT_EQ(s.latest_rows()[0]->status, "ok");
}

TEST(CellVariants, ReportShowsThemSideBySideWithTheKnobAsAColumn) {
  TwoRuns t;
  t.write(json::object(), {{"FISH_VK_ATTN_SPLIT", "0"}});
  auto files = render_report({t.dir.file("e.jsonl")}, {});
  ASSERT_TRUE(files.ok()) << files.error().message;
  const std::string& md = files->markdown;
  EXPECT_THAT(md, HasSubstr("told apart by: FISH_VK_ATTN_SPLIT."));
  EXPECT_THAT(md, HasSubstr("| FISH_VK_ATTN_SPLIT | decode tok/s |"));
  EXPECT_THAT(md, HasSubstr("| 0 | 20 [19, 21] |"));
  EXPECT_THAT(md, HasSubstr("| unset | 10 [9, 11] |"));
}

TEST(CellVariants, CompareAndGateRefuseToPickOne) {
  TwoRuns t;
  t.write(json::object(), {{"FISH_VK_ATTN_SPLIT", "0"}});
  auto join = join_rows(t.set, t.set);
  ASSERT_FALSE(join.ok());
  EXPECT_THAT(join.error().message, HasSubstr("BASE: " + t.dir.file("e.jsonl") +
                                              ":2 (cell 0, cpu)"
                                              " and " +
                                              t.dir.file("e.jsonl") + ":4 (cell 0, cpu)"));
  EXPECT_THAT(join.error().message, HasSubstr("(FISH_VK_ATTN_SPLIT unset vs 0)"));
}

TEST(CellVariants, MergeRefusesToDropOne) {
  TwoRuns t;
  t.write(json::object(), {{"FISH_VK_ATTN_SPLIT", "0"}});
  auto m = merge_results({t.dir.file("e.jsonl")}, t.dir.file("m.jsonl"), false);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.error().message, HasSubstr("measured under different provenance "
                                           "(FISH_VK_ATTN_SPLIT unset vs 0)"));
  EXPECT_FALSE(std::filesystem::exists(t.dir.file("m.jsonl")));
}

TEST(CellVariants, TwoFilesWithoutRecordedKnobsAreShownSideBySide) {
  // The committed H200 runs of gpu_long_ctx: the default and a FISH_VK_ATTN_SPLIT=0 control in
  // two files of the same commit, written before knobs were recorded. Neither may hide the other.
  test::TempDir dir;
  for (const char* name : {"split", "nosplit"})
    test::write_jsonl(dir.file(std::string(name) + ".jsonl"),
                      {test::make_context("1111111111111111", "e", 1),
                       decode_row("1111111111111111", std::string(name) == "split" ? 30 : 10)});
  auto files = render_report({dir.file("split.jsonl"), dir.file("nosplit.jsonl")}, {});
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_THAT(files->markdown, HasSubstr("told apart by: knobs."));
  EXPECT_THAT(files->markdown,
              HasSubstr("| unrecorded (" + dir.file("nosplit.jsonl") + ") | 10 ["));
  EXPECT_THAT(files->markdown, HasSubstr("| unrecorded (" + dir.file("split.jsonl") + ") | 30 ["));
}

// End to end: the same experiment run twice, the second with FISH_ISA=scalar (same cell ids).
TEST(CellVariants, AKnobChangedBetweenRunsIsVisibleAndNeverMergedSilently) {
  const std::string fish = test::binary_dir() + "/fish";
  ASSERT_TRUE(std::filesystem::exists(fish)) << fish << " not built";
  test::TempDir dir;
  auto sh = [&](const std::string& cmd) {
    const int st = std::system((cmd + " >" + dir.file("log") + " 2>&1").c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  auto log = [&] { return test::read_file(dir.file("log")); };
  const std::string model = dir.file("m.gguf");
  ASSERT_EQ(sh(fish + " make-model --shape tiny --type q8_0 --out " + model), 0) << log();
  std::ofstream(dir.file("e.json")) << R"({"schema_version": 1, "name": "e", "model": [")" + model +
                                           R"("], "defaults": {"n_threads": 1},
    "workload": {"n_prompt": 8, "n_gen": 2},
    "measure": {"warmup": 0, "repetitions": 2, "stream_MiB": 4, "stream_passes": 1},
    "output": {"formats": []}})";
  ASSERT_EQ(sh(fish + " run " + dir.file("e.json") + " --out " + dir.file("a")), 0) << log();
  ASSERT_EQ(
      sh("FISH_ISA=scalar " + fish + " run " + dir.file("e.json") + " --out " + dir.file("b")), 0)
      << log();
  const std::string a = dir.file("a/e.jsonl"), b = dir.file("b/e.jsonl");
  EXPECT_EQ(sh(fish + " report " + a + " " + b + " -o " + dir.file("r.md") + " --no-plots"), 0)
      << log();
  const std::string md = test::read_file(dir.file("r.md"));
  EXPECT_THAT(md, HasSubstr("told apart by: FISH_ISA."));
  EXPECT_THAT(md, HasSubstr("| scalar |"));
  EXPECT_THAT(md, HasSubstr("| unset |"));
  EXPECT_EQ(sh(fish + " merge " + dir.file("m.jsonl") + " " + a + " " + b), 1);
  EXPECT_THAT(log(), HasSubstr("(FISH_ISA unset vs scalar)"));
  EXPECT_EQ(sh(fish + " compare " + a + "," + b + " " + a), 1);
  EXPECT_THAT(log(), HasSubstr("BASE: "));
  EXPECT_EQ(sh(fish + " compare " + a + " " + b), 0) << log();  // one run a side: fine
}

}  // namespace
}  // namespace fish
