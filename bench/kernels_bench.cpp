// CPU kernel throughput: matvec (decode: one token) per weight type at a Llama-3.2-1B FFN shape
// (W: 8192 x 2048, ffn_up/gate), 1 and 2 threads, reported as bytes/s of WEIGHTS read, next to a
// streaming-read bandwidth benchmark on a 1 GiB buffer measured in the same run, so
// "% of bandwidth" = matvec bytes_per_second / stream bytes_per_second.
//
// matvec_cold rotates through copies of the matrix spanning >= 1 GiB, so weights come from DRAM
// as in real decode (a 1B model is 0.9+ GiB); matvec_hot re-reads one matrix (9.4 MB for Q4_K:
// L3-resident on big-L3 CPUs: matmul overheads without DRAM). Each iteration is one
// matmul() call: activation quantisation + dot products, as the engine runs it.
// Also: each dot kernel per ISA on cache-resident rows (vec_dot_l2: the compute ceiling), matmul
// with 64 tokens (prefill as matrix x matrix, tokens/s) and the thread-pool dispatch latency. The
// context line "fish_cpu" names the ISA level and CPU features used.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/registry.h"
#include "kernels/thread_pool.h"
#include "quant/f16.h"
#include "quant/q2_k.h"
#include "quant/q3_k.h"
#include "quant/q4_0.h"
#include "quant/q4_1.h"
#include "quant/q4_k.h"
#include "quant/q5_0.h"
#include "quant/q5_1.h"
#include "quant/q5_k.h"
#include "quant/q6_k.h"
#include "quant/q8_0.h"
#include "quant/types.h"

namespace fish {
namespace {

constexpr int64_t kNIn = 2048;   // Llama-3.2-1B n_embd
constexpr int64_t kNOut = 8192;  // Llama-3.2-1B n_ff
constexpr size_t kColdBytes = size_t(1) << 30;

// f16 scale fields per block (byte offsets), set to small finite values so no NaN/denormal paths
// are timed.
std::vector<size_t> f16_fields(GgmlType t) {
  switch (t) {
    case GgmlType::q4_0:
      return {offsetof(BlockQ4_0, d)};
    case GgmlType::q4_1:
      return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case GgmlType::q5_0:
      return {offsetof(BlockQ5_0, d)};
    case GgmlType::q5_1:
      return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case GgmlType::q8_0:
      return {offsetof(BlockQ8_0, d)};
    case GgmlType::q2_k:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case GgmlType::q3_k:
      return {offsetof(BlockQ3_K, d)};
    case GgmlType::q4_k:
      return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case GgmlType::q5_k:
      return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case GgmlType::q6_k:
      return {offsetof(BlockQ6_K, d)};
    default:
      return {};
  }
}

// One n_out x n_in matrix of random weights in type t.
std::vector<uint8_t> random_matrix(GgmlType t, int64_t n_out, int64_t n_in) {
  const TypeInfo& ti = type_info(t);
  std::vector<uint8_t> m(row_bytes(t, n_in) * size_t(n_out));
  std::mt19937 rng(uint32_t(t) + 7);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  if (!ti.is_quantized()) {
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < n_out; ++r) {
      for (float& f : row) f = nd(rng);
      ti.quantize_row(row.data(), m.data() + size_t(r) * row_bytes(t, n_in), n_in);
    }
    return m;
  }
  for (uint8_t& b : m) b = uint8_t(rng());
  const std::vector<size_t> fields = f16_fields(t);
  for (size_t off = 0; off < m.size(); off += ti.block_bytes) {
    for (size_t f : fields) {
      const uint16_t h = f32_to_f16(0.001f + 0.001f * float(rng() % 100));
      std::memcpy(m.data() + off + f, &h, 2);
    }
  }
  return m;
}

// Copies of one matrix spanning >= kColdBytes (cached for the type being benchmarked).
struct ColdSet {
  GgmlType t = GgmlType::f32;
  size_t matrix_bytes = 0;
  int64_t copies = 0;
  std::unique_ptr<uint8_t[]> data;
};

const ColdSet& cold_set(GgmlType t) {
  static ColdSet s;
  if (s.data && s.t == t) return s;
  s.data.reset();
  const std::vector<uint8_t> m = random_matrix(t, kNOut, kNIn);
  s.t = t;
  s.matrix_bytes = m.size();
  s.copies = int64_t((kColdBytes + m.size() - 1) / m.size());
  s.data.reset(new uint8_t[s.matrix_bytes * size_t(s.copies)]);
  for (int64_t c = 0; c < s.copies; ++c) {
    std::memcpy(s.data.get() + size_t(c) * s.matrix_bytes, m.data(), m.size());
  }
  return s;
}

std::vector<float> random_activations(int64_t n) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& f : x) f = nd(rng);
  return x;
}

