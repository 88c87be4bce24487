// Sliding-window layers' ring KV (SwaKv::ring) against full KV (SwaKv::full): the same logits bit
// for bit (prefill in batches smaller and larger than the window, decode past it, both activation
// modes), the rows and bytes it saves, kv_truncate inside the ring's slack (as a fresh run) and
// beyond it (an error naming the limit, the cache untouched). On fish make-model's "tiny-gemma3"
// (6 layers, 5 of them sliding with window 16) and on the real Gemma 3 270M.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/session.h"
#include "engine/synthetic_model.h"
#include "test_env.h"

namespace fish {
namespace {

constexpr int64_t kWindow = 16;  // tiny-gemma3's sliding window

class SwaRingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = (test::temp_dir() / "fish_swa_test_tiny_gemma3.gguf").string();
    auto ft = parse_file_type("q4_k_m");
    ASSERT_TRUE(ft.ok());
    ASSERT_TRUE(
        write_synthetic_model(*find_model_shape("tiny-gemma3"), ft.value(), {5, 1}, path).ok());
    auto m = Model::load(path);
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = m.value();
    ASSERT_EQ(model_->params().sliding_window, kWindow);
  }
  static void TearDownTestSuite() { model_.reset(); }

  static std::unique_ptr<Session> session(SwaKv swa, int64_t n_batch, ActMode act = ActMode::int8,
                                          int64_t n_ctx = 128) {
    SessionOptions opt;
    opt.n_ctx = n_ctx;
    opt.n_batch = n_batch;
    opt.act = act;
    opt.swa_kv = swa;
    auto s = Session::create(model_, opt);
    EXPECT_TRUE(s.ok());
    return std::move(s.value());
  }
  static std::vector<int32_t> tokens(int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = int32_t(3 + rng() % uint32_t(model_->params().n_vocab - 3));
    return t;
  }
  static std::vector<float> logits(Session& s, std::span<const int32_t> toks, int64_t pos0) {
    auto lg = s.forward(toks, pos0, LogitsMode::all);
    EXPECT_TRUE(lg.ok()) << lg.error().message;
    return lg.ok() ? std::vector<float>(lg.value().begin(), lg.value().end())
                   : std::vector<float>();
  }

  static std::shared_ptr<const Model> model_;
};
std::shared_ptr<const Model> SwaRingTest::model_;

TEST_F(SwaRingTest, SlidingLayersKeepWindowPlusNBatchRowsAndTheOthersNCtx) {
  auto ring = session(SwaKv::ring, 8);
  auto full = session(SwaKv::full, 8);
  const KvCache& kv = ring->kv_cache();
  for (int64_t il = 0; il < 6; ++il) {
    EXPECT_EQ(kv.rows(il), model_->params().is_swa_layer(il) ? kWindow + 8 : 128) << il;
    EXPECT_EQ(full->kv_cache().rows(il), 128) << il;
  }
  const size_t row_bytes = size_t(model_->params().kv_dim()) * sizeof(float);
  EXPECT_EQ(full->kv_bytes() - ring->kv_bytes(), 5 * 2 * (128 - 24) * row_bytes);
  // A context that fits in window + n_batch gets no ring.
  auto small = session(SwaKv::ring, 8, ActMode::int8, 20);
  for (int64_t il = 0; il < 6; ++il) EXPECT_EQ(small->kv_cache().rows(il), 20);
}

TEST_F(SwaRingTest, RingAndFullGiveBitIdenticalLogitsForBatchesBelowAndAboveTheWindow) {
  const auto toks = tokens(100, 1);
  for (ActMode act : {ActMode::int8, ActMode::f32}) {
    for (int64_t n_batch : {int64_t(1), int64_t(5), kWindow, int64_t(40)}) {
      auto ring = session(SwaKv::ring, n_batch, act);
      auto full = session(SwaKv::full, n_batch, act);
      const std::vector<float> a = logits(*ring, toks, 0), b = logits(*full, toks, 0);
      ASSERT_FALSE(a.empty());
      EXPECT_TRUE(a == b) << "n_batch " << n_batch << " act " << int(act);
    }
  }
}

