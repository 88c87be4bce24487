// `fish bench` end to end through the real CLI on a tiny synthetic model: llama-bench's tests
// (pp, tg, tg @ d, pp+tg) from comma lists, every output format, the rows it leaves being
// ordinary results (fish report reads them, the experiment files fish run repeats), Config fields
// as flags, and bad flags refused with the flag named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/cli_test_util.h"

namespace fish {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

class BenchCommand : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(std::filesystem::exists(test::fish_bin())) << test::fish_bin() << " not built";
    model_ = (test::temp_dir() / "bench_tiny.gguf").string();
    ASSERT_EQ(test::shell_exit_code(
                  test::fish_bin() + " make-model --shape tiny --type q8_0 --out " + model_,
                  (test::temp_dir() / "bench_make_model.log").string()),
              0);
  }
  // Runs `fish bench ARGS --out DIR`; stdout to out.txt, stderr to err.txt.
  int bench(const std::string& args) {
    return test::shell_exit_code("(" + test::fish_bin() + " bench -m " + model_ + " --out " +
                                     dir_.file("res") + " " + args + " 2>" + dir_.file("err.txt") +
                                     ")",
                                 dir_.file("out.txt"));
  }
  std::string out() { return test::file_text(dir_.file("out.txt")); }
  std::string err() { return test::file_text(dir_.file("err.txt")); }

  static inline std::string model_;
  test::TempDir dir_;
};

TEST_F(BenchCommand, MarkdownHasOneLinePerTestAndThreadCountWithIntervals) {
  ASSERT_EQ(bench("-p 16 -n 4 -t 1,2 -r 6 -o md"), 0) << err();
  const std::string md = out();
  EXPECT_THAT(md, HasSubstr("| model | path | n_threads | test | t/s |"));
  EXPECT_THAT(md, HasSubstr("| bench_tiny.gguf | cpu | 1 | pp16 |"));
  EXPECT_THAT(md, HasSubstr("| bench_tiny.gguf | cpu | 2 | pp16 |"));
  EXPECT_THAT(md, HasSubstr("| bench_tiny.gguf | cpu | 2 | tg4 |"));
  EXPECT_THAT(md, HasSubstr("95% CI"));  // 6 repetitions: a real interval, labelled
  EXPECT_THAT(md, Not(HasSubstr("[min, max]")));
  // The rows are ordinary results: fish report renders them, fish run repeats the files.
  const std::string res = dir_.file("res");
  EXPECT_TRUE(std::filesystem::exists(res + "/bench-p16-n1-cpu.json"));
  EXPECT_TRUE(std::filesystem::exists(res + "/bench-p1-n4-cpu.jsonl"));
  EXPECT_EQ(test::shell_exit_code(test::fish_bin() + " report " + res + "/bench-p16-n1-cpu.jsonl",
                                  dir_.file("report.log")),
            0)
      << test::file_text(dir_.file("report.log"));
}

TEST_F(BenchCommand, FewRepetitionsAreLabelledMinMaxNotCi) {
  ASSERT_EQ(bench("-p 8 -n 0 -r 2 -o md"), 0) << err();
  EXPECT_THAT(out(), HasSubstr("[min, max]"));
  EXPECT_THAT(out(), HasSubstr("allow no 95% CI"));  // said, not implied
}

TEST_F(BenchCommand, JsonlCarriesSamplesCommitAndTheDepthAndCombinedTests) {
  ASSERT_EQ(bench("-p 0 -n 3 -d 0,8 -pg 8,2 -r 2 -o jsonl"), 0) << err();
  std::istringstream in(out());
  std::string line;
  std::vector<json> rows;
  while (std::getline(in, line)) rows.push_back(json::parse(line));
  ASSERT_EQ(rows.size(), 3u) << out();
  EXPECT_EQ(rows[0]["test"], "tg3");
  EXPECT_EQ(rows[0]["n_prompt"], 1);  // FISH decodes after one prompt token
  EXPECT_EQ(rows[1]["test"], "tg3 @ d8");
  EXPECT_EQ(rows[1]["n_prompt"], 8);
  EXPECT_EQ(rows[2]["test"], "pp8+tg2");
  for (const json& r : rows) {
    EXPECT_EQ(r["status"], "ok");
    EXPECT_EQ(r["samples_ts"].size(), 2u);
    EXPECT_GT(r["median_ts"].get<double>(), 0);
    EXPECT_TRUE(r.contains("min_max"));
    EXPECT_TRUE(r["commit"].is_string());
  }
}

