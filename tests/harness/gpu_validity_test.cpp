// Validity flags of gpu rows (harness/measure.h gpu_validity_flags) and the counter behind
// cpu_fallback (Session::gpu_fallbacks): a backend whose every call fails still gives the CPU's
// logits, and the session counts each matmul that fell back; a placement with nothing on the
// device is flagged. A fake backend stands in for the device, so no GPU is needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/compute_backend.h"
#include "engine/gpu_placement.h"
#include "engine/model_shapes.h"
#include "engine/session.h"
#include "engine/synthetic_model.h"
#include "harness/measure.h"
#include "test_env.h"

namespace fish {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Accepts every upload (when `accept`), fails every multiplication like a lost device.
class FailingBackend final : public ComputeBackend {
 public:
  explicit FailingBackend(bool accept) : accept_(accept) {}
  bool supports(GgmlType) override { return accept_; }
  Result<WeightHandle> upload(const MatrixView& w, const UploadOptions& = {}) override {
    if (!accept_) return make_error("{}: not supported", w.name);
    resident_ += w.n_bytes;
    return ++next_;
  }
  Status matmul(WeightHandle, const float*, int64_t, float*) override {
    ++calls_;
    return make_error("device lost");
  }
  Status matmul_group(std::span<const MatmulOp>, const float*, int64_t) override {
    ++calls_;
    return make_error("device lost");
  }
  uint64_t memory_free(const UploadOptions& = {}) override { return uint64_t(1) << 40; }
  uint64_t bytes_resident() const override { return resident_; }
  void release(WeightHandle) override {}
  int64_t calls() const { return calls_; }

 private:
  bool accept_;
  WeightHandle next_ = 0;
  uint64_t resident_ = 0;
  int64_t calls_ = 0;
};

class GpuValidity : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.file("tiny_q8_0.gguf");
    ASSERT_TRUE(
        write_synthetic_model(*find_model_shape("tiny"), parse_file_type("q8_0").value(), {}, path)
            .ok());
    auto m = Model::load(path);
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = m.value();
  }
  std::vector<float> logits(const SessionOptions& base, uint64_t* fallbacks) {
    SessionOptions opt = base;
    opt.n_ctx = 32;
    opt.n_threads = 1;
    auto s = Session::create(model_, opt);
    EXPECT_TRUE(s.ok());
    const std::vector<int32_t> tokens = {1, 5, 9, 2, 7};
    auto lg = s.value()->forward(tokens, 0, LogitsMode::all);  // prefill: the matmul groups
    EXPECT_TRUE(lg.ok());
    std::vector<float> out(lg.value().begin(), lg.value().end());
    const int32_t next = 3;
    lg = s.value()->append(std::span<const int32_t>(&next, 1));  // decode: one token
    EXPECT_TRUE(lg.ok());
    out.insert(out.end(), lg.value().begin(), lg.value().end());
    *fallbacks = s.value()->gpu_fallbacks();
    return out;
  }

  test::TempDir dir_;
  std::shared_ptr<const Model> model_;
};

TEST_F(GpuValidity, EveryFailedGpuCallRunsOnTheCpuAndIsCounted) {
  FailingBackend backend(/*accept=*/true);
  auto pl = GpuPlacement::place_layers(*model_, backend);
  ASSERT_TRUE(pl->output_on_gpu()) << pl->summary();
  ASSERT_EQ(pl->n_gpu_layers(), model_->params().n_layer) << pl->summary();
  SessionOptions gpu;
  gpu.gpu = pl;
  uint64_t gpu_fallbacks = 0, cpu_fallbacks = 0;
  const std::vector<float> with_gpu = logits(gpu, &gpu_fallbacks);
  const std::vector<float> cpu_only = logits(SessionOptions{}, &cpu_fallbacks);
  EXPECT_EQ(with_gpu, cpu_only);  // the fallback is the CPU path itself
  EXPECT_EQ(cpu_fallbacks, 0u);
  EXPECT_EQ(int64_t(gpu_fallbacks), backend.calls());  // one per failed GPU call
  EXPECT_GE(gpu_fallbacks, uint64_t(2 * model_->params().n_layer));
  EXPECT_THAT(gpu_validity_flags(gpu_fallbacks, pl.get()), ElementsAre("cpu_fallback"));
  EXPECT_THAT(gpu_validity_flags(0, pl.get()), IsEmpty());
}

TEST_F(GpuValidity, APlacementWithNothingOnTheDeviceIsFlagged) {
  FailingBackend refuses(/*accept=*/false);
  auto none = GpuPlacement::place_layers(*model_, refuses);
  ASSERT_EQ(none->n_gpu_layers(), 0);
  ASSERT_FALSE(none->output_on_gpu());
  EXPECT_THAT(gpu_validity_flags(0, none.get()), ElementsAre("nothing_on_gpu"));
  EXPECT_THAT(gpu_validity_flags(0, nullptr), ElementsAre("nothing_on_gpu"));  // gpu_layers 0
}

TEST(PairedRatios, PerRepetitionRatiosOrNothingWhenTheyCannotPair) {
  EXPECT_THAT(paired_ratios(std::vector<double>{2, 9}, std::vector<double>{4, 3}, 100.0),
              ElementsAre(50.0, 300.0));
  EXPECT_THAT(paired_ratios(std::vector<double>{2, 9}, std::vector<double>{4}), IsEmpty());
  EXPECT_THAT(paired_ratios(std::vector<double>{}, std::vector<double>{}), IsEmpty());
  EXPECT_THAT(paired_ratios(std::vector<double>{1}, std::vector<double>{0}), IsEmpty());
}

}  // namespace
}  // namespace fish
