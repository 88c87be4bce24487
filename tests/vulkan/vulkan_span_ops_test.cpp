// Each span-op shader (shaders/{rmsnorm,elementwise,rope_kv,attention,attention_flash,
// attention_decode,argmax}.comp.glsl) against its CPU reference (kernels/ops.h) on random data
// with odd sizes, one dispatch at a time (VulkanBackend::run_span_op) on lavapipe.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/sampling.h"
#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_span.h"
#include "fish_vk_span.h"
#include "kernels/ops.h"
#include "quant/f16.h"
#include "test_env.h"
#include "vulkan_test_util.h"

namespace fish {
namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// A backend opened once for the test binary.
vk::VulkanBackend* open_static(Result<vk::VulkanOptions> o) {
  auto* nb = new vk::VulkanBackend(std::move(o));
  const Status s = nb->open();
  EXPECT_TRUE(s.ok()) << s.error().message;
  return nb;
}

vk::VulkanBackend& backend() {
  static vk::VulkanBackend* b = open_static(vk::VulkanOptions::from_env());
  return *b;
}

// The same device with FISH_VK_ATTN_STREAM_PIPE=1: span_attention_stream loads a pass ahead.
vk::VulkanBackend& pipe_backend() {
  static vk::VulkanBackend* b = [] {
    auto o = vk::VulkanOptions::from_env();
    if (o.ok()) o->stream_pipe = true;
    return open_static(std::move(o));
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

// cos/sin of pair i at position pos at [pos * n_rot + 2i] (as the span's PARAMS table).
std::vector<float> rope_table(uint32_t n_rot, uint32_t positions, float base) {
  std::vector<float> table;
  for (uint32_t pos = 0; pos < positions; ++pos)
    for (uint32_t i = 0; i < n_rot / 2; ++i) {
      const double a = double(pos) * std::pow(double(base), -2.0 * double(i) / double(n_rot));
      table.push_back(float(std::cos(a)));
      table.push_back(float(std::sin(a)));
    }
  return table;
}

float f16_round(float x) {
  return f16_to_f32(f32_to_f16(x));
}

// Value i (0 .. kv_dim) of the f16 K (which 0) or V (1) cache at position pos.
float kv_value(const std::vector<uint32_t>& kv, uint32_t kv_v, uint32_t kv_dim, int which,
               uint32_t pos, uint32_t i) {
  const uint32_t w = (which ? kv_v : 0) + pos * kv_dim / 2 + i / 2;
  return f16_to_f32(uint16_t(kv[w] >> (16 * (i & 1))));
}

// The KV cache's positions [pos0, pos0 + tok) hold f16 of k_want / v_want (tok rows of kv_dim;
// K within an f16 step: GPU and CPU RoPE may round apart before the f16 rounding) and every
// other position still holds `untouched`.
void expect_kv_rows(const std::vector<uint32_t>& kv, uint32_t kv_v, uint32_t kv_dim, uint32_t cap,
                    uint32_t pos0, uint32_t tok, const std::vector<float>& k_want,
                    const std::vector<float>& v_want, const std::vector<uint32_t>& untouched,
                    const std::string& what) {
  int bad = 0;
  for (uint32_t t = 0; t < tok; ++t)
    for (uint32_t i = 0; i < kv_dim; ++i)
      for (int which = 0; which < 2; ++which) {
        const float got = kv_value(kv, kv_v, kv_dim, which, pos0 + t, i);
        const float want = f16_round((which ? v_want : k_want)[t * kv_dim + i]);
        const float tol = which ? 0.0f : 2e-3f * (1.0f + std::fabs(want));
        if (!(std::fabs(got - want) <= tol) && bad++ < 5)
          ADD_FAILURE() << what << ": " << (which ? "V" : "K") << " t " << t << " i " << i << ": "
                        << got << " vs " << want;
      }
  for (int which = 0; which < 2; ++which)
    for (uint32_t pos = 0; pos < cap; ++pos)
      for (uint32_t w = 0; w < kv_dim / 2 && (pos < pos0 || pos >= pos0 + tok); ++w) {
        const uint32_t at = (which ? kv_v : 0) + pos * kv_dim / 2 + w;
        if (kv[at] != untouched[at] && bad++ < 5)
          ADD_FAILURE() << what << ": position " << pos << " written";
      }
  EXPECT_EQ(bad, 0) << what;
}

// span_rope_kv: per token, the query heads rotated in place and the key heads rotated into the
// f16 K with V, against rope_ref and the cache's f16 rounding: adjacent (llama) and NeoX pairs, a
// partial rotation (n_rot 32 of head_dim 48), 5 query heads on 3 KV heads, 3 tokens at positions
// 7..9, an odd row offset; ARENA's k|v stay as they were and no other position is written.
TEST(VulkanSpanOps, RopeKvRotatesQueriesInPlaceAndStoresRotatedKeysAndValues) {
  std::mt19937 rng(4);
  const uint32_t hd = 48, n_rot = 32, n_head = 5, n_kv = 3, tok = 3, pos0 = 7, cap = 12;
  const uint32_t q_dim = n_head * hd, kv_dim = n_kv * hd, stride = q_dim + 2 * kv_dim + 8;
  const uint32_t a_off = 5;
  const float base = 10000.0f;
  const std::vector<float> table = rope_table(n_rot, cap, base);
  for (RopeStyle style : {RopeStyle::normal, RopeStyle::neox}) {
    std::vector<float> arena = randn(a_off + tok * stride, rng);
    const std::vector<uint32_t> kv0(cap * kv_dim, 0x3c003c00u);  // 1.0 everywhere
    std::vector<uint32_t> kv = kv0;
    std::vector<float> want = arena, k_want, v_want;
    for (uint32_t t = 0; t < tok; ++t) {
      float* row = want.data() + a_off + t * stride;
      rope_ref(row, n_head, hd, n_rot, pos0 + t, base, style);
      std::vector<float> k(row + q_dim, row + q_dim + kv_dim);
      rope_ref(k.data(), n_kv, hd, n_rot, pos0 + t, base, style);
      k_want.insert(k_want.end(), k.begin(), k.end());
      v_want.insert(v_want.end(), row + q_dim + kv_dim, row + q_dim + 2 * kv_dim);
    }
    vk::SpanPush pc{};
    pc.n = hd;
    pc.rows = tok;
    pc.rows_per_tok = n_head;
    pc.a_off = a_off;
    pc.a_stride = stride;
    pc.b_off = a_off + q_dim;
    pc.pos0 = pos0;
    pc.n_rot = n_rot;
    pc.flags = style == RopeStyle::neox ? 1u : 0u;
    pc.kv_k = 0;
    pc.kv_v = cap * kv_dim / 2;
    pc.kv_stride = kv_dim / 2;
    ASSERT_TRUE(backend()
                    .run_span_op("span_rope_kv", pc, groups(n_head * n_rot / 2 + kv_dim / 2), tok,
                                 arena, table, kv)
                    .ok());
    const std::string what = style == RopeStyle::neox ? "rope_kv neox" : "rope_kv normal";
    expect_near_all(arena, want, 1e-5, what);
    expect_kv_rows(kv, pc.kv_v, kv_dim, cap, pos0, tok, k_want, v_want, kv0, what);
  }
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
                              std::mt19937& rng, float sharpen = 1.0f) {
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
  const float scale = sharpen / std::sqrt(float(hd));
  p.out_off = tok * q_stride;
  p.out_floats = tok * n_head * hd;
  p.arena = randn(p.out_off + p.out_floats + extra_floats, rng);
  if (sharpen != 1.0f)  // q exact in f16: sharper scores would magnify its rounding
    for (size_t i = 0; i < p.out_off; ++i) p.arena[i] = f16_to_f32(f32_to_f16(p.arena[i]));
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

// span_attention_flash_cm (cooperative matrices) against the same CPU reference: head_dim 64,
// 128, 256; no GQA, groups of 3, 4 and 8; causal from position 0 and after cached positions,
// windows shorter than the chunk and than the context; 17, 67, 130 and 200 tokens (partial query
// tiles of 64 and 32 rows, key tiles cut at odd lengths). Tolerance 4e-3 x (1 + |want|): the
// kernel rounds Q and P to f16 (unit roundoff 2^-11 = 4.9e-4; K and V are f16 already), which
// moves each score by up to ~2^-11 sum_d |q_d k_d| scale (~1e-3 for these N(0, 1) rows) and
// each weight by 2^-11 relative, so an output (a convex combination of V values of |v| < ~4) moves
// by a few 1e-3 at worst; the largest seen on lavapipe is printed. Skipped without cooperative
// matrices; fails where the device has them and the span's selection has no tile (a silent
// fallback to span_attention_flash). Both variants: 1 span_attention_flash_cm, 2 (the default)
// span_attention_flash_cm2 (FISH_VK_FLASH_CM=2; its running max lags by up to 8, which scales P
// by up to e^8 in f16 but keeps its relative rounding, so the same bound holds). Two cases have
// scores 12x sharper (q exact in f16), whose row maxima jump by more than 8 across key tiles:
// variant 2's rescale of O.
class FlashCoopmat : public ::testing::TestWithParam<uint32_t> {};

TEST_P(FlashCoopmat, MatchesCpuCausalWindowAndGqa) {
  const uint32_t variant = GetParam();
  if (const auto opt = vk::VulkanOptions::from_env(); opt.ok() && opt->flash_cm == 0)
    GTEST_SKIP() << "FISH_VK_FLASH_CM=0: the f32 kernel is selected";
  if (backend().coopmat_tiles().empty())
    GTEST_SKIP() << "no cooperative matrices on this device (or FISH_VK_COOPMAT=0); Mesa 26 "
                    "lavapipe has them: ctest -L vulkan_next";
  struct Case {
    uint32_t hd, n_head, n_kv, tok, pos0, window;
    float sharpen = 1.0f;
  };
  const Case cases[] = {{64, 8, 2, 17, 0, 0},        {128, 8, 2, 67, 297, 0},
                        {128, 8, 2, 130, 297, 100},  {64, 6, 2, 130, 0, 50},
                        {128, 4, 4, 17, 5, 0},       {256, 4, 1, 67, 40, 0},
                        {256, 6, 2, 21, 300, 16},    {128, 8, 1, 200, 33, 0},
                        {128, 8, 2, 67, 297, 0, 12}, {64, 6, 2, 130, 0, 50, 12}};
  double worst = 0.0;
  for (const Case& c : cases) {
    const std::optional<vk::FlashCmTile> t = backend().flash_cm_tile(c.hd, variant);
    ASSERT_TRUE(t.has_value()) << "the device has cooperative matrices but prefill attention of "
                                  "head_dim "
                               << c.hd << " would fall back to the f32 kernel";
    std::mt19937 rng(c.hd * 7 + c.tok + c.pos0);
    AttnProblem p =
        attention_problem(c.hd, c.n_head, c.n_kv, c.tok, c.pos0, c.window, 0, rng, c.sharpen);
    const std::vector<float> params(4, 0.0f);
    const Status s =
        backend().run_span_op(t->module(), p.pc, c.n_head,
                              (c.tok + t->queries() - 1) / t->queries(), p.arena, params, p.kv);
    ASSERT_TRUE(s.ok()) << s.error().message;
    const std::vector<float> got = attention_out(p);
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - p.want[i]) / (1.0 + std::fabs(p.want[i])));
    expect_near_all(
        got, p.want, 4e-3,
        fmt::format("{} ({} queries x {} keys) head_dim {} heads {}:{}, {} tokens at {}, "
                    "window {}, scores x{}",
                    t->module(), t->queries(), t->keys, c.hd, c.n_head, c.n_kv, c.tok, c.pos0,
                    c.window, c.sharpen));
  }
  std::printf("coopmat flash attention variant %u: largest error %.2e x (1 + |want|)\n", variant,
              worst);
}

INSTANTIATE_TEST_SUITE_P(VulkanSpanOps, FlashCoopmat, ::testing::Values(1u, 2u),
                         [](const auto& p) { return fmt::format("Variant{}", p.param); });

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

// An auto | off | on knob parses auto and the switch words into `field` as -1 / 0 / 1.
void expect_auto_switch(const char* knob, int vk::VulkanOptions::*field) {
  for (auto [word, mode] :
       {std::pair<const char*, int>{"auto", -1}, {"0", 0}, {"off", 0}, {"1", 1}, {"on", 1}}) {
    test::ScopedEnv e(knob, word);
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ((*o).*field, mode) << knob << "=" << word;
  }
}

// One span_attention_decode problem: tok tokens' unrotated q|k|v rows in ARENA (from a_off = 3,
// rows of q_dim + 2 kv_dim + 5 floats) with the output rows and extra_floats after them, the KV's
// positions before pos0 random f16 (10 spare positions after the batch), the RoPE table, and the
// CPU reference: rope_ref on q and k, the batch's k and v rounded to f16 into the cache, then
// attention_one_query_ref per token.
struct DecodeProblem {
  std::vector<float> arena, table, want, k_new, v_new;  // k_new, v_new: the batch's cache rows
  std::vector<uint32_t> kv, kv0;                        // kv0: as uploaded
  vk::SpanPush pc{};
  uint32_t out_off = 0, out_floats = 0, cap = 0, kv_dim = 0;
};
DecodeProblem decode_problem(uint32_t hd, uint32_t n_head, uint32_t n_kv, uint32_t tok,
                             uint32_t pos0, uint32_t window, uint32_t n_rot, RopeStyle style,
                             uint32_t extra_floats, std::mt19937& rng) {
  DecodeProblem p;
  p.cap = pos0 + tok + 10;
  p.kv_dim = n_kv * hd;
  const uint32_t q_dim = n_head * hd, stride = q_dim + 2 * p.kv_dim + 5, a_off = 3;
  const float base = 10000.0f;
  p.table = rope_table(n_rot, p.cap, base);
  std::vector<float> k = randn(size_t(p.cap) * p.kv_dim, rng);
  std::vector<float> v = randn(size_t(p.cap) * p.kv_dim, rng);
  for (std::vector<float>* x : {&k, &v})
    for (float& f : *x) f = f16_round(f);
  p.out_off = a_off + tok * stride + 1;
  p.out_floats = tok * q_dim;
  p.arena = randn(p.out_off + p.out_floats + extra_floats, rng);
  std::vector<float> q(size_t(tok) * q_dim);
  for (uint32_t t = 0; t < tok; ++t) {
    const float* row = p.arena.data() + a_off + t * stride;
    std::copy(row, row + q_dim, q.begin() + t * q_dim);
    rope_ref(q.data() + t * q_dim, n_head, hd, n_rot, pos0 + t, base, style);
    std::vector<float> kr(row + q_dim, row + q_dim + p.kv_dim);
    rope_ref(kr.data(), n_kv, hd, n_rot, pos0 + t, base, style);
    p.k_new.insert(p.k_new.end(), kr.begin(), kr.end());
    p.v_new.insert(p.v_new.end(), row + q_dim + p.kv_dim, row + q_dim + 2 * p.kv_dim);
    for (uint32_t i = 0; i < p.kv_dim; ++i) {
      k[size_t(pos0 + t) * p.kv_dim + i] = f16_round(kr[i]);
      v[size_t(pos0 + t) * p.kv_dim + i] = f16_round(row[q_dim + p.kv_dim + i]);
    }
  }
  p.kv.assign(size_t(p.cap) * p.kv_dim, 0u);
  for (size_t i = 0; i < k.size(); i += 2) {
    p.kv[i / 2] = uint32_t(f32_to_f16(k[i])) | uint32_t(f32_to_f16(k[i + 1])) << 16;
    p.kv[k.size() / 2 + i / 2] = uint32_t(f32_to_f16(v[i])) | uint32_t(f32_to_f16(v[i + 1])) << 16;
  }
  for (uint32_t t = 0; t < tok; ++t)  // the batch's positions: the kernel writes them
    for (uint32_t w = 0; w < p.kv_dim / 2; ++w)
      for (size_t at : {size_t(pos0 + t) * p.kv_dim / 2 + w,
                        k.size() / 2 + size_t(pos0 + t) * p.kv_dim / 2 + w})
        p.kv[at] = 0u;
  p.kv0 = p.kv;
  const float scale = 1.0f / std::sqrt(float(hd));
  p.want.resize(p.out_floats);
  std::vector<float> scratch(size_t(n_head) * p.cap);
  for (uint32_t t = 0; t < tok; ++t) {
    const int64_t pos = pos0 + t;
    const int64_t begin = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    attention_one_query_ref(q.data() + t * q_dim, k.data(), v.data(),
                            AttentionShape{n_head, n_kv, hd, p.kv_dim}, begin, pos + 1, scale,
                            p.want.data() + t * q_dim, scratch.data());
  }
  p.pc.n = hd;
  p.pc.rows = tok;
  p.pc.group = n_head / n_kv;
  p.pc.a_off = a_off;
  p.pc.a_stride = stride;
  p.pc.c_off = p.out_off;
  p.pc.c_stride = q_dim;
  p.pc.b_off = p.out_off + p.out_floats;
  p.pc.pos0 = pos0;
  p.pc.n_rot = n_rot;
  p.pc.flags = style == RopeStyle::neox ? 1u : 0u;
  p.pc.kv_k = 0;
  p.pc.kv_v = uint32_t(k.size() / 2);
  p.pc.kv_stride = p.kv_dim / 2;
  p.pc.window = window;
  p.pc.scale = scale;
  p.pc.split = 1;
  return p;
}

// Runs `module`, the _q8 variant of a one-token kernel (grid gx) whose plain run gave the output
// rows `out` (at p.out_off) and the KV `kv` from p's inputs: the same rows and KV, and token 0's
// q8_1 copy at pc.q8_off (K values) by quant_q8_1's rule.
void expect_q8_variant(const std::string& module, const vk::SpanPush& pc, uint32_t gx,
                       const DecodeProblem& p, const std::vector<float>& out,
                       const std::vector<uint32_t>& kv, uint32_t K, const std::string& what) {
  std::vector<float> q8 = p.arena;
  std::vector<uint32_t> kv_q8 = p.kv;
  auto r = backend().run_span_op(module, pc, gx, 1, q8, p.table, kv_q8);
  ASSERT_TRUE(r.ok()) << what << ": " << r.error().message;
  EXPECT_EQ(std::vector<float>(q8.begin() + p.out_off, q8.begin() + p.out_off + p.out_floats), out)
      << what;
  EXPECT_EQ(kv_q8, kv) << what;
  EXPECT_EQ(test::q8_copy_errors(q8, pc.q8_off, K, 0, out.data()), 0) << what;
}

// span_attention_decode (RoPE, the KV store and attention in one dispatch; with split-K, its
// partials then span_attention_combine) against the CPU reference, and the batch's K/V rows in
// the cache: head_dim 40 and 200 (KV words not a multiple of 8: the scalar K path), 64, 128 and
// 256 (uvec4 loads; 256: KV words of two threads a key beyond one load batch); groups of 1, 3, 4
// and 8 (8 rows of one KV head); 1, 2 and 4 tokens; contexts from 1 position to past the two
// 256-key passes; partial rotation and NeoX pairs; windows shorter and longer than the context;
// 1 split, several, and more splits than positions (empty splits). The partial scratch starts as
// 50.0, so a partial the combine reads but no split wrote shows.
TEST(VulkanSpanOps, DecodeAttentionWithRopeAndKvStoreMatchesCpu) {
  struct Case {
    uint32_t hd, n_head, n_kv, tok, pos0, window, n_rot;
    RopeStyle style;
    std::vector<uint32_t> splits;
  };
  const RopeStyle N = RopeStyle::normal, X = RopeStyle::neox;
  const Case cases[] = {
      {64, 6, 2, 1, 0, 0, 64, N, {1, 3}},       {128, 32, 8, 1, 150, 0, 128, N, {1, 4}},
      {128, 8, 2, 2, 297, 0, 128, X, {1, 7}},   {128, 8, 2, 1, 297, 100, 64, N, {1, 64}},
      {40, 9, 3, 2, 20, 4000, 40, X, {1, 16}},  {256, 4, 1, 1, 1029, 0, 256, N, {1, 5}},
      {200, 4, 4, 4, 600, 512, 200, N, {1, 9}}, {64, 8, 1, 1, 513, 0, 32, X, {1, 3}},
  };
  for (const Case& c : cases)
    for (uint32_t splits : c.splits) {
      std::mt19937 rng(c.hd * 31 + c.pos0 + splits);
      const uint32_t part_floats = c.tok * c.n_head * splits * (c.hd + 2);
      DecodeProblem p = decode_problem(c.hd, c.n_head, c.n_kv, c.tok, c.pos0, c.window, c.n_rot,
                                       c.style, part_floats, rng);
      std::fill(p.arena.end() - part_floats, p.arena.end(), 50.0f);
      p.pc.split = splits;
      std::vector<vk::SpanDispatch> ds = {{"span_attention_decode", p.pc, c.n_kv, 1, splits}};
      if (splits > 1) ds.push_back({"span_attention_combine", p.pc, c.n_head, c.tok, 1});
      auto r = backend().run_span_ops(ds, 1, p.arena, p.table, p.kv);
      ASSERT_TRUE(r.ok()) << r.error().message;
      const std::string what = fmt::format(
          "decode attention head_dim {} heads {}:{} tokens {} at {} window {} n_rot "
          "{}, {} splits",
          c.hd, c.n_head, c.n_kv, c.tok, c.pos0, c.window, c.n_rot, splits);
      expect_near_all(std::vector<float>(p.arena.begin() + p.out_off,
                                         p.arena.begin() + p.out_off + p.out_floats),
                      p.want, 1e-4, what);
      expect_kv_rows(p.kv, p.pc.kv_v, p.kv_dim, p.cap, c.pos0, c.tok, p.k_new, p.v_new, p.kv0,
                     what);
    }
}

// span_attention_decode_q8 writes the same f32 output as span_attention_decode and its q8_1
// copy by quant_q8_1's rule (test::q8_copy_errors): head_dim 64 / 128 / 256, 1 to
// FISH_Q8_MAX_TOK tokens, GQA groups of 1, 2 and 4, a window.
TEST(VulkanSpanOps, DecodeAttentionEpilogueWritesTheWoInputsQ81Copy) {
  struct Case {
    uint32_t hd, n_head, n_kv, tok, pos0, window;
  };
  const Case cases[] = {
      {64, 6, 3, 1, 0, 0}, {128, 8, 2, 2, 297, 0}, {256, 4, 4, FISH_Q8_MAX_TOK, 40, 16}};
  for (const Case& c : cases) {
    std::mt19937 rng(c.hd * 7 + c.tok);
    const uint32_t K = c.n_head * c.hd, q8_floats = FISH_Q8_BYTES(K) / 4;
    DecodeProblem p = decode_problem(c.hd, c.n_head, c.n_kv, c.tok, c.pos0, c.window, c.hd,
                                     RopeStyle::normal, q8_floats, rng);
    p.pc.q8_off = p.out_off + p.out_floats;
    std::vector<float> plain = p.arena, q8 = p.arena;
    std::vector<uint32_t> kv_plain = p.kv, kv_q8 = p.kv;
    ASSERT_TRUE(backend()
                    .run_span_op("span_attention_decode", p.pc, c.n_kv, 1, plain, p.table, kv_plain)
                    .ok());
    ASSERT_TRUE(backend()
                    .run_span_op("span_attention_decode_q8", p.pc, c.n_kv, 1, q8, p.table, kv_q8)
                    .ok());
    const std::string what = fmt::format("head_dim {} heads {}:{} tokens {} at {}", c.hd, c.n_head,
                                         c.n_kv, c.tok, c.pos0);
    const std::vector<float> out(q8.begin() + p.out_off, q8.begin() + p.out_off + p.out_floats);
    EXPECT_EQ(out, std::vector<float>(plain.begin() + p.out_off,
                                      plain.begin() + p.out_off + p.out_floats))
        << what;
    EXPECT_EQ(kv_q8, kv_plain) << what;
    expect_near_all(out, p.want, 1e-4, what);
    int bad = 0;
    for (uint32_t t = 0; t < c.tok; ++t)
      bad += test::q8_copy_errors(q8, p.pc.q8_off, K, t, out.data() + t * K);
    EXPECT_EQ(bad, 0) << what;
  }
}

// span_attention_stream (one decode token: RoPE, the KV store and attention in one dispatch,
// teams of 8 lanes a key; with split-K, its partials then span_attention_combine) against the CPU
// reference, and the token's K/V row in the cache: head_dim 64, 128, 192 and 256 (1, 2, 3 and 4
// uvec4 chunks a lane, 4, 2, 1 and 1 keys a team's pass); groups of 1 to 8 within
// FISH_SPAN_STREAM_ROWS chunk-rows; contexts of 1 position, fewer keys than teams, several passes
// and ranges that end mid-pass; partial rotation and NeoX pairs; windows shorter and longer than
// the context; 1 split, several, and more splits than positions (empty splits). The partial scratch
// starts as 50.0, so a partial the combine reads but no split wrote shows. Split 1's _q8 variant
// writes the same output and the row's q8_1 copy by quant_q8_1's rule. With splits, the _last
// variant (the last workgroup of a KV head merges its splits; FISH_VK_ATTN_STREAM=2) and its _q8
// give the CPU's rows in one dispatch, the q8_1 copy, and leave every arrival counter at 0: run
// twice over the same counters, the second run's partials in a second region that starts as
// 50.0, so a merge that fires before its splits are written, or reads the first run's, shows.
// The plain kernel (+ combine) and the _last variants run again with their key loops' loads a
// pass ahead (FISH_VK_ATTN_STREAM_PIPE=1): the same rows and KV.
TEST(VulkanSpanOps, StreamAttentionWithRopeAndKvStoreMatchesCpu) {
  struct Case {
    uint32_t hd, n_head, n_kv, pos0, window, n_rot;
    RopeStyle style;
    std::vector<uint32_t> splits;
  };
  const RopeStyle N = RopeStyle::normal, X = RopeStyle::neox;
  const Case cases[] = {
      {64, 6, 2, 0, 0, 64, N, {1, 3}},          {128, 32, 8, 150, 0, 128, N, {1, 4}},
      {128, 8, 2, 297, 100, 64, X, {1, 64}},    {64, 8, 1, 513, 0, 32, X, {1, 3}},
      {256, 4, 2, 1029, 0, 256, N, {1, 5}},     {192, 4, 2, 40, 16, 192, N, {1, 2}},
      {64, 24, 8, 700, 4000, 64, X, {1, 2, 7}}, {64, 14, 2, 2200, 0, 64, N, {9}},
      {64, 10, 2, 600, 0, 64, N, {1, 3}},       {256, 1, 1, 77, 0, 256, N, {1, 2}},
  };
  for (const Case& c : cases)
    for (uint32_t splits : c.splits) {
      std::mt19937 rng(c.hd * 41 + c.pos0 + splits);
      const uint32_t K = c.n_head * c.hd;
      const uint32_t part_floats = c.n_head * splits * (c.hd + 2), q8_floats = FISH_Q8_BYTES(K) / 4;
      DecodeProblem p = decode_problem(c.hd, c.n_head, c.n_kv, 1, c.pos0, c.window, c.n_rot,
                                       c.style, 2 * part_floats + q8_floats + c.n_kv, rng);
      const uint32_t ctr = uint32_t(p.arena.size()) - c.n_kv;  // the _last variant's counters
      std::fill(p.arena.begin() + ctr, p.arena.end(), 0.0f);
      const uint32_t parts_at = p.out_off + p.out_floats;  // two regions of partials
      std::fill(p.arena.begin() + parts_at, p.arena.begin() + parts_at + 2 * part_floats, 50.0f);
      p.pc.split = splits;
      const std::string what = fmt::format(
          "stream attention head_dim {} heads {}:{} at {} window {} n_rot {}, {} splits", c.hd,
          c.n_head, c.n_kv, c.pos0, c.window, c.n_rot, splits);
      std::vector<vk::SpanDispatch> ds = {{"span_attention_stream", p.pc, c.n_kv, 1, splits}};
      if (splits > 1) ds.push_back({"span_attention_combine", p.pc, c.n_head, 1, 1});
      std::vector<float> arena = p.arena;
      std::vector<uint32_t> kv = p.kv;
      auto r = backend().run_span_ops(ds, 1, arena, p.table, kv);
      ASSERT_TRUE(r.ok()) << what << ": " << r.error().message;
      const std::vector<float> out(arena.begin() + p.out_off,
                                   arena.begin() + p.out_off + p.out_floats);
      expect_near_all(out, p.want, 1e-4, what);
      expect_kv_rows(kv, p.pc.kv_v, p.kv_dim, p.cap, c.pos0, 1, p.k_new, p.v_new, p.kv0, what);
      {  // the key loop with its loads a pass ahead: the same rows and KV
        std::vector<float> pa = p.arena;
        std::vector<uint32_t> pkv = p.kv;
        auto rp = pipe_backend().run_span_ops(ds, 1, pa, p.table, pkv);
        ASSERT_TRUE(rp.ok()) << what << " (pipe): " << rp.error().message;
        expect_near_all(
            std::vector<float>(pa.begin() + p.out_off, pa.begin() + p.out_off + p.out_floats),
            p.want, 1e-4, what + " (pipe)");
        EXPECT_EQ(pkv, kv) << what << " (pipe)";
      }
      vk::SpanPush pc = p.pc;
      pc.q8_off = parts_at + 2 * part_floats;
      if (splits > 1) {
        pc.w_off1 = ctr;
        vk::SpanPush pc2 = pc;
        pc2.b_off = parts_at + part_floats;
        for (const bool pipe : {false, true})  // and with the loads a pass ahead
          for (const std::string name :
               {"span_attention_stream_last", "span_attention_stream_last_q8"}) {
            const std::string module = name + (pipe ? " (pipe)" : "");
            std::vector<float> last = p.arena;
            std::vector<uint32_t> kv_last = p.kv;
            const std::vector<vk::SpanDispatch> two = {{name, pc, c.n_kv, 1, splits},
                                                       {name, pc2, c.n_kv, 1, splits}};
            auto rl =
                (pipe ? pipe_backend() : backend()).run_span_ops(two, 1, last, p.table, kv_last);
            ASSERT_TRUE(rl.ok()) << what << " " << module << ": " << rl.error().message;
            const std::vector<float> got(last.begin() + p.out_off,
                                         last.begin() + p.out_off + p.out_floats);
            expect_near_all(got, p.want, 1e-4, what + " " + module);
            EXPECT_EQ(kv_last, kv) << what << " " << module;
            EXPECT_EQ(std::vector<float>(last.begin() + ctr, last.end()),
                      std::vector<float>(c.n_kv, 0.0f))
                << what << " " << module << ": arrival counters not reset";
            if (name.ends_with("_q8")) {
              EXPECT_EQ(test::q8_copy_errors(last, pc.q8_off, K, 0, got.data()), 0) << what;
            }
          }
        continue;
      }
      expect_q8_variant("span_attention_stream_q8", pc, c.n_kv, p, out, kv, K, what);
    }
}

// attention_stream_splits: at least one split per FISH_SPAN_STREAM_SPLIT_KEYS keys, more towards
// FISH_SPAN_ATTN_TARGET_WG workgroups down to splits of about max(FISH_SPAN_STREAM_MIN_KEYS,
// sqrt(8 keys)) keys (ceil(keys / that) splits), a forced count as given (0: one), all capped by
// FISH_SPAN_ATTN_MAX_SPLIT and the scratch; attention_stream_fits: head dims that are multiples of
// 64 up to FISH_SPAN_MAX_HEAD, group x head_dim / 64 up to FISH_SPAN_STREAM_ROWS, subgroups of
// multiples of 8 lanes dividing the workgroup; attention_stream_applies: one decode token, under
// auto past the short kernel and not against FISH_VK_ATTN_DECODE=1. The knob defaults to auto,
// takes the switch words and 2 (the splits merged in the kernel), and refuses 3.
TEST(VulkanSpanOps, StreamAttentionRule) {
  static_assert(FISH_SPAN_STREAM_SPLIT_KEYS == 256 && FISH_SPAN_STREAM_MIN_KEYS == 64 &&
                FISH_SPAN_ATTN_MAX_SPLIT == 64 && FISH_SPAN_ATTN_TARGET_WG == 256);
  const uint32_t cap = 32 * FISH_SPAN_ATTN_SPLIT_TOK * FISH_SPAN_ATTN_MAX_SPLIT;
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 8, 1, cap), 1u);
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 8, 64, cap), 1u);
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 8, 65, cap), 2u);
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 8, 128, cap), 2u);
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 8, 512, cap), 8u);
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 8, 2048, cap), 16u);  // 128 keys a split
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 8, 8192, cap), 32u);
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 8, 9000, cap), 36u);
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 1, 2048, cap), 16u);   // grid: 256 wanted
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 1, 4096, cap), 23u);   // 182 keys a split
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 64, 4096, cap), 16u);  // 256 / 64 x 4096 / 256
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 8, 100000, cap), 64u);
  EXPECT_EQ(vk::attention_stream_splits(-1, 32, 8, 100000, 32 * 10), 10u);
  EXPECT_EQ(vk::attention_stream_splits(0, 32, 8, 8192, cap), 1u);
  EXPECT_EQ(vk::attention_stream_splits(16, 32, 8, 100, cap), 16u);
  EXPECT_TRUE(vk::attention_stream_fits(128, 4, 32, 32));
  EXPECT_TRUE(vk::attention_stream_fits(64, 8, 8, 8));
  EXPECT_TRUE(vk::attention_stream_fits(256, 2, 8, 64));
  EXPECT_TRUE(vk::attention_stream_fits(192, 2, 16, 16));
  EXPECT_FALSE(vk::attention_stream_fits(256, 4, 32, 32));  // 16 chunk-rows: registers
  EXPECT_FALSE(vk::attention_stream_fits(128, 8, 32, 32));
  EXPECT_FALSE(vk::attention_stream_fits(96, 4, 32, 32));
  EXPECT_FALSE(vk::attention_stream_fits(320, 4, 32, 32));
  EXPECT_FALSE(vk::attention_stream_fits(128, 9, 32, 32));
  EXPECT_FALSE(vk::attention_stream_fits(128, 4, 4, 32));
  EXPECT_FALSE(vk::attention_stream_fits(128, 4, 8, 256));
  // attention_stream_applies(mode, attn_decode, n_tok, short_applies)
  EXPECT_TRUE(vk::attention_stream_applies(-1, -1, 1, false));
  EXPECT_FALSE(vk::attention_stream_applies(-1, -1, 1, true));  // the short kernel's range
  EXPECT_FALSE(vk::attention_stream_applies(-1, 1, 1, false));  // FISH_VK_ATTN_DECODE=1
  EXPECT_TRUE(vk::attention_stream_applies(-1, 0, 1, false));
  EXPECT_FALSE(vk::attention_stream_applies(-1, -1, 2, false));  // a verify batch
  EXPECT_TRUE(vk::attention_stream_applies(1, 1, 1, true));
  EXPECT_TRUE(vk::attention_stream_applies(2, -1, 1, true));
  EXPECT_FALSE(vk::attention_stream_applies(1, -1, 3, false));
  EXPECT_FALSE(vk::attention_stream_applies(0, -1, 1, false));
  EXPECT_EQ(vk::VulkanOptions{}.attn_stream, -1);
  expect_auto_switch("FISH_VK_ATTN_STREAM", &vk::VulkanOptions::attn_stream);
  for (auto [word, ok] : {std::pair<const char*, bool>{"2", true}, {"3", false}}) {
    test::ScopedEnv e("FISH_VK_ATTN_STREAM", word);
    auto o = vk::VulkanOptions::from_env();
    ASSERT_EQ(o.ok(), ok) << word;
    if (ok) {
      EXPECT_EQ(o->attn_stream, 2);
    }
  }
}

