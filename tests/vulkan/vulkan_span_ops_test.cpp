// Each span-op shader (shaders/{rmsnorm,elementwise,rope,kv_store,attention,argmax}.comp.glsl)
// against its CPU reference (kernels/ops.h) on random data with odd sizes, one dispatch at a time
// (VulkanBackend::run_span_op) on lavapipe.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/sampling.h"
#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_span.h"
#include "fish_vk_span.h"
#include "kernels/ops.h"
#include "quant/f16.h"
#include "vulkan_test_util.h"

namespace fish {
namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

vk::VulkanBackend& backend() {
  static vk::VulkanBackend* b = [] {
    auto* nb = new vk::VulkanBackend(vk::VulkanOptions::from_env());
    const Status s = nb->open();
    EXPECT_TRUE(s.ok()) << s.error().message;
    return nb;
  }();
  return *b;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - double(want[i])) <= tol * (1.0 + std::fabs(want[i]))) &&
        bad++ < 5)
      ADD_FAILURE() << what << ": [" << i << "] gpu " << got[i] << " cpu " << want[i];
  EXPECT_EQ(bad, 0) << what;
}

uint32_t groups(uint64_t n) {
  return uint32_t((n + FISH_SPAN_WG - 1) / FISH_SPAN_WG);
}

// Row geometry of one rmsnorm case: offsets and strides in floats.
struct NormCase {
  uint32_t n, a_off, a_stride, c_off, w_off;
  const char* what;
};

// Whole rows (span_rmsnorm, 512 threads a row): the scalar path (odd n, an offset not a multiple
// of 4), the vec4 path (n and every offset multiples of 4), a row longer than the vec4s a thread
// keeps in registers (FISH_SPAN_NORM_CACHE x FISH_SPAN_NORM_WG x 4 floats), and a weight offset
// that forces the scalar path on an aligned row.
TEST(VulkanSpanOps, RmsnormMatchesCpuOnStridedRows) {
  const uint32_t rows = 3, big = FISH_SPAN_NORM_CACHE * FISH_SPAN_NORM_WG * 4 + 12;
  for (const NormCase& k : {NormCase{1013, 11, 1040, 3500, 5, "scalar, odd n"},
                            NormCase{2052, 12, 2060, 6400, 8, "vec4"},
                            NormCase{big, 4, big + 8, 3 * (big + 8) + 16, 4, "vec4, long row"},
                            NormCase{2052, 12, 2060, 6400, 5, "scalar, unaligned weight"}}) {
    std::mt19937 rng(k.n + k.w_off);
    std::vector<float> arena = randn(k.c_off + rows * k.n + 7, rng);
    const std::vector<float> params = randn(k.n + k.w_off, rng);
    std::vector<uint32_t> kv(4);
    std::vector<float> want(arena.begin() + k.c_off, arena.begin() + k.c_off + rows * k.n);
    for (uint32_t t = 0; t < rows; ++t)
      rmsnorm_ref(arena.data() + k.a_off + t * k.a_stride, params.data() + k.w_off,
                  want.data() + t * k.n, k.n, 1e-5f);
    vk::SpanPush pc{};
    pc.n = k.n;
    pc.rows = rows;
    pc.rows_per_tok = 1;
    pc.split = 1;
    pc.a_off = k.a_off;
    pc.a_stride = k.a_stride;
    pc.c_off = k.c_off;
    pc.c_stride = k.n;
    pc.w_off0 = pc.w_off1 = k.w_off;
    pc.eps = 1e-5f;
    ASSERT_TRUE(backend().run_span_op("span_rmsnorm", pc, rows, 1, arena, params, kv).ok());
    expect_near_all(
        std::vector<float>(arena.begin() + k.c_off, arena.begin() + k.c_off + rows * k.n), want,
        1e-5, k.what);
  }
}

