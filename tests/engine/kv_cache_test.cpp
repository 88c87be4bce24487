// KvCache's layout (per-layer rows, ring rows, layers as a prefix of the all-layers block), its
// byte count, and what a ring layer still holds (first_held) across writes and truncations.
#include "engine/kv_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace fish {
namespace {

TEST(KvCache, LayersGetTheirOwnRowCountsAndRingRowsWrap) {
  // n_ctx 100, kv_dim 8: layers 0 and 2 are rings of 30 rows, layer 1 is full.
  KvCache kv(100, 8, {30, 100, 30});
  EXPECT_EQ(kv.n_layer(), 3);
  EXPECT_TRUE(kv.is_ring(0));
  EXPECT_FALSE(kv.is_ring(1));
  EXPECT_EQ(kv.row(0, 29), 29);
  EXPECT_EQ(kv.row(0, 30), 0);
  EXPECT_EQ(kv.row(0, 95), 5);
  EXPECT_EQ(kv.row(1, 95), 95);
  // Layer by layer, K rows then V rows.
  EXPECT_EQ(kv.v(0) - kv.k(0), 30 * 8);
  EXPECT_EQ(kv.k(1) - kv.k(0), 2 * 30 * 8);
  EXPECT_EQ(kv.k(2) - kv.k(1), 2 * 100 * 8);
  EXPECT_EQ(kv.bytes(), size_t(2 * (30 + 100 + 30) * 8) * sizeof(float));
  EXPECT_EQ(kv.bytes(), kv.bytes_all_layers());
}

TEST(KvCache, AllocateAllKeepsTheFirstLayersRows) {
  KvCache kv(50, 4, {20, 50, 20}, /*n_alloc_layers=*/1);
  EXPECT_EQ(kv.bytes(), size_t(2 * 20 * 4) * sizeof(float));
  EXPECT_EQ(kv.bytes_all_layers(), size_t(2 * 90 * 4) * sizeof(float));
  for (int i = 0; i < 2 * 20 * 4; ++i) kv.k(0)[i] = float(i);
  kv.allocate_all();
  EXPECT_EQ(kv.n_alloc_layers(), 3);
  EXPECT_EQ(kv.bytes(), kv.bytes_all_layers());
  for (int i = 0; i < 2 * 20 * 4; ++i) ASSERT_EQ(kv.k(0)[i], float(i)) << i;
}

TEST(KvCache, FirstHeldFollowsTheHighestWrittenPosition) {
  KvCache kv(100, 4, {10, 100});
  EXPECT_EQ(kv.first_held(0), 0);
  kv.set_n_past(8);
  EXPECT_EQ(kv.first_held(0), 0);
  kv.set_n_past(25);
  EXPECT_EQ(kv.first_held(0), 15);  // writing 24 overwrote 14
  EXPECT_EQ(kv.first_held(1), 0);   // a full layer holds everything
  // Truncating does not bring overwritten rows back, and the rows of 20..24 stay in place.
  kv.truncate(20);
  EXPECT_EQ(kv.n_past(), 20);
  EXPECT_EQ(kv.first_held(0), 15);
  kv.set_n_past(22);  // rewrote 20, 21: nothing new overwritten
  EXPECT_EQ(kv.first_held(0), 15);
  kv.truncate(30);  // beyond n_past: nothing changes
  EXPECT_EQ(kv.n_past(), 22);
  // An emptied cache starts over.
  kv.clear();
  EXPECT_EQ(kv.n_past(), 0);
  EXPECT_EQ(kv.first_held(0), 0);
  kv.set_n_past(5);
  EXPECT_EQ(kv.first_held(0), 0);
}

}  // namespace
}  // namespace fish
