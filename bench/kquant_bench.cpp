// K-quant (and Q8_0, Q5_0) kernels, old vs new, side by side in one run: the per-row GGUF kernels
// (matmul_preq through the registry: vec_dot_rows / vec_dot_x4 / vec_dot at the best ISA) against
// the x16 interleaved layout (kernels/kquant_x16.h, kx16_matmul), for Q4_K, Q5_K, Q6_K, Q8_0 and
// Q5_0 at a Llama-3.2-1B FFN shape (8192 x 2048), 1 and 2 threads (and the default count when
// larger).
//
//   stream/threads:T             kernels/stream_bandwidth's read pass over 512 MiB (bytes/s): the
//                                yardstick; "% of stream" = decode bytes/s / stream bytes/s
//   decode/<type>/<impl>         one token, weights from DRAM (copies of the matrix spanning
//                                512 MiB are cycled); bytes/s of the impl's own weight bytes
//                                (x16 Q4_K / Q5_K read 2.8% / 2.3% more bytes than GGUF), plus a
//                                rows_per_s counter (the same work in both)
//   decode_640/<type>/<impl>     q5_0, q8_0: decode of a 2048 x 640 matrix (Gemma 3 270M's width)
//   prefill/<type>/<impl>        8, 12, 16 or 64 tokens (tok:N) on one cache-warm matrix:
//                                tokens/s and GOP/s (8 and 12: around the AMX threshold)
// impl: gguf (old), x16 (the x16 kernel at the best ISA, without AMX), x16_nopf (decode only: the
// x16 kernel with its decode prefetch off, kx16_prefetch_bytes) or amx (x16 with its AMX tiles for
// the 16-token blocks; only where kx16_amx_usable()). Every iteration quantises its activations as
// the engine does (Q8_K; Q8_0 for q8_0 / q5_0). Run with --benchmark_repetitions=N
// --benchmark_report_aggregates_only=true for medians.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/kquant_x16.h"
#include "kernels/matmul.h"
#include "kernels/registry.h"
#include "kernels/stream_bandwidth.h"
#include "kernels/thread_pool.h"
#include "quant/f16.h"
#include "quant/q4_k.h"
#include "quant/q5_0.h"
#include "quant/q5_k.h"
#include "quant/q6_k.h"
#include "quant/q8_0.h"