// The residual add fused into the next norm: x += tmp, then xn = rmsnorm(x) * w; scalar (odd
// n), vec4, and a vec4 row longer than the register cache.
TEST(VulkanSpanOps, AddRmsnormUpdatesXAndNormsTheSum) {
  const uint32_t big = FISH_SPAN_NORM_CACHE * FISH_SPAN_NORM_WG * 4 + 20;
  for (const uint32_t n : {777u, 4100u, big}) {
    std::mt19937 rng(n);
    const uint32_t rows = 3, b_off = rows * n + 4, c_off = b_off + rows * n + 8;
    std::vector<float> arena = randn(c_off + rows * n, rng);
    const std::vector<float> params = randn(n, rng);
    std::vector<uint32_t> kv(4);
    std::vector<float> want = arena;
    for (uint32_t t = 0; t < rows; ++t) {
      float* x = want.data() + t * n;
      add(x, want.data() + b_off + t * n, x, n);
      rmsnorm_ref(x, params.data(), want.data() + c_off + t * n, n, 1e-5f);
    }
    vk::SpanPush pc{};
    pc.n = n;
    pc.rows = rows;
    pc.rows_per_tok = 1;
    pc.split = 1;
    pc.a_stride = pc.b_stride = pc.c_stride = n;
    pc.b_off = b_off;
    pc.c_off = c_off;
    pc.eps = 1e-5f;
    ASSERT_TRUE(backend().run_span_op("span_add_rmsnorm", pc, rows, 1, arena, params, kv).ok());
    expect_near_all(arena, want, 1e-5, "add + rmsnorm, n " + std::to_string(n));
  }
}

// Per-head q/k norm: 5 query heads (weight 0) and 2 key heads (weight 1) per token, in place,
// with span_head_rmsnorm (64 threads a head, what the span runs) and span_rmsnorm; head_dim 40
// (a stride not a multiple of 4: scalar) and 64 / 128 / 256 (vec4).
TEST(VulkanSpanOps, PerHeadNormUsesQAndKWeights) {
  for (const char* op : {"span_head_rmsnorm", "span_rmsnorm"})
    for (const uint32_t hd : {40u, 64u, 128u, 256u}) {
      std::mt19937 rng(hd);
      const uint32_t heads = 7, split = 5, tok = 3, stride = heads * hd + (hd == 40 ? 22 : 24);
      std::vector<float> arena = randn(tok * stride, rng);
      const std::vector<float> params = randn(2 * hd, rng);
      std::vector<uint32_t> kv(4);
      std::vector<float> want = arena;
      for (uint32_t t = 0; t < tok; ++t)
        for (uint32_t j = 0; j < heads; ++j) {
          float* x = want.data() + t * stride + j * hd;
          rmsnorm_ref(x, params.data() + (j < split ? 0 : hd), x, hd, 1e-6f);
        }
      vk::SpanPush pc{};
      pc.n = hd;
      pc.rows = tok;
      pc.rows_per_tok = heads;
      pc.split = split;
      pc.a_stride = pc.c_stride = stride;
      pc.w_off0 = 0;
      pc.w_off1 = hd;
      pc.eps = 1e-6f;
      ASSERT_TRUE(backend().run_span_op(op, pc, tok * heads, 1, arena, params, kv).ok());
      expect_near_all(arena, want, 1e-5, std::string(op) + ", head_dim " + std::to_string(hd));
    }
}