void set_label(benchmark::State& state, GgmlType t) {
  state.SetLabel(std::string(type_name(t)) + " " + std::string(isa_name(matvec_kernel(t).isa)));
}

void BM_matvec_cold(benchmark::State& state, GgmlType t) {
  ThreadPool pool(int(state.range(0)));
  const ColdSet& s = cold_set(t);
  const std::vector<float> x = random_activations(kNIn);
  std::vector<float> y(static_cast<size_t>(kNOut));
  int64_t c = 0;
  for (auto _ : state) {
    matmul(s.data.get() + size_t(c) * s.matrix_bytes, t, kNOut, kNIn, x.data(), 1, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    c = (c + 1) % s.copies;
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(s.matrix_bytes));
  set_label(state, t);
}

void BM_matvec_hot(benchmark::State& state, GgmlType t) {
  ThreadPool pool(int(state.range(0)));
  const std::vector<uint8_t> w = random_matrix(t, kNOut, kNIn);
  const std::vector<float> x = random_activations(kNIn);
  std::vector<float> y(static_cast<size_t>(kNOut));
  for (auto _ : state) {
    matmul(w.data(), t, kNOut, kNIn, x.data(), 1, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.size()));
  set_label(state, t);
}

// One dot-product kernel in isolation, per ISA level: 64 rows x 4096 weights (cache-resident)
// against one activation row; bytes/s of weights = the kernel's compute ceiling per core.
void BM_vec_dot_l2(benchmark::State& state, GgmlType t, Isa isa) {
  constexpr int64_t kRows = 64, kN = 4096;
  const MatvecKernel& k = matvec_kernel(t, isa);
  if (k.isa != isa) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const std::vector<uint8_t> w = random_matrix(t, kRows, kN);
  const std::vector<float> x = random_activations(kN);
  std::vector<uint8_t> xq(k.act_row_bytes(kN));
  if (k.quantize_act) {
    k.quantize_act(x.data(), xq.data(), kN);
  } else {
    std::memcpy(xq.data(), x.data(), xq.size());
  }
  const size_t row = row_bytes(t, kN);
  for (auto _ : state) {
    float sum = 0.0f;
    for (int64_t r = 0; r < kRows; ++r) sum += k.vec_dot(kN, w.data() + size_t(r) * row, xq.data());
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.size()));
  state.SetLabel(std::string(type_name(t)) + " " + std::string(isa_name(isa)));
}

// Prefill: 64 tokens x the same matrix; items = tokens.
void BM_matmul_prefill64(benchmark::State& state, GgmlType t) {
  constexpr int64_t kTok = 64;
  ThreadPool pool(int(state.range(0)));
  const std::vector<uint8_t> w = random_matrix(t, kNOut, kNIn);
  const std::vector<float> x = random_activations(kNIn * kTok);
  std::vector<float> y(static_cast<size_t>(kNOut * kTok));
  for (auto _ : state) {
    matmul(w.data(), t, kNOut, kNIn, x.data(), kTok, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kTok);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.size()));
  set_label(state, t);
}

// Streaming read: sum of a 1 GiB buffer as uint64 (4 independent accumulators; the compiler
// vectorises at the baseline ISA, which is far above one core's DRAM bandwidth), split across the
// pool like matmul, with the same 8 KiB software prefetch as matmul's decode path.
void BM_stream_read_1GiB(benchmark::State& state) {
  ThreadPool pool(int(state.range(0)));
  const size_t n = kColdBytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
  pool.parallel_for(int64_t(n), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) buf[size_t(i)] = uint64_t(i) * 0x9E3779B97F4A7C15ull;
  });
  std::vector<uint64_t> partial(size_t(pool.size()) * 8);
  for (auto _ : state) {
    pool.parallel_for(int64_t(n), [&](int64_t b, int64_t e, int t) {
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      int64_t i = b;
      for (; i + 8 <= e; i += 8) {
        // Software prefetch 8 KiB ahead, as matmul does for decode, so the reference is the
        // bandwidth one core can pull, not the hardware prefetcher's alone.
        __builtin_prefetch(&buf[size_t(std::min(i + 1024, e - 1))], 0, 3);
        a0 += buf[size_t(i)];
        a1 += buf[size_t(i + 1)];
        a2 += buf[size_t(i + 2)];
        a3 += buf[size_t(i + 3)];
        a0 += buf[size_t(i + 4)];
        a1 += buf[size_t(i + 5)];
        a2 += buf[size_t(i + 6)];
        a3 += buf[size_t(i + 7)];
      }
      for (; i + 4 <= e; i += 4) {
        a0 += buf[size_t(i)];
        a1 += buf[size_t(i + 1)];
        a2 += buf[size_t(i + 2)];
        a3 += buf[size_t(i + 3)];
      }
      for (; i < e; ++i) a0 += buf[size_t(i)];
      partial[size_t(t) * 8] = a0 + a1 + a2 + a3;  // one cache line per thread
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kColdBytes));
}