// span_attention_short (one decode token: RoPE, the KV store and attention in one dispatch, one
// workgroup a query head) against the CPU reference, and the token's K/V row in the cache:
// head_dim 36 (18 KV words a head: the scalar K path), 64, 80, 128, 200 and 256 (uvec4 loads;
// 80, 200 and 256: a second, part-filled load batch a key); groups of 1, 3, 4 and 8; contexts of 1
// position, fewer keys than threads, more (a thread scores several) and FISH_SPAN_SHORT_KEYS
// exactly; partial rotation and NeoX pairs; windows shorter and longer than the context. Its _q8
// variant writes the same output and the row's q8_1 copy by quant_q8_1's rule; the wide variant
// (span_attention_short_wide, FISH_SPAN_SHORT_WIDE_WG threads), the early-V variant
// (span_attention_short_prev, FISH_VK_ATTN_SHORT_PREV) and their _q8 the same, every case.
TEST(VulkanSpanOps, ShortAttentionWithRopeAndKvStoreMatchesCpu) {
  struct Case {
    uint32_t hd, n_head, n_kv, pos0, window, n_rot;
    RopeStyle style;
  };
  const RopeStyle N = RopeStyle::normal, X = RopeStyle::neox;
  const Case cases[] = {
      {64, 6, 2, 0, 0, 64, N},       {128, 32, 8, 150, 0, 128, N},
      {128, 8, 2, 297, 100, 64, X},  {36, 9, 3, 20, 4000, 36, X},
      {256, 4, 1, 700, 0, 256, N},   {200, 4, 4, 600, 512, 200, N},
      {64, 8, 1, 513, 0, 32, X},     {80, 4, 2, FISH_SPAN_SHORT_KEYS - 1, 0, 80, N},
      {64, 16, 2, 4000, 1024, 64, N}};
  for (const Case& c : cases) {
    std::mt19937 rng(c.hd * 37 + c.pos0);
    const uint32_t K = c.n_head * c.hd, q8_floats = FISH_Q8_BYTES(K) / 4 + 1;
    DecodeProblem p = decode_problem(c.hd, c.n_head, c.n_kv, 1, c.pos0, c.window, c.n_rot, c.style,
                                     q8_floats, rng);
    const std::string base =
        fmt::format("short attention head_dim {} heads {}:{} at {} window {} n_rot {}", c.hd,
                    c.n_head, c.n_kv, c.pos0, c.window, c.n_rot);
    for (const std::string module :
         {"span_attention_short", "span_attention_short_wide", "span_attention_short_prev"}) {
      const std::string what = base + " (" + module + ")";
      std::vector<float> arena = p.arena;
      std::vector<uint32_t> kv = p.kv;
      vk::SpanPush pc = p.pc;
      auto r = backend().run_span_op(module, pc, c.n_head, 1, arena, p.table, kv);
      ASSERT_TRUE(r.ok()) << what << ": " << r.error().message;
      const std::vector<float> out(arena.begin() + p.out_off,
                                   arena.begin() + p.out_off + p.out_floats);
      expect_near_all(out, p.want, 1e-4, what);
      expect_kv_rows(kv, p.pc.kv_v, p.kv_dim, p.cap, c.pos0, 1, p.k_new, p.v_new, p.kv0, what);
      EXPECT_EQ(std::vector<float>(arena.begin() + p.out_off + p.out_floats, arena.end()),
                std::vector<float>(p.arena.begin() + p.out_off + p.out_floats, p.arena.end()))
          << what << ": wrote past its output";
      if (c.hd % 32 != 0) continue;
      pc.q8_off = p.out_off + p.out_floats;
      expect_q8_variant(module + "_q8", pc, c.n_head, p, out, kv, K, what);
    }
  }
}