// add, bias, SwiGLU, GeGLU on 3 rows of 1013 values (a partial last workgroup).
TEST(VulkanSpanOps, ElementwiseOpsMatchCpu) {
  std::mt19937 rng(3);
  const uint32_t n = 1013, tok = 3, stride = 2 * n + 9;
  for (const char* op : {"span_add", "span_bias", "span_swiglu", "span_geglu"}) {
    std::vector<float> arena = randn(tok * stride + n * tok, rng, 3.0f);
    const std::vector<float> params = randn(n, rng);
    std::vector<uint32_t> kv(4);
    std::vector<float> want = arena;
    const uint32_t c_off = tok * stride;
    for (uint32_t t = 0; t < tok; ++t) {
      const float* a = arena.data() + t * stride;
      const float* b = a + n;
      const std::string o = op;
      if (o == "span_add") add(a, b, want.data() + c_off + t * n, n);
      if (o == "span_bias") add(a, params.data(), want.data() + t * stride, n);
      if (o == "span_swiglu") silu_mul_ref(a, b, want.data() + t * stride, n);
      if (o == "span_geglu") gelu_tanh_mul_ref(a, b, want.data() + t * stride, n);
    }
    vk::SpanPush pc{};
    pc.n = n;
    pc.rows = tok;
    pc.a_stride = pc.b_stride = stride;
    pc.b_off = n;
    pc.c_off = c_off;
    pc.c_stride = n;
    ASSERT_TRUE(backend().run_span_op(op, pc, groups(n), tok, arena, params, kv).ok());
    expect_near_all(arena, want, 1e-5, op);  // GPU tanh/exp: a few ulp of the inputs
  }
}

// RoPE from the cos/sin table, adjacent (llama) and NeoX pairs, a partial rotation (n_rot 32 of
// head_dim 48), 5 heads x 3 tokens at positions 7..9.
TEST(VulkanSpanOps, RopeMatchesCpuBothStyles) {
  std::mt19937 rng(4);
  const uint32_t hd = 48, n_rot = 32, heads = 5, tok = 3, pos0 = 7, stride = heads * hd + 8;
  const float base = 10000.0f;
  std::vector<float> table;
  for (uint32_t pos = 0; pos < 16; ++pos)
    for (uint32_t i = 0; i < n_rot / 2; ++i) {
      const double a = double(pos) * std::pow(double(base), -2.0 * double(i) / double(n_rot));
      table.push_back(float(std::cos(a)));
      table.push_back(float(std::sin(a)));
    }
  for (RopeStyle style : {RopeStyle::normal, RopeStyle::neox}) {
    std::vector<float> arena = randn(tok * stride, rng);
    std::vector<uint32_t> kv(4);
    std::vector<float> want = arena;
    for (uint32_t t = 0; t < tok; ++t)
      rope_ref(want.data() + t * stride, heads, hd, n_rot, pos0 + t, base, style);
    vk::SpanPush pc{};
    pc.n = hd;
    pc.rows = tok;
    pc.rows_per_tok = heads;
    pc.a_stride = stride;
    pc.pos0 = pos0;
    pc.n_rot = n_rot;
    pc.flags = style == RopeStyle::neox ? 1u : 0u;
    ASSERT_TRUE(
        backend()
            .run_span_op("span_rope", pc, groups(tok * heads * n_rot / 2), 1, arena, table, kv)
            .ok());
    expect_near_all(arena, want, 1e-5, style == RopeStyle::neox ? "rope neox" : "rope normal");
  }
}

