// Test helpers for the kernel suites: random weight rows in any type, dequantisation, and the
// float-summation error bound the SIMD-vs-reference comparisons use.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

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
#include "quant/types.h"

namespace fish::test {

enum class Fill {
  kQuantised,   // N(0,1) floats through the type's reference quantiser: realistic blocks
  kRandomBits,  // uniformly random block bytes (every code, incl. q8_0's -128), sane f16 scales
};

inline std::vector<float> random_floats(int64_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// One shape of the int4 kernel tests (W4A8 / W4A16): N outputs, K inputs, M tokens, format.
struct Int4Case {
  int64_t n_out, n_in, n_tok;
  Int4Format fmt;
  std::string label() const {
    return "N=" + std::to_string(n_out) + " K=" + std::to_string(n_in) +
           " M=" + std::to_string(n_tok) + " g=" + std::to_string(fmt.group_size) + " " +
           std::string(int4_zero_point_name(fmt.zero_point));
  }
};

// Overwrites the f16 scale fields of random-bit blocks with finite values in [-0.1, 0.1]
// (d) / [0, 0.1] (dmin, m), so dequantised rows are finite.
inline void sanitize_scales(GgmlType t, uint8_t* data, int64_t n_blocks, std::mt19937& rng) {
  std::uniform_real_distribution<float> ud(-0.1f, 0.1f);
  auto put = [&](size_t block_bytes, size_t offset, bool positive) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      const float v = positive ? std::fabs(ud(rng)) : ud(rng);
      const uint16_t h = f32_to_f16(v);
      std::memcpy(data + size_t(b) * block_bytes + offset, &h, 2);
    }
  };
  switch (t) {
    case GgmlType::q4_0:
      put(sizeof(BlockQ4_0), offsetof(BlockQ4_0, d), false);
      break;
    case GgmlType::q4_1:
      put(sizeof(BlockQ4_1), offsetof(BlockQ4_1, d), false);
      put(sizeof(BlockQ4_1), offsetof(BlockQ4_1, m), false);
      break;
    case GgmlType::q5_0:
      put(sizeof(BlockQ5_0), offsetof(BlockQ5_0, d), false);
      break;
    case GgmlType::q5_1:
      put(sizeof(BlockQ5_1), offsetof(BlockQ5_1, d), false);
      put(sizeof(BlockQ5_1), offsetof(BlockQ5_1, m), false);
      break;
    case GgmlType::q8_0:
      put(sizeof(BlockQ8_0), offsetof(BlockQ8_0, d), false);
      break;
    case GgmlType::q2_k:
      put(sizeof(BlockQ2_K), offsetof(BlockQ2_K, d), false);
      put(sizeof(BlockQ2_K), offsetof(BlockQ2_K, dmin), true);
      break;
    case GgmlType::q3_k:
      put(sizeof(BlockQ3_K), offsetof(BlockQ3_K, d), false);
      break;
    case GgmlType::q4_k:
      put(sizeof(BlockQ4_K), offsetof(BlockQ4_K, d), false);
      put(sizeof(BlockQ4_K), offsetof(BlockQ4_K, dmin), true);
      break;
    case GgmlType::q5_k:
      put(sizeof(BlockQ5_K), offsetof(BlockQ5_K, d), false);
      put(sizeof(BlockQ5_K), offsetof(BlockQ5_K, dmin), true);
      break;
    case GgmlType::q6_k:
      put(sizeof(BlockQ6_K), offsetof(BlockQ6_K, d), false);
      break;
    case GgmlType::fq3:
      put(sizeof(BlockFQ3), offsetof(BlockFQ3, d), false);
      put(sizeof(BlockFQ3), offsetof(BlockFQ3, dmin), true);
      break;
    case GgmlType::fish_i4_g32:
      put(sizeof(BlockFishI4<32>), offsetof(BlockFishI4<32>, d), false);
      break;
    case GgmlType::fish_i4_g64:
      put(sizeof(BlockFishI4<64>), offsetof(BlockFishI4<64>, d), false);
      break;
    case GgmlType::fish_i4_g128:
      put(sizeof(BlockFishI4<128>), offsetof(BlockFishI4<128>, d), false);
      break;
    case GgmlType::fish_i4fp_g32:
      put(sizeof(BlockFishI4Fp<32>), offsetof(BlockFishI4Fp<32>, d), false);
      put(sizeof(BlockFishI4Fp<32>), offsetof(BlockFishI4Fp<32>, m), false);
      break;
    case GgmlType::fish_i4fp_g64:
      put(sizeof(BlockFishI4Fp<64>), offsetof(BlockFishI4Fp<64>, d), false);
      put(sizeof(BlockFishI4Fp<64>), offsetof(BlockFishI4Fp<64>, m), false);
      break;
    case GgmlType::fish_i4fp_g128:
      put(sizeof(BlockFishI4Fp<128>), offsetof(BlockFishI4Fp<128>, d), false);
      put(sizeof(BlockFishI4Fp<128>), offsetof(BlockFishI4Fp<128>, m), false);
      break;
    default:
      break;
  }
}

// n_rows rows of n weights of type t.
inline std::vector<uint8_t> make_weights(GgmlType t, int64_t n_rows, int64_t n, Fill fill,
                                         std::mt19937& rng) {
  const TypeInfo& ti = type_info(t);
  const size_t row = row_bytes(t, n);
  std::vector<uint8_t> out(row * size_t(n_rows));
  const bool float_type = !ti.is_quantized();
  if (fill == Fill::kQuantised || float_type) {
    for (int64_t r = 0; r < n_rows; ++r) {
      const std::vector<float> f = random_floats(n, rng);
      ti.quantize_row(f.data(), out.data() + size_t(r) * row, n);
    }
  } else {
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t& b : out) b = uint8_t(byte(rng));
    sanitize_scales(t, out.data(), n_rows * (n / ti.block_elems), rng);
  }
  return out;
}

inline std::vector<float> dequantize(GgmlType t, const void* data, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  type_info(t).dequantize_row(data, out.data(), n);
  return out;
}

// Error bound for two f32 evaluations of the same sum: each adds n_roundings rounding steps of
// relative size 2^-24 to terms of total magnitude `magnitude` (Higham's gamma_n), doubled.
inline double summation_bound(int64_t n_roundings, double magnitude) {
  return 2.0 * double(n_roundings + 8) * 0x1p-24 * magnitude + 1e-30;
}

}  // namespace fish::test

namespace fish::test {

// Sum of |term| magnitudes of a weight row x activation row dot, generous enough to cover the
// intermediate terms of formats with a minimum (d*q and m separately): sum_i (|w_i| + 2 *
// max|w| of i's weight block) * |x_i|.
inline double dot_magnitude(GgmlType wtype, const std::vector<float>& w,
                            const std::vector<float>& x) {
  const int64_t be = type_info(wtype).block_elems;
  double mag = 0.0;
  for (size_t b = 0; b < w.size(); b += size_t(be)) {
    double wmax = 0.0;
    for (size_t i = b; i < b + size_t(be); ++i) wmax = std::fmax(wmax, std::fabs(double(w[i])));
    for (size_t i = b; i < b + size_t(be); ++i) {
      mag += (std::fabs(double(w[i])) + (be > 1 ? 2.0 * wmax : 0.0)) * std::fabs(double(x[i]));
    }
  }
  return mag;
}

inline double dot_f64(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

}  // namespace fish::test