// FISH_VK_ATTN_SHORT's rule (vulkan_span.h attention_short_applies): one token attending at most
// kAttnShortKeys keys (auto) or FISH_SPAN_SHORT_KEYS (1), never with 0 or FISH_VK_ATTN_DECODE=1;
// the knob parses auto and the switch words and defaults to auto.
TEST(VulkanSpanOps, ShortAttentionRule) {
  static_assert(vk::kAttnShortKeys == 256 && FISH_SPAN_SHORT_KEYS == 1024);
  EXPECT_TRUE(vk::attention_short_applies(-1, -1, 1, 1));
  EXPECT_TRUE(vk::attention_short_applies(-1, -1, 1, vk::kAttnShortKeys));
  EXPECT_FALSE(vk::attention_short_applies(-1, -1, 1, vk::kAttnShortKeys + 1));
  EXPECT_TRUE(vk::attention_short_applies(1, -1, 1, FISH_SPAN_SHORT_KEYS));
  EXPECT_FALSE(vk::attention_short_applies(1, -1, 1, FISH_SPAN_SHORT_KEYS + 1));
  EXPECT_FALSE(vk::attention_short_applies(-1, -1, 2, 100));  // a verify batch
  EXPECT_TRUE(vk::attention_short_applies(-1, 0, 1, 100));
  EXPECT_FALSE(vk::attention_short_applies(-1, 1, 1, 100));
  EXPECT_FALSE(vk::attention_short_applies(0, -1, 1, 100));
  EXPECT_EQ(vk::VulkanOptions{}.attn_short, -1);
  expect_auto_switch("FISH_VK_ATTN_SHORT", &vk::VulkanOptions::attn_short);
}