TEST(VulkanSpanOps, KvStoreWritesF16AtPositions) {
  std::mt19937 rng(5);
  const uint32_t kv_dim = 2 * 3 * 18, tok = 3, pos0 = 4, cap = 9, stride = 3 * kv_dim;
  std::vector<float> arena = randn(tok * stride, rng);
  const std::vector<float> params(4, 0.0f);
  std::vector<uint32_t> kv(2 * cap * kv_dim / 2, 0u);
  vk::SpanPush pc{};
  pc.n = kv_dim;
  pc.rows = tok;
  pc.a_off = 5;
  pc.b_off = 5 + kv_dim;
  pc.a_stride = pc.b_stride = stride;
  pc.pos0 = pos0;
  pc.kv_k = 0;
  pc.kv_v = cap * kv_dim / 2;
  pc.kv_stride = kv_dim / 2;
  ASSERT_TRUE(
      backend().run_span_op("span_kv_store", pc, groups(kv_dim / 2), tok, arena, params, kv).ok());
  int bad = 0;
  for (uint32_t t = 0; t < tok; ++t)
    for (uint32_t i = 0; i < kv_dim; ++i)
      for (int which = 0; which < 2; ++which) {
        const uint32_t w = (which ? pc.kv_v : 0) + (pos0 + t) * kv_dim / 2 + i / 2;
        const uint16_t h = uint16_t(kv[w] >> (16 * (i & 1)));
        const float src = arena[5 + t * stride + (which ? kv_dim : 0) + i];
        if (f16_to_f32(h) != f16_to_f32(f32_to_f16(src)) && bad++ < 5)
          ADD_FAILURE() << "kv_store t " << t << " i " << i << ": " << f16_to_f32(h) << " vs "
                        << src;
      }
  EXPECT_EQ(bad, 0);
  for (uint32_t w = 0; w < pos0 * kv_dim / 2; ++w)
    EXPECT_EQ(kv[w], 0u) << "position < pos0 written";
}

// One attention problem: f16-rounded random K and V for cap positions (KV: K then V, two halves
// a word), random queries for tok tokens at pos0.. in ARENA (q_stride apart, 8 floats of slack)
// with the output rows after them, the CPU reference (attention_one_query_ref on the same
// rounded keys and values), and the push constants of the one-pass kernel.
struct AttnProblem {
  std::vector<float> arena, want;
  std::vector<uint32_t> kv;
  vk::SpanPush pc{};
  uint32_t out_off = 0, out_floats = 0;
};
AttnProblem attention_problem(uint32_t hd, uint32_t n_head, uint32_t n_kv, uint32_t tok,
                              uint32_t pos0, uint32_t window, uint32_t extra_floats,
                              std::mt19937& rng) {
  const uint32_t cap = pos0 + tok + 10, kv_dim = n_kv * hd, q_stride = n_head * hd + 8;
  AttnProblem p;
  std::vector<float> k = randn(size_t(cap) * kv_dim, rng), v = randn(size_t(cap) * kv_dim, rng);
  p.kv.assign(size_t(cap) * kv_dim, 0u);
  for (size_t i = 0; i < k.size(); i += 2) {
    for (std::vector<float>* x : {&k, &v})
      for (size_t j : {i, i + 1}) (*x)[j] = f16_to_f32(f32_to_f16((*x)[j]));
    p.kv[i / 2] = uint32_t(f32_to_f16(k[i])) | uint32_t(f32_to_f16(k[i + 1])) << 16;
    p.kv[k.size() / 2 + i / 2] = uint32_t(f32_to_f16(v[i])) | uint32_t(f32_to_f16(v[i + 1])) << 16;
  }
  const float scale = 1.0f / std::sqrt(float(hd));
  p.out_off = tok * q_stride;
  p.out_floats = tok * n_head * hd;
  p.arena = randn(p.out_off + p.out_floats + extra_floats, rng);
  p.want.resize(p.out_floats);
  std::vector<float> scratch(size_t(n_head) * cap);
  for (uint32_t t = 0; t < tok; ++t) {
    const int64_t pos = pos0 + t;
    const int64_t begin = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    attention_one_query_ref(p.arena.data() + t * q_stride, k.data(), v.data(),
                            AttentionShape{n_head, n_kv, hd, kv_dim}, begin, pos + 1, scale,
                            p.want.data() + t * n_head * hd, scratch.data());
  }
  p.pc.n = hd;
  p.pc.rows = tok;
  p.pc.a_stride = q_stride;
  p.pc.c_off = p.out_off;
  p.pc.c_stride = n_head * hd;
  p.pc.pos0 = pos0;
  p.pc.n_rot = n_head / n_kv;
  p.pc.kv_k = 0;
  p.pc.kv_v = cap * kv_dim / 2;
  p.pc.kv_stride = kv_dim / 2;
  p.pc.window = window;
  p.pc.scale = scale;
  return p;
}

