// The registration table of every GGML type and FISH's own (fq3): geometry (from ggml.c type_traits
// / ggml-common.h) and the scalar reference row functions that exist in quant/. The engine, the
// tests and the benchmarks all go through this one table.
#include "quant/types.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cctype>

#include "quant/dequantize.h"
#include "quant/f16.h"
#include "quant/fq3.h"
#include "quant/int4.h"
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
#include "quant/q8_k.h"

namespace fish {
namespace {

// Type-erasing adapters: one indirect call per row, the typed loop inside stays direct.
template <typename Src, void (*F)(const Src*, float*, int64_t)>
void dequant_erased(const void* src, float* dst, int64_t n) {
  F(static_cast<const Src*>(src), dst, n);
}
template <typename Dst, void (*F)(const float*, Dst*, int64_t)>
void quant_erased(const float* src, void* dst, int64_t n) {
  F(src, static_cast<Dst*>(dst), n);
}

#define FISH_DQ(Block, fmt) &dequant_erased<Block, &dequantize_row_##fmt>
#define FISH_Q(Block, fmt) &quant_erased<Block, &quantize_row_##fmt##_ref>

using T = GgmlType;
// In id order. Sizes of the types without a FISH decoder (IQ*, TQ*, MXFP4) are ggml's block
// struct sizes; a GGUF reader needs them to validate tensor extents.
constexpr TypeInfo kTypes[] = {
    {T::f32, "f32", 1, 4, FISH_DQ(float, f32), FISH_Q(float, f32)},
    {T::f16, "f16", 1, 2, FISH_DQ(uint16_t, f16), FISH_Q(uint16_t, f16)},
    {T::q4_0, "q4_0", 32, 18, FISH_DQ(BlockQ4_0, q4_0), FISH_Q(BlockQ4_0, q4_0)},
    {T::q4_1, "q4_1", 32, 20, FISH_DQ(BlockQ4_1, q4_1), FISH_Q(BlockQ4_1, q4_1)},
    {T::q5_0, "q5_0", 32, 22, FISH_DQ(BlockQ5_0, q5_0), FISH_Q(BlockQ5_0, q5_0)},
    {T::q5_1, "q5_1", 32, 24, FISH_DQ(BlockQ5_1, q5_1), FISH_Q(BlockQ5_1, q5_1)},
    {T::q8_0, "q8_0", 32, 34, FISH_DQ(BlockQ8_0, q8_0), FISH_Q(BlockQ8_0, q8_0)},
    {T::q8_1, "q8_1", 32, 36, FISH_DQ(BlockQ8_1, q8_1), FISH_Q(BlockQ8_1, q8_1)},
    {T::q2_k, "q2_k", 256, 84, FISH_DQ(BlockQ2_K, q2_k), FISH_Q(BlockQ2_K, q2_k)},
    {T::q3_k, "q3_k", 256, 110, FISH_DQ(BlockQ3_K, q3_k), FISH_Q(BlockQ3_K, q3_k)},
    {T::q4_k, "q4_k", 256, 144, FISH_DQ(BlockQ4_K, q4_k), FISH_Q(BlockQ4_K, q4_k)},
    {T::q5_k, "q5_k", 256, 176, FISH_DQ(BlockQ5_K, q5_k), FISH_Q(BlockQ5_K, q5_k)},
    {T::q6_k, "q6_k", 256, 210, FISH_DQ(BlockQ6_K, q6_k), FISH_Q(BlockQ6_K, q6_k)},
    {T::q8_k, "q8_k", 256, 292, FISH_DQ(BlockQ8_K, q8_k), FISH_Q(BlockQ8_K, q8_k)},
    {T::iq2_xxs, "iq2_xxs", 256, 66, nullptr, nullptr},  // d + 256/4 bytes of grid indices
    {T::iq2_xs, "iq2_xs", 256, 74, nullptr, nullptr},    // + 256/32 scale bytes
    {T::iq3_xxs, "iq3_xxs", 256, 98, nullptr, nullptr},  // d + 3*256/8
    {T::iq1_s, "iq1_s", 256, 50, nullptr, nullptr},      // d + 256/8 + 256/16
    {T::iq4_nl, "iq4_nl", 32, 18, nullptr, nullptr},     // d + 16 (non-linear 4-bit)
    {T::iq3_s, "iq3_s", 256, 110, nullptr, nullptr},     // d + 64 + 32 + 8 + 4
    {T::iq2_s, "iq2_s", 256, 82, nullptr, nullptr},      // d + 64 + 16
    {T::iq4_xs, "iq4_xs", 256, 136, nullptr, nullptr},   // d + scales_h + 4 + 128
    {T::i8, "i8", 1, 1, nullptr, nullptr},
    {T::i16, "i16", 1, 2, nullptr, nullptr},
    {T::i32, "i32", 1, 4, nullptr, nullptr},
    {T::i64, "i64", 1, 8, nullptr, nullptr},
    {T::f64, "f64", 1, 8, nullptr, nullptr},
    {T::iq1_m, "iq1_m", 256, 56, nullptr, nullptr},  // 256/8 + 256/16 + 256/32, no f16 d
    {T::bf16, "bf16", 1, 2, FISH_DQ(uint16_t, bf16), FISH_Q(uint16_t, bf16)},
    {T::tq1_0, "tq1_0", 256, 54, nullptr, nullptr},  // ternary, base-3 packed: 4*13 + d
    {T::tq2_0, "tq2_0", 256, 66, nullptr, nullptr},  // ternary, 2 bits: 64 + d
    {T::mxfp4, "mxfp4", 32, 17, nullptr, nullptr},   // e8m0 scale + 16 bytes of e2m1 nibbles
    {T::fq3, "fq3", 256, 112, FISH_DQ(BlockFQ3, fq3), FISH_Q(BlockFQ3, fq3)},  // FISH's own
    {T::fish_i4_g32, "fish_i4_g32", 32, sizeof(BlockFishI4<32>),
     &dequant_erased<BlockFishI4<32>, &dequantize_row_fish_i4<32>>,
     &quant_erased<BlockFishI4<32>, &quantize_row_fish_i4_ref<32>>},
    {T::fish_i4_g64, "fish_i4_g64", 64, sizeof(BlockFishI4<64>),
     &dequant_erased<BlockFishI4<64>, &dequantize_row_fish_i4<64>>,
     &quant_erased<BlockFishI4<64>, &quantize_row_fish_i4_ref<64>>},
    {T::fish_i4_g128, "fish_i4_g128", 128, sizeof(BlockFishI4<128>),
     &dequant_erased<BlockFishI4<128>, &dequantize_row_fish_i4<128>>,
     &quant_erased<BlockFishI4<128>, &quantize_row_fish_i4_ref<128>>},
    {T::fish_i4fp_g32, "fish_i4fp_g32", 32, sizeof(BlockFishI4Fp<32>),
     &dequant_erased<BlockFishI4Fp<32>, &dequantize_row_fish_i4fp<32>>,
     &quant_erased<BlockFishI4Fp<32>, &quantize_row_fish_i4fp_ref<32>>},
    {T::fish_i4fp_g64, "fish_i4fp_g64", 64, sizeof(BlockFishI4Fp<64>),
     &dequant_erased<BlockFishI4Fp<64>, &dequantize_row_fish_i4fp<64>>,
     &quant_erased<BlockFishI4Fp<64>, &quantize_row_fish_i4fp_ref<64>>},
    {T::fish_i4fp_g128, "fish_i4fp_g128", 128, sizeof(BlockFishI4Fp<128>),
     &dequant_erased<BlockFishI4Fp<128>, &dequantize_row_fish_i4fp<128>>,
     &quant_erased<BlockFishI4Fp<128>, &quantize_row_fish_i4fp_ref<128>>},
};

#undef FISH_DQ
#undef FISH_Q

constexpr bool table_in_id_order() {
  for (size_t i = 1; i < std::size(kTypes); ++i) {
    if (uint32_t(kTypes[i - 1].type) >= uint32_t(kTypes[i].type)) return false;
  }
  return true;
}
static_assert(table_in_id_order(), "kTypes must be sorted by GGML id (find_type relies on it)");

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::span<const TypeInfo> all_types() {
  return kTypes;
}

const TypeInfo* find_type(uint32_t id) {
  const auto* it =
      std::lower_bound(std::begin(kTypes), std::end(kTypes), id,
                       [](const TypeInfo& t, uint32_t v) { return uint32_t(t.type) < v; });
  return (it != std::end(kTypes) && uint32_t(it->type) == id) ? it : nullptr;
}

const TypeInfo& type_info(GgmlType t) {
  const TypeInfo* info = find_type(uint32_t(t));
  assert(info != nullptr && "type_info: not a known GgmlType");
  return *info;
}

std::optional<GgmlType> parse_type_name(std::string_view name) {
  for (const TypeInfo& t : kTypes) {
    if (iequals(t.name, name)) return t.type;
  }
  return std::nullopt;
}

size_t row_bytes(GgmlType t, int64_t n) {
  const TypeInfo& info = type_info(t);
  assert(n >= 0 && n % info.block_elems == 0);
  return size_t(n / info.block_elems) * info.block_bytes;
}

Status dequantize_row_checked(GgmlType t, const void* src, float* dst, int64_t n,
                              std::string_view what) {
  const TypeInfo* info = find_type(uint32_t(t));
  if (info == nullptr) {
    return make_error("dequantize: {}: unknown type id {}", what, uint32_t(t));
  }
  if (info->dequantize_row == nullptr) {
    return make_error("dequantize: {}: type {} (id {}) is not supported by FISH (no dequantiser)",
                      what, info->name, uint32_t(t));
  }
  if (n < 0 || n % info->block_elems != 0) {
    return make_error("dequantize: {}: type {}: {} values is not a multiple of the block size {}",
                      what, info->name, n, info->block_elems);
  }
  info->dequantize_row(src, dst, n);
  return Status::success();
}

}  // namespace fish
