// The CPU 4-bit weight paths side by side on the same random matrices (quant/int4.h,
// kernels/w4a8.h, kernels/w4a16.h) next to the GGUF q4_k kernel (kernels/matmul.h):
//   decode/<path>/<n_out>x<n_in>   one token (matvec), bytes/s of weights read (scales included);
//                                  the matrix is re-read each iteration (cache-warm where it fits:
//                                  kernels_bench's matvec_cold is the DRAM-bound number);
//   decode_isa/<path>/<isa>        each decode variant at 8192x2048, one thread;
//   prefill/<path>/<setting>       64 tokens at 2048x2048, GFLOP/s (2 M N K per call), and the
//                                  resident weight bytes of each W4A16 prefill setting
//                                  (direct: packed only; duplicate: packed + row-major copy).
// Group size 128, asym for both int4 paths.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "kernels/w4a16.h"
#include "kernels/w4a8.h"
#include "quant/types.h"

namespace fish {
namespace {

constexpr Int4Format kFmt{128, Int4ZeroPoint::asym};
constexpr int64_t kPrefillTokens = 64;

struct Shape {
  int64_t n_out, n_in;
  std::string name() const { return std::to_string(n_out) + "x" + std::to_string(n_in); }
};

const std::vector<float>& random_f32(int64_t n) {
  static std::map<int64_t, std::vector<float>> cache;
  std::vector<float>& v = cache[n];
  if (v.empty()) {
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::normal_distribution<float> d(0.0f, 1.0f);
    v.resize(size_t(n));
    for (float& f : v) f = d(rng);
  }
  return v;
}

const Int4Vnni16& w4a8_weights(Shape s) {
  static std::map<std::pair<int64_t, int64_t>, Int4Vnni16> cache;
  auto [it, fresh] = cache.try_emplace({s.n_out, s.n_in});
  if (fresh)
    it->second = pack_int4_vnni16_ref(random_f32(s.n_out * s.n_in).data(), s.n_out, s.n_in, kFmt);
  return it->second;
}

const Int4Blocks64& w4a16_packed(Shape s) {
  static std::map<std::pair<int64_t, int64_t>, Int4Blocks64> cache;
  auto [it, fresh] = cache.try_emplace({s.n_out, s.n_in});
  if (fresh) {
    it->second = pack_int4_blocks64_ref(random_f32(s.n_out * s.n_in).data(), s.n_out, s.n_in, kFmt);
  }
  return it->second;
}

std::vector<uint8_t> q4_k_weights(Shape s) {
  const TypeInfo& ti = type_info(GgmlType::q4_k);
  const size_t row = row_bytes(GgmlType::q4_k, s.n_in);
  std::vector<uint8_t> m(row * size_t(s.n_out));
  const std::vector<float>& f = random_f32(s.n_out * s.n_in);
  for (int64_t r = 0; r < s.n_out; ++r) {
    ti.quantize_row(f.data() + r * s.n_in, m.data() + size_t(r) * row, s.n_in);
  }
  return m;
}

void BM_decode_w4a8(benchmark::State& state, Shape s, W4A8Isa isa) {
  ThreadPool pool(int(state.range(0)));
  const Int4Vnni16& w = w4a8_weights(s);
  const std::vector<float>& x = random_f32(s.n_in);
  std::vector<float> y(size_t(s.n_out));
  for (auto _ : state) {
    matmul_w4a8(w, x.data(), 1, y.data(), pool, isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.bytes()));
  // One token never takes the AMX tiles: amx decodes with the avx512_vnni kernel.
  state.SetLabel(std::string(w4a8_isa_name(isa == W4A8Isa::amx ? W4A8Isa::avx512_vnni : isa)));
}

void BM_decode_w4a16(benchmark::State& state, Shape s, W4A16Isa isa) {
  ThreadPool pool(int(state.range(0)));
  const W4A16Weights w = make_w4a16_weights(w4a16_packed(s), {});
  const std::vector<float>& x = random_f32(s.n_in);
  std::vector<float> y(size_t(s.n_out));
  for (auto _ : state) {
    matmul_w4a16(w, x.data(), 1, y.data(), pool, {}, isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.packed.bytes()));
  state.SetLabel(std::string(w4a16_isa_name(isa)));
}

void BM_decode_q4_k(benchmark::State& state, Shape s) {
  ThreadPool pool(int(state.range(0)));
  const std::vector<uint8_t> w = q4_k_weights(s);
  const std::vector<float>& x = random_f32(s.n_in);
  std::vector<float> y(size_t(s.n_out));
  for (auto _ : state) {
    matmul(w.data(), GgmlType::q4_k, s.n_out, s.n_in, x.data(), 1, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.size()));
  state.SetLabel(std::string(isa_name(matvec_kernel(GgmlType::q4_k).isa)));
}

void set_flops(benchmark::State& state, Shape s, size_t weight_bytes) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      double(state.iterations()) * 2.0 * double(kPrefillTokens * s.n_out * s.n_in) * 1e-9,
      benchmark::Counter::kIsRate);
  state.counters["weight_MB"] = double(weight_bytes) / 1e6;
  state.SetItemsProcessed(int64_t(state.iterations()) * kPrefillTokens);
}

