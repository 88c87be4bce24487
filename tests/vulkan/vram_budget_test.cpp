// The seed's memory rules (engine/vulkan/vram_budget.h) at card sizes this machine does not
// have: the 85% ceiling or FISH_VRAM_BUDGET_MB, the max(256 MB, 10% of heap) headroom on the
// live free memory, the 80% fallback without VK_EXT_memory_budget.
#include "engine/vulkan/vram_budget.h"

#include <gtest/gtest.h>

namespace fish::vk {
namespace {

constexpr uint64_t MB = uint64_t(1) << 20;

TEST(VramBudget, CeilingIs85PercentOfFreeAtOpenOrTheEnvBudget) {
  const VramBudget b = VramBudget::at_open(4096 * MB, 3000 * MB, std::nullopt);
  EXPECT_EQ(b.ceiling_bytes, 3000 * MB / 100 * 85);
  EXPECT_FALSE(b.ceiling_from_env);
  const VramBudget e = VramBudget::at_open(4096 * MB, 3000 * MB, 1200 * MB);
  EXPECT_EQ(e.ceiling_bytes, 1200 * MB);
  EXPECT_TRUE(e.ceiling_from_env);
}

TEST(VramBudget, ARunCeilingReplacesTheOpenOneButNeverPassesTheEnvBudget) {
  const VramBudget b = VramBudget::at_open(8192 * MB, 8000 * MB, std::nullopt);
  const VramBudget run = b.under(4096 * MB);
  EXPECT_EQ(run.ceiling_bytes, 4096 * MB);
  EXPECT_TRUE(run.ceiling_from_run);
  const std::string r = run.refusal(100 * MB, 4000 * MB, 8000 * MB);
  EXPECT_NE(r.find("vram_budget_mb"), std::string::npos) << r;
  // The budget itself is a value: a run's ceiling never changes it.
  EXPECT_EQ(b.ceiling_bytes, 8000 * MB / 100 * 85);
  EXPECT_FALSE(b.ceiling_from_run);
  EXPECT_EQ(b.under(std::nullopt).ceiling_bytes, b.ceiling_bytes);
  EXPECT_FALSE(b.under(std::nullopt).ceiling_from_run);

  const VramBudget e = VramBudget::at_open(8192 * MB, 8000 * MB, 2048 * MB);  // FISH_VRAM_BUDGET_MB
  EXPECT_EQ(e.under(4096 * MB).ceiling_bytes, 2048 * MB);
  EXPECT_NE(e.under(4096 * MB).refusal(100 * MB, 2000 * MB, 8000 * MB).find("FISH_VRAM_BUDGET_MB"),
            std::string::npos);
  EXPECT_EQ(e.under(1024 * MB).ceiling_bytes, 1024 * MB);
}

TEST(VramBudget, HeadroomIsTheLargerOf256MbAnd10PercentOfHeap) {
  EXPECT_EQ(VramBudget::at_open(1024 * MB, 0, std::nullopt).headroom_bytes, 256 * MB);
  EXPECT_EQ(VramBudget::at_open(2560 * MB, 0, std::nullopt).headroom_bytes, 256 * MB);
  EXPECT_EQ(VramBudget::at_open(4000 * MB, 0, std::nullopt).headroom_bytes, 400 * MB);
  EXPECT_EQ(VramBudget::at_open(144000 * MB, 0, std::nullopt).headroom_bytes, 14400 * MB);
}

TEST(VramBudget, RefusesPastTheCeiling) {
  const VramBudget b = VramBudget::at_open(4096 * MB, 4000 * MB, 1000 * MB);
  EXPECT_EQ(b.refusal(400 * MB, 600 * MB, 3000 * MB), "");
  const std::string r = b.refusal(401 * MB, 600 * MB, 3000 * MB);
  EXPECT_NE(r.find("FISH_VRAM_BUDGET_MB"), std::string::npos) << r;
  EXPECT_EQ(b.allocatable(600 * MB, 3000 * MB), 400 * MB);
}

TEST(VramBudget, RefusesWhatWouldLeaveLessThanTheHeadroomFree) {
  // A 2 GB card where another program since took most of the memory: the ceiling set at open
  // is not the limit, the live free memory is.
  const VramBudget b = VramBudget::at_open(2048 * MB, 1700 * MB, std::nullopt);
  EXPECT_EQ(b.refusal(200 * MB, 0, 456 * MB), "");  // leaves exactly 256 MB
  const std::string r = b.refusal(201 * MB, 0, 456 * MB);
  EXPECT_NE(r.find("headroom"), std::string::npos) << r;
  EXPECT_EQ(b.allocatable(0, 456 * MB), 200 * MB);
  EXPECT_EQ(b.allocatable(0, 100 * MB), 0u);
}

TEST(VramBudget, FallbackFreeIs80PercentOfHeapMinusOwn) {
  EXPECT_EQ(VramBudget::fallback_free(1000 * MB, 0), 800 * MB);
  EXPECT_EQ(VramBudget::fallback_free(1000 * MB, 300 * MB), 500 * MB);
  EXPECT_EQ(VramBudget::fallback_free(1000 * MB, 900 * MB), 0u);
}

}  // namespace
}  // namespace fish::vk