TEST_F(SwaRingTest, DecodePastTheWindowEqualsFull) {
  const auto toks = tokens(70, 2);
  auto ring = session(SwaKv::ring, 4);
  auto full = session(SwaKv::full, 4);
  const std::span<const int32_t> all(toks);
  EXPECT_TRUE(logits(*ring, all.subspan(0, 10), 0) == logits(*full, all.subspan(0, 10), 0));
  for (int64_t p = 10; p < 70; ++p) {  // 60 single-token steps: the ring wraps 3 times
    auto a = ring->append(all.subspan(size_t(p), 1));
    auto b = full->append(all.subspan(size_t(p), 1));
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(std::equal(a.value().begin(), a.value().end(), b.value().begin())) << p;
  }
}

TEST_F(SwaRingTest, KvTruncateInsideTheSlackEqualsAFreshRun) {
  // n_batch 8: rows 24. After 68 positions the ring holds 44..67; the next query at n reads
  // n - 15..n - 1, so truncating to 59 (n_past - n_batch - 1) is the deepest that works.
  const auto prefix = tokens(60, 3);
  const auto draft = tokens(8, 4);
  const auto tail = tokens(5, 5);
  for (int64_t keep : {int64_t(67), int64_t(60), int64_t(59)}) {
    auto s = session(SwaKv::ring, 8);
    ASSERT_TRUE(s->append(prefix).ok());
    ASSERT_TRUE(s->append(draft).ok());
    ASSERT_EQ(s->n_past(), 68);
    Status st = s->kv_truncate(keep);
    ASSERT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ(s->n_past(), keep);
    const std::vector<float> got = logits(*s, tail, keep);

    std::vector<int32_t> fresh_toks(prefix);
    fresh_toks.insert(fresh_toks.end(), draft.begin(), draft.end());
    fresh_toks.resize(size_t(keep));
    fresh_toks.insert(fresh_toks.end(), tail.begin(), tail.end());
    auto fresh = session(SwaKv::full, 8);
    const std::vector<float> want = logits(*fresh, fresh_toks, 0);
    const size_t V = size_t(model_->params().n_vocab);
    ASSERT_EQ(got.size(), 5 * V);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.end() - long(5 * V))) << "keep " << keep;
  }
}

TEST_F(SwaRingTest, KvTruncateBeyondTheRingFailsNamingTheLimitAndKeepsTheCache) {
  const auto toks = tokens(68, 6);
  const auto more = tokens(6, 7);
  auto s = session(SwaKv::ring, 8);
  auto full = session(SwaKv::full, 8);
  ASSERT_TRUE(s->append(toks).ok());
  ASSERT_TRUE(full->append(toks).ok());
  for (int64_t n : {int64_t(58), int64_t(30), int64_t(1)}) {
    Status st = s->kv_truncate(n);
    ASSERT_FALSE(st.ok()) << n;
    const std::string& msg = st.error().message;
    EXPECT_NE(msg.find(fmt::format("kv_truncate({})", n)), std::string::npos) << msg;
    EXPECT_NE(msg.find("keep the last 24 positions"), std::string::npos) << msg;
    EXPECT_NE(msg.find("n_past 68"), std::string::npos) << msg;
    EXPECT_EQ(s->n_past(), 68);
  }
  auto r = s->forward(more, 30);  // a forward below n_past truncates first: refused too
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("kv_truncate(30)"), std::string::npos) << r.error().message;
  // The cache is untouched: continuing gives full KV's logits.
  EXPECT_TRUE(logits(*s, more, 68) == logits(*full, more, 68));
  // Full KV rolls back anywhere, and a reset always works.
  ASSERT_TRUE(full->kv_truncate(30).ok());
  s->reset();
  ASSERT_TRUE(s->append(std::span(toks).subspan(0, 30)).ok());
  EXPECT_TRUE(logits(*s, more, 30) == logits(*full, more, 30));
}