void BM_prefill_w4a16(benchmark::State& state, Shape s, W4A16Options opt) {
  ThreadPool pool(int(state.range(0)));
  const W4A16Weights w = make_w4a16_weights(w4a16_packed(s), opt);
  const std::vector<float>& x = random_f32(kPrefillTokens * s.n_in);
  std::vector<float> y(size_t(kPrefillTokens * s.n_out));
  for (auto _ : state) {
    matmul_w4a16(w, x.data(), kPrefillTokens, y.data(), pool, opt);
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state, s, w.bytes());
}

void BM_prefill_w4a8(benchmark::State& state, Shape s, W4A8Isa isa) {
  ThreadPool pool(int(state.range(0)));
  const Int4Vnni16& w = w4a8_weights(s);
  const std::vector<float>& x = random_f32(kPrefillTokens * s.n_in);
  std::vector<float> y(size_t(kPrefillTokens * s.n_out));
  for (auto _ : state) {
    matmul_w4a8(w, x.data(), kPrefillTokens, y.data(), pool, isa);
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state, s, w.bytes());
  state.SetLabel(std::string(w4a8_isa_name(isa)));
}

void BM_prefill_q4_k(benchmark::State& state, Shape s) {
  ThreadPool pool(int(state.range(0)));
  const std::vector<uint8_t> w = q4_k_weights(s);
  const std::vector<float>& x = random_f32(kPrefillTokens * s.n_in);
  std::vector<float> y(size_t(kPrefillTokens * s.n_out));
  for (auto _ : state) {
    matmul(w.data(), GgmlType::q4_k, s.n_out, s.n_in, x.data(), kPrefillTokens, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state, s, w.size());
}

std::vector<int64_t> thread_counts() {
  std::vector<int64_t> t = {1, 2};
  if (default_thread_count() > 2) t.push_back(default_thread_count());
  return t;
}

template <typename Fn, typename... Args>
void add(const std::string& name, Fn fn, Args... args) {
  for (int64_t th : thread_counts()) {
    benchmark::RegisterBenchmark(name.c_str(), fn, args...)
        ->Arg(th)
        ->ArgName("threads")
        ->UseRealTime()
        ->MinTime(0.2);
  }
}

int register_all() {
  benchmark::AddCustomContext("fish_cpu", cpu_features_summary() + " " + cpu_features().brand);
  benchmark::AddCustomContext("fish_int4_format", "group 128 asym");
  for (Shape s : {Shape{2048, 2048}, Shape{8192, 2048}}) {
    add("decode/w4a8/" + s.name(), BM_decode_w4a8, s, w4a8_best_isa());
    add("decode/w4a16/" + s.name(), BM_decode_w4a16, s, w4a16_best_isa());
    add("decode/q4_k/" + s.name(), BM_decode_q4_k, s);
  }
  const Shape big{8192, 2048};
  for (int i = 0; i < kW4A8IsaCount; ++i) {
    const W4A8Isa isa = W4A8Isa(i);
    if (isa == W4A8Isa::amx || !w4a8_isa_supported(isa)) continue;  // amx decodes as avx512
    benchmark::RegisterBenchmark(("decode_isa/w4a8/" + std::string(w4a8_isa_name(isa))).c_str(),
                                 BM_decode_w4a8, big, isa)
        ->Arg(1)
        ->ArgName("threads")
        ->MinTime(0.1);
  }
  for (int i = 0; i < kW4A16IsaCount; ++i) {
    const W4A16Isa isa = W4A16Isa(i);
    if (!w4a16_isa_supported(isa)) continue;
    benchmark::RegisterBenchmark(("decode_isa/w4a16/" + std::string(w4a16_isa_name(isa))).c_str(),
                                 BM_decode_w4a16, big, isa)
        ->Arg(1)
        ->ArgName("threads")
        ->MinTime(0.1);
  }
  const Shape pre{2048, 2048};
  add("prefill/w4a16/direct_dequant", BM_prefill_w4a16, pre, W4A16Options{true, true, 8});
  add("prefill/w4a16/duplicate", BM_prefill_w4a16, pre, W4A16Options{true, false, 8});
  add("prefill/w4a16/decode_kernel", BM_prefill_w4a16, pre, W4A16Options{false, true, 8});
  add("prefill/w4a8/best", BM_prefill_w4a8, pre, w4a8_best_isa());
  if (w4a8_best_isa() == W4A8Isa::amx) {
    add("prefill/w4a8/avx512_vnni", BM_prefill_w4a8, pre, W4A8Isa::avx512_vnni);
  }
  add("prefill/q4_k/gguf", BM_prefill_q4_k, pre);
  return 0;
}

const int kRegistered = register_all();

}  // namespace
}  // namespace fish
