// run_process (base/subprocess.h): output capture, exit codes, signals, the timeout, and programs
// that cannot run.
#include "base/subprocess.h"

#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

#include "test_env.h"

namespace fish {
namespace {

std::string script(const test::TempDir& dir, const std::string& name, const std::string& body,
                   mode_t mode = 0755) {
  const std::string p = dir.file(name);
  std::ofstream(p) << "#!/bin/sh\n" << body;
  ::chmod(p.c_str(), mode);
  return p;
}

TEST(RunProcess, CapturesStdoutAndStderrApartAndPassesArgumentsAsGiven) {
  test::TempDir dir;
  const std::string s = script(dir, "a.sh", "echo \"out:$1\"; echo err >&2; exit 3\n");
  auto r = run_process({s, "two words; $HOME"}, 30);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->out, "out:two words; $HOME\n");  // no shell in between
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->how_it_ended(), "exited with status 3");
}

TEST(RunProcess, NamesTheSignalThatEndedIt) {
  test::TempDir dir;
  auto r = run_process({script(dir, "s.sh", "kill -ABRT $$\n")}, 30);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->term_signal, 6);
  EXPECT_EQ(r->how_it_ended(), "killed by signal 6 (SIGABRT)");
}

TEST(RunProcess, KillsAProgramPastItsTimeout) {
  test::TempDir dir;
  auto r = run_process({script(dir, "t.sh", "echo started; exec sleep 60\n")}, 0.3);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->out, "started\n");
  EXPECT_NE(r->how_it_ended().find("timed out"), std::string::npos);
}

TEST(RunProcess, AProgramThatCannotRunIsAnErrorNamingIt) {
  test::TempDir dir;
  auto missing = run_process({dir.file("nope")}, 5);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find(dir.file("nope") + ": No such file"), std::string::npos);
  auto noexec = run_process({script(dir, "n.sh", "exit 0\n", 0644)}, 5);
  ASSERT_FALSE(noexec.ok());
  EXPECT_NE(noexec.error().message.find("not executable"), std::string::npos);
  auto folder = run_process({dir.path().string()}, 5);
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.error().message.find("not a regular file"), std::string::npos);
  const std::string bad = dir.file("bad");
  std::ofstream(bad) << "\x7f" "ELF garbage";
  ::chmod(bad.c_str(), 0755);
  auto garbage = run_process({bad}, 5);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error().message.find("cannot execute"), std::string::npos)
      << garbage.error().message;
  EXPECT_FALSE(run_process({}, 5).ok());
}

}  // namespace
}  // namespace fish
