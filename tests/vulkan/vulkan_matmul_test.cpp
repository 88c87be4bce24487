// The matvec (n_tok <= 4) and tiled (prefill) kernels of every supported type against the CPU
// f32 reference (quant/ dequantisation, double accumulation), per element within
// 1e-3 * (sum |w||x|) / n_out (the seed's bound): synthetic tensors with rows that are not a
// multiple of a workgroup's rows, K an odd multiple of the block, partial tiles, weights split
// into several buffer parts; the real models' blk.0 projections; matmul_group.
#include <gtest/gtest.h>

#include <random>

#include "engine/model.h"
#include "engine/vulkan/device_weight.h"
#include "engine/vulkan/vulkan_backend.h"
#include "shaders/fish_vk_layout.h"
#include "test_env.h"
#include "vulkan_test_util.h"

namespace fish {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::f32,  GgmlType::f16,  GgmlType::q4_0, GgmlType::q4_1,
                               GgmlType::q5_0, GgmlType::q5_1, GgmlType::q8_0, GgmlType::q4_k,
                               GgmlType::q5_k, GgmlType::q6_k, GgmlType::fq3};
constexpr int64_t kTokenCounts[] = {1, 3, 37, 256};

// One backend for the suite: lavapipe compiles each pipeline once.
class VulkanMatmul : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto opt = vk::VulkanOptions::from_env();
    ASSERT_TRUE(opt.ok()) << opt.error().message;
    // The f32 decode kernels, whatever FISH_VK_MATVEC or the device's auto rule says: the bound
    // here is f32 arithmetic's; the integer-dot kernels round x to q8_1 and have their own
    // (vulkan_matvec_idot_test.cpp).
    opt->matvec = vk::MatvecMode::fast;
    backend_ = new vk::VulkanBackend(opt);
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  void SetUp() override {
    const Status s = backend_->open();
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  void TearDown() override {
    EXPECT_EQ(backend_->bytes_resident(), 0u) << "a test leaked a weight";
  }

  // Uploads w, runs every token count, compares, releases.
  static void check(const MatrixView& w, std::mt19937& rng, std::span<const int64_t> token_counts) {
    auto h = backend_->upload(w);
    ASSERT_TRUE(h.ok()) << h.error().message;
    for (int64_t n_tok : token_counts) {
      const std::vector<float> x = test::random_input(n_tok * w.n_in, rng);
      std::vector<float> y(size_t(n_tok * w.n_out), -1.0f);
      const Status s = backend_->matmul(h.value(), x.data(), n_tok, y.data());
      ASSERT_TRUE(s.ok()) << s.error().message;
      test::expect_close(test::reference_matmul(w, x.data(), n_tok), y, w.n_out,
                         fmt::format("{} {} x {} n_tok {}", w.name, w.n_out, w.n_in, n_tok));
    }
    backend_->release(h.value());
  }

  static vk::VulkanBackend* backend_;
};
vk::VulkanBackend* VulkanMatmul::backend_ = nullptr;

MatrixView view(const std::vector<uint8_t>& data, GgmlType t, int64_t n_out, int64_t n_in,
                std::string name) {
  return MatrixView{data.data(), t, n_in, n_out, data.size(), std::move(name)};
}

TEST_F(VulkanMatmul, SupportsExactlyTheKernelTypes) {
  for (GgmlType t : kTypes) EXPECT_TRUE(backend_->supports(t)) << type_name(t);
  for (GgmlType t :
       {GgmlType::q2_k, GgmlType::q3_k, GgmlType::q8_1, GgmlType::bf16, GgmlType::iq4_xs})
    EXPECT_FALSE(backend_->supports(t)) << type_name(t);
}

TEST_F(VulkanMatmul, EveryTypeMatchesCpuReferenceOnOddShapes) {
  std::mt19937 rng(42);
  for (GgmlType t : kTypes) {
    const TypeInfo& ti = type_info(t);
    // K: an odd multiple of the block (f32/f16: not a multiple of the 32-value kernel step);
    // rows: not a multiple of 4 (matvec workgroup) nor 64 (tile).
    const int64_t n_in = ti.block_elems == 1 ? 100 : ti.block_elems == 32 ? 32 * 9 : 256 * 3;
    const int64_t n_out = 133;
    const std::vector<uint8_t> w = test::random_weights(t, n_out, n_in, rng);
    check(view(w, t, n_out, n_in, fmt::format("synthetic {}", ti.name)), rng, kTokenCounts);
  }
}