std::vector<float> attention_out(const AttnProblem& p) {
  return std::vector<float>(p.arena.begin() + p.out_off,
                            p.arena.begin() + p.out_off + p.out_floats);
}

// GQA (6 query heads on 2 KV heads), 3 query tokens, causal, with and without a sliding window
// of 100, against the CPU reference on the same f16-rounded keys and values: head_dim 40 / 64 /
// 128 at positions 297..299 (many key tiles, a partial last one) and 256 (16-key tiles), and
// head_dim 64 at positions 0..2 (one partial tile, the window longer than the context).
TEST(VulkanSpanOps, AttentionMatchesCpuGqaCausalAndWindow) {
  struct Case {
    uint32_t hd, pos0;
  };
  for (const Case c : {Case{40, 297}, Case{64, 297}, Case{128, 297}, Case{256, 297}, Case{64, 0}}) {
    std::mt19937 rng(6 + c.hd + c.pos0);
    for (uint32_t window : {0u, 100u}) {
      AttnProblem p = attention_problem(c.hd, 6, 2, 3, c.pos0, window, 0, rng);
      const std::vector<float> params(4, 0.0f);
      ASSERT_TRUE(backend().run_span_op("span_attention", p.pc, 6, 3, p.arena, params, p.kv).ok());
      expect_near_all(attention_out(p), p.want, 1e-4,
                      "attention, head_dim " + std::to_string(c.hd) + ", pos0 " +
                          std::to_string(c.pos0) + (window ? ", window 100" : ", causal"));
    }
  }
}

// Prefill attention (span_attention_flash: query tiles of FISH_SPAN_FLASH_TOK tokens sharing
// key tiles) against the CPU reference: head_dim 40, 64, 128, 256; no GQA and groups of 3 / 4;
// causal from position 0 and after 297 cached positions, windows shorter than the chunk and
// than the context; token counts leaving a partial query tile.
TEST(VulkanSpanOps, FlashAttentionMatchesCpuCausalWindowAndGqa) {
  struct Case {
    uint32_t hd, n_head, n_kv, tok, pos0, window;
  };
  const Case cases[] = {{64, 8, 2, 37, 0, 0},   {128, 8, 2, 37, 297, 0}, {128, 8, 2, 37, 297, 100},
                        {256, 4, 1, 21, 40, 0}, {64, 6, 2, 130, 0, 50},  {128, 4, 4, 17, 5, 0},
                        {40, 9, 3, 16, 297, 20}};
  for (const Case& c : cases) {
    std::mt19937 rng(c.hd * 7 + c.tok + c.pos0);
    AttnProblem p = attention_problem(c.hd, c.n_head, c.n_kv, c.tok, c.pos0, c.window, 0, rng);
    const std::vector<float> params(4, 0.0f);
    ASSERT_TRUE(backend()
                    .run_span_op("span_attention_flash", p.pc, c.n_head,
                                 (c.tok + FISH_SPAN_FLASH_TOK - 1) / FISH_SPAN_FLASH_TOK, p.arena,
                                 params, p.kv)
                    .ok());
    expect_near_all(
        attention_out(p), p.want, 1e-4,
        fmt::format("flash attention head_dim {} heads {}:{}, {} tokens at {}, window {}", c.hd,
                    c.n_head, c.n_kv, c.tok, c.pos0, c.window));
  }
}