namespace fish {
namespace {

constexpr int64_t kNIn = 2048;
constexpr int64_t kNOut = 8192;
// n_out x n_in of a benchmark's matrix: the FFN shape above, or (decode_640 rows) Gemma 3 270M's
// gate / up, whose n_in of 640 is why its Q4_K_M layers are Q5_0.
struct Shape {
  int64_t n_out = kNOut, n_in = kNIn;
  bool operator==(const Shape&) const = default;
};
constexpr Shape kFfn{};
constexpr Shape kGemmaUp{2048, 640};
constexpr size_t kColdBytes = size_t(512) << 20;

std::vector<uint8_t> random_matrix(GgmlType t, Shape sh = kFfn) {
  std::vector<uint8_t> m(row_bytes(t, sh.n_in) * size_t(sh.n_out));
  std::mt19937 rng(uint32_t(t) + 17);
  for (uint8_t& b : m) b = uint8_t(rng());
  const size_t bb = type_info(t).block_bytes;
  std::vector<size_t> f16;  // scale fields: small finite values
  if (t == GgmlType::q4_k) f16 = {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
  if (t == GgmlType::q5_k) f16 = {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
  if (t == GgmlType::q6_k) f16 = {offsetof(BlockQ6_K, d)};
  if (t == GgmlType::q8_0) f16 = {offsetof(BlockQ8_0, d)};
  if (t == GgmlType::q5_0) f16 = {offsetof(BlockQ5_0, d)};
  for (size_t off = 0; off < m.size(); off += bb) {
    for (size_t f : f16) {
      const uint16_t h = f32_to_f16(0.001f + 0.001f * float(rng() % 100));
      std::memcpy(m.data() + off + f, &h, 2);
    }
  }
  return m;
}

std::vector<uint8_t> packed(GgmlType t, const std::vector<uint8_t>& m, Shape sh = kFfn) {
  std::vector<uint8_t> p(kx16_matrix_bytes(t, sh.n_out, sh.n_in));
  kx16_pack(t, m.data(), sh.n_out, sh.n_in, p.data(), 0, (sh.n_out + 15) / 16);
  return p;
}

// Copies of one matrix (GGUF or x16 bytes) spanning >= kColdBytes; one set cached at a time.
struct ColdSet {
  GgmlType t = GgmlType::f32;
  bool x16 = false;
  Shape sh;
  size_t bytes = 0;
  int64_t copies = 0;
  std::unique_ptr<uint8_t[]> data;
};

const ColdSet& cold_set(GgmlType t, bool x16, Shape sh) {
  static ColdSet s;
  if (s.data && s.t == t && s.x16 == x16 && s.sh == sh) return s;
  s.data.reset();
  const std::vector<uint8_t> g = random_matrix(t, sh);
  const std::vector<uint8_t> m = x16 ? packed(t, g, sh) : g;
  s.t = t;
  s.x16 = x16;
  s.sh = sh;
  s.bytes = m.size();
  s.copies = int64_t((kColdBytes + m.size() - 1) / m.size());
  s.data.reset(new uint8_t[s.bytes * size_t(s.copies)]);
  for (int64_t c = 0; c < s.copies; ++c)
    std::memcpy(s.data.get() + size_t(c) * s.bytes, m.data(), m.size());
  return s;
}

std::vector<float> activations(int64_t n) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& f : x) f = nd(rng);
  return x;
}

enum class Impl { gguf, x16, amx, x16_nopf };
const char* impl_name(Impl i) {
  switch (i) {
    case Impl::gguf:
      return "gguf";
    case Impl::x16:
      return "x16";
    case Impl::amx:
      return "amx";
    default:
      return "x16_nopf";
  }
}

// y = W x for n_tok tokens on `w` (GGUF bytes, or x16 bytes for x16 / amx).
void run_matmul(GgmlType t, Impl impl, const uint8_t* w, const float* x, int64_t n_tok, float* y,
                std::vector<uint8_t>& xq, ThreadPool& pool, Shape sh = kFfn) {
  const MatvecKernel& k = matvec_kernel(t);
  quantize_activations(k, x, n_tok, sh.n_in, xq.data(), pool);
  if (impl == Impl::gguf) {
    matmul_preq(k, w, sh.n_out, sh.n_in, xq.data(), n_tok, y, pool);
  } else {
    kx16_matmul(kx16_kernel(t, best_isa(), nullptr, impl == Impl::amx), t, w, sh.n_out, sh.n_in,
                xq.data(), n_tok, y, pool);
  }
}

std::string label(GgmlType t, Impl impl) {
  Isa got = Isa::scalar;
  bool amx = false;
  if (impl != Impl::gguf) kx16_kernel(t, best_isa(), &got, impl == Impl::amx, &amx);
  const Isa isa = impl != Impl::gguf ? got : matvec_kernel(t).isa;
  return std::string(type_name(t)) + " " + impl_name(impl) + " " + std::string(isa_name(isa)) +
         (amx ? "+amx" : "");
}

void BM_stream(benchmark::State& state) {
  ThreadPool pool(int(state.range(0)));
  StreamBuffer buf(kColdBytes);
  for (auto _ : state) benchmark::DoNotOptimize(buf.read_pass(pool));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(buf.n_bytes()));
}

void BM_decode(benchmark::State& state, GgmlType t, Impl impl, Shape sh) {
  ThreadPool pool(int(state.range(0)));
  // x16_nopf: the x16 kernel without its decode prefetch (kx16_prefetch_bytes), for the A/B.
  struct Prefetch {
    size_t saved = kx16_prefetch_bytes();
    explicit Prefetch(bool off) {
      if (off) kx16_set_prefetch_bytes(0);
    }
    ~Prefetch() { kx16_set_prefetch_bytes(saved); }
  } prefetch(impl == Impl::x16_nopf);
  const ColdSet& s = cold_set(t, impl != Impl::gguf, sh);
  const std::vector<float> x = activations(sh.n_in);
  std::vector<uint8_t> xq(matvec_kernel(t).act_row_bytes(sh.n_in));
  std::vector<float> y(static_cast<size_t>(sh.n_out));
  int64_t c = 0;
  for (auto _ : state) {
    run_matmul(t, impl, s.data.get() + size_t(c) * s.bytes, x.data(), 1, y.data(), xq, pool, sh);
    benchmark::DoNotOptimize(y.data());
    c = (c + 1) % s.copies;
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(s.bytes));
  state.counters["rows_per_s"] = benchmark::Counter(double(state.iterations()) * double(sh.n_out),
                                                    benchmark::Counter::kIsRate);
  state.SetLabel(label(t, impl));
}

void BM_prefill(benchmark::State& state, GgmlType t, Impl impl) {
  ThreadPool pool(int(state.range(0)));
  const int64_t n_tok = state.range(1);
  const std::vector<uint8_t> g = random_matrix(t);
  const std::vector<uint8_t> w = impl != Impl::gguf ? packed(t, g) : g;
  const std::vector<float> x = activations(kNIn * n_tok);
  std::vector<uint8_t> xq(matvec_kernel(t).act_row_bytes(kNIn) * size_t(n_tok));
  std::vector<float> y(size_t(kNOut * n_tok));
  for (auto _ : state) {
    run_matmul(t, impl, w.data(), x.data(), n_tok, y.data(), xq, pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * n_tok);
  state.counters["GOPs"] =
      benchmark::Counter(double(state.iterations()) * 2.0 * double(kNOut * kNIn * n_tok) / 1e9,
                         benchmark::Counter::kIsRate);
  state.SetLabel(label(t, impl));
}

std::vector<int64_t> thread_counts() {
  std::vector<int64_t> v = {1, 2};
  if (default_thread_count() > 2) v.push_back(default_thread_count());
  return v;
}

int register_all() {
  benchmark::AddCustomContext("fish_cpu", cpu_features_summary() + " " + cpu_features().brand);
  benchmark::AddCustomContext(
      "fish_kquant_shape", std::to_string(kNOut) + "x" + std::to_string(kNIn) + " (n_out x n_in)");
  for (int64_t th : thread_counts())
    benchmark::RegisterBenchmark("stream", BM_stream)
        ->Arg(th)
        ->ArgName("threads")
        ->UseRealTime()
        ->MinTime(0.5);
  std::vector<Impl> prefill_impls = {Impl::gguf, Impl::x16};
  if (kx16_amx_usable()) prefill_impls.push_back(Impl::amx);
  for (GgmlType t :
       {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::q8_0, GgmlType::q5_0}) {
    // Decode: one token never reaches the AMX tiles (kKx16AmxMinTokens), so no amx row.
    for (Impl impl : {Impl::gguf, Impl::x16, Impl::x16_nopf}) {
      for (int64_t th : thread_counts())
        benchmark::RegisterBenchmark(
            ("decode/" + std::string(type_name(t)) + "/" + impl_name(impl)).c_str(), BM_decode, t,
            impl, kFfn)
            ->Arg(th)
            ->ArgName("threads")
            ->UseRealTime()
            ->MinTime(0.3);
    }
    for (Impl impl : prefill_impls) {
      for (int64_t th : thread_counts())
        for (int64_t tok : {8, 12, 16, 64})
          benchmark::RegisterBenchmark(
              ("prefill/" + std::string(type_name(t)) + "/" + impl_name(impl)).c_str(), BM_prefill,
              t, impl)
              ->Args({th, tok})
              ->ArgNames({"threads", "tok"})
              ->UseRealTime()
              ->MinTime(0.3);
    }
  }
  // Gemma 3 270M's rows of 640 in decode: its Q5_0 gate / up (2048 x 640) and, for the Q8_0
  // repacking question, Q8_0 rows of the same width (its tied head is 262144 x 640 Q8_0). Short
  // rows (20 blocks): per-call costs weigh more than at the FFN shape.
  for (GgmlType t : {GgmlType::q5_0, GgmlType::q8_0})
    for (Impl impl : {Impl::gguf, Impl::x16})
      for (int64_t th : thread_counts())
        benchmark::RegisterBenchmark(
            ("decode_640/" + std::string(type_name(t)) + "/" + impl_name(impl)).c_str(), BM_decode,
            t, impl, kGemmaUp)
            ->Arg(th)
            ->ArgName("threads")
            ->UseRealTime()
            ->MinTime(0.3);
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace fish