TEST_F(VulkanMatmul, SingleRowAndSingleBlock) {
  std::mt19937 rng(7);
  for (GgmlType t : kTypes) {
    const int64_t n_in = std::max<int64_t>(type_info(t).block_elems, 8);
    const std::vector<uint8_t> w = test::random_weights(t, 1, n_in, rng);
    const int64_t counts[] = {1, 4, 5};
    check(view(w, t, 1, n_in, fmt::format("one row {}", type_name(t))), rng, counts);
  }
}

TEST_F(VulkanMatmul, WeightSplitIntoPartsMatchesCpuReference) {
  auto opt = vk::VulkanOptions::from_env();
  ASSERT_TRUE(opt.ok());
  opt->max_part_bytes = 10000;         // a few rows per storage buffer
  opt->matvec = vk::MatvecMode::fast;  // the f32 bound (SetUpTestSuite)
  vk::VulkanBackend small_parts(opt);
  std::mt19937 rng(3);
  for (GgmlType t : {GgmlType::q6_k, GgmlType::q4_0, GgmlType::f16}) {
    const int64_t n_in = 512, n_out = 201;
    const std::vector<uint8_t> w = test::random_weights(t, n_out, n_in, rng);
    const MatrixView v = view(w, t, n_out, n_in, fmt::format("parts {}", type_name(t)));
    auto h = small_parts.upload(v);
    ASSERT_TRUE(h.ok()) << h.error().message;
    for (int64_t n_tok : {int64_t(2), int64_t(70)}) {
      const std::vector<float> x = test::random_input(n_tok * n_in, rng);
      std::vector<float> y(size_t(n_tok * n_out));
      ASSERT_TRUE(small_parts.matmul(h.value(), x.data(), n_tok, y.data()).ok());
      test::expect_close(test::reference_matmul(v, x.data(), n_tok), y, n_out,
                         fmt::format("{} n_tok {}", v.name, n_tok));
    }
    small_parts.release(h.value());
  }
  EXPECT_EQ(small_parts.bytes_resident(), 0u);
}

// FISH_VK_PREFILL_F16's rule (no device): auto copies from kPrefillF16AutoTok tokens only on a
// device with coopmat2 tiles; N from N tokens (and past the verify's 8) on any device with f16
// storage and arithmetic; 0 never; f16 / f32 weights and a copy larger than a binding never;
// auto allocates none under a VRAM ceiling.
TEST(VulkanPrefillF16Rule, AutoOnlyWithCoopmat2AndNeverWithoutF16) {
  vk::VulkanOptions o;
  vk::DeviceFeatures f;
  f.storage_16bit = f.shader_float16 = true;
  EXPECT_EQ(vk::prefill_f16_min_tok(o, f), 0u);  // auto, no coopmat2
  f.coopmat2 = true;
  EXPECT_EQ(vk::prefill_f16_min_tok(o, f), vk::kPrefillF16AutoTok);
  o.prefill_f16 = 0;
  EXPECT_EQ(vk::prefill_f16_min_tok(o, f), 0u);
  o.prefill_f16 = 1;
  EXPECT_EQ(vk::prefill_f16_min_tok(o, f), uint32_t(FISH_MATVEC_WIDE_TOK + 1));
  o.prefill_f16 = 300;
  EXPECT_EQ(vk::prefill_f16_min_tok(o, f), 300u);
  f.shader_float16 = false;
  EXPECT_EQ(vk::prefill_f16_min_tok(o, f), 0u);
  f.shader_float16 = true;
  vk::DeviceWeight w;
  w.type = GgmlType::q6_k;
  w.n_in = w.n_in_pad = 4096;
  w.row_bytes = 4096 / 256 * 210;
  w.parts.push_back({vk::Buffer{}, 0, 1000});
  EXPECT_FALSE(vk::prefill_f16(o, f, w, 299, uint64_t(1) << 32));
  EXPECT_TRUE(vk::prefill_f16(o, f, w, 300, uint64_t(1) << 32));
  EXPECT_EQ(vk::f16_copy_bytes(w, w.parts[0]), 1000u * 4096 * 2);
  EXPECT_FALSE(vk::prefill_f16(o, f, w, 300, 1000u * 4096 * 2 - 1));  // a binding too small
  w.type = GgmlType::f16;
  EXPECT_FALSE(vk::prefill_f16(o, f, w, 300, uint64_t(1) << 32));
  // Auto allocates copies only where the run has no VRAM ceiling; an explicit N always may.
  o.prefill_f16 = -1;
  EXPECT_TRUE(vk::prefill_f16_may_allocate(o, std::nullopt));
  EXPECT_FALSE(vk::prefill_f16_may_allocate(o, uint64_t(4) << 30));
  o.budget_bytes = uint64_t(4) << 30;
  EXPECT_FALSE(vk::prefill_f16_may_allocate(o, std::nullopt));
  o.prefill_f16 = 512;
  EXPECT_TRUE(vk::prefill_f16_may_allocate(o, uint64_t(4) << 30));
}