// Split-K (span_attention_split, grid z = splits, then span_attention_combine) against the CPU
// reference: head_dim 38 (an odd number of KV words; odd head_dim itself is refused by the span,
// K/V being f16 pairs), 64, 128, 200 (16-key tiles) and 256; no GQA, groups of 3, 4 and 8;
// contexts of 1, 17, ~300 and 1000+ positions; windows shorter and longer than the context; 1 to
// 4 query tokens (verify: earlier tokens have shorter ranges, so their last splits are empty);
// 1 split, splits of a few keys, more splits than positions (empty splits). The partial scratch
// starts as 50.0 everywhere, so a partial the combine reads but no split wrote shows.
TEST(VulkanSpanOps, SplitKAttentionMatchesCpu) {
  struct Case {
    uint32_t hd, n_head, n_kv, tok, pos0, window;
    std::vector<uint32_t> splits;
  };
  const Case cases[] = {
      {64, 6, 2, 1, 0, 0, {1, 3}},       {38, 5, 5, 1, 16, 0, {2, 64}},
      {128, 8, 2, 3, 297, 0, {1, 4, 7}}, {128, 8, 2, 3, 297, 100, {4, 64}},
      {200, 4, 1, 1, 1029, 0, {5, 64}},  {200, 4, 1, 2, 1029, 512, {9}},
      {256, 6, 2, 4, 1200, 0, {3}},      {64, 9, 3, 1, 20, 4000, {16}},
  };
  for (const Case& c : cases)
    for (uint32_t splits : c.splits) {
      std::mt19937 rng(c.hd * 31 + c.pos0 + splits);
      const uint32_t part_floats = c.tok * c.n_head * splits * (c.hd + 2);
      AttnProblem p =
          attention_problem(c.hd, c.n_head, c.n_kv, c.tok, c.pos0, c.window, part_floats, rng);
      std::fill(p.arena.end() - part_floats, p.arena.end(), 50.0f);
      p.pc.split = splits;
      p.pc.b_off = p.out_off + p.out_floats;
      const vk::SpanDispatch ds[] = {
          {"span_attention_split", p.pc, c.n_head, c.tok, splits},
          {"span_attention_combine", p.pc, c.n_head, c.tok, 1},
      };
      const std::vector<float> params(4, 0.0f);
      auto r = backend().run_span_ops(ds, 1, p.arena, params, p.kv);
      ASSERT_TRUE(r.ok()) << r.error().message;
      expect_near_all(attention_out(p), p.want, 1e-4,
                      fmt::format("split-K head_dim {} heads {}:{} tokens {} at {} window {}, {} "
                                  "splits",
                                  c.hd, c.n_head, c.n_kv, c.tok, c.pos0, c.window, splits));
    }
}

