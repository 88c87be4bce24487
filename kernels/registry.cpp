// Registration table: one row per weight type; ISA variants left nullptr fall back to the next
// lower level (every type has a scalar reference).
#include "kernels/registry.h"

#include <array>
#include <cassert>

namespace fish {
namespace {

struct Row {
  GgmlType weight;
  GgmlType act;
  std::array<VecDotFn, kIsaCount> dot;            // scalar, avx2, avx512
  std::array<QuantizeActFn, kIsaCount> quant;     // all nullptr for f32 activations
  std::array<VecDotX4Fn, kIsaCount> dot4 = {};    // optional 4-token variants (no scalar one)
  std::array<VecDotRowsFn, kIsaCount> rows = {};  // optional many-row variants (no scalar one)
};

void quantize_q8_0_ref_fn(const float* x, void* y, int64_t n) {
  quantize_row_q8_0_ref(x, static_cast<BlockQ8_0*>(y), n);
}
void quantize_q8_1_ref_fn(const float* x, void* y, int64_t n) {
  quantize_row_q8_1_ref(x, static_cast<BlockQ8_1*>(y), n);
}
void quantize_q8_k_ref_fn(const float* x, void* y, int64_t n) {
  quantize_row_q8_k_ref(x, static_cast<BlockQ8_K*>(y), n);
}

constexpr std::array<QuantizeActFn, kIsaCount> kQ8_0 = {
    quantize_q8_0_ref_fn, quantize_row_q8_0_avx2, quantize_row_q8_0_avx512};
constexpr std::array<QuantizeActFn, kIsaCount> kQ8_1 = {
    quantize_q8_1_ref_fn, quantize_row_q8_1_avx2, quantize_row_q8_1_avx512};
constexpr std::array<QuantizeActFn, kIsaCount> kQ8_K = {
    quantize_q8_k_ref_fn, quantize_row_q8_k_avx2, quantize_row_q8_k_avx512};
constexpr std::array<QuantizeActFn, kIsaCount> kNoQuant = {nullptr, nullptr, nullptr};

#define FISH_DOTS(w, a) \
  { vec_dot_##w##_##a##_ref, vec_dot_##w##_##a##_avx2, vec_dot_##w##_##a##_avx512 }
#define FISH_DOTS4(w, a) \
  { nullptr, vec_dot_##w##_##a##_x4_avx2, vec_dot_##w##_##a##_x4_avx512 }
#define FISH_ROWS512(w, a) \
  { nullptr, nullptr, vec_dot_##w##_##a##_rows_avx512 }

const Row kRows[] = {
    {GgmlType::f32, GgmlType::f32, FISH_DOTS(f32, f32), kNoQuant},
    {GgmlType::f16, GgmlType::f32, FISH_DOTS(f16, f32), kNoQuant},
    {GgmlType::q4_0, GgmlType::q8_0, FISH_DOTS(q4_0, q8_0), kQ8_0, FISH_DOTS4(q4_0, q8_0),
     FISH_ROWS512(q4_0, q8_0)},
    {GgmlType::q4_1, GgmlType::q8_1, FISH_DOTS(q4_1, q8_1), kQ8_1, FISH_DOTS4(q4_1, q8_1),
     FISH_ROWS512(q4_1, q8_1)},
    {GgmlType::q5_0, GgmlType::q8_0, FISH_DOTS(q5_0, q8_0), kQ8_0, FISH_DOTS4(q5_0, q8_0),
     FISH_ROWS512(q5_0, q8_0)},
    {GgmlType::q5_1, GgmlType::q8_1, FISH_DOTS(q5_1, q8_1), kQ8_1, FISH_DOTS4(q5_1, q8_1),
     FISH_ROWS512(q5_1, q8_1)},
    {GgmlType::q8_0, GgmlType::q8_0, FISH_DOTS(q8_0, q8_0), kQ8_0, FISH_DOTS4(q8_0, q8_0),
     FISH_ROWS512(q8_0, q8_0)},
    {GgmlType::q2_k, GgmlType::q8_k, FISH_DOTS(q2_k, q8_k), kQ8_K},
    {GgmlType::q3_k, GgmlType::q8_k, FISH_DOTS(q3_k, q8_k), kQ8_K},
    {GgmlType::q4_k, GgmlType::q8_k, FISH_DOTS(q4_k, q8_k), kQ8_K, FISH_DOTS4(q4_k, q8_k)},
    {GgmlType::q5_k, GgmlType::q8_k, FISH_DOTS(q5_k, q8_k), kQ8_K, FISH_DOTS4(q5_k, q8_k)},
    {GgmlType::q6_k, GgmlType::q8_k, FISH_DOTS(q6_k, q8_k), kQ8_K, FISH_DOTS4(q6_k, q8_k)},
    {GgmlType::bf16, GgmlType::f32, FISH_DOTS(bf16, f32), kNoQuant},
    {GgmlType::fq3, GgmlType::q8_k, FISH_DOTS(fq3, q8_k), kQ8_K, FISH_DOTS4(fq3, q8_k)},
    // FISH's GGUF int4 (`fish quantize-w4`): scalar here; the W4A8 / W4A16 paths are the fast ones.
    {GgmlType::fish_i4_g32,
     GgmlType::q8_0,
     {vec_dot_fish_i4_g32_q8_0_ref, nullptr, nullptr},
     kQ8_0},
    {GgmlType::fish_i4_g64,
     GgmlType::q8_0,
     {vec_dot_fish_i4_g64_q8_0_ref, nullptr, nullptr},
     kQ8_0},
    {GgmlType::fish_i4_g128,
     GgmlType::q8_0,
     {vec_dot_fish_i4_g128_q8_0_ref, nullptr, nullptr},
     kQ8_0},
    {GgmlType::fish_i4fp_g32,
     GgmlType::q8_0,
     {vec_dot_fish_i4fp_g32_q8_0_ref, nullptr, nullptr},
     kQ8_0},
    {GgmlType::fish_i4fp_g64,
     GgmlType::q8_0,
     {vec_dot_fish_i4fp_g64_q8_0_ref, nullptr, nullptr},
     kQ8_0},
    {GgmlType::fish_i4fp_g128,
     GgmlType::q8_0,
     {vec_dot_fish_i4fp_g128_q8_0_ref, nullptr, nullptr},
     kQ8_0},
};
#undef FISH_DOTS
#undef FISH_DOTS4
#undef FISH_ROWS512

constexpr size_t kRowCount = sizeof(kRows) / sizeof(kRows[0]);

struct Table {
  std::array<std::array<MatvecKernel, kIsaCount>, kRowCount> kernels;
  std::array<GgmlType, kRowCount> types;
};

const Row* find_row(GgmlType weight) {
  for (const Row& r : kRows) {
    if (r.weight == weight) return &r;
  }
  return nullptr;
}

Table build_table() {
  Table t;
  for (size_t i = 0; i < kRowCount; ++i) {
    const Row& r = kRows[i];
    t.types[i] = r.weight;
    for (int want = 0; want < kIsaCount; ++want) {
      int level = want;
      while (level > 0 && (!isa_supported(Isa(level)) || r.dot[size_t(level)] == nullptr ||
                           (r.act != GgmlType::f32 && r.quant[size_t(level)] == nullptr))) {
        --level;
      }
      MatvecKernel& k = t.kernels[i][size_t(want)];
      k.weight = r.weight;
      k.act = r.act;
      k.isa = Isa(level);
      k.vec_dot = r.dot[size_t(level)];
      k.vec_dot_x4 = r.dot4[size_t(level)];
      k.vec_dot_rows = r.rows[size_t(level)];
      k.quantize_act = r.quant[size_t(level)];
      k.block_elems = type_info(r.act).block_elems > type_info(r.weight).block_elems
                          ? type_info(r.act).block_elems
                          : type_info(r.weight).block_elems;
    }
  }
  // Sort the type list by id so callers iterate in a stable, documented order.
  for (size_t i = 1; i < kRowCount; ++i) {
    for (size_t j = i; j > 0 && uint32_t(t.types[j]) < uint32_t(t.types[j - 1]); --j) {
      std::swap(t.types[j], t.types[j - 1]);
    }
  }
  return t;
}

const Table& table() {
  static const Table t = build_table();
  return t;
}

}  // namespace

const MatvecKernel& matvec_kernel(GgmlType weight, Isa isa) {
  const Row* r = find_row(weight);
  assert(r != nullptr && "no matvec kernel for this weight type (check has_matvec_kernel)");
  return table().kernels[size_t(r - kRows)][size_t(isa)];
}

bool has_matvec_kernel(GgmlType weight) {
  return find_row(weight) != nullptr;
}

std::span<const GgmlType> matvec_weight_types() {
  return table().types;
}

}  // namespace fish