// FISH_VK_PREFILL_F16: prefill matmuls of every quantised type on f16 copies of the weights
// (dequant_f16_<type>, then the f16 kernel the device's rule picks for f16) against the CPU
// reference, the copies placed one after another in one buffer (several parts, several weights
// of a group); below the threshold, the type's own kernel.
TEST_F(VulkanMatmul, PrefillOnF16CopiesMatchesCpuReference) {
  auto opt = vk::VulkanOptions::from_env();
  ASSERT_TRUE(opt.ok());
  opt->matvec = vk::MatvecMode::fast;  // the f32 bound (SetUpTestSuite)
  opt->prefill_f16 = 30;
  opt->max_part_bytes = 20000;  // several parts a weight
  vk::VulkanBackend f16(opt);
  ASSERT_TRUE(f16.open().ok());
  if (f16.prefill_kernel(64, 37, GgmlType::q4_k).find("f16 copies") == std::string::npos)
    GTEST_SKIP() << "no f16 copies on this device: " << f16.prefill_kernel(64, 37, GgmlType::q4_k);
  EXPECT_EQ(f16.prefill_kernel(64, 29, GgmlType::q4_k).find("f16 copies"), std::string::npos);
  EXPECT_EQ(f16.prefill_kernel(64, 37, GgmlType::f16).find("f16 copies"), std::string::npos);
  std::mt19937 rng(5);
  for (GgmlType t : kTypes) {
    if (!vk::has_dequant_f16(t)) continue;
    const TypeInfo& ti = type_info(t);
    const int64_t n_in = ti.block_elems == 32 ? 32 * 9 : 256 * 3, n_out = 133;
    const std::vector<uint8_t> w = test::random_weights(t, n_out, n_in, rng);
    const MatrixView v = view(w, t, n_out, n_in, fmt::format("f16 copy {}", ti.name));
    auto h = f16.upload(v);
    ASSERT_TRUE(h.ok()) << h.error().message;
    for (int64_t n_tok : {int64_t(29), int64_t(37), int64_t(256)}) {
      const std::vector<float> x = test::random_input(n_tok * n_in, rng);
      std::vector<float> y(size_t(n_tok * n_out), -1.0f);
      ASSERT_TRUE(f16.matmul(h.value(), x.data(), n_tok, y.data()).ok());
      test::expect_close(
          test::reference_matmul(v, x.data(), n_tok), y, n_out,
          fmt::format("{} n_tok {} ({})", v.name, n_tok, f16.prefill_kernel(n_out, n_tok, t)));
    }
    f16.release(h.value());
  }
  // A group: two weights' copies side by side, one input.
  const int64_t n_in = 256 * 2, n_tok = 40;
  const std::vector<uint8_t> a = test::random_weights(GgmlType::q4_k, 70, n_in, rng);
  const std::vector<uint8_t> b = test::random_weights(GgmlType::q6_k, 45, n_in, rng);
  const MatrixView va = view(a, GgmlType::q4_k, 70, n_in, "group q4_k");
  const MatrixView vb = view(b, GgmlType::q6_k, 45, n_in, "group q6_k");
  auto ha = f16.upload(va);
  auto hb = f16.upload(vb);
  ASSERT_TRUE(ha.ok() && hb.ok());
  const std::vector<float> x = test::random_input(n_tok * n_in, rng);
  std::vector<float> ya(size_t(n_tok * 70)), yb(size_t(n_tok * 45));
  const ComputeBackend::MatmulOp ops[] = {{ha.value(), ya.data()}, {hb.value(), yb.data()}};
  ASSERT_TRUE(f16.matmul_group(ops, x.data(), n_tok).ok());
  test::expect_close(test::reference_matmul(va, x.data(), n_tok), ya, 70, "group q4_k");
  test::expect_close(test::reference_matmul(vb, x.data(), n_tok), yb, 45, "group q6_k");
  f16.release(ha.value());
  f16.release(hb.value());
  EXPECT_EQ(f16.bytes_resident(), 0u);
  // FISH_VK_PREFILL_F16_COPY_WG=2: each copy dispatch on 2 workgroups striding over all its rows;
  // the same group, bitwise the same outputs.
  opt->prefill_f16_copy_wg = 2;
  vk::VulkanBackend capped(opt);
  ASSERT_TRUE(capped.open().ok());
  auto ca = capped.upload(va);
  auto cb = capped.upload(vb);
  ASSERT_TRUE(ca.ok() && cb.ok());
  std::vector<float> za(ya.size(), -1.0f), zb(yb.size(), -1.0f);
  const ComputeBackend::MatmulOp cops[] = {{ca.value(), za.data()}, {cb.value(), zb.data()}};
  ASSERT_TRUE(capped.matmul_group(cops, x.data(), n_tok).ok());
  EXPECT_EQ(za, ya);
  EXPECT_EQ(zb, yb);
}

