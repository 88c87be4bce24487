// Speculative decoding against plain greedy decoding (forward_greedy one token at a time, an
// independent loop): the same tokens for a draft that always agrees (the target itself), a
// smaller model with other weights, drafts wrong at known places, prompt-lookup, every draft_n
// in 1..8, early stops; the drafters on their own; the vocabulary check. (Synthetic models
// mostly repeat their input token, so the smaller draft agrees often; the corrupting drafter
// makes the rejections.)
#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/sampling.h"
#include "engine/synthetic_model.h"
#include "kernels/w4a8.h"
#include "real_model.h"
#include "speculative_test_util.h"
#include "test_env.h"

namespace fish {
namespace {

std::shared_ptr<const Model> synthetic(const ModelShape& shape, uint64_t seed,
                                       const std::string& name) {
  const std::string path = (test::temp_dir() / name).string();
  auto ft = parse_file_type("q4_k_m");
  EXPECT_TRUE(ft.ok());
  EXPECT_TRUE(write_synthetic_model(shape, ft.value(), {seed, 1}, path).ok());
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.value();
}

std::unique_ptr<Session> session(std::shared_ptr<const Model> m, int64_t n_ctx = 160) {
  SessionOptions opt;
  opt.n_ctx = n_ctx;
  auto s = Session::create(std::move(m), opt);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return std::move(s.value());
}

std::vector<int32_t> random_tokens(int n, int32_t n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(size_t(n), 0);
  for (int32_t& x : t) x = int32_t(rng() % uint32_t(n_vocab));
  return t;
}

using test::CorruptingDrafter;
using test::plain_greedy;
using test::SpecRun;
using test::speculative;

class SpeculativeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    target_ = synthetic(*find_model_shape("tiny"), 3, "spec_target.gguf");
    ModelShape small = *find_model_shape("tiny");  // same vocabulary, other size and weights
    small.name = "tiny-draft";
    small.n_layer = 1;
    small.n_embd = 128;
    small.n_ff = 256;
    small.n_head = 2;
    small.n_head_kv = 1;
    draft_ = synthetic(small, 11, "spec_draft.gguf");
  }
  static void TearDownTestSuite() {
    target_.reset();
    draft_.reset();
  }
  static std::vector<int32_t> prompt(uint32_t seed = 1) {
    return random_tokens(12, int32_t(target_->params().n_vocab), seed);
  }
  static std::shared_ptr<const Model> target_, draft_;
};
std::shared_ptr<const Model> SpeculativeTest::target_, SpeculativeTest::draft_;

TEST_F(SpeculativeTest, TargetAsItsOwnDraftMatchesPlainGreedyAndAcceptsEveryDraft) {
  auto ref = session(target_);
  const auto want = plain_greedy(*ref, prompt(), 40);
  auto s = session(target_);
  auto d = session(target_);
  ModelDrafter drafter(*d);
  const SpecRun got = speculative(*s, drafter, prompt(), 40, 4);
  EXPECT_EQ(got.tokens, want);
  EXPECT_EQ(got.stats.generated, 40);
  // A batch row's logits are the same dot products as a one-token forward's: every draft holds.
  EXPECT_EQ(got.stats.accepted, got.stats.drafted);
  EXPECT_EQ(got.stats.verifies, 8);  // 39 tokens after the first: 7 verifies of 1 + 4, one of 1 + 3
  EXPECT_DOUBLE_EQ(got.stats.accepted_per_verify(), 31.0 / 8);
}

TEST_F(SpeculativeTest, SmallerDraftModelMatchesPlainGreedy) {
  auto ref = session(target_);
  const auto want = plain_greedy(*ref, prompt(2), 33);
  for (int64_t n : {1, 2, 3, 5, 8}) {
    auto s = session(target_);
    auto d = session(draft_);
    ModelDrafter drafter(*d);
    const SpecRun got = speculative(*s, drafter, prompt(2), 33, n);
    EXPECT_EQ(got.tokens, want) << "draft_n " << n;
    EXPECT_EQ(s->n_past(), 12 + 33 - 1) << "the target holds all but the last token";
  }
}

TEST_F(SpeculativeTest, RejectedDraftsRollBackAndTheTargetsTokenFollows) {
  auto ref = session(target_);
  const auto want = plain_greedy(*ref, prompt(6), 30);
  std::vector<int32_t> full = prompt(6);
  full.insert(full.end(), want.begin(), want.end());
  for (int64_t n : {1, 2, 4, 7}) {
    auto s = session(target_);
    CorruptingDrafter drafter(full, int32_t(target_->params().n_vocab));
    const SpecRun got = speculative(*s, drafter, prompt(6), 30, n);
    EXPECT_EQ(got.tokens, want) << "draft_n " << n;
    EXPECT_GT(got.stats.accepted, 0) << "draft_n " << n;
    EXPECT_LT(got.stats.accepted, got.stats.drafted) << "draft_n " << n;
  }
}

