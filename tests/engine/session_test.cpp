// Session behaviour on a small synthetic llama (fish make-model's "tiny": 2 layers, n_embd 256,
// GQA 4/2 heads, vocab 512) and, where noted, the real models: batched prefill equals token-by-
// token decode, chunking and thread count do not change logits, kv_truncate, teacher forcing, and
// the input errors.
#include "engine/session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <vector>

#include "engine/sampling.h"
#include "engine/synthetic_model.h"
#include "real_model.h"
#include "test_env.h"

namespace fish {
namespace {

class SessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = (test::temp_dir() / "fish_session_test_tiny_q4_k_m.gguf").string();
    auto ft = parse_file_type("q4_k_m");
    ASSERT_TRUE(ft.ok());
    ASSERT_TRUE(write_synthetic_model(*find_model_shape("tiny"), ft.value(), {3, 1}, path).ok());
    auto m = Model::load(path);
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = m.value();
  }
  static void TearDownTestSuite() { model_.reset(); }

  static std::unique_ptr<Session> session(SessionOptions opt = {}) {
    if (opt.n_ctx == SessionOptions{}.n_ctx) opt.n_ctx = 128;
    auto s = Session::create(model_, opt);
    EXPECT_TRUE(s.ok());
    return std::move(s.value());
  }
  static std::vector<int32_t> tokens(int n, uint32_t seed = 1) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = int32_t(rng() % uint32_t(model_->params().n_vocab));
    return t;
  }
  // Logits of every position, fed one token at a time.
  static std::vector<float> one_by_one(Session& s, const std::vector<int32_t>& toks) {
    std::vector<float> all;
    for (int32_t t : toks) {
      auto lg = s.append(std::span<const int32_t>(&t, 1));
      EXPECT_TRUE(lg.ok());
      all.insert(all.end(), lg.value().begin(), lg.value().end());
    }
    return all;
  }
  static std::vector<float> batched(Session& s, const std::vector<int32_t>& toks) {
    auto lg = s.forward(toks, 0, LogitsMode::all);
    EXPECT_TRUE(lg.ok());
    return std::vector<float>(lg.value().begin(), lg.value().end());
  }

  static std::shared_ptr<const Model> model_;
};
std::shared_ptr<const Model> SessionTest::model_;

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  EXPECT_LE(worst, tol);
}

TEST_F(SessionTest, BatchedPrefillEqualsTokenByTokenDecode) {
  // Every matmul output is one dot product of the same quantised rows either way, and attention
  // runs the same per-head code, so the logits agree to rounding of the summation order.
  const auto toks = tokens(37);
  for (ActMode act : {ActMode::int8, ActMode::f32}) {
    SessionOptions opt;
    opt.act = act;
    auto a = session(opt);
    auto b = session(opt);
    expect_close(batched(*a, toks), one_by_one(*b, toks), 1e-4f);
    EXPECT_EQ(a->n_past(), 37);
    EXPECT_EQ(b->n_past(), 37);
  }
}

TEST_F(SessionTest, ChunkingAndThreadCountDoNotChangeLogits) {
  const auto toks = tokens(50, 2);
  SessionOptions one;
  one.n_threads = 1;
  SessionOptions chunked;
  chunked.n_threads = 2;
  chunked.n_batch = 7;
  auto a = session(one);
  auto b = session(chunked);
  EXPECT_EQ(batched(*a, toks), batched(*b, toks));  // bit-identical: same dot products
}

TEST_F(SessionTest, LastLogitsAreTheLastRowOfAllLogits) {
  const auto toks = tokens(20, 3);
  auto a = session();
  auto b = session();
  const auto all = batched(*a, toks);
  auto last = b->forward(toks, 0, LogitsMode::last);
  ASSERT_TRUE(last.ok());
  const int64_t V = model_->params().n_vocab;
  ASSERT_EQ(int64_t(last.value().size()), V);
  EXPECT_EQ(std::vector<float>(last.value().begin(), last.value().end()),
            std::vector<float>(all.end() - V, all.end()));
}

TEST_F(SessionTest, KvTruncateThenContinueEqualsFreshRun) {
  const auto prefix = tokens(16, 4);
  const auto old_tail = tokens(9, 5);
  const auto new_tail = tokens(6, 6);
  auto s = session();
  ASSERT_TRUE(s->append(prefix).ok());
  ASSERT_TRUE(s->append(old_tail).ok());
  ASSERT_TRUE(s->kv_truncate(16).ok());
  EXPECT_EQ(s->n_past(), 16);
  auto lg = s->append(new_tail, LogitsMode::all);
  ASSERT_TRUE(lg.ok());
  const std::vector<float> got(lg.value().begin(), lg.value().end());

  std::vector<int32_t> fresh_toks = prefix;
  fresh_toks.insert(fresh_toks.end(), new_tail.begin(), new_tail.end());
  auto fresh = session();
  const auto all = batched(*fresh, fresh_toks);
  const int64_t V = model_->params().n_vocab;
  expect_close(got, std::vector<float>(all.end() - 6 * V, all.end()), 1e-4f);
}

TEST_F(SessionTest, ForwardBelowNPastOverwritesLaterPositions) {
  const auto a = tokens(12, 7);
  const auto b = tokens(4, 8);
  auto s = session();
  ASSERT_TRUE(s->append(a).ok());
  auto lg = s->forward(b, 8);  // positions 8..11 replaced
  ASSERT_TRUE(lg.ok());
  EXPECT_EQ(s->n_past(), 12);
  std::vector<int32_t> ref_toks(a.begin(), a.begin() + 8);
  ref_toks.insert(ref_toks.end(), b.begin(), b.end());
  auto r = session();
  auto want = r->forward(ref_toks, 0);
  ASSERT_TRUE(want.ok());
  expect_close(std::vector<float>(lg.value().begin(), lg.value().end()),
               std::vector<float>(want.value().begin(), want.value().end()), 1e-4f);
}

