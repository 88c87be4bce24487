// Re-quantisation throughput per type pair (kernels/requant.h requantize_rows: dequantise, the
// fastest byte-identical quantiser, dequantise again for the error) on a pool of 1 and 2 threads.
// Input: N(0, 0.02) rows of 4096 values quantised to the source type, 64 rows per iteration.
// Counter "ns/weight" (printed inverted, with an "s" suffix) = wall time per converted value.
// Seed 000 measured ~6 ns/weight on 8 threads (~48 thread-ns/weight) for its upload path.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/quantize_fast.h"
#include "kernels/requant.h"
#include "kernels/thread_pool.h"

namespace fish {
namespace {

constexpr int64_t kRowValues = 4096;
constexpr int64_t kRows = 64;

std::vector<uint8_t> source_rows(GgmlType t) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> w(size_t(kRows * kRowValues));
  for (float& f : w) f = dist(rng);
  std::vector<uint8_t> out(row_bytes(t, kRowValues) * size_t(kRows));
  ThreadPool pool(1);
  quantize_rows(t, w.data(), out.data(), kRows, kRowValues, pool);
  return out;
}

void BM_requant(benchmark::State& state, GgmlType from, GgmlType to, int threads) {
  ThreadPool pool(threads);
  const std::vector<uint8_t> src = source_rows(from);
  std::vector<uint8_t> out(row_bytes(to, kRowValues) * size_t(kRows));
  for (auto _ : state) {
    const RequantError e =
        requantize_rows(from, src.data(), to, out.data(), kRows, kRowValues, pool);
    benchmark::DoNotOptimize(e);
  }
  state.counters["ns/weight"] = benchmark::Counter(
      double(kRows * kRowValues) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(int64_t(state.iterations()) * kRows * kRowValues);
}

const int kRegistered = [] {
  const std::pair<GgmlType, GgmlType> pairs[] = {{GgmlType::q6_k, GgmlType::q4_k},
                                                 {GgmlType::q4_k, GgmlType::fq3},
                                                 {GgmlType::q4_1, GgmlType::fq3},
                                                 {GgmlType::q5_0, GgmlType::fq3},
                                                 {GgmlType::q8_0, GgmlType::fq3}};
  // 1 and 2 threads everywhere; 8 (the seed's count) and all hardware threads where there are more.
  std::vector<int> thread_counts = {1, 2};
  for (int t : {8, default_thread_count()})
    if (t > thread_counts.back() && t <= default_thread_count()) thread_counts.push_back(t);
  for (auto [from, to] : pairs) {
    for (int threads : thread_counts) {
      benchmark::RegisterBenchmark(
          ("requant/" + std::string(type_name(from)) + "->" + std::string(type_name(to)) +
           "/threads:" + std::to_string(threads))
              .c_str(),
          BM_requant, from, to, threads)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return 0;
}();

}  // namespace
}  // namespace fish