// FISH_VK_VERIFY_SPLIT: a matmul of 5..8 tokens runs as runs of at most FISH_MATVEC_MAX_TOK on
// the decode kernels, so each of its rows is bitwise the one-token matmul's of that row (what
// decode_exact_tokens() = FISH_MATVEC_WIDE_TOK promises a speculative verify), for the decode
// kernel the device's rule picks. Where that is integer-dot (NVIDIA) the unsplit matvec8_ (f32)
// rows differ; on lavapipe (f32 decode kernels, matvec8_ the same source) they would not, so
// there the split's bound is the decode_exact_tokens check.
TEST_F(VulkanMatmul, VerifySplitRowsAreOneTokenMatmulsBitwise) {
  auto opt = vk::VulkanOptions::from_env();
  ASSERT_TRUE(opt.ok());
  opt->verify_split = true;
  vk::VulkanBackend split(opt);
  ASSERT_TRUE(split.open().ok());
  EXPECT_EQ(split.decode_exact_tokens(), FISH_MATVEC_WIDE_TOK);
  EXPECT_EQ(backend_->decode_exact_tokens(), FISH_MATVEC_MAX_TOK);
  std::mt19937 rng(19);
  for (GgmlType t : {GgmlType::q4_k, GgmlType::q6_k, GgmlType::q8_0}) {
    const int64_t n_in = 256 * 3, n_out = 77;
    const std::vector<uint8_t> w = test::random_weights(t, n_out, n_in, rng);
    auto h = split.upload(view(w, t, n_out, n_in, "split"));
    ASSERT_TRUE(h.ok()) << h.error().message;
    for (int64_t n_tok = FISH_MATVEC_MAX_TOK + 1; n_tok <= FISH_MATVEC_WIDE_TOK; ++n_tok) {
      const std::vector<float> x = test::random_input(n_tok * n_in, rng);
      std::vector<float> y(size_t(n_tok * n_out));
      ASSERT_TRUE(split.matmul(h.value(), x.data(), n_tok, y.data()).ok());
      size_t differ = 0;
      for (int64_t r = 0; r < n_tok; ++r) {
        std::vector<float> one(static_cast<size_t>(n_out));
        ASSERT_TRUE(split.matmul(h.value(), x.data() + r * n_in, 1, one.data()).ok());
        for (int64_t i = 0; i < n_out; ++i) differ += y[size_t(r * n_out + i)] != one[size_t(i)];
      }
      EXPECT_EQ(differ, 0u) << type_name(t) << " n_tok " << n_tok;
    }
    split.release(h.value());
  }
}

