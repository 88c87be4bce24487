// dequantize_row / quantize_row throughput per GGML type (scalar reference code in quant/).
// Each iteration converts 1 MiB of packed blocks, as rows of 4096 values (a typical n_embd),
// into one f32 buffer (a prefill dequantise-then-GEMM pass writes like this). bytes_per_second
// counts the PACKED bytes read; the "values/s" counter counts floats produced.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "quant/types.h"

namespace fish {
namespace {

constexpr int64_t kRowValues = 4096;
constexpr size_t kPackedBytesPerIter = size_t(1) << 20;

// Byte offsets of the f16 scale fields per block, kept finite so no NaN/inf slow paths are timed.
std::vector<size_t> f16_fields(GgmlType t) {
  switch (t) {
    case GgmlType::q4_0:
    case GgmlType::q5_0:
    case GgmlType::q8_0:
      return {0};
    case GgmlType::q4_1:
    case GgmlType::q5_1:
    case GgmlType::q4_k:
    case GgmlType::q5_k:
      return {0, 2};
    case GgmlType::q2_k:
      return {80, 82};
    case GgmlType::q3_k:
      return {108};
    case GgmlType::q6_k:
      return {208};
    default:
      return {};
  }
}

// Packed rows of type t: random quants, finite random scales, values of plain float types finite.
std::vector<uint8_t> random_rows(GgmlType t, int64_t n_rows) {
  const TypeInfo& info = type_info(t);
  std::mt19937 rng(uint32_t(t) + 1);
  const int64_t n_blocks = n_rows * kRowValues / info.block_elems;
  std::vector<uint8_t> bytes(size_t(n_blocks) * info.block_bytes);
  for (auto& b : bytes) b = uint8_t(rng());
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* block = bytes.data() + size_t(i) * info.block_bytes;
    for (size_t off : f16_fields(t)) {
      const uint16_t h = uint16_t(0x2000 + rng() % 0x1800);  // f16 in ~[2^-7, 2^5): realistic
      std::memcpy(block + off, &h, 2);
    }
    if (t == GgmlType::f16) block[1] = uint8_t(0x20 + rng() % 0x18);
    if (t == GgmlType::bf16) block[1] = uint8_t(0x3c + rng() % 4);
    if (t == GgmlType::f32) block[3] = uint8_t(0x3c + rng() % 4);
    if (t == GgmlType::q8_k) {
      const float d = 0.01f;
      std::memcpy(block, &d, sizeof d);
    }
  }
  return bytes;
}

int64_t rows_per_iter(GgmlType t) {
  return std::max<int64_t>(1, int64_t(kPackedBytesPerIter / row_bytes(t, kRowValues)));
}

void BM_dequantize_row(benchmark::State& state, GgmlType t) {
  const TypeInfo& info = type_info(t);
  const int64_t n_rows = rows_per_iter(t);
  const std::vector<uint8_t> packed = random_rows(t, n_rows);
  std::vector<float> out(size_t(n_rows * kRowValues));
  const size_t bytes_per_row = row_bytes(t, kRowValues);
  for (auto _ : state) {
    for (int64_t r = 0; r < n_rows; ++r) {
      info.dequantize_row(packed.data() + size_t(r) * bytes_per_row, out.data() + r * kRowValues,
                          kRowValues);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(packed.size()));
  state.counters["values/s"] = benchmark::Counter(
      double(state.iterations()) * double(n_rows * kRowValues), benchmark::Counter::kIsRate);
  state.counters["bpw"] = info.bits_per_weight();
}

// Reference quantisers: the K-quants' scale searches make them ~100x slower than dequantising;
// these numbers say what re-quantising a model at load time costs.
void BM_quantize_row(benchmark::State& state, GgmlType t) {
  const TypeInfo& info = type_info(t);
  const int64_t n_rows = std::max<int64_t>(1, rows_per_iter(t) / 8);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::vector<float> in(size_t(n_rows * kRowValues));
  for (auto& v : in) v = normal(rng);
  std::vector<uint8_t> packed(row_bytes(t, n_rows * kRowValues));
  const size_t bytes_per_row = row_bytes(t, kRowValues);
  for (auto _ : state) {
    for (int64_t r = 0; r < n_rows; ++r) {
      info.quantize_row(in.data() + r * kRowValues, packed.data() + size_t(r) * bytes_per_row,
                        kRowValues);
    }
    benchmark::DoNotOptimize(packed.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(packed.size()));
  state.counters["values/s"] = benchmark::Counter(
      double(state.iterations()) * double(n_rows * kRowValues), benchmark::Counter::kIsRate);
}

// One registration per type FISH can decode, straight from the registry (no hand-kept list).
const bool kRegistered = [] {
  for (const TypeInfo& t : all_types()) {
    if (t.dequantize_row) {
      benchmark::RegisterBenchmark(("dequantize_row/" + std::string(t.name)).c_str(),
                                   BM_dequantize_row, t.type);
    }
  }
  for (const TypeInfo& t : all_types()) {
    if (t.quantize_row) {
      benchmark::RegisterBenchmark(("quantize_row/" + std::string(t.name)).c_str(), BM_quantize_row,
                                   t.type);
    }
  }
  return true;
}();

}  // namespace
}  // namespace fish
