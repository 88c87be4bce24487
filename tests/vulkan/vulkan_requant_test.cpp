// FISH_GPU_REQUANT on the Vulkan backend (seed 000 "Online re-quantisation"): the mode from the
// environment and per run, which weights the device gets in which type, the kernels on
// re-quantised weights against the CPU decode of the same re-quantised bytes (the real models'
// blk.0 after modes 3 and 1, a q3_k weight made uploadable by mode 1; the seed's bound),
// describe()'s per-pair line, and placement under a fixed FISH_VRAM_BUDGET_MB counting the
// smaller sizes (more Gemma 3 layers fit in mode 3).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "engine/gpu_placement.h"
#include "engine/model.h"
#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_device.h"
#include "kernels/requant.h"
#include "kernels/thread_pool.h"
#include "test_env.h"
#include "vulkan_test_util.h"

namespace fish {
namespace {

// A backend built from the environment with FISH_GPU_REQUANT / FISH_VRAM_BUDGET_MB set as given
// (nullptr: unset) while the options are read.
std::unique_ptr<vk::VulkanBackend> backend_with(const char* requant, const char* budget_mb) {
  auto set = [](const char* var, const char* v) {
    if (v)
      setenv(var, v, 1);
    else
      unsetenv(var);
  };
  set("FISH_GPU_REQUANT", requant);
  set("FISH_VRAM_BUDGET_MB", budget_mb);
  auto opt = vk::VulkanOptions::from_env();
  // The f32 decode kernels under any FISH_VK_MATVEC or auto rule: the bounds against the CPU here
  // are f32 arithmetic's (the integer-dot kernels': vulkan_matvec_idot_test.cpp).
  if (opt.ok()) opt->matvec = vk::MatvecMode::fast;
  auto b = std::make_unique<vk::VulkanBackend>(opt);
  unsetenv("FISH_GPU_REQUANT");
  unsetenv("FISH_VRAM_BUDGET_MB");
  return b;
}

MatrixView view(const std::vector<uint8_t>& data, GgmlType t, int64_t n_out, int64_t n_in,
                std::string name) {
  return MatrixView{data.data(), t, n_in, n_out, data.size(), std::move(name)};
}

double mib(uint64_t b) {
  return double(b) / double(1 << 20);
}

TEST(GpuRequant, ModeComesFromFishGpuRequantAndAnInvalidValueFailsTheOpenNamingIt) {
  EXPECT_EQ(backend_with(nullptr, nullptr)->requant_mode(), 0);
  EXPECT_EQ(backend_with("3", nullptr)->requant_mode(), 3);
  for (const char* bad : {"4", "-1", "fq3", "1x"}) {
    auto b = backend_with(bad, nullptr);
    const Status s = b->open();
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.error().message.find(fmt::format("FISH_GPU_REQUANT='{}'", bad)), std::string::npos)
        << s.error().message;
    EXPECT_NE(b->status().find("FISH_GPU_REQUANT"), std::string::npos) << b->status();
  }
}

TEST(GpuRequant, AnUploadsOwnModeOverridesTheEnvironmentForThatUploadOnly) {
  auto b = backend_with("2", nullptr);
  ASSERT_TRUE(b->open().ok());
  std::mt19937 rng(31);
  const std::vector<uint8_t> q6 = test::random_weights(GgmlType::q6_k, 8, 512, rng);
  const MatrixView w = view(q6, GgmlType::q6_k, 8, 512, "q6");
  auto by_env = b->upload(w);  // FISH_GPU_REQUANT=2: q6_k -> q4_k
  ASSERT_TRUE(by_env.ok()) << by_env.error().message;
  UploadOptions off;
  off.requant = 0;
  auto own = b->upload(w, off);
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_NE(b->describe().find("1 x q6_k->q4_k"), std::string::npos) << b->describe();
  EXPECT_NE(b->describe().find("1 x q6_k "), std::string::npos) << b->describe();
  EXPECT_EQ(b->requant_mode(), 2);  // the backend's own mode is untouched
  UploadOptions bad;
  bad.requant = 4;
  const uint64_t before = b->bytes_resident();
  auto refused = b->upload(w, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("gpu_requant 4"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(b->bytes_resident(), before);  // a refused upload changes nothing
  b->release(by_env.value());
  b->release(own.value());
}

TEST(GpuRequant, DeviceTypeFollowsTheModeWhereRowsHoldWhole256Blocks) {
  auto b = backend_with(nullptr, nullptr);
  auto type_of = [&](int mode, GgmlType t, int64_t n_in) {
    UploadOptions u;
    u.requant = mode;
    return b->device_type(MatrixView{nullptr, t, n_in, 8, 0, "w"}, u);
  };
  using T = GgmlType;
  for (T t : {T::q4_k, T::q6_k, T::q8_0, T::f16}) EXPECT_EQ(type_of(0, t, 512), t);
  EXPECT_EQ(type_of(1, T::q4_k, 512), T::fq3);
  EXPECT_EQ(type_of(1, T::q8_0, 512), T::fq3);
  EXPECT_EQ(type_of(1, T::q3_k, 512), T::fq3);   // no kernel of its own, uploadable as fq3
  EXPECT_EQ(type_of(1, T::q8_0, 640), T::q8_0);  // 640 is not a multiple of 256
  EXPECT_EQ(type_of(1, T::f16, 512), T::f16);    // unquantised weights stay
  EXPECT_EQ(type_of(1, T::fq3, 512), T::fq3);
  EXPECT_EQ(type_of(2, T::q6_k, 512), T::q4_k);
  EXPECT_EQ(type_of(2, T::q4_k, 512), T::q4_k);
  EXPECT_EQ(type_of(3, T::q6_k, 512), T::q4_k);
  EXPECT_EQ(type_of(3, T::q4_k, 512), T::fq3);
  EXPECT_EQ(type_of(3, T::q5_0, 512), T::q5_0);
}

TEST(GpuRequant, Mode1MakesATypeWithoutKernelsUploadableAsFq3) {
  auto b = backend_with(nullptr, nullptr);
  ASSERT_TRUE(b->open().ok());
  std::mt19937 rng(29);
  const int64_t n_out = 37, n_in = 512;
  const std::vector<uint8_t> q3 = test::random_weights(GgmlType::q3_k, n_out, n_in, rng);
  const MatrixView w = view(q3, GgmlType::q3_k, n_out, n_in, "q3_k weight");
  auto refused = b->upload(w);  // mode 0: q3_k has no kernel
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("q3_k has no Vulkan kernel"), std::string::npos)
      << refused.error().message;
  UploadOptions fq3_copy;
  fq3_copy.requant = 1;
  auto h = b->upload(w, fq3_copy);
  ASSERT_TRUE(h.ok()) << h.error().message;
  ThreadPool pool(1);
  std::vector<uint8_t> fq3(row_bytes(GgmlType::fq3, n_in) * size_t(n_out));
  requantize_rows(GgmlType::q3_k, q3.data(), GgmlType::fq3, fq3.data(), n_out, n_in, pool);
  const std::vector<float> x = test::random_input(3 * n_in, rng);
  std::vector<float> y(size_t(3 * n_out));
  ASSERT_TRUE(b->matmul(h.value(), x.data(), 3, y.data()).ok());
  test::expect_close(
      test::reference_matmul(view(fq3, GgmlType::fq3, n_out, n_in, "fq3"), x.data(), 3), y, n_out,
      "q3_k uploaded as fq3");
  EXPECT_NE(b->describe().find("1 x q3_k->fq3 0 MB (from 0)"), std::string::npos) << b->describe();
  b->release(h.value());
}

// The seven blk.0 projections of `file` uploaded under `mode`: the converted ones against the CPU
// decode of the same re-quantised bytes (requantize_rows), the rest against their own bytes;
// device bytes shrink by exactly the converted rows' difference.
void check_block0_requantised(const char* file, int mode, int expect_converted) {
  const std::string path = test::model_path(file);
  ASSERT_FALSE(path.empty()) << file << " missing: run scripts/setup.sh (fetches the real models)";
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto b = backend_with(nullptr, nullptr);
  ASSERT_TRUE(b->open().ok());
  UploadOptions u;
  u.requant = mode;
  u.n_threads = 2;
  ThreadPool pool(2);
  std::mt19937 rng(17);
  const LayerWeights& L = model.value()->layers()[0];
  int converted = 0;
  for (const MatrixView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) {
    const GgmlType to = b->device_type(*w, u);
    std::vector<uint8_t> bytes;
    MatrixView ref_view = *w;
    if (to != w->type) {
      ++converted;
      bytes.resize(row_bytes(to, w->n_in) * size_t(w->n_out));
      requantize_rows(w->type, w->data, to, bytes.data(), w->n_out, w->n_in, pool);
      ref_view = view(bytes, to, w->n_out, w->n_in, w->name);
    }
    auto h = b->upload(*w, u);
    ASSERT_TRUE(h.ok()) << h.error().message;
    for (int64_t n_tok : {int64_t(1), int64_t(37)}) {
      const std::vector<float> x = test::random_input(n_tok * w->n_in, rng);
      std::vector<float> y(size_t(n_tok * w->n_out), -1.0f);
      const Status s = b->matmul(h.value(), x.data(), n_tok, y.data());
      ASSERT_TRUE(s.ok()) << s.error().message;
      test::expect_close(test::reference_matmul(ref_view, x.data(), n_tok), y, w->n_out,
                         fmt::format("{} mode {} {} ({} -> {}) n_tok {}", file, mode, w->name,
                                     type_name(w->type), type_name(to), n_tok));
    }
    b->release(h.value());
  }
  EXPECT_EQ(converted, expect_converted) << file << " mode " << mode;
  EXPECT_EQ(b->bytes_resident(), 0u);
}

// Gemma 3 270M blk.0: attn_output q4_k (-> fq3) and ffn_down q6_k (-> q4_k); the n_embd = 640
// rows stay as they are.
TEST(GpuRequant, Gemma3Block0Mode3MatchesCpuDecodeOfTheSameBytes) {
  check_block0_requantised(test::kGemma3, 3, 2);
}

TEST(GpuRequant, Gemma3Block0Mode1MatchesCpuDecodeOfTheSameBytes) {
  check_block0_requantised(test::kGemma3, 1, 2);
}

// SmolLM2 blk.0 is q4_1 with n_embd 576: only ffn_down (n_in 1536) holds whole 256 blocks.
TEST(GpuRequant, SmolLm2Block0Mode1MatchesCpuDecodeOfTheSameBytes) {
  check_block0_requantised(test::kSmolLm2, 1, 1);
}

TEST(GpuRequant, DescribeShowsEachPairWithItsDeviceAndModelBytes) {
  auto b = backend_with("3", nullptr);
  ASSERT_TRUE(b->open().ok());
  std::mt19937 rng(23);
  const std::vector<uint8_t> q4 = test::random_weights(GgmlType::q4_k, 4096, 1024, rng);
  const std::vector<uint8_t> q6 = test::random_weights(GgmlType::q6_k, 1024, 1024, rng);
  const std::vector<uint8_t> q8 = test::random_weights(GgmlType::q8_0, 64, 640, rng);
  std::vector<WeightHandle> hs;
  auto upload = [&](const MatrixView& v) -> uint64_t {
    const uint64_t before = b->bytes_resident();
    auto h = b->upload(v);
    EXPECT_TRUE(h.ok()) << h.error().message;
    if (h.ok()) hs.push_back(h.value());
    return b->bytes_resident() - before;
  };
  uint64_t fq3_bytes = 0;
  for (int i = 0; i < 3; ++i) fq3_bytes += upload(view(q4, GgmlType::q4_k, 4096, 1024, "q4"));
  const uint64_t q4k_bytes = upload(view(q6, GgmlType::q6_k, 1024, 1024, "q6"));
  const uint64_t q8_bytes = upload(view(q8, GgmlType::q8_0, 64, 640, "q8"));
  // Device copies: 112 of 144 bytes per 256 values (fq3), 144 of 210 (q4_k), plus buffer padding.
  EXPECT_LT(fq3_bytes, 3 * q4.size() * 112 / 144 + 3 * 4096);
  EXPECT_LT(q4k_bytes, q6.size() * 144 / 210 + 4096);
  // The weights part of the line, then "; prefill <kernel>".
  const std::string weights_part = fmt::format(
      "vulkan {}: {:.0f} MB weights, 3 x q4_k->fq3 {:.0f} MB (from {:.0f}), 1 x "
      "q6_k->q4_k {:.0f} MB (from {:.0f}), 1 x q8_0 {:.0f} MB; prefill ",
      b->info().device, mib(fq3_bytes + q4k_bytes + q8_bytes), mib(fq3_bytes), mib(3 * q4.size()),
      mib(q4k_bytes), mib(q6.size()), mib(q8_bytes));
  EXPECT_EQ(b->describe().substr(0, weights_part.size()), weights_part) << b->describe();
  EXPECT_NE(b->describe().find("3 x q4_k->fq3 5 MB (from 7)"), std::string::npos) << b->describe();
  for (WeightHandle h : hs) b->release(h);
  // Mode 0: the same weights keep their types, no pair.
  UploadOptions off;
  off.requant = 0;
  auto h = b->upload(view(q4, GgmlType::q4_k, 4096, 1024, "q4"), off);
  ASSERT_TRUE(h.ok());
  EXPECT_GT(b->bytes_resident(), fq3_bytes / 3 * 144 / 113);
  EXPECT_EQ(b->describe().find("->"), std::string::npos) << b->describe();
  EXPECT_NE(b->describe().find("1 x q4_k 2 MB"), std::string::npos) << b->describe();
  b->release(h.value());
}

// Layers placed on Gemma 3 270M under FISH_VRAM_BUDGET_MB = budget_mb, mode `mode`; the
// placement's bytes must equal the backend's.
int64_t gemma_layers_placed(const Model& model, int mode, const char* budget_mb,
                            std::string* describe = nullptr) {
  auto b = backend_with(std::to_string(mode).c_str(), budget_mb);
  EXPECT_TRUE(b->open().ok());
  auto pl = GpuPlacement::place_layers(model, *b);
  EXPECT_TRUE(pl->output_on_gpu()) << pl->summary();
  EXPECT_EQ(pl->bytes(), b->bytes_resident());
  if (describe) *describe = b->describe();
  return pl->n_gpu_layers();
}

TEST(GpuRequant, Mode3PlacesMoreGemmaLayersUnderATightBudgetAndAsManyUnderALooseOne) {
  const std::string path = test::model_path(test::kGemma3);
  ASSERT_FALSE(path.empty()) << "gemma 3 missing: run scripts/setup.sh";
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const Model& m = *model.value();
  const int64_t n_layer = m.params().n_layer;
  // Mode 0's bytes for the output + k last layers; a budget 1 MB above them fits k layers, not
  // k + 1 (a layer is ~4 MB); mode 3's layers are ~0.4 MB smaller where wo/down are k-quants.
  const int64_t k = n_layer - 2;
  uint64_t bytes_k = 0;
  {
    auto b = backend_with("0", nullptr);
    ASSERT_TRUE(b->open().ok());
    bytes_k = GpuPlacement::place_layers(m, *b, test::placement_request(k))->bytes();
  }
  const std::string tight = std::to_string((bytes_k >> 20) + 1);
  std::string describe0, describe3;
  EXPECT_EQ(gemma_layers_placed(m, 0, tight.c_str(), &describe0), k);
  const int64_t mode3 = gemma_layers_placed(m, 3, tight.c_str(), &describe3);
  EXPECT_GT(mode3, k) << describe3;
  EXPECT_EQ(describe0.find("->"), std::string::npos) << describe0;
  EXPECT_NE(describe3.find("q4_k->fq3"), std::string::npos) << describe3;
  EXPECT_NE(describe3.find("q6_k->q4_k"), std::string::npos) << describe3;
  EXPECT_EQ(gemma_layers_placed(m, 3, nullptr), n_layer);
}

}  // namespace
}  // namespace fish
