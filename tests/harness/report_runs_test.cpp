// Command-run folders in the report (harness/report_gbench.h render_command_runs_section): the
// context line, the `fish ...` stats lines of *.txt files, and *.md result tables as they are,
// after README.md's title and first paragraph (what was run); a folder with nothing but a README
// shows all of it.
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

TEST(ReportRuns, TheReadmesFirstParagraphThenStatsLinesThenMarkdownTables) {
  test::TempDir dir;
  write(dir.file("context.txt"), "commit=abc123\ncpu=Test CPU x2\n");
  write(dir.file("README.md"),
        "# The run\n\n`scripts/x.sh` produced these.\n\n## Details\n\nNot in the section.\n");
  write(dir.file("gen.txt"), "some text\nfish generate: decode 10 tok/s\n");
  write(dir.file("b_memory.md"), "| a | b |\n|---|---|\n| 1 | 2 |\n\n");
  write(dir.file("a_greedy.md"), "| setting | exact |\n|---|---|\n| fp | 9/12 |\n");
  auto r = render_command_runs_section(dir.path().string());
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string& md = r.value();
  EXPECT_NE(md.find("commit abc123"), std::string::npos) << md;
  EXPECT_NE(md.find("gen.txt: fish generate: decode 10 tok/s"), std::string::npos) << md;
  EXPECT_EQ(md.find("some text"), std::string::npos) << md;
  const size_t title = md.find("**The run**"), command = md.find("`scripts/x.sh` produced these.");
  ASSERT_NE(title, std::string::npos) << md;
  ASSERT_NE(command, std::string::npos) << md;
  EXPECT_LT(command, md.find("```"));
  EXPECT_EQ(md.find("Details"), std::string::npos) << md;
  EXPECT_EQ(md.find("Not in the section"), std::string::npos) << md;
  const size_t greedy = md.find("| fp | 9/12 |"), memory = md.find("| 1 | 2 |");
  ASSERT_NE(greedy, std::string::npos) << md;
  ASSERT_NE(memory, std::string::npos) << md;
  EXPECT_LT(md.find("```"), greedy);  // tables follow the stats block, in name order
  EXPECT_LT(greedy, memory);
}

TEST(ReportRuns, AFolderWithOnlyAReadmeShowsItWholeAndNoEmptyBlock) {
  test::TempDir dir;
  write(dir.file("README.md"),
        "# A/B\n\n`bench --filter x`, twice:\n\n## Numbers\n\n| a |\n|---|\n| 7 |\n");
  auto r = render_command_runs_section(dir.path().string());
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string& md = r.value();
  EXPECT_EQ(md.find("```"), std::string::npos) << md;
  EXPECT_NE(md.find("**A/B**"), std::string::npos) << md;
  EXPECT_NE(md.find("`bench --filter x`, twice:"), std::string::npos) << md;
  EXPECT_NE(md.find("##### Numbers"), std::string::npos) << md;  // below the section's ###
  EXPECT_NE(md.find("| 7 |"), std::string::npos) << md;
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
