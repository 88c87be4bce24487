// Command-run folders in the report (harness/report_gbench.h render_command_runs_section): the
// context line, the `fish ...` stats lines of *.txt files, and *.md result tables as they are.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "harness/report_gbench.h"
#include "test_env.h"

namespace fish {
namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(ReportRuns, StatsLinesThenMarkdownTablesButNotTheReadme) {
  test::TempDir dir;
  write(dir.file("context.txt"), "commit=abc123\ncpu=Test CPU x2\n");
  write(dir.file("README.md"), "How these were produced.\n");
  write(dir.file("gen.txt"), "some text\nfish generate: decode 10 tok/s\n");
  write(dir.file("b_memory.md"), "| a | b |\n|---|---|\n| 1 | 2 |\n\n");
  write(dir.file("a_greedy.md"), "| setting | exact |\n|---|---|\n| fp | 9/12 |\n");
  auto r = render_command_runs_section(dir.path().string());
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string& md = r.value();
  EXPECT_NE(md.find("commit abc123"), std::string::npos) << md;
  EXPECT_NE(md.find("gen.txt: fish generate: decode 10 tok/s"), std::string::npos) << md;
  EXPECT_EQ(md.find("some text"), std::string::npos) << md;
  EXPECT_EQ(md.find("How these were produced"), std::string::npos) << md;
  const size_t greedy = md.find("| fp | 9/12 |"), memory = md.find("| 1 | 2 |");
  ASSERT_NE(greedy, std::string::npos) << md;
  ASSERT_NE(memory, std::string::npos) << md;
  EXPECT_LT(md.find("```"), greedy);  // tables follow the stats block, in name order
  EXPECT_LT(greedy, memory);
}

TEST(ReportRuns, AFolderWithOnlyTablesHasNoEmptyStatsBlock) {
  test::TempDir dir;
  write(dir.file("t.md"), "| x |\n|---|\n| 1 |\n");
  auto r = render_command_runs_section(dir.path().string());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().find("```"), std::string::npos) << r.value();
  EXPECT_NE(r.value().find("| 1 |"), std::string::npos);
}

}  // namespace
}  // namespace fish

namespace fish {
namespace {

// google-benchmark writes the spread of a constant counter as a bare NaN (not JSON): the report
// reads such a file and renders its iteration rows; a file that is not JSON still fails.
TEST(ReportGbench, BareNanFromGoogleBenchmarkIsReadNotAnError) {
  test::TempDir dir;
  const std::string path = dir.file("attn_bench.json");
  write(path, R"({"context": {"host_name": "h", "date": "d"}, "benchmarks": [
    {"name": "a/1", "run_name": "a/1", "run_type": "iteration", "real_time": 2.0,
     "time_unit": "ms", "splits": 8, "label": "NaN in a label stays"},
    {"name": "a/1", "run_name": "a/1", "run_type": "iteration", "real_time": 4.0,
     "time_unit": "ms", "splits": 8},
    {"name": "a/1_cv", "run_name": "a/1", "run_type": "aggregate", "real_time": 0.4,
     "time_unit": "ms", "splits": NaN, "other": -Infinity}]})");
  auto r = render_gbench_section(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(r.value().find("| a/1 | 2 | 3 ms [2 ms, 4 ms]"), std::string::npos) << r.value();
  write(path, R"({"benchmarks": [ NaNa ]})");
  EXPECT_FALSE(render_gbench_section(path).ok());
}

}  // namespace
}  // namespace fish
