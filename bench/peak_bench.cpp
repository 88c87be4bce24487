// Arithmetic peaks of this CPU, per thread count, for reporting prefill GFLOP/s against them:
// f32 FMA (AVX-512 or AVX2) and int8 dot products (AVX-512 VNNI vpdpbusd, or AVX2 pmaddubsw +
// pmaddwd). Each loop keeps 12 independent accumulators so throughput, not latency, bounds it;
// operands stay in registers, so memory plays no part. An op is a multiply or an add
// (one FMA lane = 2 FLOP; one u8*s8 MAC = 2 OP).
#include <benchmark/benchmark.h>
#include <immintrin.h>

// GCC 12's _mm512_reduce_* use an intentionally undefined vector (false -Wuninitialized).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Keeps a register value opaque to the optimiser so the timed loop cannot be folded away.
#define FISH_OPAQUE(v) asm volatile("" : "+v"(v))

#include "kernels/cpu_features.h"

namespace {

constexpr int64_t kInner = 1 << 16;  // iterations per benchmark iteration

__attribute__((target("avx512f"))) float fma_f32_avx512(int64_t n) {
  __m512 a[12];
  const __m512 x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.9999f);
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(float(i));
  for (int64_t k = 0; k < n; ++k)
    for (int i = 0; i < 12; ++i) {
      a[i] = _mm512_fmadd_ps(a[i], x, y);
      FISH_OPAQUE(a[i]);
    }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float fma_f32_avx2(int64_t n) {
  __m256 a[12];
  const __m256 x = _mm256_set1_ps(1.0001f), y = _mm256_set1_ps(0.9999f);
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(float(i));
  for (int64_t k = 0; k < n; ++k)
    for (int i = 0; i < 12; ++i) {
      a[i] = _mm256_fmadd_ps(a[i], x, y);
      FISH_OPAQUE(a[i]);
    }
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  alignas(32) float o[8];
  _mm256_store_ps(o, s);
  return o[0] + o[7];
}

__attribute__((target("avx512f,avx512vnni"))) int dot_i8_avx512vnni(int64_t n) {
  __m512i a[12];
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_epi32(i);
  for (int64_t k = 0; k < n; ++k)
    for (int i = 0; i < 12; ++i) {
      a[i] = _mm512_dpbusd_epi32(a[i], u, s);
      FISH_OPAQUE(a[i]);
    }
  __m512i t = a[0];
  for (int i = 1; i < 12; ++i) t = _mm512_add_epi32(t, a[i]);
  return _mm512_reduce_add_epi32(t);
}

__attribute__((target("avx2"))) int dot_i8_avx2(int64_t n) {
  __m256i a[12];
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_epi32(i);
  for (int64_t k = 0; k < n; ++k)
    for (int i = 0; i < 12; ++i) {
      a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), one));
      FISH_OPAQUE(a[i]);
    }
  __m256i t = a[0];
  for (int i = 1; i < 12; ++i) t = _mm256_add_epi32(t, a[i]);
  return _mm256_extract_epi32(t, 0);
}

bool has_avx512() {
  return fish::best_isa() == fish::Isa::avx512;
}
bool has_avx2() {
  return fish::best_isa() >= fish::Isa::avx2;
}

void BM_peak_f32_fma(benchmark::State& state) {
  const bool wide = has_avx512();
  if (!has_avx2()) return state.SkipWithError("no AVX2/FMA");
  for (auto _ : state)
    benchmark::DoNotOptimize(wide ? fma_f32_avx512(kInner) : fma_f32_avx2(kInner));
  const double flop_per_iter = double(kInner) * 12 * (wide ? 16 : 8) * 2;
  state.counters["FLOP/s"] =
      benchmark::Counter(flop_per_iter * double(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(wide ? "avx512 fma" : "avx2 fma");
}

void BM_peak_int8_dot(benchmark::State& state) {
  const bool wide = has_avx512();
  if (!has_avx2()) return state.SkipWithError("no AVX2");
  for (auto _ : state)
    benchmark::DoNotOptimize(wide ? dot_i8_avx512vnni(kInner) : dot_i8_avx2(kInner));
  const double op_per_iter = double(kInner) * 12 * (wide ? 64 : 32) * 2;
  state.counters["OP/s"] =
      benchmark::Counter(op_per_iter * double(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(wide ? "avx512 vpdpbusd" : "avx2 pmaddubsw+pmaddwd");
}

}  // namespace

BENCHMARK(BM_peak_f32_fma)->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(BM_peak_int8_dot)->ThreadRange(1, 2)->UseRealTime();
