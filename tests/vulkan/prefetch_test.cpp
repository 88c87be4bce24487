// The decode weight prefetch's cursor (engine/vulkan/prefetch.h): budgets split across ranges,
// the stream's end, and matvecs moving the cursor past what they read.
#include "engine/vulkan/prefetch.h"

#include <gtest/gtest.h>

#include <vector>

namespace fish::vk {
namespace {

TEST(Prefetch, BudgetsWalkTheStreamAcrossRangesAndStopAtItsEnd) {
  const std::vector<uint64_t> vecs = {10, 4, 0, 7};
  PrefetchCursor c;
  EXPECT_EQ(plan_prefetch(vecs, &c, 6), (std::vector<PrefetchPiece>{{0, 0, 6}}));
  // The rest of range 0, all of range 1, the empty range 2 skipped, 3 vectors of range 3.
  EXPECT_EQ(plan_prefetch(vecs, &c, 11),
            (std::vector<PrefetchPiece>{{0, 6, 4}, {1, 0, 4}, {3, 0, 3}}));
  EXPECT_EQ(plan_prefetch(vecs, &c, 100), (std::vector<PrefetchPiece>{{3, 3, 4}}));
  EXPECT_TRUE(plan_prefetch(vecs, &c, 100).empty());
  EXPECT_EQ(c.range, vecs.size());
  PrefetchCursor z;
  EXPECT_TRUE(plan_prefetch(vecs, &z, 0).empty());
  EXPECT_EQ(z.range, 0u);
  EXPECT_EQ(z.vec, 0u);
}

TEST(Prefetch, AMatvecMovesABehindCursorPastItsRangeOnly) {
  const std::vector<uint64_t> vecs = {8, 8, 8};
  PrefetchCursor c;
  prefetch_consumed(&c, 0);  // range 0 read before anything was fetched: not fetched again
  EXPECT_EQ(plan_prefetch(vecs, &c, 5), (std::vector<PrefetchPiece>{{1, 0, 5}}));
  prefetch_consumed(&c, 0);  // behind the cursor: no move
  EXPECT_EQ(c.range, 1u);
  EXPECT_EQ(c.vec, 5u);
  prefetch_consumed(&c, 1);  // the partly fetched range is read: on to range 2
  EXPECT_EQ(plan_prefetch(vecs, &c, 100), (std::vector<PrefetchPiece>{{2, 0, 8}}));
  prefetch_consumed(&c, 2);
  EXPECT_EQ(c.range, 3u);
  EXPECT_TRUE(plan_prefetch(vecs, &c, 1).empty());
}

}  // namespace
}  // namespace fish::vk
