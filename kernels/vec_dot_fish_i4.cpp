// Dot products of FISH's GGUF int4 rows (fish_i4_g32/64/128, quant/int4.h BlockFishI4) with q8_0
// activations: the scalar path that lets the GGUF engine path run a `fish quantize-w4` file
// as it is. The fast paths for these weights are W4A8 / W4A16 (kernels/w4a8.h, w4a16.h), which
// take the same codes re-laid-out at load.
// Per group: sum over its 32-value activation blocks of d_w * d_a * sum((q - z) * a), exact int32
// inner sums; the fp types (fish_i4fp, w = d q + m): d_w * d_a * sum(q a) + m * d_a * sum(a).
#include <cassert>

#include "kernels/vec_dot.h"
#include "quant/f16.h"
#include "quant/int4.h"

namespace fish {
namespace {

template <int G>
float vec_dot_fish_i4_q8_0(int64_t n, const void* w, const void* x) {
  assert(n % G == 0);
  const auto* wb = static_cast<const BlockFishI4<G>*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / G; ++b) {
    const float dw = f16_to_f32(wb[b].d);
    const int z = wb[b].z;
    for (int c = 0; c < G / 32; ++c) {
      const BlockQ8_0& a = xb[b * (G / 32) + c];
      int32_t isum = 0;
      for (int j = 0; j < 16; ++j) {
        const uint8_t byte = wb[b].qs[c * 16 + j];
        isum += ((byte & 0xF) - z) * a.qs[j] + ((byte >> 4) - z) * a.qs[j + 16];
      }
      acc += dw * f16_to_f32(a.d) * float(isum);
    }
  }
  return acc;
}

template <int G>
float vec_dot_fish_i4fp_q8_0(int64_t n, const void* w, const void* x) {
  assert(n % G == 0);
  const auto* wb = static_cast<const BlockFishI4Fp<G>*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / G; ++b) {
    const float dw = f16_to_f32(wb[b].d);
    const float m = f16_to_f32(wb[b].m);
    for (int c = 0; c < G / 32; ++c) {
      const BlockQ8_0& a = xb[b * (G / 32) + c];
      int32_t isum = 0, asum = 0;
      for (int j = 0; j < 16; ++j) {
        const uint8_t byte = wb[b].qs[c * 16 + j];
        isum += (byte & 0xF) * a.qs[j] + (byte >> 4) * a.qs[j + 16];
        asum += a.qs[j] + a.qs[j + 16];
      }
      const float da = f16_to_f32(a.d);
      acc += dw * da * float(isum) + m * da * float(asum);
    }
  }
  return acc;
}

}  // namespace

float vec_dot_fish_i4fp_g32_q8_0_ref(int64_t n, const void* w, const void* x) {
  return vec_dot_fish_i4fp_q8_0<32>(n, w, x);
}
float vec_dot_fish_i4fp_g64_q8_0_ref(int64_t n, const void* w, const void* x) {
  return vec_dot_fish_i4fp_q8_0<64>(n, w, x);
}
float vec_dot_fish_i4fp_g128_q8_0_ref(int64_t n, const void* w, const void* x) {
  return vec_dot_fish_i4fp_q8_0<128>(n, w, x);
}

float vec_dot_fish_i4_g32_q8_0_ref(int64_t n, const void* w, const void* x) {
  return vec_dot_fish_i4_q8_0<32>(n, w, x);
}
float vec_dot_fish_i4_g64_q8_0_ref(int64_t n, const void* w, const void* x) {
  return vec_dot_fish_i4_q8_0<64>(n, w, x);
}
float vec_dot_fish_i4_g128_q8_0_ref(int64_t n, const void* w, const void* x) {
  return vec_dot_fish_i4_q8_0<128>(n, w, x);
}

}  // namespace fish
