// The cooperative-matrix flash-attention tile (engine/vulkan/flash_cm.h): which tile a shape,
// shared-memory size and head dimension get, and when there is none (no device needed).
#include <gtest/gtest.h>

#include "engine/vulkan/flash_cm.h"

namespace fish::vk {
namespace {

constexpr uint32_t kNvidiaShared = 48 * 1024, kNvidiaThreads = 1024;

TEST(FlashCmTiles, NvidiaGetsSixtyFourQueriesUpToHeadDim128AndFewerAt256) {
  for (uint32_t hd : {64u, 128u}) {
    const auto t = flash_cm_tile(16, 16, 16, 32, kNvidiaShared, kNvidiaThreads, hd);
    ASSERT_TRUE(t.has_value()) << hd;
    EXPECT_EQ(t->queries(), 64u) << hd;
    EXPECT_EQ(t->keys, 32u) << hd;
    EXPECT_EQ(t->threads(), 128u) << hd;
    EXPECT_LE(t->shared_bytes(), kNvidiaShared) << hd;
  }
  const auto t = flash_cm_tile(16, 16, 16, 32, kNvidiaShared, kNvidiaThreads, 256);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->subgroups, 2u);
  EXPECT_EQ(t->keys, 16u);
  EXPECT_LE(t->shared_bytes(), kNvidiaShared);
}

TEST(FlashCmTiles, HeadDimsTheShapeDoesNotDivideOrPastTheMaximumHaveNone) {
  for (uint32_t hd : {0u, 40u, 72u, 264u, 512u})
    EXPECT_FALSE(flash_cm_tile(16, 16, 16, 32, kNvidiaShared, kNvidiaThreads, hd).has_value())
        << hd;
  EXPECT_TRUE(flash_cm_tile(8, 8, 8, 8, 32 * 1024, 1024, 40).has_value());  // lavapipe's shape
}

TEST(FlashCmTiles, SmallSharedMemoryTakesASmallerTileOrNone) {
  const auto t = flash_cm_tile(16, 16, 16, 32, 20 * 1024, kNvidiaThreads, 128);
  ASSERT_TRUE(t.has_value());
  EXPECT_LE(t->shared_bytes(), 20u * 1024);
  EXPECT_LT(t->queries(), 64u);
  EXPECT_FALSE(flash_cm_tile(16, 16, 16, 32, 4 * 1024, kNvidiaThreads, 128).has_value());
  EXPECT_FALSE(flash_cm_tile(16, 16, 16, 32, kNvidiaShared, 16, 128).has_value());     // threads
  EXPECT_FALSE(flash_cm_tile(16, 16, 16, 512, kNvidiaShared, 4096, 128).has_value());  // lanes
}

// Variant 2 (attention_flash_cm2): double-buffered K/V with Q staged there (queries <= 4 keys),
// no Q copy; 64 queries x 32 keys fill the H100's 48 KiB exactly at head_dim 128, 4 x 16 at 256;
// lavapipe's 8 x 8 x 8 on 8 lanes within 32 KiB takes 8-key tiles at 256.
TEST(FlashCmTiles, VariantTwoFitsDoubleBufferedKeysAndValues) {
  for (uint32_t hd : {64u, 128u}) {
    const auto t = flash_cm_tile(16, 16, 16, 32, kNvidiaShared, kNvidiaThreads, hd, 2);
    ASSERT_TRUE(t.has_value()) << hd;
    EXPECT_EQ(t->variant, 2u);
    EXPECT_STREQ(t->module(), kFlashCm2Module);
    EXPECT_EQ(t->queries(), 64u) << hd;
    EXPECT_EQ(t->keys, 32u) << hd;
    EXPECT_LE(t->shared_bytes(), kNvidiaShared) << hd;
  }
  EXPECT_EQ(flash_cm_tile(16, 16, 16, 32, kNvidiaShared, kNvidiaThreads, 128, 2)->shared_bytes(),
            kNvidiaShared);
  const auto t = flash_cm_tile(16, 16, 16, 32, kNvidiaShared, kNvidiaThreads, 256, 2);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->queries(), 64u);
  EXPECT_EQ(t->keys, 16u);
  const auto lvp = flash_cm_tile(8, 8, 8, 8, 32 * 1024, 1024, 256, 2);
  ASSERT_TRUE(lvp.has_value());
  EXPECT_EQ(lvp->keys, 8u);
  EXPECT_LE(lvp->shared_bytes(), 32u * 1024);
}

TEST(FlashCmTiles, ConstantsFollowTheShadersConstantIds) {
  const auto t = flash_cm_tile(16, 16, 16, 32, kNvidiaShared, kNvidiaThreads, 128);
  ASSERT_TRUE(t.has_value());
  // local_size_x, SG, CM, CN, CK, HD, NSG, KT, WG (attention_flash_cm.comp.glsl)
  EXPECT_EQ(t->constants(), (std::vector<uint32_t>{128, 32, 16, 16, 16, 128, 4, 32, 128}));
}

}  // namespace
}  // namespace fish::vk