// The attention epilogues that write the wo input's q8_1 copy (span_attention_q8, and
// span_attention_combine_q8 after split-K) write the same f32 output as the plain kernels and
// its q8_1 copy by quant_q8_1's rule (test::q8_copy_errors on that output): decode and
// FISH_Q8_MAX_TOK tokens, head_dim 64 / 128 / 256 (two dims a thread), GQA, a window.
TEST(VulkanSpanOps, AttentionEpiloguesWriteTheWoInputsQ81Copy) {
  struct Case {
    uint32_t hd, n_head, n_kv, tok, pos0, window, splits;
  };
  const Case cases[] = {{64, 6, 2, 1, 0, 0, 0},
                        {128, 8, 2, FISH_Q8_MAX_TOK, 297, 0, 0},
                        {256, 4, 1, 2, 40, 16, 0},
                        {128, 8, 2, 1, 297, 0, 5},
                        {64, 6, 3, FISH_Q8_MAX_TOK, 90, 50, 3}};
  for (const Case& c : cases) {
    std::mt19937 rng(c.hd * 7 + c.tok + c.splits);
    const uint32_t K = c.n_head * c.hd;
    const uint32_t part_floats = c.tok * c.n_head * std::max(c.splits, 1u) * (c.hd + 2);
    const uint32_t q8_floats = FISH_Q8_BYTES(K) / 4;
    AttnProblem p = attention_problem(c.hd, c.n_head, c.n_kv, c.tok, c.pos0, c.window,
                                      part_floats + q8_floats, rng);
    p.pc.split = c.splits;
    p.pc.b_off = p.out_off + p.out_floats;
    p.pc.q8_off = p.pc.b_off + part_floats;
    const std::vector<float> params(4, 0.0f);
    std::vector<float> plain = p.arena, q8 = p.arena;
    std::vector<uint32_t> kv = p.kv;
    auto dispatches = [&](bool fused) -> std::vector<vk::SpanDispatch> {
      if (c.splits == 0)
        return {{fused ? "span_attention_q8" : "span_attention", p.pc, c.n_head, c.tok, 1}};
      return {{"span_attention_split", p.pc, c.n_head, c.tok, c.splits},
              {fused ? "span_attention_combine_q8" : "span_attention_combine", p.pc, c.n_head,
               c.tok, 1}};
    };
    ASSERT_TRUE(backend().run_span_ops(dispatches(false), 1, plain, params, kv).ok());
    ASSERT_TRUE(backend().run_span_ops(dispatches(true), 1, q8, params, kv).ok());
    const std::string what = fmt::format("head_dim {} heads {}:{} tokens {} at {}, {} splits", c.hd,
                                         c.n_head, c.n_kv, c.tok, c.pos0, c.splits);
    const std::vector<float> out(q8.begin() + p.out_off, q8.begin() + p.out_off + p.out_floats);
    EXPECT_EQ(out, std::vector<float>(plain.begin() + p.out_off,
                                      plain.begin() + p.out_off + p.out_floats))
        << what;
    expect_near_all(out, p.want, 1e-4, what);
    int bad = 0;
    for (uint32_t t = 0; t < c.tok; ++t)
      bad += test::q8_copy_errors(q8, p.pc.q8_off, K, t, out.data() + t * K);
    EXPECT_EQ(bad, 0) << what;
  }
}

// The split rule (vulkan_span.h attention_splits): auto fills the grid up to
// FISH_SPAN_ATTN_TARGET_WG workgroups with splits of at least one key tile, declines prefill
// chunks and short contexts; forced counts are capped by the maximum and the scratch only.
TEST(VulkanSpanOps, AttentionSplitRule) {
  const uint32_t cap32 = 32 * FISH_SPAN_ATTN_SPLIT_TOK * FISH_SPAN_ATTN_MAX_SPLIT;
  const uint32_t cap9 = 9 * FISH_SPAN_ATTN_SPLIT_TOK * FISH_SPAN_ATTN_MAX_SPLIT;
  static_assert(FISH_SPAN_ATTN_TARGET_WG == 256 && FISH_SPAN_ATTN_TILE == 32);
  EXPECT_EQ(vk::attention_splits(-1, 32, 1, 512, cap32), 8u);    // 32 heads x 8 = 256
  EXPECT_EQ(vk::attention_splits(-1, 32, 1, 100, cap32), 3u);    // 3 whole tiles
  EXPECT_EQ(vk::attention_splits(-1, 32, 1, 63, cap32), 0u);     // one tile: one-pass
  EXPECT_EQ(vk::attention_splits(-1, 32, 4, 4096, cap32), 16u);  // verify of 4 tokens: 4096 / 256
  EXPECT_EQ(vk::attention_splits(-1, 32, 8, 4096, cap32), 0u);   // 256 rows fill the grid
  EXPECT_EQ(vk::attention_splits(-1, 9, 1, 4096, cap9), 29u);    // ceil(256 / 9)
  EXPECT_EQ(vk::attention_splits(-1, 32, 1, 8192, cap32), 32u);  // <= 256 keys a split
  EXPECT_EQ(vk::attention_splits(-1, 32, 1, 2049, cap32), 9u);   // ceil(2049 / 256)
  EXPECT_EQ(vk::attention_splits(-1, 9, 1, 32768, cap9), 64u);   // capped at MAX_SPLIT
  EXPECT_EQ(vk::attention_splits(-1, 9, 64, 4096, cap9), 0u);    // a prefill chunk
  EXPECT_EQ(vk::attention_splits(-1, 1, 1, 1 << 20, FISH_SPAN_ATTN_MAX_SPLIT * 4),
            uint32_t(FISH_SPAN_ATTN_MAX_SPLIT));
  EXPECT_EQ(vk::attention_splits(0, 32, 1, 4096, cap32), 0u);
  EXPECT_EQ(vk::attention_splits(3, 32, 1, 1, cap32), 3u);       // forced: even empty splits
  EXPECT_EQ(vk::attention_splits(1, 32, 64, 64, cap32), 1u);     // forced 1: split path, S = 1
  EXPECT_EQ(vk::attention_splits(64, 32, 64, 4096, cap32), 4u);  // the scratch's share
  EXPECT_EQ(vk::attention_splits(5, 32, 1, 4096, 31), 0u);       // no split fits
}