// The decode kernel's split rule (vulkan_span.h attention_decode_splits): one workgroup per KV
// head up to FISH_SPAN_DEC_ONE_WG_KEYS keys, then a split per FISH_SPAN_DEC_SPLIT_KEYS; forced
// counts (FISH_VK_ATTN_SPLIT) as given, 0 as 1; all capped by the maximum and the scratch, >= 1.
TEST(VulkanSpanOps, DecodeAttentionSplitRule) {
  const uint32_t cap32 = 32 * FISH_SPAN_ATTN_SPLIT_TOK * FISH_SPAN_ATTN_MAX_SPLIT;
  const uint32_t cap9 = 9 * FISH_SPAN_ATTN_SPLIT_TOK * FISH_SPAN_ATTN_MAX_SPLIT;
  static_assert(FISH_SPAN_DEC_ONE_WG_KEYS == 512 && FISH_SPAN_DEC_SPLIT_KEYS == 256);
  EXPECT_EQ(vk::attention_decode_splits(-1, 32, 1, 1, cap32), 1u);
  EXPECT_EQ(vk::attention_decode_splits(-1, 32, 1, 150, cap32), 1u);
  EXPECT_EQ(vk::attention_decode_splits(-1, 32, 1, 512, cap32), 1u);
  EXPECT_EQ(vk::attention_decode_splits(-1, 32, 1, 513, cap32), 3u);
  EXPECT_EQ(vk::attention_decode_splits(-1, 32, 2, 2048, cap32), 8u);
  EXPECT_EQ(vk::attention_decode_splits(-1, 32, 1, 8192, cap32), 32u);
  EXPECT_EQ(vk::attention_decode_splits(-1, 9, 1, 32768, cap9), 64u);  // MAX_SPLIT
  EXPECT_EQ(vk::attention_decode_splits(-1, 32, 4, 32768, cap32), 64u);
  EXPECT_EQ(vk::attention_decode_splits(0, 32, 1, 8192, cap32), 1u);
  EXPECT_EQ(vk::attention_decode_splits(5, 32, 1, 3, cap32), 5u);       // forced: even empty splits
  EXPECT_EQ(vk::attention_decode_splits(64, 32, 64, 4096, cap32), 4u);  // the scratch's share
  EXPECT_EQ(vk::attention_decode_splits(5, 32, 1, 4096, 31), 1u);       // no split fits: one pass
}

