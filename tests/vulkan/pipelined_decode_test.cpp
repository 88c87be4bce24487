// The pipelined greedy decode (layer_span.h decode_greedy, engine/vulkan/vulkan_span_decode.cpp)
// on lavapipe: span_get_rows_<type> against the CPU's dequantize_row bit for bit for every type
// it takes (odd ids, the embedding scale), and Session::decode_greedy against one append_greedy
// a step on the same placement: the same ids, a stop in the middle that leaves the KV where the
// next step continues it exactly, the tied and untied embeddings, FISH_GPU_PIPELINE=0 and
// FISH_GPU_PROFILE turning it off, and a device fault mid-decode falling back to the CPU with the
// same tokens. The Config field gpu_pipeline reaches the placement through gpu_request.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/gpu_placement.h"
#include "engine/model_shapes.h"
#include "engine/session.h"
#include "engine/synthetic_model.h"
#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_span.h"
#include "fish_vk_span.h"
#include "quant/types.h"
#include "test_env.h"
#include "vulkan_test_util.h"

namespace fish {
namespace {

std::unique_ptr<vk::VulkanBackend> open_backend(int profile = 0) {
  auto opt = vk::VulkanOptions::from_env();
  if (opt.ok()) {
    opt->matvec = vk::MatvecMode::fast;
    opt->profile = profile;
  }
  auto b = std::make_unique<vk::VulkanBackend>(opt);
  const Status s = b->open();
  EXPECT_TRUE(s.ok()) << s.error().message;
  return b;
}

// span_get_rows_<type> over a random 37-row matrix quantised by the CPU's reference: rows 0, 1,
// 17 and 36 (and an id past the last row, which reads the last) against dequantize_row times the
// scale, bit for bit. The matrix goes in as PARAMS (binding 1, where the span binds the
// embedding), the id as an ARENA word.
TEST(PipelinedDecode, GetRowsEqualsCpuDequantisationBitForBit) {
  auto b = open_backend();
  constexpr int64_t kRows = 37, kN = 512;
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 0.7f);
  std::vector<float> src(size_t(kRows * kN));
  for (float& v : src) v = d(rng);
  for (const char* name :
       {"f32", "f16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k", "q6_k"}) {
    const GgmlType t = *parse_type_name(name);
    const TypeInfo& ti = type_info(t);
    ASSERT_TRUE(ti.quantize_row && ti.dequantize_row) << name;
    const size_t rb = row_bytes(t, kN);
    std::vector<uint8_t> bytes(rb * kRows);
    for (int64_t r = 0; r < kRows; ++r)
      ti.quantize_row(src.data() + r * kN, bytes.data() + size_t(r) * rb, kN);
    std::vector<float> params((bytes.size() + 3) / 4 + 4, 0.0f);
    std::memcpy(params.data(), bytes.data(), bytes.size());
    for (const float scale : {1.0f, 22.627417f}) {
      for (const uint32_t id : {0u, 1u, 17u, 36u, 1000u}) {
        const uint32_t row = std::min<uint32_t>(id, kRows - 1);
        std::vector<float> want(kN);
        ti.dequantize_row(bytes.data() + size_t(row) * rb, want.data(), kN);
        if (scale != 1.0f)
          for (float& v : want) v *= scale;
        constexpr uint32_t kIdWord = 3, kOut = 64;
        std::vector<float> arena(kOut + kN + 16, -1.0f);
        std::memcpy(&arena[kIdWord], &id, 4);
        vk::SpanPush pc{};
        pc.n = kN;
        pc.rows = kRows;
        pc.a_off = kIdWord;
        pc.a_stride = uint32_t(rb);
        pc.c_off = kOut;
        pc.scale = scale;
        const std::vector<vk::SpanDispatch> ds = {
            {std::string("span_get_rows_") + name, pc, (kN + FISH_SPAN_WG - 1) / FISH_SPAN_WG}};
        std::vector<uint32_t> kv(4, 0);
        auto r = b->run_span_ops(ds, 1, arena, params, kv);
        ASSERT_TRUE(r.ok()) << name << ": " << r.error().message;
        int differ = 0;
        for (int64_t j = 0; j < kN; ++j) {
          uint32_t g, w;
          std::memcpy(&g, &arena[size_t(kOut + j)], 4);
          std::memcpy(&w, &want[size_t(j)], 4);
          if (g != w && differ++ < 3)
            ADD_FAILURE() << name << " id " << id << " scale " << scale << " [" << j << "]: gpu "
                          << arena[size_t(kOut + j)] << " cpu " << want[size_t(j)];
        }
        EXPECT_EQ(differ, 0) << name << " id " << id;
        EXPECT_EQ(arena[kOut - 1], -1.0f) << name << ": wrote before its row";
        EXPECT_EQ(arena[size_t(kOut + kN)], -1.0f) << name << ": wrote past its row";
      }
    }
  }
}

// A 3-layer llama (8:2 heads of 64; untied: token_embd q4_k beside a q6_k output) and a 3-layer
// gemma3 (tied: the output's q6_k rows are the embedding, scaled by sqrt(n_embd)).
std::shared_ptr<const Model> model_of(bool tied) {
  static std::shared_ptr<const Model> untied_model, tied_model;
  std::shared_ptr<const Model>& m = tied ? tied_model : untied_model;
  if (!m) {
    const ModelShape shape{tied ? "test-pipe-tied" : "test-pipe",
                           tied ? "gemma3" : "llama",
                           "3-layer pipelined decode test",
                           3,
                           256,
                           512,
                           8,
                           2,
                           64,
                           2048,
                           tied,
                           512,
                           10000.0f,
                           1e-5f,
                           0};
    m = test::synthetic_q4_k_m(shape, {21, 3},
                               tied ? "fish_pipe_3l_tied.gguf" : "fish_pipe_3l_untied.gguf");
  }
  return m;
}

std::unique_ptr<Session> session(std::shared_ptr<const Model> model,
                                 std::shared_ptr<const GpuPlacement> pl) {
  SessionOptions opt;
  opt.n_ctx = 64;
  opt.n_batch = 16;
  opt.gpu = std::move(pl);
  auto s = Session::create(std::move(model), opt);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return std::move(s).value();
}

// pipeline false: Config gpu_pipeline false or FISH_GPU_PIPELINE=0 (span_request_from_env).
std::shared_ptr<const GpuPlacement> place(const Model& m, ComputeBackend& b, bool pipeline) {
  if (!pipeline) setenv("FISH_GPU_PIPELINE", "0", 1);
  SpanRequest span = span_request_from_env(64, 16);
  unsetenv("FISH_GPU_PIPELINE");
  EXPECT_EQ(span.pipeline, pipeline);
  span.kv_reserve = 8;
  return GpuPlacement::place_layers(m, b, test::placement_request(-1, span));
}

const std::vector<int32_t> kPrompt = {5, 77, 901, 13, 1500};

// Greedy ids from one append_greedy a step: the prompt's, then n more.
std::vector<int32_t> stepwise(Session& s, int n) {
  std::vector<int32_t> ids;
  auto first = s.forward_greedy(kPrompt, 0);
  EXPECT_TRUE(first.ok()) << first.error().message;
  if (!first.ok()) return ids;
  ids.push_back(first.value());
  for (int i = 0; i < n; ++i) {
    auto id = s.append_greedy(std::span(&ids.back(), 1));
    EXPECT_TRUE(id.ok()) << id.error().message;
    if (!id.ok()) break;
    ids.push_back(id.value());
  }
  return ids;
}

TEST(PipelinedDecode, SameIdsAsStepwiseAndStopsWhereTheNextDecodeContinues) {
  constexpr int kGen = 20;  // the KV starts at 8 positions and grows on the way
  for (const bool tied : {false, true}) {
    auto model = model_of(tied);
    ASSERT_TRUE(model);
    const std::string what = tied ? "tied gemma3" : "untied llama";
    auto b = open_backend();
    std::vector<int32_t> ref;
    {
      auto pl = place(*model, *b, false);
      ASSERT_TRUE(pl->span() && pl->span()->has_head()) << pl->summary();
      EXPECT_FALSE(pl->span()->can_decode_greedy()) << what << ": " << pl->summary();
      EXPECT_EQ(pl->summary().find("pipelined"), std::string::npos) << pl->summary();
      auto s = session(model, pl);
      EXPECT_FALSE(s->pipelined_decode());
      ref = stepwise(*s, kGen);
      ASSERT_EQ(ref.size(), size_t(kGen + 1)) << what;
    }
    auto pl = place(*model, *b, true);
    ASSERT_TRUE(pl->span() && pl->span()->can_decode_greedy())
        << what << ": " << pl->summary() << " | " << pl->span()->kernels();
    EXPECT_NE(pl->summary().find(tied ? "pipelined greedy decode (the tied output's rows)"
                                      : "pipelined greedy decode (token_embd"),
              std::string::npos)
        << pl->summary();
    EXPECT_NE(pl->span()->kernels().find(tied ? "span_get_rows_q6_k" : "span_get_rows_q4_k"),
              std::string::npos)
        << pl->span()->kernels();
    auto s = session(model, pl);
    ASSERT_TRUE(s->pipelined_decode()) << what;
    // All at once.
    auto first = s->forward_greedy(kPrompt, 0);
    ASSERT_TRUE(first.ok()) << first.error().message;
    EXPECT_EQ(first.value(), ref[0]) << what;
    std::vector<int32_t> got = {first.value()};
    auto n = s->decode_greedy(first.value(), kGen, [&](int32_t id) {
      got.push_back(id);
      return true;
    });
    ASSERT_TRUE(n.ok()) << n.error().message;
    EXPECT_EQ(n.value(), kGen) << what;
    EXPECT_EQ(got, ref) << what;
    EXPECT_EQ(s->n_past(), int64_t(kPrompt.size()) + kGen) << what;
    // Stopped after 7 ids (a step already queued runs and is dropped), then continued: the KV
    // left behind is the one 7 steps make, so the rest equals the stepwise ids too.
    s->reset();
    ASSERT_TRUE(s->forward_greedy(kPrompt, 0).ok());
    got = {ref[0]};
    n = s->decode_greedy(ref[0], kGen, [&](int32_t id) {
      got.push_back(id);
      return got.size() < 8;
    });
    ASSERT_TRUE(n.ok()) << n.error().message;
    EXPECT_EQ(n.value(), 7) << what;
    EXPECT_EQ(s->n_past(), int64_t(kPrompt.size()) + 7) << what;
    n = s->decode_greedy(got.back(), kGen - 7, [&](int32_t id) {
      got.push_back(id);
      return true;
    });
    ASSERT_TRUE(n.ok()) << n.error().message;
    EXPECT_EQ(got, ref) << what << ": stopped at 7, then continued";
    // One plain step after the pipelined ones reads the same KV.
    auto next = s->append_greedy(std::span(&got.back(), 1));
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(s->gpu_fallbacks(), 0u) << what;
    // Refusals: a token outside the vocabulary, more steps than n_ctx holds.
    EXPECT_FALSE(s->decode_greedy(-1, 1, [](int32_t) { return true; }).ok());
    EXPECT_FALSE(s->decode_greedy(5, 64, [](int32_t) { return true; }).ok());
  }
}

TEST(PipelinedDecode, ProfilingRunsTheStepsOneAtATime) {
  auto model = model_of(false);
  ASSERT_TRUE(model);
  auto b = open_backend(1);
  auto pl = place(*model, *b, true);
  ASSERT_TRUE(pl->span());
  EXPECT_FALSE(pl->span()->can_decode_greedy());
  EXPECT_NE(pl->span()->kernels().find("no pipelined greedy decode: FISH_GPU_PROFILE"),
            std::string::npos)
      << pl->span()->kernels();
  // The untied embedding it did not take went back.
  EXPECT_EQ(pl->summary().find("pipelined"), std::string::npos) << pl->summary();
  auto s = session(model, pl);
  std::vector<int32_t> got;
  ASSERT_TRUE(s->forward_greedy(kPrompt, 0).ok());
  auto n = s->decode_greedy(3, 4, [&](int32_t id) {
    got.push_back(id);
    return true;
  });
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(n.value(), 4);
  EXPECT_EQ(got.size(), 4u);
}

// A device fault at the third pipelined step: the session leaves the span, replays the KV on the
// CPU and decodes on there; its ids equal a CPU-only session's from that point (the GPU's before
// it equal the GPU's stepwise ids, checked above).
TEST(PipelinedDecode, DeviceFaultMidDecodeFallsBackToTheCpu) {
  auto model = model_of(false);
  ASSERT_TRUE(model);
  constexpr int kGen = 8;
  for (DeviceFaultKind kind : {DeviceFaultKind::lost, DeviceFaultKind::timeout}) {
    auto b = open_backend();
    auto pl = place(*model, *b, true);
    ASSERT_TRUE(pl->span() && pl->span()->can_decode_greedy()) << pl->summary();
    auto s = session(model, pl);
    auto first = s->forward_greedy(kPrompt, 0);
    ASSERT_TRUE(first.ok());
    std::vector<int32_t> got = {first.value()};
    b->inject_fault(kind, 3);
    auto n = s->decode_greedy(first.value(), kGen, [&](int32_t id) {
      got.push_back(id);
      return true;
    });
    ASSERT_TRUE(n.ok()) << n.error().message;
    EXPECT_EQ(n.value(), kGen);
    EXPECT_GE(s->gpu_fallbacks(), 1u);
    EXPECT_FALSE(s->span_active());
    EXPECT_NE(b->status().find("span pipelined decode"), std::string::npos) << b->status();
    // FISH_VK_FAULT counts compute submits: steps 0 and 1 are queued first, step 2 after step 0's
    // id. An injected loss fails that submit (one pipelined id given), an injected timeout fails
    // step 2's wait (two given). The session then replays positions [0, 5 + cut) on the CPU in one
    // batch and decodes on there: a CPU-only session fed the same tokens the same way gives the
    // same ids.
    const size_t cut = kind == DeviceFaultKind::lost ? 1 : 2;
    std::vector<int32_t> ctx = kPrompt;
    ctx.insert(ctx.end(), got.begin(), got.end());
    auto cpu = session(model, nullptr);
    ASSERT_TRUE(cpu->forward_greedy(std::span(ctx).subspan(0, kPrompt.size() + cut), 0).ok());
    for (size_t i = kPrompt.size() + cut; i + 1 < ctx.size(); ++i) {
      auto id = cpu->append_greedy(std::span(ctx).subspan(i, 1));
      ASSERT_TRUE(id.ok());
      EXPECT_EQ(id.value(), ctx[i + 1]) << "the id after position " << i;
    }
  }
}

}  // namespace
}  // namespace fish