TEST_F(SessionTest, ResetStartsOver) {
  const auto toks = tokens(10, 9);
  auto s = session();
  const auto first = batched(*s, toks);
  ASSERT_TRUE(s->append(tokens(5, 10)).ok());
  s->reset();
  EXPECT_EQ(s->n_past(), 0);
  EXPECT_EQ(batched(*s, toks), first);
}

TEST_F(SessionTest, TeacherForcingVisitsEveryPositionWithItsLogits) {
  const auto toks = tokens(30, 11);
  auto a = session();
  const auto all = batched(*a, toks);
  auto b = session();
  const int64_t V = model_->params().n_vocab;
  int64_t visited = 0;
  Status st = b->teacher_force(
      toks,
      [&](int64_t t, std::span<const float> lg) {
        EXPECT_EQ(t, visited++);
        EXPECT_EQ(std::vector<float>(lg.begin(), lg.end()),
                  std::vector<float>(all.begin() + t * V, all.begin() + (t + 1) * V));
      },
      /*chunk=*/8);
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(visited, 30);
}

TEST_F(SessionTest, Int8ActivationsStayCloseToF32) {
  const auto toks = tokens(24, 12);
  SessionOptions f;
  f.act = ActMode::f32;
  auto a = session();
  auto b = session(f);
  const auto x = batched(*a, toks), y = batched(*b, toks);
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += double(x[i] - y[i]) * double(x[i] - y[i]);
    den += double(y[i]) * double(y[i]);
  }
  EXPECT_LT(std::sqrt(num / den), 0.05);  // relative RMS of the logits
  EXPECT_GT(std::sqrt(num / den), 0.0);   // int8 really quantises
}

// Greedy steps (forward_greedy / append_greedy; on the CPU path greedy_token of the logits the
// same forward computes): a prompt over several batches (n_batch 7) then decode steps give the
// ids of greedy_token over forward()'s logits on a twin session, the same n_past, and the same
// errors as forward() (nothing run).
TEST_F(SessionTest, GreedyStepsEqualGreedyTokenOfTheLogits) {
  SessionOptions opt;
  opt.n_batch = 7;
  auto a = session(opt);
  auto b = session(opt);
  const auto prompt = tokens(17, 21);
  auto id = a->forward_greedy(prompt, 0);
  auto lg = b->forward(prompt, 0);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(id.ok()) << id.error().message;
    ASSERT_TRUE(lg.ok());
    const int32_t want = greedy_token(lg.value());
    EXPECT_EQ(id.value(), want) << "step " << i;
    EXPECT_EQ(a->n_past(), b->n_past());
    id = a->append_greedy(std::span<const int32_t>(&want, 1));
    lg = b->append(std::span<const int32_t>(&want, 1));
  }
  const std::vector<int32_t> bad = {int32_t(model_->params().n_vocab)};
  auto r = a->append_greedy(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("outside the vocabulary"), std::string::npos)
      << r.error().message;
  EXPECT_FALSE(a->forward_greedy(prompt, a->n_past() + 1).ok());
  EXPECT_EQ(a->n_past(), b->n_past());
}

TEST_F(SessionTest, RejectsTokenOutsideTheVocabulary) {
  auto s = session();
  std::vector<int32_t> bad = {1, 2, int32_t(model_->params().n_vocab)};
  auto r = s->forward(bad, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("512"), std::string::npos) << r.error().message;
  bad = {-1};
  EXPECT_FALSE(s->forward(bad, 0).ok());
  EXPECT_EQ(s->n_past(), 0);
}

TEST_F(SessionTest, RejectsGapsEmptyInputAndContextOverflow) {
  SessionOptions opt;
  opt.n_ctx = 16;
  auto s = session(opt);
  const auto toks = tokens(10, 13);
  auto gap = s->forward(toks, 1);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.error().message.find("position 1"), std::string::npos) << gap.error().message;
  EXPECT_FALSE(s->forward({}, 0).ok());
  ASSERT_TRUE(s->append(toks).ok());
  auto over = s->append(toks);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("n_ctx 16"), std::string::npos) << over.error().message;
  EXPECT_EQ(s->n_past(), 10);
  opt.n_ctx = 0;
  EXPECT_FALSE(Session::create(model_, opt).ok());
}

TEST(SessionRealModel, SessionsShareOneModelIndependently) {
  const std::shared_ptr<const Model> model = test::load_real_model(test::kSmolLm2);
  ASSERT_TRUE(model);
  SessionOptions opt;
  opt.n_ctx = 32;
  auto a = Session::create(model, opt);
  auto b = Session::create(model, opt);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<int32_t> t1 = {504, 3575, 282, 4649, 314};
  const std::vector<int32_t> t2 = {1, 2, 3};
  auto x = a.value()->append(t1);
  ASSERT_TRUE(x.ok());
  const std::vector<float> first(x.value().begin(), x.value().end());
  ASSERT_TRUE(b.value()->append(t2).ok());  // another session in between changes nothing
  a.value()->reset();
  auto y = a.value()->append(t1);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(std::vector<float>(y.value().begin(), y.value().end()), first);
}

}  // namespace
}  // namespace fish
