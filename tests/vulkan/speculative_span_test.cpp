// Speculative decoding (engine/speculative.h) with the target on a GPU layer span, on lavapipe:
// the verify batches of 2..8 tokens (matvec up to FISH_MATVEC_MAX_TOK, matvec8_<type> above)
// and the rollback of the device KV give the tokens plain greedy decoding gives on the same
// span (forward_greedy one token at a time, the span's output head): the model as its own (CPU)
// draft, drafts wrong at known places, prompt lookup; and SmolLM2 as its own draft.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/gpu_placement.h"
#include "engine/session.h"
#include "engine/speculative.h"
#include "engine/vulkan/vulkan_backend.h"
#include "fish_vk_layout.h"
#include "real_model.h"
#include "speculative_test_util.h"
#include "test_env.h"
#include "vulkan_test_util.h"

namespace fish {
namespace {

constexpr int64_t kCtx = 96;

// A 2-layer llama with an untied output and grouped-query heads.
std::shared_ptr<const Model> synthetic_llama() {
  static std::shared_ptr<const Model> model = [] {
    const ModelShape shape{"test-spec", "llama", "2-layer speculative test llama",
                           2,           256,     512,
                           4,           2,       64,
                           1024,        false,   512,
                           10000.0f,    1e-5f,   0};
    return test::synthetic_q4_k_m(shape, {17, 2}, "fish_spec_2l_q4_k_m.gguf");
  }();
  return model;
}

std::unique_ptr<Session> session(std::shared_ptr<const Model> m,
                                 std::shared_ptr<const GpuPlacement> pl) {
  SessionOptions opt;
  opt.n_ctx = kCtx;
  opt.n_batch = 32;
  opt.gpu = std::move(pl);
  auto s = Session::create(std::move(m), opt);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return std::move(s).value();
}

struct Gpu {
  std::unique_ptr<vk::VulkanBackend> backend;
  std::shared_ptr<const GpuPlacement> placement;
};

// verify_split: FISH_VK_VERIFY_SPLIT on (else the environment's setting).
Gpu place(const Model& m, bool verify_split = false) {
  Gpu g;
  Result<vk::VulkanOptions> opt = vk::VulkanOptions::from_env();
  if (opt.ok() && verify_split) opt->verify_split = true;
  g.backend = std::make_unique<vk::VulkanBackend>(std::move(opt));
  const Status st = g.backend->open();
  EXPECT_TRUE(st.ok()) << st.error().message;
  if (!st.ok()) return g;
  g.placement = GpuPlacement::place_layers(m, *g.backend,
                                           test::placement_request(-1, SpanRequest{kCtx, 32, 32}));
  return g;
}

const std::vector<int32_t> kPrompt = {5, 77, 901, 13, 500, 8, 640, 222, 31, 999, 5, 77, 901};
constexpr int64_t kTokens = 30;

// Plain greedy decoding's kTokens after kPrompt on the placement's span.
std::vector<int32_t> greedy_tokens(std::shared_ptr<const Model> model, const Gpu& g) {
  auto ref = session(model, g.placement);
  EXPECT_TRUE(ref->span_active());
  return test::plain_greedy(*ref, kPrompt, kTokens);
}

// Speculative decoding with a drafter that corrupts some drafts, at each draft_n of `ns`, on
// fresh sessions over the placement: plain greedy's tokens (`want`), the session's
// decode_exact_tokens() `exact`, at most min(n, exact - 1) drafts a verify, no GPU fallback.
// Returns the runs.
std::vector<test::SpecRun> corrupting_runs(std::shared_ptr<const Model> model, const Gpu& g,
                                           const std::vector<int32_t>& want,
                                           std::initializer_list<int64_t> ns, int64_t exact) {
  std::vector<int32_t> full = kPrompt;
  full.insert(full.end(), want.begin(), want.end());
  std::vector<test::SpecRun> runs;
  for (int64_t n : ns) {
    auto s = session(model, g.placement);
    EXPECT_TRUE(s->span_active());
    EXPECT_EQ(s->decode_exact_tokens(), exact);
    test::CorruptingDrafter bad(full, int32_t(model->params().n_vocab));
    runs.push_back(test::speculative(*s, bad, kPrompt, kTokens, n));
    const test::SpecRun& got = runs.back();
    EXPECT_EQ(got.tokens, want) << "corrupting, draft_n " << n;
    EXPECT_LT(got.stats.accepted, got.stats.drafted);
    EXPECT_LE(got.stats.drafted, std::min<int64_t>(n, exact - 1) * got.stats.verifies)
        << "draft_n " << n;
    EXPECT_EQ(s->gpu_fallbacks(), 0);
  }
  return runs;
}

TEST(SpeculativeSpan, VerifyBatchesOnTheSpanGivePlainGreedyTokens) {
  auto model = synthetic_llama();
  ASSERT_TRUE(model);
  Gpu g = place(*model);
  ASSERT_TRUE(g.placement && g.placement->span()) << (g.placement ? g.placement->summary() : "");
  const std::vector<int32_t> want = greedy_tokens(model, g);
  // draft_n 1, 3, 4, 7: verifies of 2 and 4 tokens, since a session with matrices on the GPU
  // caps a verify at the decode matvec's FISH_MATVEC_MAX_TOK (decode_exact_tokens: past it the
  // kernels round activations otherwise; FISH_VK_VERIFY_SPLIT lifts the cap, below); 5..8-row
  // forwards are HeadOverEveryRow's.
  corrupting_runs(model, g, want, {1, 3, 4, 7}, FISH_MATVEC_MAX_TOK);
  {
    auto s = session(model, g.placement);
    auto d = session(model, nullptr);  // the draft on the CPU
    ModelDrafter own(*d);
    EXPECT_EQ(test::speculative(*s, own, kPrompt, kTokens, 7).tokens, want) << "own draft";
    LookupDrafter lookup;
    s.reset();  // the span is free again
    auto s3 = session(model, g.placement);
    ASSERT_TRUE(s3->span_active());
    EXPECT_EQ(test::speculative(*s3, lookup, kPrompt, kTokens, 4).tokens, want) << "lookup";
  }
}

// FISH_VK_VERIFY_SPLIT: verifies of 5..8 tokens run as chunks of <= FISH_MATVEC_MAX_TOK on the
// decode kernels, so the session may draft up to FISH_MATVEC_WIDE_TOK - 1 tokens a verify and
// still give plain greedy decoding's tokens (the per-matmul path's split:
// VulkanMatmul.VerifySplitRowsAreOneTokenMatmulsBitwise). At draft_n 5 and 7 the drafts average
// more than FISH_MATVEC_MAX_TOK - 1 a verify: verifies past 4 tokens ran.
TEST(SpeculativeSpan, SplitVerifiesOfUpToEightTokensGivePlainGreedyTokens) {
  auto model = synthetic_llama();
  ASSERT_TRUE(model);
  Gpu g = place(*model, true);
  ASSERT_TRUE(g.placement && g.placement->span()) << (g.placement ? g.placement->summary() : "");
  EXPECT_NE(g.placement->span()->kernels().find("verify forwards of 5..8 tokens in chunks of <= 4"),
            std::string::npos)
      << g.placement->span()->kernels();
  const std::vector<int32_t> want = greedy_tokens(model, g);
  const std::vector<test::SpecRun> runs =
      corrupting_runs(model, g, want, {4, 5, 7}, FISH_MATVEC_WIDE_TOK);
  for (size_t i : {size_t(1), size_t(2)}) {
    if (i < runs.size()) {
      EXPECT_GT(runs[i].stats.drafted, (FISH_MATVEC_MAX_TOK - 1) * runs[i].stats.verifies)
          << "run " << i << ": drafted " << runs[i].stats.drafted << " in "
          << runs[i].stats.verifies << " verifies";
    }
  }
}

// The span's head over 1..8 rows (forward_greedy_rows: only the ids back) against one-token
// greedy steps (the head over the last row) over the same tokens on the same span.
TEST(SpeculativeSpan, HeadOverEveryRowEqualsOneTokenGreedySteps) {
  auto model = synthetic_llama();
  ASSERT_TRUE(model);
  Gpu g = place(*model);
  ASSERT_TRUE(g.placement && g.placement->span() && g.placement->span()->has_head());
  EXPECT_EQ(g.placement->span()->head_rows(), FISH_MATVEC_WIDE_TOK);
  const std::vector<int32_t> prompt = {5, 77, 901, 13, 500, 8, 640, 222, 31};
  const std::vector<int32_t> tail = {999, 5, 77, 901, 13, 17, 1000, 2};
  auto s = session(model, g.placement);
  ASSERT_TRUE(s->span_active());
  ASSERT_TRUE(s->forward(prompt, 0).ok());
  std::vector<int32_t> steps;
  for (size_t i = 0; i < tail.size(); ++i) {
    auto t = s->forward_greedy(std::span(tail).subspan(i, 1), int64_t(prompt.size() + i));
    ASSERT_TRUE(t.ok()) << t.error().message;
    steps.push_back(t.value());
  }
  for (size_t n = 1; n <= tail.size(); ++n) {
    auto ids = s->forward_greedy_rows(std::span(tail).subspan(0, n), int64_t(prompt.size()));
    ASSERT_TRUE(ids.ok()) << ids.error().message;
    EXPECT_EQ(std::vector<int32_t>(ids.value().begin(), ids.value().end()),
              std::vector<int32_t>(steps.begin(), steps.begin() + int64_t(n)))
        << n << " rows";
  }
  EXPECT_EQ(s->gpu_fallbacks(), 0);
}

TEST(SpeculativeSpan, SmolLm2OnTheSpanAsItsOwnDraftGivesPlainGreedyTokens) {
  const std::shared_ptr<const Model> model = test::load_real_model(test::kSmolLm2);
  ASSERT_TRUE(model);
  Gpu g = place(*model);
  ASSERT_TRUE(g.placement && g.placement->span()) << (g.placement ? g.placement->summary() : "");
  const std::vector<int32_t> prompt = {504, 3575, 282, 4649, 314, 504, 3575, 282, 4649, 314};
  std::vector<int32_t> want;
  {
    auto ref = session(model, g.placement);
    want = test::plain_greedy(*ref, prompt, 16);
  }
  auto s = session(model, g.placement);
  ASSERT_TRUE(s->span_active());
  auto d = session(model, nullptr);
  ModelDrafter own(*d);
  const test::SpecRun got = test::speculative(*s, own, prompt, 16, 5);
  EXPECT_EQ(got.tokens, want);
  EXPECT_EQ(s->gpu_fallbacks(), 0);
}

}  // namespace
}  // namespace fish