// FISH_VK_ATTN_DECODE's rule (vulkan_span.h attention_decode_fused): auto fuses RoPE, the KV
// store and attention from kAttnDecodeMinKeys attended keys on, 1 always, 0 never; the knob
// parses auto and the switch words.
TEST(VulkanSpanOps, DecodeAttentionAutoFusesLongContextsOnly) {
  static_assert(vk::kAttnDecodeMinKeys == 1024);
  EXPECT_FALSE(vk::attention_decode_fused(-1, 1));
  EXPECT_FALSE(vk::attention_decode_fused(-1, 1023));
  EXPECT_TRUE(vk::attention_decode_fused(-1, 1024));
  EXPECT_TRUE(vk::attention_decode_fused(-1, 8192));
  EXPECT_TRUE(vk::attention_decode_fused(1, 1));
  EXPECT_FALSE(vk::attention_decode_fused(0, 8192));
  expect_auto_switch("FISH_VK_ATTN_DECODE", &vk::VulkanOptions::attn_decode);
  EXPECT_EQ(vk::VulkanOptions{}.attn_decode, -1);  // the default: auto
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
// stride), all equal, -inf everywhere, and NaN at index 0 and elsewhere (greedy_token's ranking);
// by one workgroup a row and by slices then their pairs (a vocabulary of 12 slices), two rows, and
// by pass 3 (the slices, each row's last workgroup reducing its pairs after an arrival counter,
// which it leaves zero).
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
      // One workgroup (pass 0), and slices then their pairs (passes 1, 2) over 2 rows: this
      // row and its reverse (the winner moves; ties and NaN keep their rules).
      std::vector<float> rev(lg.rbegin(), lg.rend());
      const uint32_t slices = (k.n + FISH_SPAN_ARGMAX_SLICE - 1) / FISH_SPAN_ARGMAX_SLICE;
      const uint32_t a_off = 37, c_off = a_off + 2 * k.n + 3, b_off = c_off + 4;
      const uint32_t ctr = b_off + 4 * slices + 1;  // pass 3's two counters, then a sentinel
      std::vector<float> arena(ctr + 3, -1.0f);
      arena[ctr] = arena[ctr + 1] = 0.0f;  // the words' zero bits
      std::copy(lg.begin(), lg.end(), arena.begin() + a_off);
      std::copy(rev.begin(), rev.end(), arena.begin() + a_off + k.n);
      const std::vector<float> params(4);
      std::vector<uint32_t> kv(4);
      vk::SpanPush pc{};
      pc.n = k.n;
      pc.a_off = a_off;
      pc.a_stride = k.n;
      pc.c_off = c_off;
      pc.b_off = b_off;
      pc.split = slices;
      for (int passes : {1, 2, 3}) {
        std::vector<float> a = arena;
        std::vector<vk::SpanDispatch> ds;
        if (passes == 3) {
          vk::SpanPush p3 = pc;
          p3.flags = 3;
          p3.w_off1 = ctr;
          ds.push_back({"span_argmax", p3, slices, 2, 1});
        } else if (passes == 2) {
          vk::SpanPush p1 = pc;
          p1.flags = 1;
          ds.push_back({"span_argmax", p1, slices, 2, 1});
          pc.flags = 2;
        }
        if (passes != 3) ds.push_back({"span_argmax", pc, 1, 2, 1});
        auto r = backend().run_span_ops(ds, 1, a, params, kv);
        ASSERT_TRUE(r.ok()) << what << ": " << r.error().message;
        uint32_t got[2] = {0, 0};
        std::memcpy(got, &a[c_off], 8);
        const std::string w = what + (passes == 3   ? " (slices, merged)"
                                      : passes == 2 ? " (slices)"
                                                    : " (one workgroup)");
        EXPECT_EQ(int32_t(got[0]), greedy_token(lg)) << w;
        EXPECT_EQ(int32_t(got[1]), greedy_token(rev)) << w << ", reversed";
        EXPECT_EQ(a[c_off + 2], -1.0f) << w << ": wrote past its words";
        EXPECT_EQ(a[ctr - 1], -1.0f) << w << ": wrote past its pairs";
        EXPECT_EQ(a[ctr], 0.0f) << w << ": counter left set";
        EXPECT_EQ(a[ctr + 1], 0.0f) << w << ": counter left set";
        EXPECT_EQ(a.back(), -1.0f) << w << ": wrote past its counters";
      }
    }
  }
}

}  // namespace
}  // namespace fish
