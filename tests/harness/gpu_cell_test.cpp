// The gpu path of a fish run cell (harness/gpu_cell.h) on lavapipe, in process: the cell's layer
// cap, VRAM ceiling and gpu_requant decide the placement, and destroying it gives every device
// byte back and restores the backend's own ceiling and mode, so the next cell starts from zero.
#include "harness/gpu_cell.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/compute_backend.h"
#include "engine/model_shapes.h"
#include "engine/synthetic_model.h"
#include "test_env.h"
#if FISH_HAVE_VULKAN
#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_device.h"  // BackendInfo::devices
#endif

namespace fish {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

#if FISH_HAVE_VULKAN
// Registers a lavapipe-capable backend for the test's lifetime (the start-up one follows the
// environment, which the harness suite leaves alone).
class GpuCell : public ::testing::Test {
 protected:
  void SetUp() override {
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    o.value().enabled = true;
    o.value().allow_cpu = true;
    o.value().budget_bytes.reset();
    backend_ = std::make_unique<vk::VulkanBackend>(o);
    const Status st = backend_->open();
    ASSERT_TRUE(st.ok()) << st.error().message;
    previous_ = gpu_backend();
    set_gpu_backend(backend_.get());
    const std::string path = dir_.file("tiny_q8_0.gguf");
    ASSERT_TRUE(
        write_synthetic_model(*find_model_shape("tiny"), parse_file_type("q8_0").value(), {}, path)
            .ok());
    auto m = Model::load(path);
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = m.value();
  }
  void TearDown() override { set_gpu_backend(previous_); }

  test::TempDir dir_;
  std::unique_ptr<vk::VulkanBackend> backend_;
  ComputeBackend* previous_ = nullptr;
  std::shared_ptr<const Model> model_;
};

TEST_F(GpuCell, TheLayerCapDecidesThePlacementAndDestroyingItFreesEveryByte) {
  EXPECT_EQ(gpu_path_unavailable(), "");
  Config c;
  c.gpu_layers = 1;
  {
    auto p = CellPlacement::place(*model_, c);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p.value()->gpu_layers(), 1);
    EXPECT_THAT(p.value()->detail(), HasSubstr("output + 1 of 2 layers"));
    EXPECT_THAT(p.value()->detail(), HasSubstr("layer cap 1"));
    EXPECT_GT(p.value()->vram_MB(), 0.0);
    EXPECT_GT(backend_->bytes_resident(), 0u);
  }
  EXPECT_EQ(backend_->bytes_resident(), 0u);
  c.gpu_layers = 0;
  auto none = CellPlacement::place(*model_, c);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_EQ(none.value()->placement(), nullptr);
  EXPECT_EQ(none.value()->gpu_layers(), 0);
}

TEST_F(GpuCell, TheCellsBudgetLimitsThePlacementAndTheOpenCeilingComesBack) {
  const uint64_t open_ceiling = backend_->info().ceiling_bytes;
  Config c;
  c.vram_budget_mb = 1;  // the tiny model's q8_0 weights are ~1.3 MB: not every layer fits
  {
    auto p = CellPlacement::place(*model_, c);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_LT(p.value()->gpu_layers(), 2);
    EXPECT_THAT(p.value()->detail(), HasSubstr("vram_budget_mb"));
    EXPECT_LE(p.value()->vram_MB(), 1.0);
    EXPECT_EQ(backend_->info().ceiling_bytes, uint64_t(1) << 20);
  }
  EXPECT_EQ(backend_->bytes_resident(), 0u);
  EXPECT_EQ(backend_->info().ceiling_bytes, open_ceiling);
  c.vram_budget_mb = 0;
  auto all = CellPlacement::place(*model_, c);
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(all.value()->gpu_layers(), 2);
}

TEST_F(GpuCell, TheCellsGpuRequantConvertsTheDeviceCopyAndTheBackendsModeComesBack) {
  const int open_mode = backend_->requant_mode();
  Config c;
  double q8_MB = 0;
  {
    auto p = CellPlacement::place(*model_, c);  // gpu_requant -1: the backend's mode (0 here)
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_THAT(p.value()->detail(), Not(HasSubstr("->")));
    q8_MB = p.value()->vram_MB();
  }
  c.gpu_requant = 1;  // every q8_0 matrix of the tiny model (rows of 256 / 512) -> fq3
  {
    auto p = CellPlacement::place(*model_, c);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p.value()->gpu_layers(), 2);
    EXPECT_THAT(p.value()->detail(), HasSubstr("x q8_0->fq3"));
    EXPECT_LT(p.value()->vram_MB(), q8_MB);
    EXPECT_EQ(backend_->requant_mode(), 1);
  }
  EXPECT_EQ(backend_->bytes_resident(), 0u);
  EXPECT_EQ(backend_->requant_mode(), open_mode);
}
#endif

TEST(GpuPath, WithoutARegisteredBackendTheCellIsRefusedWithTheReason) {
  test::TempDir dir;
  const std::string path = dir.file("tiny_q8_0.gguf");
  ASSERT_TRUE(
      write_synthetic_model(*find_model_shape("tiny"), parse_file_type("q8_0").value(), {}, path)
          .ok());
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ComputeBackend* previous = gpu_backend();
  set_gpu_backend(nullptr);
  const std::string why = gpu_path_unavailable();
  auto p = CellPlacement::place(*m.value(), Config{});
  set_gpu_backend(previous);
  EXPECT_NE(why, "");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, "gpu: " + why);
}

}  // namespace
}  // namespace fish
