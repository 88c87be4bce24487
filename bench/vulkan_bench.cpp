// Vulkan kernel throughput (the GPU backend, engine/vulkan): matvec (decode, 1 token) and tiled
// matmul (prefill, 512 tokens) per weight type at Llama-3.1-8B shapes (attn 4096 x 4096, FFN
// 14336 x 4096 and 4096 x 14336), reported as bytes/s of WEIGHTS read (matvec) and tokens/s.
//
// Each iteration is one matmul_group over distinct device copies of the matrix totalling
// >= 512 MiB, so weights stream from device memory rather than L2 (H200: 50 MB) and the one
// submit + fence wait is amortised over many dispatches, as in a layer span. Host time per
// iteration includes x upload and y readback (small next to the weights). BM_VulkanDeviceCopy
// measures the device's copy bandwidth in the same run (bytes read + written), so "% of copy"
// = matvec bytes_per_second / copy bytes_per_second. The context line "vulkan" names the
// device (FISH_GPU=cpu runs on lavapipe; numbers there only smoke-test).
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/vulkan/vulkan_backend.h"
#include "quant/types.h"

namespace fish {

// The one backend of the run (opened once; leaked like the registered one).
vk::VulkanBackend* backend();

namespace {

constexpr uint64_t kGroupBytes = uint64_t(512) << 20;

}  // namespace

vk::VulkanBackend* backend() {
  static vk::VulkanBackend* b = [] {
    auto* be = new vk::VulkanBackend(vk::VulkanOptions::from_env());
    (void)be->open();
    return be;
  }();
  return b;
}

namespace {

// Args: type id, n_out, n_in, n_tok.
void BM_VulkanMatmul(benchmark::State& state) {
  const GgmlType t = GgmlType(state.range(0));
  const int64_t n_out = state.range(1), n_in = state.range(2), n_tok = state.range(3);
  vk::VulkanBackend* b = backend();
  if (!b->supports(t)) {
    state.SkipWithError(("no Vulkan backend or type: " + b->status()).c_str());
    return;
  }
  // One reference-quantised matrix of N(0,1) rows, uploaded as many times as fill the group.
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t rb = row_bytes(t, n_in);
  std::vector<uint8_t> w(rb * size_t(n_out));
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out; ++r) {
    for (float& f : row) f = dist(rng);
    type_info(t).quantize_row(row.data(), w.data() + size_t(r) * rb, n_in);
  }
  // Prefill is compute-bound and returns n_tok x n_out floats per copy: 4 copies keep the y
  // readback (part of the timing, as in stage 1) from dominating.
  const int copies = n_tok > 4 ? 4 : int(std::max<uint64_t>(1, kGroupBytes / w.size()));
  const MatrixView view{w.data(), t, n_in, n_out, w.size(), "bench"};
  std::vector<WeightHandle> hs;
  for (int i = 0; i < copies; ++i) {
    auto h = b->upload(view);
    if (!h.ok()) break;  // budget: measure what fits
    hs.push_back(h.value());
  }
  if (hs.empty()) {
    state.SkipWithError("upload refused");
    return;
  }
  std::vector<float> x(size_t(n_tok * n_in));
  for (float& f : x) f = dist(rng);
  std::vector<std::vector<float>> ys(hs.size(), std::vector<float>(size_t(n_tok * n_out)));
  std::vector<ComputeBackend::MatmulOp> ops;
  for (size_t i = 0; i < hs.size(); ++i) ops.push_back({hs[i], ys[i].data()});
  for (auto _ : state) {
    const Status s = b->matmul_group(ops, x.data(), n_tok);
    if (!s.ok()) {
      state.SkipWithError(s.error().message.c_str());
      break;
    }
  }
  for (WeightHandle h : hs) b->release(h);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(hs.size() * w.size()));
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(hs.size()) * n_tok);
  state.counters["copies"] = double(hs.size());
  state.counters["gflops"] = benchmark::Counter(
      double(state.iterations()) * double(hs.size()) * 2.0 * double(n_out * n_in * n_tok) * 1e-9,
      benchmark::Counter::kIsRate);
  state.SetLabel(std::string(type_name(t)));
}

// Device-to-device copy of 256 MiB, 5x the H200 L2 (the reference the kernels' GB/s is compared
// with): bytes read + written per second, 20 copies per submit.
void BM_VulkanDeviceCopy(benchmark::State& state) {
  vk::VulkanBackend* b = backend();
  const uint64_t bytes = uint64_t(state.range(0)) << 20;
  double bytes_per_s = 0;
  for (auto _ : state) {
    auto r = b->device_copy_bytes_per_s(bytes, 20);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    bytes_per_s = r.value();
    state.SetIterationTime(2.0 * double(bytes) * 20 / bytes_per_s);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * bytes * 20));
  state.counters["copy_GBps"] = bytes_per_s / 1e9;
}
BENCHMARK(BM_VulkanDeviceCopy)->Arg(256)->UseManualTime()->Unit(benchmark::kMillisecond);

void shapes(benchmark::internal::Benchmark* bm) {
  // fq3 (FISH_GPU_REQUANT's 3.5-bit device copy) next to q4_k, the type it replaces.
  for (GgmlType t : {GgmlType::q4_k, GgmlType::fq3, GgmlType::q6_k, GgmlType::q8_0, GgmlType::q4_0,
                     GgmlType::q5_k, GgmlType::f16})
    for (auto [n_out, n_in] :
         {std::pair<int64_t, int64_t>{4096, 4096}, {14336, 4096}, {4096, 14336}})
      for (int64_t n_tok : {1, 512}) bm->Args({int64_t(t), n_out, n_in, n_tok});
}
BENCHMARK(BM_VulkanMatmul)->Apply(shapes)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fish

// Own main (the executable's definition wins over benchmark_main's): the device opens before
// the run so the context line can name it.
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("vulkan", fish::backend()->status());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
