// Stage 2 layer spans (engine/layer_span.h, engine/vulkan/vulkan_span.cpp) on lavapipe: the span
// against stage 1 per-matmul and the CPU on identical teacher-forced inputs (seed test section
// 2), device memory back to zero after the placement, span_kv_truncate + re-forward equals a
// fresh run, a multi-token verify equals sequential decode, a KV that starts short and grows,
// a failed span forward falls back to the CPU with the KV replayed (also into sliding-window
// rings), and a small FISH_VRAM_BUDGET_MB places fewer layers with a working span.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>

#include "engine/gpu_placement.h"
#include "engine/model_shapes.h"
#include "engine/sampling.h"
#include "engine/session.h"
#include "engine/synthetic_model.h"
#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_span.h"
#include "test_env.h"
#include "vulkan_test_util.h"

namespace fish {
namespace {

constexpr int64_t kCtx = 96;

std::unique_ptr<vk::VulkanBackend> open_backend(const char* budget_mb = nullptr) {
  if (budget_mb)
    setenv("FISH_VRAM_BUDGET_MB", budget_mb, 1);
  else
    unsetenv("FISH_VRAM_BUDGET_MB");
  // The f32 decode kernels under any FISH_VK_MATVEC or auto rule: these tests' bounds against
  // the CPU f32 engine are f32 arithmetic's; the integer-dot kernels round x to q8_1 and are
  // checked against their own bound in vulkan_matvec_idot_test.cpp.
  auto opt = vk::VulkanOptions::from_env();
  if (opt.ok()) opt->matvec = vk::MatvecMode::fast;
  auto b = std::make_unique<vk::VulkanBackend>(opt);
  unsetenv("FISH_VRAM_BUDGET_MB");
  const Status s = b->open();
  EXPECT_TRUE(s.ok()) << s.error().message;
  return b;
}

// A span request that starts the KV at 8 positions, so every test also grows it.
SpanRequest small_span(int64_t max_tok = 64, int64_t n_ctx = kCtx) {
  return SpanRequest{n_ctx, max_tok, 8};
}

std::shared_ptr<const Model> load(const char* file) {
  const std::string path = test::model_path(file);
  EXPECT_FALSE(path.empty()) << file << " missing: run scripts/setup.sh";
  if (path.empty()) return nullptr;
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? m.value() : nullptr;
}

// A 3-layer llama with grouped-query heads (8:2, head_dim 64) for the prefill chunk tests.
std::shared_ptr<const Model> synthetic_llama() {
  static std::shared_ptr<const Model> model = [] {
    const ModelShape shape{"test-span", "llama", "3-layer span test llama",
                           3,           512,     1024,
                           8,           2,       64,
                           2048,        false,   512,
                           10000.0f,    1e-5f,   0};
    return test::synthetic_q4_k_m(shape, {11, 3}, "fish_span_3l_q4_k_m.gguf");
  }();
  return model;
}

// A 3-layer gemma3 (every layer sliding, window 64 < the test contexts) with 4 query heads on 1
// KV head of head_dim 72 (36 KV words): split-K attention under a window.
std::shared_ptr<const Model> synthetic_gemma3_window() {
  static std::shared_ptr<const Model> model = [] {
    const ModelShape shape{"test-span-swa",
                           "gemma3",
                           "3-layer sliding-window gemma3",
                           3,
                           256,
                           512,
                           4,
                           1,
                           72,
                           2048,
                           true,
                           512,
                           10000.0f,
                           1e-6f,
                           64};
    return test::synthetic_q4_k_m(shape, {13, 3}, "fish_span_3l_swa_q4_k_m.gguf");
  }();
  return model;
}

// act: f32 where CPU layers are compared with GPU ones (only the GPU paths differ then); the
// all-GPU runs have no CPU matmuls, and the CPU reference of the real models runs int8 (as the
// seed's "span vs CPU", reported only).
std::unique_ptr<Session> session(std::shared_ptr<const Model> model,
                                 std::shared_ptr<const GpuPlacement> pl, int64_t n_batch = 64,
                                 ActMode act = ActMode::f32, int64_t n_ctx = kCtx) {
  SessionOptions opt;
  opt.n_ctx = n_ctx;
  opt.n_batch = n_batch;
  opt.act = act;
  opt.gpu = std::move(pl);
  auto s = Session::create(std::move(model), opt);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return std::move(s).value();
}

// Logits at every position: a prefill of n_prefill tokens, then one token at a time.
std::vector<float> run(Session& s, const std::vector<int32_t>& tokens, size_t n_prefill) {
  std::vector<float> all;
  const std::span<const int32_t> t(tokens);
  auto lg = s.forward(t.subspan(0, n_prefill), 0, LogitsMode::all);
  EXPECT_TRUE(lg.ok()) << lg.error().message;
  if (!lg.ok()) return all;
  all.assign(lg.value().begin(), lg.value().end());
  for (size_t i = n_prefill; i < tokens.size(); ++i) {
    lg = s.append(t.subspan(i, 1));
    EXPECT_TRUE(lg.ok()) << lg.error().message;
    if (!lg.ok()) return all;
    all.insert(all.end(), lg.value().begin(), lg.value().end());
  }
  return all;
}

struct Diff {
  int64_t argmax_equal = 0, positions = 0;
  double max_diff = 0, max_abs = 0;
};
Diff compare(const std::vector<float>& a, const std::vector<float>& b, int64_t n_vocab) {
  Diff d;
  if (a.size() != b.size()) return d;
  for (size_t i = 0; i < a.size(); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(double(b[i])));
    d.max_diff = std::max(d.max_diff, std::fabs(double(a[i]) - double(b[i])));
  }
  d.positions = int64_t(a.size()) / n_vocab;
  for (int64_t p = 0; p < d.positions; ++p) {
    auto ra = a.begin() + p * n_vocab, rb = b.begin() + p * n_vocab;
    d.argmax_equal +=
        (std::max_element(ra, ra + n_vocab) - ra) == (std::max_element(rb, rb + n_vocab) - rb);
  }
  return d;
}

// Logits within rel of the largest |logit| of b, and the same top-1 except at near ties: a
// position's picks may differ only where b ranks a's pick within 2 rel max|b| of its own top (the
// logit bound lets such a tie flip; on an H100 one of the 303 positions at 300 keys did).
void expect_same(const std::vector<float>& a, const std::vector<float>& b, int64_t n_vocab,
                 double rel, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  const Diff d = compare(a, b, n_vocab);
  int64_t far = 0;
  for (int64_t p = 0; p < d.positions; ++p) {
    auto ra = a.begin() + p * n_vocab, rb = b.begin() + p * n_vocab;
    const float top_b = *std::max_element(rb, rb + n_vocab);
    far += double(top_b - rb[std::max_element(ra, ra + n_vocab) - ra]) > 2 * rel * d.max_abs;
  }
  EXPECT_EQ(far, 0) << what << ": top-1 equal at " << d.argmax_equal << " of " << d.positions;
  EXPECT_LE(d.max_diff, rel * d.max_abs)
      << what << ": max |dlogit| " << d.max_diff << " of " << d.max_abs;
}

// Seed test 2: span vs per-matmul vs CPU on identical teacher-forced inputs: a prefill of 3,
// then one token at a time (matvec kernels; the tiled ones and chunking are covered by the
// synthetic model below). lavapipe on a shared 2-core machine takes seconds per token of these
// models (gemma3's 262k-row output above all), so the runs are short; 33 steps belong to the
// GPU machine's session.
void check_span_end_to_end(const char* file, const std::vector<int32_t>& tokens) {
  auto model = load(file);
  ASSERT_TRUE(model);
  const int64_t n_vocab = model->params().n_vocab;
  auto b = open_backend();
  std::vector<float> span_lg, matmul_lg;
  {
    std::shared_ptr<const GpuPlacement> pl =
        GpuPlacement::place_layers(*model, *b, test::placement_request(-1, small_span()));
    ASSERT_TRUE(pl->span()) << pl->summary();
    EXPECT_EQ(pl->span()->n_layers(), model->params().n_layer) << pl->summary();
    EXPECT_NE(b->describe().find("span"), std::string::npos) << b->describe();
    auto s = session(model, pl);
    EXPECT_TRUE(s->span_active());
    span_lg = run(*s, tokens, 3);
    EXPECT_EQ(s->gpu_fallbacks(), 0);
    EXPECT_GE(pl->span()->kv_capacity(), int64_t(tokens.size()));  // grown from 8 as needed
    s.reset();
  }
  EXPECT_EQ(b->bytes_resident(), 0u) << "device memory after the span placement is gone";
  {
    std::shared_ptr<const GpuPlacement> pl = GpuPlacement::place_layers(*model, *b);
    ASSERT_FALSE(pl->span());
    auto s = session(model, pl);
    EXPECT_FALSE(s->span_active());
    matmul_lg = run(*s, tokens, 3);
  }
  EXPECT_EQ(b->bytes_resident(), 0u);
  auto cpu = session(model, nullptr, 64, ActMode::int8);
  const std::vector<float> cpu_lg = run(*cpu, tokens, 3);
  expect_same(span_lg, matmul_lg, n_vocab, 0.02, std::string(file) + " span vs per-matmul");
  const Diff d = compare(span_lg, cpu_lg, n_vocab);
  std::printf(
      "%s: span vs per-matmul max |dlogit| %.4g of %.4g; span vs CPU argmax %lld/%lld, "
      "max |dlogit| %.4g (%.2f%%)\n",
      file, compare(span_lg, matmul_lg, n_vocab).max_diff, d.max_abs, (long long)d.argmax_equal,
      (long long)d.positions, d.max_diff, 100.0 * d.max_diff / std::max(d.max_abs, 1e-30));
}

TEST(VulkanSpan, SmolLm2SpanMatchesPerMatmulAndCpu) {
  check_span_end_to_end(test::kSmolLm2, {1, 504, 3458, 282, 4649});
}

TEST(VulkanSpan, Gemma3SpanMatchesPerMatmulAndCpu) {
  check_span_end_to_end(test::kGemma3, {2, 651, 6037, 576});
}

// Prefill of 70 tokens = two chunks (64 + 6) with the tiled kernels, then decode; and a
// 70-token prefill in batches of 32 (three span forwards) gives the same logits.
TEST(VulkanSpan, ChunkedPrefillMatchesPerMatmul) {
  auto model = synthetic_llama();
  ASSERT_TRUE(model);
  auto b = open_backend();
  std::vector<int32_t> tokens;
  for (int i = 0; i < 72; ++i) tokens.push_back(int32_t((i * 37 + 5) % 2048));
  std::shared_ptr<const GpuPlacement> span_pl =
      GpuPlacement::place_layers(*model, *b, test::placement_request(-1, small_span(96)));
  ASSERT_TRUE(span_pl->span()) << span_pl->summary();
  std::vector<float> span_lg, batched_lg;
  {
    auto s = session(model, span_pl, 96);
    ASSERT_TRUE(s->span_active());
    span_lg = run(*s, tokens, 70);
  }
  {
    auto s = session(model, span_pl, 32);
    ASSERT_TRUE(s->span_active());
    batched_lg = run(*s, tokens, 70);
  }
  std::vector<float> matmul_lg;
  {
    auto s = session(model, GpuPlacement::place_layers(*model, *b), 96);
    matmul_lg = run(*s, tokens, 70);
  }
  const int64_t n_vocab = model->params().n_vocab;
  expect_same(span_lg, matmul_lg, n_vocab, 0.02, "synthetic llama span vs per-matmul");
  // With cooperative matrices the 70-token forward runs every matmul on f16 operands, while the
  // batches' 6-token tail runs the f32 tiled kernel (fewer than 16 tokens): the two agree to the
  // f16 rounding of the operands (relative 2^-11 per element), not to f32 order. Without them
  // both run the f32 tiled kernel, equal up to summation order.
  const bool coopmat = !b->coopmat_tiles().empty();
  expect_same(batched_lg, span_lg, n_vocab, coopmat ? 2e-3 : 1e-4,
              "batches of 32 vs one 70-token forward");
}

std::unique_ptr<vk::VulkanBackend> open_backend_split(int attn_split, int attn_decode = 1,
                                                      int attn_short = -1, int attn_stream = 0,
                                                      bool stream_pipe = false) {
  auto opt = vk::VulkanOptions::from_env();
  EXPECT_TRUE(opt.ok()) << opt.error().message;
  if (opt.ok()) opt->attn_split = attn_split;        // as FISH_VK_ATTN_SPLIT
  if (opt.ok()) opt->attn_decode = attn_decode;      // as FISH_VK_ATTN_DECODE
  if (opt.ok()) opt->attn_short = attn_short;        // as FISH_VK_ATTN_SHORT
  if (opt.ok()) opt->attn_stream = attn_stream;      // as FISH_VK_ATTN_STREAM
  if (opt.ok()) opt->stream_pipe = stream_pipe;      // as FISH_VK_ATTN_STREAM_PIPE
  if (opt.ok()) opt->matvec = vk::MatvecMode::fast;  // as open_backend
  auto b = std::make_unique<vk::VulkanBackend>(opt);
  const Status s = b->open();
  EXPECT_TRUE(s.ok()) << s.error().message;
  return b;
}

// Split-K attention through span forwards: a `prefill`-token prefill (chunks of 64 + the rest)
// then 3 decode steps, with FISH_VK_ATTN_SPLIT forced to 5 (prefill chunks split too, as far as
// the scratch allows; decode's span_attention_decode in 5 splits) and auto, auto without the
// fused decode kernel (FISH_VK_ATTN_DECODE=0: span_attention_short up to 256 keys, else
// span_rope_kv then split-K past 64 keys), and span_attention_short forced (FISH_VK_ATTN_SHORT=1:
// its wide variant past 256 keys), and span_attention_stream (FISH_VK_ATTN_STREAM=1, auto and 5
// splits, and 5 with its loads a pass ahead (FISH_VK_ATTN_STREAM_PIPE=1); =2, 5 splits merged by
// the last workgroup; auto, as the defaults run it: past the short kernel's 256 keys; where the
// heads fit it: head_dim 64, not 72)
// against the span with splitting and the fused kernels off (the one-pass kernel; tight) and the
// CPU engine.
void check_split_span(std::shared_ptr<const Model> model, const std::string& what,
                      int prefill = 70) {
  ASSERT_TRUE(model);
  const int64_t n_ctx = prefill + 26;
  std::vector<int32_t> tokens;
  for (int i = 0; i < prefill + 3; ++i) tokens.push_back(int32_t((i * 53 + 9) % 2048));
  const bool stream_fits =  // lavapipe and the GPUs these tests run on have >= 8-lane subgroups
      vk::attention_stream_fits(uint32_t(model->params().head_dim),
                                uint32_t(model->params().n_head / model->params().n_head_kv), 8, 8);
  auto span_logits = [&](int attn_split, int attn_decode = 1, int attn_short = -1,
                         int attn_stream = 0, bool pipe = false) {
    auto b = open_backend_split(attn_split, attn_decode, attn_short, attn_stream, pipe);
    std::shared_ptr<const GpuPlacement> pl =
        GpuPlacement::place_layers(*model, *b, test::placement_request(-1, small_span(96, n_ctx)));
    EXPECT_TRUE(pl->span()) << pl->summary();
    auto s = session(model, pl, 96, ActMode::f32, n_ctx);
    EXPECT_TRUE(s->span_active());
    std::vector<float> lg = run(*s, tokens, prefill);
    EXPECT_EQ(s->gpu_fallbacks(), 0);
    const bool streamed = b->describe().find("stream (") != std::string::npos;
    EXPECT_EQ(streamed, attn_stream != 0 && stream_fits && !(attn_stream < 0 && attn_decode == 1))
        << b->describe();
    return lg;
  };
  const std::vector<float> off = span_logits(0, 0, 0), forced = span_logits(5),
                           automatic = span_logits(-1), unfused = span_logits(-1, 0),
                           shortk = span_logits(-1, 0, 1), stream = span_logits(-1, -1, -1, 1),
                           stream5 = span_logits(5, -1, -1, 1), last5 = span_logits(5, -1, -1, 2),
                           pipe5 = span_logits(5, -1, -1, 1, true),
                           defaults = span_logits(-1, -1, -1, -1);
  auto cpu = session(model, nullptr, 96, ActMode::f32, n_ctx);
  const std::vector<float> cpu_lg = run(*cpu, tokens, prefill);
  const int64_t n_vocab = model->params().n_vocab;
  expect_same(forced, off, n_vocab, 1e-3, what + ": 5 splits vs one-pass");
  expect_same(automatic, off, n_vocab, 1e-3, what + ": auto splits vs one-pass");
  expect_same(unfused, off, n_vocab, 1e-3, what + ": auto splits, no decode kernel vs one-pass");
  expect_same(shortk, off, n_vocab, 1e-3, what + ": short kernel forced vs one-pass");
  expect_same(shortk, cpu_lg, n_vocab, 3e-3, what + ": short kernel forced vs CPU");
  expect_same(stream, off, n_vocab, 1e-3, what + ": stream kernel vs one-pass");
  expect_same(stream5, off, n_vocab, 1e-3, what + ": stream kernel, 5 splits vs one-pass");
  expect_same(pipe5, off, n_vocab, 1e-3,
              what + ": stream kernel, 5 splits, loads a pass ahead vs one-pass");
  expect_same(last5, off, n_vocab, 1e-3,
              what + ": stream kernel, 5 splits merged in it vs one-pass");
  expect_same(stream, cpu_lg, n_vocab, 3e-3, what + ": stream kernel vs CPU");
  expect_same(defaults, off, n_vocab, 1e-3, what + ": every attention knob auto vs one-pass");
  expect_same(forced, cpu_lg, n_vocab, 3e-3, what + ": 5 splits vs CPU");
  std::printf("%s: split vs one-pass max |dlogit| %.3g, split vs CPU %.3g (of %.3g)\n",
              what.c_str(), compare(forced, off, n_vocab).max_diff,
              compare(forced, cpu_lg, n_vocab).max_diff, compare(forced, cpu_lg, n_vocab).max_abs);
}

TEST(VulkanSpan, SplitKAttentionMatchesOnePassAndCpuGqa) {
  check_split_span(synthetic_llama(), "synthetic llama 8:2");
}

TEST(VulkanSpan, SplitKAttentionMatchesOnePassAndCpuSlidingWindow) {
  check_split_span(synthetic_gemma3_window(), "synthetic gemma3 window 64");
}

// Past 256 keys: the decode steps at 300..302 positions, where FISH_VK_ATTN_SHORT=1 runs
// span_attention_short_wide and auto the split-K kernels.
TEST(VulkanSpan, ShortAttentionWideMatchesOnePassAndCpuPast256Keys) {
  check_split_span(synthetic_llama(), "synthetic llama 8:2 at 300 positions", 300);
}

// span_kv_truncate then a re-forward equals a fresh run; a 3-token verify at pos0 < the device
// KV length returns the rows sequential decode gives.
TEST(VulkanSpan, TruncateAndMultiTokenVerifyMatchSequentialDecode) {
  auto model = synthetic_llama();
  ASSERT_TRUE(model);
  auto b = open_backend();
  std::shared_ptr<const GpuPlacement> pl =
      GpuPlacement::place_layers(*model, *b, test::placement_request(-1, small_span()));
  ASSERT_TRUE(pl->span());
  const int64_t n_vocab = model->params().n_vocab;
  const std::vector<int32_t> tokens = {5, 77, 901, 13, 1500, 8, 640, 222, 31, 1999};
  std::vector<float> fresh;
  {
    auto s = session(model, pl);
    fresh = run(*s, tokens, 7);  // positions 0..6 prefill, 7, 8, 9 one at a time
  }
  auto s = session(model, pl);
  // Wrong draft tokens at 7..9, rejected: truncate to 7 and verify the right ones in one go.
  ASSERT_TRUE(s->forward(std::span(tokens).subspan(0, 7), 0).ok());
  const std::vector<int32_t> wrong = {3, 3, 3};
  ASSERT_TRUE(s->append(wrong).ok());
  EXPECT_EQ(pl->span()->kv_length(), 10);
  ASSERT_TRUE(s->kv_truncate(7).ok());
  EXPECT_EQ(pl->span()->kv_length(), 7);
  auto lg = s->forward(std::span(tokens).subspan(7, 3), 7, LogitsMode::all);
  ASSERT_TRUE(lg.ok()) << lg.error().message;
  const std::vector<float> verify(lg.value().begin(), lg.value().end());
  const std::vector<float> seq(fresh.end() - 3 * n_vocab, fresh.end());
  expect_same(verify, seq, n_vocab, 1e-3, "3-token verify vs sequential decode");
  // A forward at pos0 below the KV length (re-running the last two positions) also matches.
  lg = s->forward(std::span(tokens).subspan(8, 2), 8, LogitsMode::all);
  ASSERT_TRUE(lg.ok());
  expect_same(std::vector<float>(lg.value().begin(), lg.value().end()),
              std::vector<float>(fresh.end() - 2 * n_vocab, fresh.end()), n_vocab, 1e-3,
              "re-forward at pos0 8");
  EXPECT_EQ(s->gpu_fallbacks(), 0);
}

// FISH_VK_RECORD_AHEAD: a span that records its next forward while the GPU runs the current one
// returns exactly (bitwise) what one recording each forward after the previous returns, through
// decode steps that use the recorded buffer (logits, then greedy ids only), a KV growth that
// invalidates it (the KV starts at 8 positions), a truncate + multi-token verify and a re-forward
// below the KV length (misses: recorded anew); the profile counts the forwards that ran ahead.
// FISH_GPU_PROFILE=1 (two timestamps a forward) returns the same bits, and both levels time every
// one-token forward.
TEST(VulkanSpan, RecordAheadMatchesRecordingEachForwardExactly) {
  auto model = synthetic_llama();
  ASSERT_TRUE(model);
  struct Out {
    std::vector<float> logits;
    std::vector<int32_t> ids;
    std::string profile;
  };
  auto run_all = [&](bool ahead, int profile = 2) {
    Out o;
    auto opt = vk::VulkanOptions::from_env();
    EXPECT_TRUE(opt.ok());
    if (!opt.ok()) return o;
    opt->matvec = vk::MatvecMode::fast;
    opt->record_ahead = ahead;
    opt->profile = profile;
    vk::VulkanBackend b(opt);
    EXPECT_TRUE(b.open().ok());
    std::shared_ptr<const GpuPlacement> pl =
        GpuPlacement::place_layers(*model, b, test::placement_request(-1, small_span()));
    EXPECT_TRUE(pl->span() && pl->span()->has_head()) << pl->summary();
    if (!pl->span()) return o;
    auto s = session(model, pl);
    const std::vector<int32_t> prompt = {5, 77, 901, 13};
    auto keep = [&](Result<std::span<const float>> lg) {
      EXPECT_TRUE(lg.ok()) << lg.error().message;
      if (lg.ok()) o.logits.insert(o.logits.end(), lg.value().begin(), lg.value().end());
    };
    keep(s->forward(prompt, 0, LogitsMode::all));
    int32_t next = 1500;
    for (int i = 0; i < 6; ++i) {  // logits back: positions 4..9, the KV grows at 8
      keep(s->append(std::span(&next, 1)));
      next = int32_t((next * 7 + 3) % 2000);
    }
    for (int i = 0; i < 8; ++i) {  // greedy: only the id comes back; grows again at 16
      auto id = s->append_greedy(std::span(&next, 1));
      EXPECT_TRUE(id.ok()) << id.error().message;
      if (!id.ok()) break;
      o.ids.push_back(id.value());
      next = id.value();
    }
    EXPECT_TRUE(s->kv_truncate(12).ok());  // a rejected draft: verify 3 tokens at 12
    const std::vector<int32_t> verify = {31, 1999, 8};
    keep(s->forward(verify, 12, LogitsMode::all));
    keep(s->forward(std::span(verify).subspan(1, 2), 13, LogitsMode::all));  // below the KV end
    for (int i = 0; i < 3; ++i) {
      keep(s->append(std::span(&next, 1)));
      next = int32_t((next * 5 + 1) % 2000);
    }
    EXPECT_EQ(s->gpu_fallbacks(), 0);
    o.profile = pl->span()->profile();
    return o;
  };
  const Out ahead = run_all(true), each = run_all(false), level1 = run_all(true, 1);
  ASSERT_FALSE(each.logits.empty());
  EXPECT_EQ(ahead.ids, each.ids);
  EXPECT_EQ(level1.ids, each.ids);
  ASSERT_EQ(ahead.logits.size(), each.logits.size());
  ASSERT_EQ(level1.logits.size(), each.logits.size());
  size_t differ = 0, differ1 = 0;
  for (size_t i = 0; i < each.logits.size(); ++i) {
    differ += ahead.logits[i] != each.logits[i];
    differ1 += level1.logits[i] != each.logits[i];
  }
  EXPECT_EQ(differ, 0u) << "logits that differ of " << each.logits.size();
  EXPECT_EQ(differ1, 0u) << "FISH_GPU_PROFILE=1: logits that differ of " << each.logits.size();
  if (ahead.profile.find("no timestamp support") != std::string::npos)
    GTEST_SKIP() << ahead.profile;
  // The one-token forwards (6 + 8 + 3 appends) at both levels; level 1 times no stage. The GPU's
  // run lies inside the host's submit-to-done.
  const std::regex one_re(
      R"((\d+) one-token forwards: ([\d.]+) us GPU, ([\d.]+) us submit to done a forward)");
  for (const Out* o : {&ahead, &level1}) {
    std::smatch m1;
    ASSERT_TRUE(std::regex_search(o->profile, m1, one_re)) << o->profile;
    EXPECT_EQ(std::stoi(m1[1]), 17) << o->profile;
    EXPECT_GT(std::stod(m1[2]), 0.0) << o->profile;
    EXPECT_LE(std::stod(m1[2]), std::stod(m1[3])) << o->profile;
  }
  EXPECT_EQ(level1.profile.find("matvec"), std::string::npos) << level1.profile;
  EXPECT_NE(ahead.profile.find("matvec"), std::string::npos) << ahead.profile;
  EXPECT_NE(each.profile.find("(0 forwards recorded ahead)"), std::string::npos) << each.profile;
  // Decode steps after a decode step of the same outputs, none right after a KV growth.
  const std::regex hits_re(R"(\((\d+) forwards recorded ahead\))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(ahead.profile, m, hits_re)) << ahead.profile;
  EXPECT_GE(std::stoi(m[1]), 9) << ahead.profile;
}

// The output head in the span (layer_span.h forward_head): its decode logits against the head
// outside the span (FISH_VK_HEAD=0: x comes back, the final norm on the CPU and the output matmul
// per-matmul on the device) and the CPU f32 engine; greedy decoding (Session::forward_greedy, only
// the id read back) gives the same tokens as greedy_token of those logits, with and without the
// head, and the CPU's; each greedy id equals greedy_token of the head's own logits at that step.
TEST(VulkanSpan, OutputHeadLogitsAndGreedyIdsMatchHeadOutside) {
  auto model = synthetic_llama();
  ASSERT_TRUE(model);
  const int64_t n_vocab = model->params().n_vocab;
  const std::vector<int32_t> prompt = {5, 77, 901, 13, 1500};
  const std::vector<int32_t> tokens = {5, 77, 901, 13, 1500, 8, 640, 222, 31, 1999};
  constexpr int kGen = 12;
  // Greedy decode through append_greedy, and per step the logits path's greedy_token.
  auto greedy_ids = [&](Session& s) {
    std::vector<int32_t> out;
    auto id = s.forward_greedy(prompt, 0);
    EXPECT_TRUE(id.ok()) << id.error().message;
    for (int i = 0; id.ok() && i < kGen; ++i) {
      out.push_back(id.value());
      id = s.append_greedy(std::span<const int32_t>(&out.back(), 1));
      EXPECT_TRUE(id.ok()) << id.error().message;
    }
    return out;
  };
  auto logits_ids = [&](Session& s) {
    std::vector<int32_t> out;
    auto lg = s.forward(prompt, 0);
    for (int i = 0; lg.ok() && i < kGen; ++i) {
      out.push_back(greedy_token(lg.value()));
      lg = s.append(std::span<const int32_t>(&out.back(), 1));
    }
    EXPECT_TRUE(lg.ok());
    return out;
  };
  std::vector<float> head_lg, outside_lg;
  std::vector<int32_t> head_greedy, head_logits_greedy, outside_greedy;
  for (const char* head : {"1", "0"}) {
    test::ScopedEnv e("FISH_VK_HEAD", head);
    auto b = open_backend();
    std::shared_ptr<const GpuPlacement> pl =
        GpuPlacement::place_layers(*model, *b, test::placement_request(-1, small_span()));
    ASSERT_TRUE(pl->span()) << pl->summary();
    ASSERT_TRUE(pl->output_on_gpu());
    EXPECT_EQ(pl->span()->has_head(), *head == '1') << head;
    auto s = session(model, pl);
    (*head == '1' ? head_lg : outside_lg) = run(*s, tokens, 3);
    (*head == '1' ? head_greedy : outside_greedy) = greedy_ids(*s);
    if (*head == '1') {
      head_logits_greedy = logits_ids(*s);
      // Step by step: the id the span's argmax returns equals greedy_token of its logits.
      ASSERT_TRUE(s->forward(prompt, 0).ok());
      for (int32_t t : head_greedy) {
        auto lg = s->forward(std::span<const int32_t>(&t, 1), s->n_past());
        ASSERT_TRUE(lg.ok());
        const int32_t want = greedy_token(lg.value());
        ASSERT_TRUE(s->kv_truncate(s->n_past() - 1).ok());
        auto id = s->append_greedy(std::span<const int32_t>(&t, 1));
        ASSERT_TRUE(id.ok()) << id.error().message;
        EXPECT_EQ(id.value(), want) << "after token " << t;
      }
    }
    EXPECT_EQ(s->gpu_fallbacks(), 0);
    s.reset();
    pl.reset();
    EXPECT_EQ(b->bytes_resident(), 0u);
  }
  expect_same(head_lg, outside_lg, n_vocab, 1e-3, "span head vs head outside");
  auto cpu = session(model, nullptr);
  const std::vector<float> cpu_lg = run(*cpu, tokens, 3);
  expect_same(head_lg, cpu_lg, n_vocab, 0.02, "span head vs CPU f32");
  EXPECT_EQ(head_greedy.size(), size_t(kGen));
  EXPECT_EQ(head_greedy, head_logits_greedy) << "greedy ids vs greedy_token of the logits";
  EXPECT_EQ(head_greedy, outside_greedy) << "FISH_VK_HEAD=1 vs 0";
  EXPECT_EQ(head_greedy, logits_ids(*cpu)) << "span head vs CPU f32";
}

// The span's API refuses a gap and n_tok out of range, leaving x untouched.
TEST(VulkanSpan, ForwardRefusesGapsAndLeavesXUntouched) {
  auto model = synthetic_llama();
  ASSERT_TRUE(model);
  auto b = open_backend();
  std::shared_ptr<const GpuPlacement> pl =
      GpuPlacement::place_layers(*model, *b, test::placement_request(-1, small_span()));
  LayerSpan* sp = pl->claim_span();
  ASSERT_TRUE(sp);
  std::vector<float> x(size_t(2 * model->params().n_embd), 0.5f);
  const std::vector<float> x0 = x;
  EXPECT_FALSE(sp->forward(x.data(), 1, 1).ok());  // KV holds 0 positions
  EXPECT_FALSE(sp->forward(x.data(), 0, 0).ok());
  EXPECT_FALSE(sp->forward(x.data(), 65, 0).ok());  // max_tok 64
  EXPECT_FALSE(sp->kv_reserve(kCtx + 1).ok());
  EXPECT_EQ(x, x0);
  ASSERT_TRUE(sp->forward(x.data(), 2, 0).ok());
  EXPECT_NE(x, x0);
  EXPECT_EQ(sp->kv_length(), 2);
  pl->unclaim_span();
}

// Open request 3: a span forward that fails after successful ones makes the session run those
// layers on the CPU from then on, with the KV replayed, so the logits stay right.
TEST(VulkanSpan, FailedSpanFallsBackToCpuWithReplayedKv) {
  auto model = synthetic_llama();
  ASSERT_TRUE(model);
  auto b = open_backend();
  const std::vector<int32_t> tokens = {5, 77, 901, 13, 1500, 8, 640, 222};
  std::vector<float> ref;
  {
    auto s = session(model, nullptr);
    ref = run(*s, tokens, 5);
  }
  std::shared_ptr<const GpuPlacement> pl =
      GpuPlacement::place_layers(*model, *b, test::placement_request(-1, small_span()));
  ASSERT_TRUE(pl->span());
  auto s = session(model, pl);
  ASSERT_TRUE(s->span_active());
  std::vector<float> got;
  auto lg = s->forward(std::span(tokens).subspan(0, 5), 0, LogitsMode::all);
  ASSERT_TRUE(lg.ok());
  got.assign(lg.value().begin(), lg.value().end());
  // The device KV loses positions behind the session's back: the next forward is refused.
  const_cast<LayerSpan*>(pl->span())->kv_truncate(2);
  for (size_t i = 5; i < tokens.size(); ++i) {
    lg = s->append(std::span(tokens).subspan(i, 1));
    ASSERT_TRUE(lg.ok());
    got.insert(got.end(), lg.value().begin(), lg.value().end());
  }
  EXPECT_EQ(s->gpu_fallbacks(), 1);
  EXPECT_FALSE(s->span_active());
  expect_same(got, ref, model->params().n_vocab, 0.02, "after the fallback vs CPU");
}

// A device fault injected in a decode step (the device layer's FISH_VK_FAULT, here set on the
// open backend): the span forward reports it, the backend turns itself off, the session leaves
// the span and replays the KV on the CPU, and from that step on every logit equals the CPU's
// bit for bit (the CPU reference runs the same schedule: a 5-token batch, then single tokens;
// the output projection's per-matmul GPU calls fail too and run on the CPU). Both fault kinds.
TEST(VulkanSpan, InjectedDeviceFaultFallsBackToCpuAndMatchesItExactly) {
  auto model = synthetic_llama();
  ASSERT_TRUE(model);
  const int64_t n_vocab = model->params().n_vocab;
  const std::vector<int32_t> tokens = {5, 77, 901, 13, 1500, 8, 640, 222};
  std::vector<float> ref;
  {
    auto s = session(model, nullptr);
    ref = run(*s, tokens, 5);
  }
  for (DeviceFaultKind kind : {DeviceFaultKind::lost, DeviceFaultKind::timeout}) {
    const char* name = kind == DeviceFaultKind::lost ? "lost" : "timeout";
    auto b = open_backend();
    std::shared_ptr<const GpuPlacement> pl =
        GpuPlacement::place_layers(*model, *b, test::placement_request(-1, small_span()));
    ASSERT_TRUE(pl->span() && pl->output_on_gpu()) << pl->summary();
    auto s = session(model, pl);
    ASSERT_TRUE(s->span_active());
    auto lg = s->forward(std::span(tokens).subspan(0, 5), 0, LogitsMode::all);
    ASSERT_TRUE(lg.ok()) << lg.error().message;
    std::vector<float> gpu(lg.value().begin(), lg.value().end());
    // Token 5: the span forward is the next compute submit.
    b->inject_fault(kind, 1);
    std::vector<float> after;
    for (size_t i = 5; i < tokens.size(); ++i) {
      lg = s->append(std::span(tokens).subspan(i, 1));
      ASSERT_TRUE(lg.ok()) << lg.error().message;
      after.insert(after.end(), lg.value().begin(), lg.value().end());
    }
    EXPECT_GE(s->gpu_fallbacks(), 1u) << name;
    EXPECT_FALSE(s->span_active()) << name;
    EXPECT_NE(b->status().find("vulkan: off: span forward:"), std::string::npos) << b->status();
    EXPECT_NE(b->status().find("injected by FISH_VK_FAULT"), std::string::npos) << b->status();
    const std::vector<float> ref_after(ref.begin() + 5 * n_vocab, ref.end());
    EXPECT_EQ(after, ref_after) << name << ": logits after the fault differ from the CPU's";
    expect_same(gpu, std::vector<float>(ref.begin(), ref.begin() + 5 * n_vocab), n_vocab, 0.02,
                std::string(name) + ": before the fault, span vs CPU");
  }
}

// The fallback with Gemma 3's ring KV (tiny-gemma3: window 16; n_batch 8, so sliding layers keep
// 24 rows): the span runs layers 3..5, the CPU's sliding layers 0..2 keep rings; after the span
// fails, every layer gets its ring or full rows, the replay refills them, and decoding on past
// the ring's length matches a CPU-only run.
TEST(VulkanSpan, FailedSpanFallsBackWithSlidingWindowRingKv) {
  auto model = test::synthetic_q4_k_m(*find_model_shape("tiny-gemma3"), {13, 3},
                                      "fish_span_tiny_gemma3_q4_k_m.gguf");
  ASSERT_TRUE(model);
  auto b = open_backend();
  std::vector<int32_t> tokens(60);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(3 + (i * 97 + 5) % 500);
  std::vector<float> ref;
  {
    auto s = session(model, nullptr, 8);
    EXPECT_EQ(s->kv_cache().rows(0), 24);
    ref = run(*s, tokens, 20);
  }
  std::shared_ptr<const GpuPlacement> pl =
      GpuPlacement::place_layers(*model, *b, test::placement_request(3, small_span()));
  ASSERT_TRUE(pl->span());
  auto s = session(model, pl, 8);
  ASSERT_TRUE(s->span_active());
  EXPECT_EQ(s->kv_cache().n_alloc_layers(), 3);
  auto lg = s->forward(std::span(tokens).subspan(0, 20), 0, LogitsMode::all);
  ASSERT_TRUE(lg.ok()) << lg.error().message;
  std::vector<float> got(lg.value().begin(), lg.value().end());
  const_cast<LayerSpan*>(pl->span())->kv_truncate(2);  // the next span forward is refused
  for (size_t i = 20; i < tokens.size(); ++i) {
    lg = s->append(std::span(tokens).subspan(i, 1));
    ASSERT_TRUE(lg.ok()) << lg.error().message;
    got.insert(got.end(), lg.value().begin(), lg.value().end());
  }
  EXPECT_EQ(s->gpu_fallbacks(), 1);
  EXPECT_FALSE(s->span_active());
  EXPECT_EQ(s->kv_cache().n_alloc_layers(), 6);
  EXPECT_EQ(s->kv_cache().rows(4), 24);
  expect_same(got, ref, model->params().n_vocab, 0.02, "tiny-gemma3 after the fallback vs CPU");
}

// A budget that holds the output and some layers but not all: fewer layers, a working span, and
// the same logits as per-matmul on the same layer count.
TEST(VulkanSpan, SmallBudgetPlacesFewerLayersAndRuns) {
  auto model = synthetic_llama();
  ASSERT_TRUE(model);
  uint64_t full = 0;
  {
    auto b = open_backend();
    full =
        GpuPlacement::place_layers(*model, *b, test::placement_request(-1, small_span()))->bytes();
  }
  // The smallest MB budget that places some layers but not all (the layers are ~1.4 MB, so
  // whole-MB budgets step through the counts).
  std::unique_ptr<vk::VulkanBackend> b;
  std::shared_ptr<const GpuPlacement> pl;
  for (uint64_t mb = 1; mb <= (full >> 20) + 1; ++mb) {
    pl.reset();
    b = open_backend(std::to_string(mb).c_str());
    pl = GpuPlacement::place_layers(*model, *b, test::placement_request(-1, small_span()));
    if (pl->n_gpu_layers() > 0) break;
  }
  ASSERT_TRUE(pl);
  EXPECT_LT(pl->n_gpu_layers(), model->params().n_layer) << pl->summary();
  ASSERT_GT(pl->n_gpu_layers(), 0) << pl->summary();
  ASSERT_TRUE(pl->span()) << pl->summary();
  EXPECT_EQ(pl->span()->n_layers(), pl->n_gpu_layers());
  const std::vector<int32_t> tokens = {5, 77, 901, 13, 1500, 8};
  std::vector<float> span_lg, matmul_lg;
  {
    auto s = session(model, pl);
    EXPECT_TRUE(s->span_active());
    span_lg = run(*s, tokens, 4);
  }
  {
    auto s = session(model, nullptr);
    matmul_lg = run(*s, tokens, 4);
  }
  expect_same(span_lg, matmul_lg, model->params().n_vocab, 0.02, "budget span vs CPU");
  pl.reset();
  EXPECT_EQ(b->bytes_resident(), 0u);
}

}  // namespace
}  // namespace fish