// span_argmax (the output head's greedy token) against engine/sampling's greedy_token: random
// logits of sizes below, at and above the workgroup (a real vocabulary's 49152 + 3), the largest
// value repeated at several indices (the lowest wins, across threads and within one thread's
// stride), all equal, -inf everywhere, and NaN at index 0 and elsewhere (greedy_token's ranking).
TEST(VulkanSpanOps, ArgmaxMatchesGreedyTokenWithTiesAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    uint32_t n;
    const char* what;
  };
  int seed = 0;
  for (const Case& k : {Case{1, "one value"}, Case{7, "short"}, Case{FISH_SPAN_ARGMAX_WG, "wg"},
                        Case{FISH_SPAN_ARGMAX_WG * 3 + 5, "3 wg + 5"}, Case{49155, "vocab"}}) {
    for (int variant = 0; variant < 7; ++variant) {
      std::mt19937 rng(uint32_t(k.n * 7 + variant + seed++));
      std::vector<float> lg = randn(k.n, rng, 3.0f);
      std::uniform_int_distribution<uint32_t> pick(0, k.n - 1);
      std::string what = std::string(k.what) + " variant " + std::to_string(variant);
      if (variant == 1) {  // ties: the max at up to 5 random indices, one of them a stride apart
        const uint32_t a = pick(rng);
        for (uint32_t i : {a, pick(rng), pick(rng), pick(rng), a + FISH_SPAN_ARGMAX_WG})
          if (i < k.n) lg[i] = 50.0f;
      } else if (variant == 2) {
        std::fill(lg.begin(), lg.end(), 1.5f);  // all equal: 0
      } else if (variant == 3) {
        std::fill(lg.begin(), lg.end(), -inf);  // no finite value: 0
      } else if (variant == 4) {
        lg[0] = nan;  // greedy_token keeps 0
      } else if (variant == 5) {
        for (int j = 0; j < 4; ++j) lg[pick(rng)] = nan;  // NaN elsewhere never wins
      } else if (variant == 6) {
        lg[pick(rng)] = inf;  // +inf twice: the lower index
        lg[pick(rng)] = inf;
      }
      const uint32_t a_off = 37, c_off = a_off + k.n + 3;
      std::vector<float> arena(c_off + 4, -1.0f);
      std::copy(lg.begin(), lg.end(), arena.begin() + a_off);
      const std::vector<float> params(4);
      std::vector<uint32_t> kv(4);
      vk::SpanPush pc{};
      pc.n = k.n;
      pc.a_off = a_off;
      pc.c_off = c_off;
      ASSERT_TRUE(backend().run_span_op("span_argmax", pc, 1, 1, arena, params, kv).ok()) << what;
      uint32_t got = 0;
      std::memcpy(&got, &arena[c_off], 4);
      EXPECT_EQ(int32_t(got), greedy_token(lg)) << what;
      EXPECT_EQ(arena[c_off + 1], -1.0f) << what << ": wrote past its word";
    }
  }
}

}  // namespace
}  // namespace fish