TEST_F(SpeculativeTest, PromptLookupMatchesPlainGreedyForEveryDraftN) {
  // A prompt that repeats itself gives the n-gram lookup something to propose.
  std::vector<int32_t> p = prompt(3);
  p.insert(p.end(), p.begin(), p.end());
  auto ref = session(target_);
  const auto want = plain_greedy(*ref, p, 48);
  for (int64_t n = 1; n <= 8; ++n) {
    auto s = session(target_);
    LookupDrafter drafter;
    const SpecRun got = speculative(*s, drafter, p, 48, n);
    EXPECT_EQ(got.tokens, want) << "draft_n " << n;
    EXPECT_GT(got.stats.drafted, 0) << "draft_n " << n;
    EXPECT_LE(got.stats.verifies, 47);
  }
}

TEST_F(SpeculativeTest, SinkStopsGenerationAndShortBudgetsDraftNothingExtra) {
  auto ref = session(target_);
  const auto want = plain_greedy(*ref, prompt(4), 20);
  auto s = session(target_);
  auto d = session(target_);
  ModelDrafter drafter(*d);
  auto first = s->forward_greedy(prompt(4), 0);
  ASSERT_TRUE(first.ok());
  std::vector<int32_t> got;
  auto st = speculative_decode(*s, drafter, prompt(4), first.value(), 20, 6, [&](int32_t t) {
    got.push_back(t);
    return got.size() < 7;  // stop after the 7th token, mid-verify
  });
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.begin() + 7));
  EXPECT_EQ(st.value().generated, 7);

  for (int64_t n_predict : {1, 2}) {  // 1: no verify; 2: one verify with no draft
    auto s2 = session(target_);
    auto first2 = s2->forward_greedy(prompt(4), 0);
    ASSERT_TRUE(first2.ok());
    std::vector<int32_t> out;
    auto st2 =
        speculative_decode(*s2, drafter, prompt(4), first2.value(), n_predict, 6, [&](int32_t t) {
          out.push_back(t);
          return true;
        });
    ASSERT_TRUE(st2.ok());
    EXPECT_EQ(out, std::vector<int32_t>(want.begin(), want.begin() + n_predict));
    EXPECT_EQ(st2.value().verifies, n_predict - 1);
    EXPECT_EQ(st2.value().drafted, 0);
  }
}

TEST_F(SpeculativeTest, ForwardGreedyRowsIsTheArgmaxOfEveryRowsLogits) {
  const auto p = prompt(7);
  auto a = session(target_);
  auto b = session(target_);
  ASSERT_TRUE(a->forward(p, 0).ok());
  ASSERT_TRUE(b->forward(p, 0).ok());
  const std::vector<int32_t> verify = {3, 99, 256, 7, 511};
  auto ids = a->forward_greedy_rows(verify, 12);
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  auto lg = b->forward(verify, 12, LogitsMode::all);
  ASSERT_TRUE(lg.ok());
  const size_t V = size_t(target_->params().n_vocab);
  ASSERT_EQ(ids.value().size(), verify.size());
  for (size_t t = 0; t < verify.size(); ++t)
    EXPECT_EQ(ids.value()[t], greedy_token(lg.value().subspan(t * V, V))) << "row " << t;
  EXPECT_EQ(a->n_past(), 17);
}

TEST_F(SpeculativeTest, RejectsBadArguments) {
  auto s = session(target_);
  LookupDrafter drafter;
  auto none = [](int32_t) { return true; };
  auto st = speculative_decode(*s, drafter, prompt(), 0, 4, 0, none);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("draft_n 0"), std::string::npos) << st.error().message;
  st = speculative_decode(*s, drafter, prompt(), 0, 4, 2, none);  // nothing prefilled
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("holds 0 positions"), std::string::npos);
}

TEST_F(SpeculativeTest, ModelDrafterKeepsTheSharedPrefixAndDraftsItsGreedyContinuation) {
  auto d = session(draft_);
  ModelDrafter drafter(*d);
  const auto p = prompt(5);
  auto ref = session(draft_);
  const auto want = plain_greedy(*ref, p, 4);
  auto got = drafter.draft(p, 4);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value(), want);
  EXPECT_EQ(d->n_past(), 12 + 3);  // the prompt and the drafts it fed
  // A context that diverges after the prompt rolls back to it and feeds the new tail.
  std::vector<int32_t> ctx = p;
  ctx.push_back((want[0] + 1) % int32_t(draft_->params().n_vocab));
  auto ref2 = session(draft_);
  const auto want2 = plain_greedy(*ref2, ctx, 3);
  got = drafter.draft(ctx, 3);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value(), want2);
  EXPECT_EQ(d->n_past(), 13 + 2);
}

TEST(LookupDrafter, ProposesWhatFollowedTheLatestLongestMatch) {
  LookupDrafter d(1, 3);
  // "5 6 7" occurs twice before the tail; the later one (followed by 9 9) wins.
  const std::vector<int32_t> ctx = {5, 6, 7, 1, 2, 5, 6, 7, 9, 9, 4, 5, 6, 7};
  auto got = d.draft(ctx, 2);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value(), (std::vector<int32_t>{9, 9}));
  // The 3-gram "2 3 4" is new; the 1-gram "4" matched earlier wins, cut at the context's end.
  const std::vector<int32_t> ctx2 = {8, 4, 3, 1, 2, 3, 4};
  got = d.draft(ctx2, 8);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value(), (std::vector<int32_t>{3, 1, 2, 3, 4}));
  got = d.draft(std::vector<int32_t>{1, 2, 3}, 4);  // nothing repeats
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got.value().empty());
  got = d.draft(std::vector<int32_t>{7}, 4);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got.value().empty());
}

