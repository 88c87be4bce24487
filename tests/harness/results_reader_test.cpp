// Reading fish-results/1 files: the fixtures (a resumed run, shards) and one bad line per rule,
// each reported as FILE:LINE with what was expected.
#include "harness/results_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "results_fixture.h"

namespace fish {
namespace {

using ::testing::HasSubstr;

TEST(ResultsReader, ReadsBothRunsOfAResumedFile) {
  auto set = read_results_files({test::results_fixture("sweep.jsonl")});
  ASSERT_TRUE(set.ok()) << set.error().message;
  ASSERT_EQ(set->contexts.size(), 2u);
  EXPECT_EQ(set->contexts[1].line, 5);
  EXPECT_EQ(set->contexts[1].experiment, "fixture_sweep");
  EXPECT_EQ(set->contexts[1].n_cells, 6);
  ASSERT_EQ(set->rows.size(), 7u);
  EXPECT_EQ(set->rows[3].line, 6);
  EXPECT_EQ(set->rows[3].context, 1u);
  EXPECT_EQ(set->rows[3].cell_index, 1);
}

TEST(ResultsReader, LatestRowsKeepTheLaterRowOfAKeyInCellOrder) {
  auto set = read_results_files({test::results_fixture("sweep.jsonl")});
  ASSERT_TRUE(set.ok()) << set.error().message;
  const std::vector<const ResultRow*> rows = set->latest_rows();
  ASSERT_EQ(rows.size(), 6u);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i]->cell_index, static_cast<int64_t>(i));
  // Cell 1 was measured in run a (decode 1 tok/s, stale) and again in the resume (line 6).
  EXPECT_EQ(rows[1]->line, 6);
  EXPECT_GT(rows[1]->speed("decode_tok_s")->median, 50);
}

TEST(ResultsReader, ReadsSpeedAndScalarMetrics) {
  auto set = read_results_files({test::results_fixture("quality.jsonl")});
  ASSERT_TRUE(set.ok()) << set.error().message;
  const ResultRow& r = set->rows[0];
  const std::optional<SpeedMetric> d = r.speed("decode_tok_s");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->n, 5);
  EXPECT_EQ(d->samples.size(), 5u);
  EXPECT_EQ(d->median, 60);
  EXPECT_FALSE(r.speed("prefill_tok_s"));  // null
  EXPECT_EQ(*r.number("top1"), 0.91);
  EXPECT_EQ(*r.number("greedy_exact"), 9.0 / 12.0);  // {"n": 9, "of": 12}
  EXPECT_FALSE(r.number("rel_rms"));
}

TEST(ResultsReader, ReportsEveryBadLineWithFileLineAndExpectation) {
  const std::string path = test::results_fixture("bad.jsonl");
  auto set = read_results_files({path});
  ASSERT_FALSE(set.ok());
  const std::string& m = set.error().message;
  EXPECT_THAT(m, HasSubstr("10 problem(s)"));
  EXPECT_THAT(m, HasSubstr(path + ":3: not valid JSON"));
  EXPECT_THAT(m, HasSubstr(path + ":4: expected a JSON object, found array"));
  EXPECT_THAT(m, HasSubstr(path + ":5: \"kind\": expected \"context\"|\"row\", found \"rows\""));
  EXPECT_THAT(m, HasSubstr(path + ":6: \"path\": expected \"cpu\"|\"gpu\", found \"npu\""));
  EXPECT_THAT(m, HasSubstr(path + ":7: \"cell_id\": expected 16 lowercase hex digits"));
  EXPECT_THAT(m, HasSubstr(path + ":8: missing key \"metrics\""));
  EXPECT_THAT(m, HasSubstr(path + ":9: metrics.decode_tok_s.ci95: expected [lo, hi]"));
  EXPECT_THAT(m, HasSubstr(path + ":10: run_id \"ffffffffffffffff\" has no context line"));
  EXPECT_THAT(m, HasSubstr(path + ":11: status \"error\" needs a non-empty \"error\""));
  EXPECT_THAT(m, HasSubstr(path + ":12: \"schema\": expected \"fish-results/1\""));
  EXPECT_THAT(m, ::testing::Not(HasSubstr(":2:")));  // the good row
}

TEST(ResultsReader, RejectsARowBeforeAnyContext) {
  test::TempDir dir;
  auto lines = test::read_jsonl(test::results_fixture("sweep.jsonl"));
  test::write_jsonl(dir.file("r.jsonl"), {lines[1], lines[0]});
  auto set = read_results_files({dir.file("r.jsonl")});
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.error().message, HasSubstr("r.jsonl:1: row before any context line"));
}

TEST(ResultsReader, RejectsMissingAndEmptyFiles) {
  test::TempDir dir;
  auto missing = read_results_files({dir.file("nope.jsonl")});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message, HasSubstr("nope.jsonl: cannot open"));
  test::write_jsonl(dir.file("empty.jsonl"), {});
  auto empty = read_results_files({dir.file("empty.jsonl")});
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.error().message, HasSubstr("empty.jsonl: no context line"));
}

TEST(ResultsReader, ListsAtMostTwentyProblemsAndCountsTheRest) {
  test::TempDir dir;
  std::ofstream f(dir.file("many.jsonl"));
  for (int i = 0; i < 25; ++i) f << "not json\n";
  f.close();
  auto set = read_results_files({dir.file("many.jsonl")});
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.error().message, HasSubstr("25 problem(s)"));
  EXPECT_THAT(set.error().message, HasSubstr("many.jsonl:20: not valid JSON"));
  EXPECT_THAT(set.error().message, ::testing::Not(HasSubstr("many.jsonl:21:")));
  EXPECT_THAT(set.error().message, HasSubstr("and 5 more"));
}

TEST(ResultsReader, IgnoresATornLastLineWithAWarning) {
  test::TempDir dir;
  const std::string path = dir.file("killed.jsonl");
  test::write_jsonl(path, {test::read_jsonl(test::results_fixture("sweep.jsonl"))[0],
                           test::read_jsonl(test::results_fixture("sweep.jsonl"))[1]});
  std::ofstream(path, std::ios::app) << R"({"kind":"row","run_id":"a1a1)";  // no newline
  auto set = read_results_files({path});
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set->rows.size(), 1u);
  ASSERT_EQ(set->warnings.size(), 1u);
  EXPECT_THAT(set->warnings[0], HasSubstr(path + ":3: ignored a partial last line"));
  // The same text followed by a newline is a bad line like any other.
  std::ofstream(path, std::ios::app) << "\n";
  auto bad = read_results_files({path});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr(path + ":3: not valid JSON"));
}

}  // namespace
}  // namespace fish
