#include "base/mapped_file.h"

#include <gtest/gtest.h>

#include "test_env.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace fish {
namespace {

TEST(MappedFile, MapsTheWholeFileReadOnly) {
  auto path = test::temp_dir() / "fish_mapped_file_test.bin";
  { std::ofstream(path, std::ios::binary) << "hello, fish"; }
  auto m = MappedFile::open(path.string());
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->size(), 11u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->data()), m->size()), "hello, fish");
  MappedFile moved = std::move(m.value());
  EXPECT_EQ(moved.size(), 11u);
  std::filesystem::remove(path);
}

TEST(MappedFile, EmptyFileMapsToNothing) {
  auto path = test::temp_dir() / "fish_mapped_file_empty.bin";
  { std::ofstream f(path, std::ios::binary); }
  auto m = MappedFile::open(path.string());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->size(), 0u);
  EXPECT_EQ(m->data(), nullptr);
  std::filesystem::remove(path);
}

TEST(MappedFile, DirectoryIsRejectedByName) {
  auto m = MappedFile::open("/tmp");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message, "/tmp: is a directory, expected a regular file");
}

}  // namespace
}  // namespace fish
