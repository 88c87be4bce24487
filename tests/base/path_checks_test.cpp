// Input and output path checks: FIFOs, directories and devices refused at once (never a blocked
// open or an endless read), the size cap checked before reading, an output that resolves to an
// input refused whether it is the same path, a symlink, a hard link or the writer's .tmp path.
#include "base/path_checks.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_env.h"

namespace fish {
namespace {

using ::testing::HasSubstr;

std::string write_file(const test::TempDir& d, const std::string& name, const std::string& text) {
  const std::string p = d.file(name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

TEST(InputFile, RefusesAFifoWithoutBlocking) {
  test::TempDir d;
  const std::string fifo = d.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = open_regular_file(fifo);  // no writer: a blocking open would never return
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, fifo + ": is a FIFO, expected a regular file");
}

TEST(InputFile, RefusesADirectoryAndACharacterDevice) {
  test::TempDir d;
  auto dir = read_regular_file(d.path().string(), kMaxJsonFileBytes, "an experiment file");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().message, d.path().string() + ": is a directory, expected a regular file");
  auto zero = read_regular_file("/dev/zero", kMaxJsonFileBytes, "an experiment file");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().message, "/dev/zero: is a character device, expected a regular file");
}

TEST(InputFile, NamesAMissingFile) {
  auto r = check_input_file("/nonexistent/x.json", 100, "a test file");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "/nonexistent/x.json: cannot open: No such file or directory");
}

TEST(InputFile, ReadsARegularFileAndRefusesOneOverTheCap) {
  test::TempDir d;
  const std::string p = write_file(d, "a.json", std::string(3000000, 'x'));
  auto ok = read_regular_file(p, uint64_t(4) << 20, "an experiment file");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->size(), 3000000u);
  auto big = read_regular_file(p, uint64_t(2) << 20, "an experiment file");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().message, p + ": 3000000 bytes, over the 2 MiB limit of an experiment file");
  EXPECT_FALSE(check_input_file(p, uint64_t(2) << 20, "a results file").ok());
}

TEST(OutputPath, RefusesTheInputItselfASymlinkAndAHardLink) {
  test::TempDir d;
  const std::string in = write_file(d, "model.gguf", "GGUF");
  const std::vector<std::string> inputs = {in};
  auto same = check_output_path(in, inputs);
  ASSERT_FALSE(same.ok());
  EXPECT_EQ(same.error().message,
            in + ": is the input " + in + " (the same file); write the output to another path");
  const std::string link = d.file("link.gguf");
  std::filesystem::create_symlink(in, link);
  auto via_link = check_output_path(link, inputs);
  ASSERT_FALSE(via_link.ok());
  EXPECT_THAT(via_link.error().message, HasSubstr("(the same file, through a link)"));
  const std::string hard = d.file("hard.gguf");
  std::filesystem::create_hard_link(in, hard);
  EXPECT_FALSE(check_output_path(hard, inputs).ok());
}

TEST(OutputPath, RefusesAnOutputWhoseTempFileIsTheInput) {
  test::TempDir d;
  const std::string in = write_file(d, "m.gguf.tmp", "GGUF");
  const std::vector<std::string> inputs = {in};
  // Writing m.gguf goes through m.gguf.tmp: truncating it would destroy the input.
  auto r = check_output_path(d.file("m.gguf"), inputs, ".tmp");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("m.gguf.tmp: is the input"));
  EXPECT_TRUE(check_output_path(d.file("m.gguf"), inputs).ok());
}

TEST(OutputPath, AcceptsANewPathAndRefusesADirectory) {
  test::TempDir d;
  const std::string in = write_file(d, "in.gguf", "GGUF");
  const std::vector<std::string> inputs = {in};
  EXPECT_TRUE(check_output_path(d.file("new.gguf"), inputs, ".tmp").ok());
  EXPECT_TRUE(check_output_path(write_file(d, "other.gguf", "x"), inputs).ok());
  auto dir = check_output_path(d.path().string(), inputs);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().message,
            d.path().string() + ": is a directory, expected an output file path");
}

}  // namespace
}  // namespace fish