// Positions written past n_past before a rollback still overwrote rows: after 68 positions, a
// rollback to 60 and 2 new ones, the ring holds 44..61, so 54 (which reads 39..53) is refused
// although it is only 8 below n_past, and 59 works.
TEST_F(SwaRingTest, KvTruncateCountsRowsOverwrittenBeforeAnEarlierRollback) {
  const auto toks = tokens(68, 8);
  const auto two = tokens(2, 9);
  const auto tail = tokens(4, 10);
  auto s = session(SwaKv::ring, 8);
  auto full = session(SwaKv::full, 8);
  for (Session* x : {s.get(), full.get()}) {
    ASSERT_TRUE(x->append(toks).ok());
    ASSERT_TRUE(x->kv_truncate(60).ok());
    ASSERT_TRUE(x->append(two).ok());
  }
  Status st = s->kv_truncate(54);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("the ring holds 44..61"), std::string::npos)
      << st.error().message;
  ASSERT_TRUE(s->kv_truncate(59).ok());
  ASSERT_TRUE(full->kv_truncate(59).ok());
  EXPECT_TRUE(logits(*s, tail, 59) == logits(*full, tail, 59));
}

// The real Gemma 3 270M, or an error saying where it should be.
Result<std::shared_ptr<const Model>> load_gemma3() {
  const std::string path = test::model_path(test::kGemma3);
  if (path.empty())
    return make_error(
        "Gemma 3 not in FISH_MODELS_DIR (tests need the real models: scripts/setup.sh fetches "
        "them)");
  return Model::load(path);
}

// The real Gemma 3 270M (window 512) on the 620-token reference prompt: with n_batch 64 its
// sliding layers keep 576 rows, so positions 576..619 reuse rows; teacher-forced logits must
// equal full KV's bit for bit in both activation modes.
TEST(SwaRealModel, Gemma3RingEqualsFullOverTheLongReferencePrompt) {
  auto m = load_gemma3();
  if (!m.ok()) FAIL() << m.error().message;
  std::ifstream in(std::filesystem::path(test::testdata_dir()) / "reference" /
                   "gemma-3-270m-q4_k_m" / "prompt_3.json");
  ASSERT_TRUE(in.good());
  const auto toks = nlohmann::json::parse(in).at("tokens").get<std::vector<int32_t>>();
  ASSERT_GT(toks.size(), 576u);
  for (ActMode act : {ActMode::int8, ActMode::f32}) {
    SessionOptions opt;
    opt.n_ctx = int64_t(toks.size());
    opt.n_batch = 64;
    opt.act = act;
    auto ring = Session::create(m.value(), opt);
    opt.swa_kv = SwaKv::full;
    auto full = Session::create(m.value(), opt);
    ASSERT_TRUE(ring.ok() && full.ok());
    EXPECT_EQ(ring.value()->kv_cache().rows(0), 576);
    for (size_t b = 0; b < toks.size(); b += 64) {
      const auto chunk = std::span(toks).subspan(b, std::min<size_t>(64, toks.size() - b));
      // Every position's logits from 512 on (rows are reused from 576), only the last one's
      // before: the 262k-row head is most of the cost.
      const LogitsMode mode = b + 64 > 512 ? LogitsMode::all : LogitsMode::last;
      auto x = ring.value()->forward(chunk, int64_t(b), mode);
      auto y = full.value()->forward(chunk, int64_t(b), mode);
      ASSERT_TRUE(x.ok() && y.ok());
      ASSERT_TRUE(std::equal(x.value().begin(), x.value().end(), y.value().begin()))
          << "positions from " << b << " act " << int(act);
    }
  }
}

// At n_ctx 4096 (n_batch 256): 15 sliding layers keep 768 rows instead of 4096, 3 global keep
// 4096; a row is K + V of one KV head of 256 f32.
TEST(SwaRealModel, Gemma3RingKvBytesAtNCtx4096) {
  auto m = load_gemma3();
  if (!m.ok()) FAIL() << m.error().message;
  SessionOptions opt;
  opt.n_ctx = 4096;
  auto ring = Session::create(m.value(), opt);
  opt.swa_kv = SwaKv::full;
  auto full = Session::create(m.value(), opt);
  ASSERT_TRUE(ring.ok() && full.ok());
  const size_t per_row = 2 * 256 * sizeof(float);
  EXPECT_EQ(full.value()->kv_bytes(), 18 * 4096 * per_row);                      // 151.0 MB
  EXPECT_EQ(ring.value()->kv_bytes(), (3 * 4096 + 15 * (512 + 256)) * per_row);  // 48.8 MB
}

}  // namespace
}  // namespace fish
