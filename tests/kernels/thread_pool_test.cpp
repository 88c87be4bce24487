// ThreadPool: coverage, static deterministic split, back-to-back dispatch, sleep/wake
// (kernels/thread_pool.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "kernels/thread_pool.h"

namespace fish {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 5, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << n << " " << i;
    }
  }
}

TEST(ThreadPool, SplitIsStaticContiguousAndIndexedByThread) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<int64_t> begin(3, -1), end(3, -1);
    pool.parallel_for(10, [&](int64_t b, int64_t e, int t) {
      begin[size_t(t)] = b;
      end[size_t(t)] = e;
    });
    // thread t gets [n*t/T, n*(t+1)/T)
    EXPECT_EQ(begin, (std::vector<int64_t>{0, 3, 6}));
    EXPECT_EQ(end, (std::vector<int64_t>{3, 6, 10}));
  }
}

TEST(ThreadPool, ManyBackToBackDispatchesAllComplete) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int rep = 0; rep < 2000; ++rep) {
    pool.parallel_for(7, [&](int64_t b, int64_t e, int) { total.fetch_add(e - b); });
  }
  EXPECT_EQ(total.load(), 2000 * 7);
}

TEST(ThreadPool, MoreThreadsThanCoresRunEachSliceOnceWithoutOverlap) {
  // Slices are claimed by whichever thread is free; with 8 threads on a smaller machine many are
  // descheduled mid-claim. Each slice must still run exactly once and no slice index twice at
  // the same time (callers index per-slice scratch by it).
  ThreadPool pool(8);
  std::vector<std::atomic<int>> busy(8);
  for (int rep = 0; rep < 500; ++rep) {
    std::vector<std::atomic<int>> hits(64);
    std::atomic<int> overlaps{0};
    pool.parallel_for(64, [&](int64_t b, int64_t e, int t) {
      if (busy[size_t(t)].fetch_add(1) != 0) overlaps.fetch_add(1);
      for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
      busy[size_t(t)].fetch_sub(1);
    });
    ASSERT_EQ(overlaps.load(), 0) << rep;
    for (int i = 0; i < 64; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << rep << " " << i;
  }
}

TEST(ThreadPool, WakesWorkersThatFellAsleep) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 3; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // past the spin phase
    std::atomic<int> threads_seen{0};
    pool.parallel_for(3, [&](int64_t, int64_t, int) { threads_seen.fetch_add(1); });
    EXPECT_EQ(threads_seen.load(), 3);
  }
}

TEST(ThreadPool, DestroysCleanlyWhileWorkersSleepOrSpin) {
  for (int sleep_ms : {0, 30}) {
    ThreadPool pool(4);
    pool.parallel_for(4, [](int64_t, int64_t, int) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  }
  SUCCEED();
}

TEST(ThreadPool, DefaultThreadCountHonoursFishThreads) {
  const char* old = std::getenv("FISH_THREADS");
  const std::string saved = old ? old : "";
  setenv("FISH_THREADS", "3", 1);
  EXPECT_EQ(default_thread_count(), 3);
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), 3);
  setenv("FISH_THREADS", "0", 1);  // invalid: falls back to the hardware count
  EXPECT_GE(default_thread_count(), 1);
  if (old) {
    setenv("FISH_THREADS", saved.c_str(), 1);
  } else {
    unsetenv("FISH_THREADS");
  }
}

}  // namespace
}  // namespace fish
