// The gpu path of a fish run cell (harness/gpu_cell.h) on lavapipe, in process: the cell's layer
// cap, VRAM ceiling and gpu_requant decide the placement, travel with its uploads and never touch
// the backend's own ceiling and mode, and destroying it gives every device byte back.
#include "harness/gpu_cell.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/compute_backend.h"
#include "engine/config.h"
#include "engine/model_shapes.h"
#include "engine/session.h"
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

// The cell's GpuRequest as fish run resolves it.
Result<std::unique_ptr<CellPlacement>> place(const Model& model, const Config& c) {
  FISH_ASSIGN_OR_RETURN(GpuRequest req, gpu_request(c));
  return CellPlacement::place(model, req);
}

TEST_F(GpuCell, TheLayerCapDecidesThePlacementAndDestroyingItFreesEveryByte) {
  EXPECT_EQ(gpu_path_unavailable(), "");
  Config c;
  c.gpu_layers = 1;
  {
    auto p = place(*model_, c);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p.value()->gpu_layers(), 1);
    EXPECT_THAT(p.value()->detail(), HasSubstr("output + 1 of 2 layers"));
    EXPECT_THAT(p.value()->detail(), HasSubstr("layer cap 1"));
    EXPECT_GT(p.value()->vram_MB(), 0.0);
    EXPECT_GT(backend_->bytes_resident(), 0u);
  }
  EXPECT_EQ(backend_->bytes_resident(), 0u);
  c.gpu_layers = 0;
  auto none = place(*model_, c);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_EQ(none.value()->placement(), nullptr);
  EXPECT_EQ(none.value()->gpu_layers(), 0);
}

TEST_F(GpuCell, TheCellsBudgetLimitsThePlacementAndLeavesTheBackendsCeiling) {
  const uint64_t open_ceiling = backend_->info().ceiling_bytes;
  Config c;
  c.vram_budget_mb = 1;  // the tiny model's q8_0 weights are ~1.3 MB: not every layer fits
  {
    auto p = place(*model_, c);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_LT(p.value()->gpu_layers(), 2);
    EXPECT_THAT(p.value()->detail(), HasSubstr("vram_budget_mb"));
    EXPECT_LE(p.value()->vram_MB(), 1.0);
    EXPECT_EQ(backend_->info().ceiling_bytes, open_ceiling);
  }
  EXPECT_EQ(backend_->bytes_resident(), 0u);
  EXPECT_EQ(backend_->info().ceiling_bytes, open_ceiling);
  c.vram_budget_mb = 0;
  auto all = place(*model_, c);
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(all.value()->gpu_layers(), 2);
}

TEST_F(GpuCell, TheCellsGpuRequantConvertsTheDeviceCopyAndLeavesTheBackendsMode) {
  const int open_mode = backend_->requant_mode();
  Config c;
  double q8_MB = 0;
  {
    auto p = place(*model_, c);  // gpu_requant -1: the backend's mode (0 here)
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_THAT(p.value()->detail(), Not(HasSubstr("->")));
    q8_MB = p.value()->vram_MB();
  }
  c.gpu_requant = 1;  // every q8_0 matrix of the tiny model (rows of 256 / 512) -> fq3
  {
    auto p = place(*model_, c);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p.value()->gpu_layers(), 2);
    EXPECT_THAT(p.value()->detail(), HasSubstr("x q8_0->fq3"));
    EXPECT_LT(p.value()->vram_MB(), q8_MB);
    EXPECT_EQ(backend_->requant_mode(), open_mode);
  }
  EXPECT_EQ(backend_->bytes_resident(), 0u);
  EXPECT_EQ(backend_->requant_mode(), open_mode);
}

// Two cells alive at once in one process (what a process-global setting would leak): the first
// with a 1 MiB budget and every weight re-quantised to fq3, the second with neither. The second
// places every layer as q8_0 bytes, exactly what it places alone; the first keeps its own.
TEST_F(GpuCell, TwoCellsWithDifferentGpuSettingsDoNotLeakIntoEachOther) {
  Config plain;
  plain.gpu_span = false;  // stage 1: the placed bytes are the weights' alone
  uint64_t plain_alone = 0;
  {
    auto p = place(*model_, plain);
    ASSERT_TRUE(p.ok()) << p.error().message;
    ASSERT_EQ(p.value()->gpu_layers(), 2);
    plain_alone = p.value()->placement()->bytes();
  }
  Config tight = plain;
  tight.vram_budget_mb = 1;
  tight.gpu_requant = 1;
  auto first = place(*model_, tight);
  ASSERT_TRUE(first.ok()) << first.error().message;
  const uint64_t first_bytes = first.value()->placement()->bytes();
  EXPECT_LE(backend_->bytes_resident(), uint64_t(1) << 20);
  EXPECT_THAT(first.value()->detail(), HasSubstr("q8_0->fq3"));

  auto second = place(*model_, plain);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second.value()->gpu_layers(), 2) << second.value()->detail();
  EXPECT_EQ(second.value()->placement()->bytes(), plain_alone) << second.value()->detail();
  EXPECT_THAT(second.value()->detail(), HasSubstr("x q8_0 "));  // uploaded unconverted
  EXPECT_EQ(first.value()->placement()->bytes(), first_bytes);

  // The second cell's decode runs on its own weights next to the first's.
  SessionOptions so = session_options(plain).value();
  so.n_ctx = 16;
  so.gpu = second.value()->placement();
  auto sess = Session::create(model_, so);
  ASSERT_TRUE(sess.ok()) << sess.error().message;
  const int32_t toks[] = {1, 2, 3};
  auto lg = sess.value()->append(toks);
  ASSERT_TRUE(lg.ok()) << lg.error().message;
  EXPECT_EQ(sess.value()->gpu_fallbacks(), 0u);
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
  auto p = CellPlacement::place(*m.value(), GpuRequest{});
  set_gpu_backend(previous);
  EXPECT_NE(why, "");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, "gpu: " + why);
}

}  // namespace
}  // namespace fish