TEST_F(VulkanMatmul, MatmulGroupMatchesSeparateReferences) {
  std::mt19937 rng(11);
  const int64_t n_in = 256 * 3;
  const std::vector<uint8_t> a = test::random_weights(GgmlType::q4_k, 70, n_in, rng);
  const std::vector<uint8_t> b = test::random_weights(GgmlType::q6_k, 33, n_in, rng);
  const std::vector<uint8_t> c = test::random_weights(GgmlType::q8_0, 5, n_in, rng);
  const MatrixView views[] = {view(a, GgmlType::q4_k, 70, n_in, "group q4_k"),
                              view(b, GgmlType::q6_k, 33, n_in, "group q6_k"),
                              view(c, GgmlType::q8_0, 5, n_in, "group q8_0")};
  std::vector<WeightHandle> hs;
  for (const MatrixView& v : views) {
    auto h = backend_->upload(v);
    ASSERT_TRUE(h.ok()) << h.error().message;
    hs.push_back(h.value());
  }
  for (int64_t n_tok : kTokenCounts) {
    const std::vector<float> x = test::random_input(n_tok * n_in, rng);
    std::vector<std::vector<float>> ys;
    std::vector<ComputeBackend::MatmulOp> ops;
    for (size_t i = 0; i < 3; ++i) ys.emplace_back(size_t(n_tok * views[i].n_out), -1.0f);
    for (size_t i = 0; i < 3; ++i) ops.push_back({hs[i], ys[i].data()});
    const Status s = backend_->matmul_group(ops, x.data(), n_tok);
    ASSERT_TRUE(s.ok()) << s.error().message;
    for (size_t i = 0; i < 3; ++i)
      test::expect_close(test::reference_matmul(views[i], x.data(), n_tok), ys[i], views[i].n_out,
                         fmt::format("{} n_tok {}", views[i].name, n_tok));
  }
  for (WeightHandle h : hs) backend_->release(h);
}

// The decode kernels (n_tok 1..FISH_MATVEC_MAX_TOK, and matvec8_<type> for the verify's
// FISH_MATVEC_MAX_TOK + 1..FISH_MATVEC_WIDE_TOK) on K of one block, a few blocks, and more
// chunks than a workgroup has threads (the chunk loop wraps with idle threads; matvec_fast's
// chunks are 32 values, fq3's 64), rows not a multiple of FISH_MATVEC_ROWS: matvec_<type>
// (matvec_fast for the bandwidth-bound types, fq3 included) with FISH_VK_MATVEC=fast,
// matvec1_<type> with FISH_VK_MATVEC=1 (generic); the integer-dot kernels, whose bound is their
// activation rounding, are vulkan_matvec_idot_test.cpp's.
void check_matvec_kernels(vk::VulkanBackend& backend) {
  std::mt19937 rng(19);
  for (GgmlType t : kTypes) {
    const int64_t blk = std::max<int64_t>(type_info(t).block_elems, 32);
    const int64_t chunks_past_wg = (FISH_MATVEC_WG + 13) * 64;  // 141 chunks of 64 values
    for (int64_t n_in : {blk, 3 * blk, (chunks_past_wg + blk - 1) / blk * blk}) {
      const int64_t n_out = 7 * FISH_MATVEC_ROWS + 3;
      const std::vector<uint8_t> w = test::random_weights(t, n_out, n_in, rng);
      const MatrixView v = view(w, t, n_out, n_in, fmt::format("matvec {}", type_name(t)));
      auto h = backend.upload(v);
      ASSERT_TRUE(h.ok()) << h.error().message;
      for (int64_t n_tok = 1; n_tok <= FISH_MATVEC_WIDE_TOK; ++n_tok) {
        const std::vector<float> x = test::random_input(n_tok * n_in, rng);
        std::vector<float> y(size_t(n_tok * n_out), -1.0f);
        const Status s = backend.matmul(h.value(), x.data(), n_tok, y.data());
        ASSERT_TRUE(s.ok()) << s.error().message;
        test::expect_close(test::reference_matmul(v, x.data(), n_tok), y, n_out,
                           fmt::format("{} K {} n_tok {}", v.name, n_in, n_tok));
      }
      backend.release(h.value());
    }
  }
}

TEST_F(VulkanMatmul, MatvecKernelsMatchCpuReferenceAtEveryTokenCount) {
  check_matvec_kernels(*backend_);  // FISH_VK_MATVEC=fast (SetUpTestSuite)
}