// Round trip of an (almost) empty parallel_for: what each of decode's ~200 matmuls pays.
void BM_thread_pool_dispatch(benchmark::State& state) {
  ThreadPool pool(int(state.range(0)));
  std::vector<int64_t> sink(size_t(pool.size()) * 8);
  for (auto _ : state) {
    pool.parallel_for(pool.size(), [&](int64_t b, int64_t, int t) { sink[size_t(t) * 8] += b; });
  }
  benchmark::DoNotOptimize(sink.data());
}

const GgmlType kTypes[] = {GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1,
                           GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k, GgmlType::q4_k,
                           GgmlType::q5_k, GgmlType::q6_k, GgmlType::f32,  GgmlType::f16,
                           GgmlType::bf16};

// Threads: 1, 2, and the default count (FISH_THREADS or all hardware threads) when that is more.
std::vector<int64_t> thread_counts() {
  std::vector<int64_t> t = {1, 2};
  if (default_thread_count() > 2) t.push_back(default_thread_count());
  return t;
}

int register_all() {
  benchmark::AddCustomContext("fish_cpu", cpu_features_summary() + " " + cpu_features().brand);
  benchmark::AddCustomContext(
      "fish_matvec_shape", std::to_string(kNOut) + "x" + std::to_string(kNIn) + " (n_out x n_in)");
  for (int64_t th : thread_counts()) {
    benchmark::RegisterBenchmark("stream_read_1GiB", BM_stream_read_1GiB)
        ->Arg(th)
        ->ArgName("threads")
        ->UseRealTime()
        ->MinTime(0.5);
  }
  for (GgmlType t : kTypes) {
    for (int64_t th : thread_counts()) {
      benchmark::RegisterBenchmark(("matvec_cold/" + std::string(type_name(t))).c_str(),
                                   BM_matvec_cold, t)
          ->Arg(th)
          ->ArgName("threads")
          ->UseRealTime()
          ->MinTime(0.3);
    }
  }
  for (GgmlType t : kTypes) {
    for (int64_t th : thread_counts()) {
      benchmark::RegisterBenchmark(("matvec_hot/" + std::string(type_name(t))).c_str(),
                                   BM_matvec_hot, t)
          ->Arg(th)
          ->ArgName("threads")
          ->UseRealTime()
          ->MinTime(0.2);
    }
  }
  for (GgmlType t : kTypes) {
    for (int i = 0; i < kIsaCount; ++i) {
      if (!isa_supported(Isa(i))) continue;
      benchmark::RegisterBenchmark(
          ("vec_dot_l2/" + std::string(type_name(t)) + "/" + std::string(isa_name(Isa(i)))).c_str(),
          BM_vec_dot_l2, t, Isa(i))
          ->MinTime(0.1);
    }
  }
  for (GgmlType t : {GgmlType::q4_1, GgmlType::q8_0, GgmlType::q4_k, GgmlType::q6_k}) {
    for (int64_t th : thread_counts()) {
      benchmark::RegisterBenchmark(("matmul_prefill64/" + std::string(type_name(t))).c_str(),
                                   BM_matmul_prefill64, t)
          ->Arg(th)
          ->ArgName("threads")
          ->UseRealTime()
          ->MinTime(0.2);
    }
  }
  for (int64_t th : thread_counts()) {
    benchmark::RegisterBenchmark("thread_pool_dispatch", BM_thread_pool_dispatch)
        ->Arg(th)
        ->ArgName("threads")
        ->UseRealTime();
  }
  return 0;
}

const int kRegistered = register_all();

}  // namespace
}  // namespace fish
