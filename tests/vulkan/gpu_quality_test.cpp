// Seed test 3 (issue 4, "Quality"): on both real models, a CPU greedy run of 128 tokens is the
// reference (int8 activations: the default CPU engine the GPU replaces); the GPU placement (every
// layer and the output on the device) is teacher-forced on those tokens. Top-1 agreement must be
// >= 95%; KL(P_cpu || P_gpu) is reported. Through the harness's quality code (quality.source
// "greedy"), which is what `fish run` does for a gpu row with that source.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "engine/gpu_placement.h"
#include "engine/tokenizer.h"
#include "engine/vulkan/vulkan_backend.h"
#include "harness/quality.h"
#include "test_env.h"

namespace fish {
namespace {

void check_gpu_quality(const char* file) {
  const std::string path = test::model_path(file);
  ASSERT_FALSE(path.empty()) << file << " missing: run scripts/setup.sh (fetches the real models)";
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto tok = Tokenizer::from_gguf(model.value()->gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;

  test::TempDir dir;
  QualitySpec q;
  q.metrics = {"top1", "kl"};
  q.source = "greedy";
  q.n_tokens = 128;
  q.prompt_file = dir.file("prompt.txt");
  q.chunk = 4;  // the GPU's matvec kernels: lavapipe runs the tiled ones slowly
  std::ofstream(q.prompt_file) << "The capital of France is\n";  // short: the time is the 128
  // q.reference: a default Config, i.e. the CPU engine with int8 activations.
  auto ref = build_quality_reference(model.value(), tok.value(), q);
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  ASSERT_EQ(ref->top1.size(), 128u);

  vk::VulkanBackend backend(vk::VulkanOptions::from_env());
  const Status st = backend.open();
  ASSERT_TRUE(st.ok()) << st.error().message;
  auto pl = GpuPlacement::place_layers(*model.value(), backend);
  ASSERT_TRUE(pl->output_on_gpu()) << pl->summary();
  ASSERT_EQ(pl->n_gpu_layers(), model.value()->params().n_layer) << pl->summary();
  auto m = measure_quality(model.value(), Config{}, ref.value(), q, pl);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->gpu_fallbacks, 0u) << "GPU calls fell back to the CPU: not the GPU's quality";
  std::printf(
      "%s: GPU (%s) vs CPU int8 greedy reference, 128 teacher-forced tokens: top-1 %.1f%%, "
      "KL mean %.5f, p99 %.5f, max %.5f nats\n",
      file, pl->summary().c_str(), 100 * *m->top1, *m->kl_mean, *m->kl_p99, *m->kl_max);
  EXPECT_GE(*m->top1, 0.95) << file;
  pl.reset();
  EXPECT_EQ(backend.bytes_resident(), 0u);
}

TEST(GpuQuality, SmolLm2GpuAgreesWithTheCpuGreedyRun) {
  check_gpu_quality(test::kSmolLm2);
}

TEST(GpuQuality, Gemma3GpuAgreesWithTheCpuGreedyRun) {
  check_gpu_quality(test::kGemma3);
}

}  // namespace
}  // namespace fish
