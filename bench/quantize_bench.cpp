// Weight quantisation throughput per GGML type: the scalar reference (quant/) against the fast
// byte-identical variants (kernels/quantize_fast.h) at each ISA level, one row at a time, and
// quantize_rows (best level) on a pool of 1 and 2 threads. Input: N(0, 0.02) rows of 4096 values
// (a typical n_embd), 64 rows per iteration. Counter "ns/weight" (google-benchmark prints this
// inverted rate with an "s" suffix) = time per quantised value: CPU time for the one-row runs
// (steadier on a shared machine), wall time for the pool runs (2 threads ideally halve it).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/quantize_fast.h"

namespace fish {
namespace {

constexpr int64_t kRowValues = 4096;
constexpr int64_t kRows = 64;

const std::vector<float>& weights() {
  static const std::vector<float> w = [] {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> v(size_t(kRows * kRowValues));
    for (float& f : v) f = dist(rng);
    return v;
  }();
  return w;
}

void set_counters(benchmark::State& state, int64_t values_per_iter) {
  state.counters["ns/weight"] = benchmark::Counter(
      double(values_per_iter) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(int64_t(state.iterations()) * values_per_iter);
}

// One row per call: the reference (isa = scalar) or the fastest variant at `isa`.
void BM_quantize_row(benchmark::State& state, GgmlType t, Isa isa) {
  const QuantizeRowKernel k = quantize_row_kernel(t, isa);
  if (k.isa != isa) {
    state.SkipWithError("ISA level not available for this type or CPU");
    return;
  }
  const std::vector<float>& w = weights();
  const size_t rb = row_bytes(t, kRowValues);
  std::vector<uint8_t> out(rb * size_t(kRows));
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r)
      k.fn(w.data() + r * kRowValues, out.data() + r * rb, kRowValues);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, kRows * kRowValues);
}

// quantize_rows (best ISA) on a pool of `threads`.
void BM_quantize_rows(benchmark::State& state, GgmlType t, int threads) {
  ThreadPool pool(threads);
  const std::vector<float>& w = weights();
  std::vector<uint8_t> out(row_bytes(t, kRowValues) * size_t(kRows));
  for (auto _ : state) {
    quantize_rows(t, w.data(), out.data(), kRows, kRowValues, pool);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, kRows * kRowValues);
}

const int kRegistered = [] {
  for (GgmlType t : {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::q8_0, GgmlType::q4_0,
                     GgmlType::q4_1, GgmlType::q5_0, GgmlType::fq3}) {
    const std::string name(type_name(t));
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      if (isa != Isa::scalar && quantize_row_kernel(t, isa).isa != isa) continue;
      benchmark::RegisterBenchmark(
          ("quantize_row/" + name + "/" + std::string(isa_name(isa))).c_str(), BM_quantize_row, t,
          isa)
          ->Unit(benchmark::kMillisecond);
    }
    for (int threads : {1, 2}) {
      benchmark::RegisterBenchmark(
          ("quantize_rows/" + name + "/threads:" + std::to_string(threads)).c_str(),
          BM_quantize_rows, t, threads)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return 0;
}();

}  // namespace
}  // namespace fish