TEST_F(VulkanMatmul, GenericMatvec1KernelsMatchCpuReferenceAtEveryTokenCount) {
  auto opt = vk::VulkanOptions::from_env();
  ASSERT_TRUE(opt.ok());
  opt->matvec = vk::MatvecMode::generic;  // as FISH_VK_MATVEC=1
  vk::VulkanBackend generic(opt);
  check_matvec_kernels(generic);
  EXPECT_EQ(generic.bytes_resident(), 0u);
}

TEST_F(VulkanMatmul, ShaderCopyIsBitExact) {
  // 16-byte vectors not a multiple of a workgroup's share; 3 copies (a -> b -> a -> b), then b
  // is read back against the host pattern inside shader_copy_bytes_per_s.
  for (uint64_t bytes : {uint64_t(16), uint64_t(16) * (FISH_COPY_WG * 4 * 5 + 37)}) {
    auto r = backend_->shader_copy_bytes_per_s(bytes, 2);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_GT(r.value(), 0.0);
  }
  EXPECT_FALSE(backend_->shader_copy_bytes_per_s(24, 1).ok()) << "not a multiple of 16";
}

// blk.0's seven projections of a real model, alone and as the engine groups them.
void check_real_model(vk::VulkanBackend& backend, const char* file) {
  const std::string path = test::model_path(file);
  ASSERT_FALSE(path.empty()) << file << " missing: run scripts/setup.sh (fetches the real models)";
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const LayerWeights& L = model.value()->layers()[0];
  std::mt19937 rng(5);
  for (const MatrixView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) {
    ASSERT_TRUE(backend.supports(w->type)) << w->name << " " << type_name(w->type);
    auto h = backend.upload(*w);
    ASSERT_TRUE(h.ok()) << h.error().message;
    for (int64_t n_tok : kTokenCounts) {
      const std::vector<float> x = test::random_input(n_tok * w->n_in, rng);
      std::vector<float> y(size_t(n_tok * w->n_out), -1.0f);
      const Status s = backend.matmul(h.value(), x.data(), n_tok, y.data());
      ASSERT_TRUE(s.ok()) << s.error().message;
      test::expect_close(
          test::reference_matmul(*w, x.data(), n_tok), y, w->n_out,
          fmt::format("{} {} ({}) n_tok {}", file, w->name, type_name(w->type), n_tok));
    }
    backend.release(h.value());
  }
  // q/k/v and gate/up as groups (one submit each).
  for (auto group : {std::vector<const MatrixView*>{&L.wq, &L.wk, &L.wv},
                     std::vector<const MatrixView*>{&L.gate, &L.up}}) {
    std::vector<WeightHandle> hs;
    for (const MatrixView* w : group) {
      auto h = backend.upload(*w);
      ASSERT_TRUE(h.ok()) << h.error().message;
      hs.push_back(h.value());
    }
    for (int64_t n_tok : {int64_t(1), int64_t(37)}) {
      const std::vector<float> x = test::random_input(n_tok * group[0]->n_in, rng);
      std::vector<std::vector<float>> ys;
      std::vector<ComputeBackend::MatmulOp> ops;
      for (const MatrixView* w : group) ys.emplace_back(size_t(n_tok * w->n_out), -1.0f);
      for (size_t i = 0; i < group.size(); ++i) ops.push_back({hs[i], ys[i].data()});
      const Status s = backend.matmul_group(ops, x.data(), n_tok);
      ASSERT_TRUE(s.ok()) << s.error().message;
      for (size_t i = 0; i < group.size(); ++i)
        test::expect_close(test::reference_matmul(*group[i], x.data(), n_tok), ys[i],
                           group[i]->n_out,
                           fmt::format("{} group {} n_tok {}", file, group[i]->name, n_tok));
    }
    for (WeightHandle h : hs) backend.release(h);
  }
}

TEST_F(VulkanMatmul, SmolLm2Block0ProjectionsMatchCpuReference) {
  check_real_model(*backend_, test::kSmolLm2);
}

TEST_F(VulkanMatmul, Gemma3Block0ProjectionsMatchCpuReference) {
  check_real_model(*backend_, test::kGemma3);
}

}  // namespace
}  // namespace fish
