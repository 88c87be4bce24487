// Every dequantiser against the gguf package's (gguf.quants.dequantize) on random blocks:
// bit-exact float32 output. Random bytes everywhere except the f16 scales, kept finite (a NaN or
// inf scale has no meaningful "correct" output to compare).
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "quant/f16.h"
#include "quant/q8_k.h"
#include "quant/types.h"
#include "quant_reference.h"

namespace fish {
namespace {

struct DequantCase {
  GgmlType type;
  std::vector<size_t> f16_offsets;  // byte offsets of f16 fields in a block (kept finite)
};

// Scale field offsets come from the block structs (quant/q*.h).
const std::vector<DequantCase> kCases = {
    {GgmlType::f16, {0}},     {GgmlType::bf16, {}},     {GgmlType::f32, {}},
    {GgmlType::q4_0, {0}},    {GgmlType::q4_1, {0, 2}}, {GgmlType::q5_0, {0}},
    {GgmlType::q5_1, {0, 2}}, {GgmlType::q8_0, {0}},    {GgmlType::q2_k, {80, 82}},
    {GgmlType::q3_k, {108}},  {GgmlType::q4_k, {0, 2}}, {GgmlType::q5_k, {0, 2}},
    {GgmlType::q6_k, {208}},
};

// Test names and failure messages show the type name, not the struct's bytes.
void PrintTo(const DequantCase& c, std::ostream* os) {
  *os << type_name(c.type);
}

uint16_t random_finite_f16(std::mt19937& rng) {
  for (;;) {
    const auto h = uint16_t(rng());
    if ((h & 0x7c00) != 0x7c00) return h;
  }
}

// n_blocks random blocks of type t with finite scales (and finite values for f32/bf16).
std::vector<uint8_t> random_blocks(const DequantCase& c, int64_t n_blocks, uint32_t seed) {
  const TypeInfo& info = type_info(c.type);
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(size_t(n_blocks) * info.block_bytes);
  for (auto& b : bytes) b = uint8_t(rng());
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* block = bytes.data() + size_t(i) * info.block_bytes;
    for (size_t off : c.f16_offsets) {
      const uint16_t h = random_finite_f16(rng);
      std::memcpy(block + off, &h, 2);
    }
    if (c.type == GgmlType::bf16) block[1] &= 0xbf;  // exponent never all ones: finite
    if (c.type == GgmlType::f32) block[3] &= 0xbf;
  }
  return bytes;
}

class DequantMatchesGgufPackage : public ::testing::TestWithParam<DequantCase> {};

TEST_P(DequantMatchesGgufPackage, OnRandomBlocks) {
  const DequantCase& c = GetParam();
  const TypeInfo& info = type_info(c.type);
  const int64_t n_blocks = info.block_elems == 1 ? 65536 : 2048;
  const int64_t n = n_blocks * info.block_elems;
  const std::vector<uint8_t> blocks = random_blocks(c, n_blocks, 42 + uint32_t(c.type));

  test::TempDir dir;
  test::write_file(dir.file("in.bin"), blocks.data(), blocks.size());
  const std::string job =
      "dequant " + std::string(info.name) + " " + dir.file("in.bin") + " " + dir.file("out.f32");
  ASSERT_EQ(test::run_quant_reference(dir, {job}), "");
  const std::vector<float> want = test::read_floats(dir.file("out.f32"));
  ASSERT_EQ(int64_t(want.size()), n);

  std::vector<float> got(size_t(n), -7.f);
  info.dequantize_row(blocks.data(), got.data(), n);
  const int64_t bad = test::first_bit_mismatch(got, want);
  ASSERT_EQ(bad, -1) << info.name << ": value " << bad << " (block " << bad / info.block_elems
                     << ") FISH " << got[size_t(bad)] << " gguf " << want[size_t(bad)];
}

INSTANTIATE_TEST_SUITE_P(Types, DequantMatchesGgufPackage, ::testing::ValuesIn(kCases),
                         [](const auto& p) { return std::string(type_name(p.param.type)); });

// gguf has no Q8_K (it is ggml's in-memory activation format, never in a file): check the layout
// directly: value j of block i is d * qs[j], with d an f32.
TEST(Q8K, DequantIsScaleTimesQuant) {
  std::mt19937 rng(7);
  std::vector<BlockQ8_K> blocks(64);
  for (auto& b : blocks) {
    b.d = std::uniform_real_distribution<float>(-2.f, 2.f)(rng);
    for (auto& q : b.qs) q = int8_t(rng());
  }
  std::vector<float> got(64 * kQK_K);
  dequantize_row_q8_k(blocks.data(), got.data(), int64_t(got.size()));
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (int j = 0; j < kQK_K; ++j) {
      ASSERT_EQ(got[i * kQK_K + j], blocks[i].d * float(blocks[i].qs[j])) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace fish
