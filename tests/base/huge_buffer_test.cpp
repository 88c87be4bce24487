#include "base/huge_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "test_env.h"

namespace fish {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

TEST(HugeBuffer, RoundsToWholeHugePagesAlignedAndZeroed) {
  auto b = HugeBuffer::allocate(3 * kMiB + 5, true);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->size(), 4 * kMiB);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % HugeBuffer::kHugePage, 0u);
  for (size_t i = 0; i < b->size(); i += 4096) ASSERT_EQ(b->data()[i], 0) << i;
  std::memset(b->data(), 0x5a, b->size());  // every byte writable
  EXPECT_EQ(b->data()[b->size() - 1], 0x5a);
}

TEST(HugeBuffer, ZeroBytesIsAnError) {
  auto b = HugeBuffer::allocate(0, true);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().message, "huge buffer: 0 bytes requested");
}

TEST(HugeBuffer, MoveTransfersOwnership) {
  auto b = HugeBuffer::allocate(kMiB, false);
  ASSERT_TRUE(b.ok()) << b.error().message;
  uint8_t* p = b->data();
  HugeBuffer moved = std::move(b.value());
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(b->data(), nullptr);
  EXPECT_EQ(b->size(), 0u);
  EXPECT_FALSE(moved.huge_requested());
}

// The smaps reader finds this buffer's own mapping: what it reports is whole huge pages within
// the buffer. Whether the kernel grants any depends on its THP setting and free memory, so the
// count is bounded, not required.
TEST(HugeBuffer, HugeBytesAreWholePagesWithinTheBuffer) {
  auto b = HugeBuffer::allocate(16 * kMiB, true);
  ASSERT_TRUE(b.ok()) << b.error().message;
  std::memset(b->data(), 1, b->size());
  const uint64_t huge = b->huge_bytes();
  EXPECT_LE(huge, b->size());
  EXPECT_EQ(huge % HugeBuffer::kHugePage, 0u);
  std::string mode;
  std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), mode);
  if (mode.find("[never]") != std::string::npos) EXPECT_FALSE(b->huge_requested());
  RecordProperty("huge_bytes", std::to_string(huge));
}

TEST(HugeBuffer, KnobTurnsTheRequestOffAndRejectsOtherWords) {
  {
    test::ScopedEnv e("FISH_HUGEPAGES", nullptr);
    auto on = huge_pages_wanted();
    ASSERT_TRUE(on.ok());
    EXPECT_TRUE(on.value());
  }
  {
    test::ScopedEnv e("FISH_HUGEPAGES", "0");
    auto off = huge_pages_wanted();
    ASSERT_TRUE(off.ok());
    EXPECT_FALSE(off.value());
  }
  test::ScopedEnv e("FISH_HUGEPAGES", "sometimes");
  auto bad = huge_pages_wanted();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("FISH_HUGEPAGES"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace fish