TEST_F(SpeculativeTest, DraftVocabularyMustMatch) {
  EXPECT_TRUE(check_draft_vocab(*target_, *draft_).ok());
  ModelShape other = *find_model_shape("tiny");
  other.name = "tiny-vocab600";
  other.n_vocab = 600;
  auto m = synthetic(other, 3, "spec_vocab600.gguf");
  const Status st = check_draft_vocab(*target_, *m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("600 tokens"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("512"), std::string::npos) << st.error().message;
}

TEST(SpeculativeRealModel, SmolLm2AsItsOwnDraftAndWithLookupMatchesPlainGreedy) {
  const std::shared_ptr<const Model> model = test::load_real_model(test::kSmolLm2);
  ASSERT_TRUE(model);
  EXPECT_TRUE(check_draft_vocab(*model, *model).ok());
  // A 5-token phrase twice (SmolLM2 ids), so the lookup has an n-gram to match.
  const std::vector<int32_t> p = {504, 3575, 282, 4649, 314, 504, 3575, 282, 4649, 314};
  auto ref = session(model, 64);
  const auto want = plain_greedy(*ref, p, 24);
  {
    auto s = session(model, 64);
    auto d = session(model, 64);
    ModelDrafter drafter(*d);
    const SpecRun got = speculative(*s, drafter, p, 24, 5);
    EXPECT_EQ(got.tokens, want);
    EXPECT_EQ(got.stats.accepted, got.stats.drafted);
  }
  {
    auto s = session(model, 64);
    LookupDrafter drafter;
    EXPECT_EQ(speculative(*s, drafter, p, 24, 4).tokens, want);
  }
}

// A verify holds at most decode_exact_tokens() tokens: unbounded on the GGUF path, the last
// size before a kernel switch (and its rounding) on the int4 paths; and the loop drafts one
// fewer than that per verify, whatever draft_n asks.
TEST_F(SpeculativeTest, AVerifyHoldsNoMoreTokensThanTheDecodeKernelsTake) {
  EXPECT_EQ(session(target_)->decode_exact_tokens(), std::numeric_limits<int64_t>::max());
  for (auto [path, want] :
       {std::pair{WeightPath::w4a16, int64_t(3)}, std::pair{WeightPath::w4a8, kW4A8AmxMinTokens}}) {
    SessionOptions opt;
    opt.n_ctx = 160;
    opt.weights.weight_path = path;
    opt.weights.dequant_threshold = 3;
    auto s = Session::create(target_, opt);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s.value()->decode_exact_tokens(), want) << weight_path_name(path);
    const std::vector<int32_t> p = prompt(5);
    std::vector<int32_t> want_tokens;
    {
      auto ref = Session::create(target_, opt);
      ASSERT_TRUE(ref.ok());
      want_tokens = plain_greedy(*ref.value(), p, 24);
    }
    LookupDrafter lookup;
    const SpecRun got = speculative(*s.value(), lookup, p, 24, 8);
    EXPECT_EQ(got.tokens, want_tokens) << weight_path_name(path);
    EXPECT_LE(got.stats.drafted, (want - 1) * got.stats.verifies) << weight_path_name(path);
  }
}

// A draft session whose sliding-window ring no longer holds the rows a rollback needs (a new
// repetition after a long generation) starts over from an empty cache: its draft is what a fresh
// session drafts.
TEST(SpeculativeRing, ModelDrafterStartsOverWhenTheRingCannotRollBack) {
  const std::shared_ptr<const Model> m =
      synthetic(*find_model_shape("tiny-gemma3"), 7, "spec_ring_draft.gguf");  // window 16
  SessionOptions opt;
  opt.n_ctx = 160;
  opt.n_batch = 4;  // ring rows: window + 4, so a rollback of more than ~4 positions is refused
  opt.swa_kv = SwaKv::ring;
  const std::vector<int32_t> long_ctx = random_tokens(100, int32_t(m->params().n_vocab), 9);
  const std::vector<int32_t> short_ctx(long_ctx.begin(), long_ctx.begin() + 30);
  auto s = Session::create(m, opt);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ModelDrafter d(*s.value());
  ASSERT_TRUE(d.draft(long_ctx, 4).ok());
  ASSERT_FALSE(s.value()->kv_truncate(29).ok()) << "the ring was expected to refuse this rollback";
  auto got = d.draft(short_ctx, 4);
  ASSERT_TRUE(got.ok()) << got.error().message;
  auto fresh_s = Session::create(m, opt);
  ASSERT_TRUE(fresh_s.ok());
  ModelDrafter fresh(*fresh_s.value());
  auto want = fresh.draft(short_ctx, 4);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(got.value(), want.value());
}

}  // namespace
}  // namespace fish
