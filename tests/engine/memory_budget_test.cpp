// Host memory budget: the estimate a session makes before allocating equals what it allocates
// (KV of every layer, ring rows for sliding-window layers), a configuration that cannot fit is
// refused by Session::create with what it needs and what there is, and /proc/meminfo parsing.
#include "engine/memory_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/session.h"
#include "engine/synthetic_model.h"
#include "test_env.h"

namespace fish {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const Model> tiny(const std::string& shape) {
  const std::string path = (test::temp_dir() / ("fish_memory_" + shape + ".gguf")).string();
  auto ft = parse_file_type("q8_0");
  EXPECT_TRUE(ft.ok());
  EXPECT_TRUE(write_synthetic_model(*find_model_shape(shape), ft.value(), {1, 1}, path).ok());
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.value();
}

TEST(MemoryBudget, ParsesMemAvailableInKib) {
  EXPECT_EQ(parse_mem_available("MemTotal:       24000000 kB\nMemFree:  1 kB\n"
                                "MemAvailable:   20971520 kB\nBuffers: 5 kB\n"),
            uint64_t(20) << 30);
  EXPECT_FALSE(parse_mem_available("MemTotal: 1 kB\n").has_value());
}

TEST(MemoryBudget, RefusesWhatDoesNotFitNamingNeedAndHave) {
  SessionMemory need;
  need.kv = uint64_t(45) << 30;
  need.scores = uint64_t(36) << 20;
  need.buffers = uint64_t(8) << 20;
  const HostMemory have{uint64_t(20) << 30, "MemAvailable"};
  auto st = check_host_memory(need, have, "session: n_ctx 1048576", "a smaller n_ctx");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message,
            "session: n_ctx 1048576 needs 45.0 GiB of host memory (KV 45.0 GiB, attention scores "
            "36.0 MiB, work buffers 8.0 MiB), have 20.0 GiB (MemAvailable) (hint: a smaller "
            "n_ctx)");
  EXPECT_TRUE(check_host_memory(need, {uint64_t(46) << 30, "x"}, "s", "h").ok());
  EXPECT_EQ(bytes_text(512), "512 B");
  EXPECT_EQ(bytes_text(uint64_t(3) << 19), "1.5 MiB");
}

TEST(MemoryBudget, EstimateIsTheKvTheSessionAllocates) {
  for (const char* shape : {"tiny", "tiny-gemma3"}) {
    const auto model = tiny(shape);
    for (SwaKv swa : {SwaKv::ring, SwaKv::full}) {
      SessionOptions opt;
      opt.n_ctx = 200;
      opt.n_batch = 16;
      opt.n_threads = 1;
      opt.swa_kv = swa;
      opt.weights.weight_path = WeightPath::gguf;
      const SessionMemory m = Session::memory_estimate(*model, opt);
      auto s = Session::create(model, opt);
      ASSERT_TRUE(s.ok()) << s.error().message;
      EXPECT_EQ(m.kv, s.value()->kv_cache().bytes_all_layers()) << shape;
      EXPECT_GT(m.scores, 0u);
      EXPECT_GT(m.buffers, 0u);
      EXPECT_EQ(m.int4, 0u);
    }
  }
}

TEST(MemoryBudget, SessionCreateRefusesAContextThatCannotFit) {
  const auto model = tiny("tiny");
  ::setenv("FISH_RAM_BUDGET_MB", "64", 1);
  SessionOptions opt;
  opt.n_ctx = int64_t(1) << 20;  // 2 layers x 128 floats x K,V: 2.0 GiB of KV
  opt.n_threads = 1;
  auto s = Session::create(model, opt);
  SessionOptions small = opt;
  small.n_ctx = 256;
  auto fits = Session::create(model, small);
  ::unsetenv("FISH_RAM_BUDGET_MB");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message,
              HasSubstr("session: n_ctx 1048576, n_batch 256 needs 2.0 GiB of host memory (KV "
                        "2.0 GiB, attention scores 16.0 MiB"));
  EXPECT_THAT(s.error().message, HasSubstr("have 64.0 MiB (FISH_RAM_BUDGET_MB)"));
  EXPECT_TRUE(fits.ok()) << fits.error().message;
}

TEST(MemoryBudget, AvailableMemoryIsCappedByTheKnobAndRejectsABadValue) {
  ::setenv("FISH_RAM_BUDGET_MB", "100", 1);
  auto h = host_memory_available();
  ::setenv("FISH_RAM_BUDGET_MB", "lots", 1);
  auto bad = host_memory_available();
  ::unsetenv("FISH_RAM_BUDGET_MB");
  ASSERT_TRUE(h.ok());
  EXPECT_LE(h->bytes, uint64_t(100) << 20);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "FISH_RAM_BUDGET_MB='lots': expected an integer 1 to 1073741824");
  auto real = host_memory_available();
  ASSERT_TRUE(real.ok());
  EXPECT_GT(real->bytes, uint64_t(1) << 20);
}

}  // namespace
}  // namespace fish
