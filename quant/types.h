// The tensor element types FISH knows: GGML's type ids (as stored in GGUF) plus FISH's own
// formats, one registration table with block geometry and the scalar reference (de)quantisers.
//
// Spelling: one lowercase name per type everywhere (C++, GLSL, JSON, result columns): "q4_k".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace fish {

// FISH's own formats have ids from kFishTypeBase up ("FI" in the high half), far above GGML's
// (< 64), so no GGML type added upstream can collide; only FISH reads or writes them.
inline constexpr uint32_t kFishTypeBase = 0x46490000;

// Values are GGML's ggml_type ids (ggml.h) and FISH's own; they are what a GGUF tensor info stores.
enum class GgmlType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  /* 4, 5 removed upstream */ q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq1_s = 19,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  iq1_m = 29,
  bf16 = 30,
  tq1_0 = 34,
  tq2_0 = 35,
  mxfp4 = 39,
  fq3 = kFishTypeBase + 1,  // FISH's 3-bit re-quantisation format (quant/fq3.h)
  // Packed int4 groups (quant/int4.h BlockFishI4), written by `fish quantize-w4`: base + group.
  fish_i4_g32 = kFishTypeBase + 32,
  fish_i4_g64 = kFishTypeBase + 64,
  fish_i4_g128 = kFishTypeBase + 128,
  fish_i4fp_g32 = kFishTypeBase + 256 + 32,  // float zero point: w = d * q + m (quant/int4.h)
  fish_i4fp_g64 = kFishTypeBase + 256 + 64,
  fish_i4fp_g128 = kFishTypeBase + 256 + 128,
};

// True for FISH's own formats (not GGML's; unknown to llama.cpp and the gguf package).
inline constexpr bool is_fish_type(GgmlType t) {
  return uint32_t(t) >= kFishTypeBase;
}
// The packed int4 types with a float zero point (fish_i4fp_g32/64/128: w = d * q + m).
inline constexpr bool is_fish_i4fp_type(GgmlType t) {
  return t == GgmlType::fish_i4fp_g32 || t == GgmlType::fish_i4fp_g64 ||
         t == GgmlType::fish_i4fp_g128;
}
// True for the packed int4 types (fish_i4_g32/64/128 and fish_i4fp_g32/64/128); fq3 is a FISH
// type but not one of them.
inline constexpr bool is_fish_i4_type(GgmlType t) {
  return t == GgmlType::fish_i4_g32 || t == GgmlType::fish_i4_g64 || t == GgmlType::fish_i4_g128 ||
         is_fish_i4fp_type(t);
}

// Converts n values (n % block_elems == 0) from one packed row to f32.
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
// Reference quantiser: n floats (n % block_elems == 0) to packed blocks.
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);

struct TypeInfo {
  GgmlType type;
  std::string_view name;           // "q4_k"
  int64_t block_elems;             // values per block (1 for f32/f16/bf16/ints)
  size_t block_bytes;              // bytes per block
  DequantizeRowFn dequantize_row;  // nullptr: FISH cannot decode this type
  QuantizeRowFn quantize_row;      // nullptr: no reference quantiser
  bool is_quantized() const { return block_elems > 1; }
  double bits_per_weight() const { return 8.0 * double(block_bytes) / double(block_elems); }
};

// Every type FISH knows the geometry of (all GGML types), in id order.
std::span<const TypeInfo> all_types();
// nullptr when the id is not a known type (a GGUF naming such a type is malformed).
const TypeInfo* find_type(uint32_t id);
const TypeInfo& type_info(GgmlType t);                           // precondition: t is a known type
std::optional<GgmlType> parse_type_name(std::string_view name);  // "q4_k" or "Q4_K"
inline std::string_view type_name(GgmlType t) {
  return type_info(t).name;
}

// Bytes of a row of n values; precondition n % block_elems == 0.
size_t row_bytes(GgmlType t, int64_t n);

}  // namespace fish