TEST_F(BenchCommand, CsvAndSqlHaveAHeaderAndARowPerTest) {
  ASSERT_EQ(bench("-p 8 -n 2 -r 1 -o csv"), 0) << err();
  std::istringstream csv(out());
  std::string header, l1, l2, extra;
  std::getline(csv, header);
  std::getline(csv, l1);
  std::getline(csv, l2);
  EXPECT_FALSE(std::getline(csv, extra));
  EXPECT_THAT(header, HasSubstr("model,path,n_threads,test,n_prompt,n_gen,status,median_ts"));
  EXPECT_THAT(header, HasSubstr("commit"));
  EXPECT_THAT(l1, HasSubstr(",pp8,"));
  EXPECT_THAT(l2, HasSubstr(",tg2,"));
  ASSERT_EQ(bench("-p 8 -n 2 -r 1 -o sql"), 0) << err();  // resumes: nothing re-measured
  EXPECT_THAT(out(), HasSubstr("CREATE TABLE IF NOT EXISTS fish_bench ("));
  EXPECT_THAT(out(), HasSubstr("INSERT INTO fish_bench ("));
  EXPECT_THAT(out(), HasSubstr("'pp8'"));
}

TEST_F(BenchCommand, ConfigFieldsAreFlagsAndSweep) {
  ASSERT_EQ(bench("-p 8 -n 0 -r 1 --act int8,f32 -o jsonl"), 0) << err();
  std::istringstream in(out());
  std::string line;
  std::vector<std::string> acts;
  while (std::getline(in, line)) acts.push_back(json::parse(line)["config"]["act"]);
  EXPECT_EQ(acts, (std::vector<std::string>{"int8", "f32"}));
  EXPECT_THAT(out(), Not(HasSubstr("error")));
}

TEST_F(BenchCommand, BadFlagsAreUsageErrorsNamingTheFlag) {
  EXPECT_EQ(bench("-p 8 --act int9"), 1);
  EXPECT_THAT(err(), HasSubstr("--act"));
  EXPECT_THAT(err(), HasSubstr("int9"));
  EXPECT_EQ(bench("-p 8 -o xml"), 1);
  EXPECT_THAT(err(), HasSubstr("xml"));
  EXPECT_EQ(bench("-p 0 -n 0"), 1);
  EXPECT_THAT(err(), HasSubstr("no tests"));
  EXPECT_EQ(bench("-pg 8"), 1);
  EXPECT_THAT(err(), HasSubstr("-pg"));
  EXPECT_EQ(bench("-t 1,,2"), 1);
  EXPECT_THAT(err(), HasSubstr("empty item"));
}

TEST_F(BenchCommand, CompareOfItsRowsJoinsAndNothingJoinedIsExitCode1) {
  ASSERT_EQ(bench("-p 8 -n 0 -r 1"), 0) << err();
  const std::string rows = dir_.file("res") + "/bench-p8-n1-cpu.jsonl";
  EXPECT_EQ(test::shell_exit_code(test::fish_bin() + " compare " + rows + " " + rows,
                                  dir_.file("cmp.log")),
            0)
      << test::file_text(dir_.file("cmp.log"));
  ASSERT_EQ(test::shell_exit_code(test::fish_bin() + " bench -m " + model_ + " --out " +
                                      dir_.file("res2") + " -p 16 -n 0 -r 1",
                                  dir_.file("b2.log")),
            0);
  EXPECT_EQ(test::shell_exit_code(test::fish_bin() + " compare " + rows + " " + dir_.file("res2") +
                                      "/bench-p16-n1-cpu.jsonl",
                                  dir_.file("cmp.log")),
            1);
  EXPECT_THAT(test::file_text(dir_.file("cmp.log")), HasSubstr("no row of HEAD matches"));
}

TEST_F(BenchCommand, AMissingModelIsAnErrorRowAndExitCode2) {
  const int rc = test::shell_exit_code(test::fish_bin() + " bench -m " + dir_.file("nope.gguf") +
                                           " --out " + dir_.file("res") + " -p 8 -n 0 -r 1",
                                       dir_.file("log.txt"));
  EXPECT_EQ(rc, 2);
  EXPECT_THAT(test::file_text(dir_.file("log.txt")), HasSubstr("nope.gguf"));
}

}  // namespace
}  // namespace fish
