// Provenance comes from the binary: the commit, dirty flag and diff digest baked in at build time
// are what `fish --version` prints and what every results context records, even when fish runs
// inside another git checkout (whose HEAD the old working-directory lookup would have taken).
#include "base/build_info.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_env.h"

namespace fish {
namespace {

using ::testing::HasSubstr;

int run_shell(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(BuildInfo, NamesACommitADirtyStateAndTheBuild) {
  const BuildInfo& b = build_info();
  EXPECT_TRUE(std::regex_match(std::string(b.commit), std::regex("[0-9a-f]{40}|unknown")))
      << b.commit;
  EXPECT_TRUE(b.dirty == -1 || b.dirty == 0 || b.dirty == 1);
  if (b.dirty == 1)
    EXPECT_TRUE(std::regex_match(std::string(b.diff_sha256), std::regex("[0-9a-f]{64}")));
  else
    EXPECT_TRUE(b.diff_sha256.empty());
  EXPECT_FALSE(b.build_type.empty());
  EXPECT_FALSE(b.compiler.empty());
  EXPECT_THAT(build_info_text(), HasSubstr("commit " + std::string(b.commit) + " ("));
}

TEST(BuildInfo, FishVersionPrintsTheBinarysProvenance) {
  test::TempDir dir;
  ASSERT_EQ(run_shell(test::binary_dir() + "/fish --version > " + dir.file("v") + " 2>&1"), 0);
  EXPECT_EQ(test::read_file(dir.file("v")), build_info_text())
      << "fish and this test binary were built from different trees: rebuild both";
}

TEST(BuildInfo, AContextRecordsTheBinarysCommitWhateverCheckoutItRunsIn) {
  // A fresh git repository with one commit, and fish run inside it.
  test::TempDir dir;
  const std::string repo = dir.file("other");
  const std::string git = "git -C " + repo + " -c user.name=t -c user.email=t@t ";
  ASSERT_EQ(run_shell("mkdir -p " + repo + " && git init -q " + repo + " && echo x > " + repo +
                      "/f && " + git + "add f && " + git + "commit -qm x"),
            0);
  ASSERT_EQ(run_shell("git -C " + repo + " rev-parse HEAD > " + dir.file("head")), 0);
  const std::string other_head = test::read_file(dir.file("head")).substr(0, 40);
  ASSERT_EQ(run_shell(test::binary_dir() + "/fish make-model --shape tiny --type q8_0 --out " +
                      repo + "/m.gguf > /dev/null 2>&1"),
            0);
  std::ofstream(repo + "/e.json") << R"({"schema_version": 1, "name": "e", "model": ["m.gguf"],
    "defaults": {"n_threads": 1}, "workload": {"n_prompt": 8, "n_gen": 2},
    "measure": {"warmup": 0, "repetitions": 1, "stream_MiB": 4, "stream_passes": 1},
    "output": {"formats": []}})";
  ASSERT_EQ(run_shell("cd " + repo + " && FISH_ISA=scalar " + test::binary_dir() +
                      "/fish run e.json --out out > " + dir.file("log") + " 2>&1"),
            0)
      << test::read_file(dir.file("log"));
  std::istringstream lines(test::read_file(repo + "/out/e.jsonl"));
  std::string first;
  std::getline(lines, first);
  const nlohmann::json ctx = nlohmann::json::parse(first);
  const BuildInfo& b = build_info();
  EXPECT_EQ(ctx["commit"], std::string(b.commit))
      << "fish and this test binary differ: rebuild both";
  EXPECT_NE(ctx["commit"], other_head);
  if (b.dirty >= 0) {
    EXPECT_EQ(ctx["dirty"], b.dirty == 1);
  }
  EXPECT_EQ(ctx["build_type"], std::string(b.build_type));
  EXPECT_EQ(ctx["env"]["FISH_ISA"], "scalar");  // the knob in effect, recorded
  // 1 repetition: the planning warned that no gate could use this run.
  EXPECT_THAT(test::read_file(dir.file("log")), HasSubstr("warning: measure.repetitions 1"));
}

}  // namespace
}  // namespace fish
