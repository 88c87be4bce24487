// FQ3 (FISH type, id kFishTypeFq3 in quant/types.h): FISH's own 3-bit format for on-line
// re-quantisation (seed 000 "FQ3"). Super-blocks of 256 values = 8 groups of 32;
// value = d * sc[g] * q - dmin * m[g], q in 0..7, sc/m 6-bit in Q4_K's 12-byte packing
// (get_scale_min_k4). 3.5 bits per weight.
// Layout of a group's three little-endian words A, B, C: values 4s..4s+3 (s = 0..7) are the four
// bytes of ((s < 4 ? A : B) >> 2(s&3)) & 0x03030303 | ((C >> s) & 0x01010101) << 2, i.e. byte j
// of A holds the low 2 bits of values j, 4+j, 8+j, 12+j (bit pairs 0..3), B those of 16+j .. 28+j,
// and bit s of C's byte j is the high bit of value 4s+j. A shader builds four values with two
// masks and one unpackUnorm4x8; a SIMD kernel builds 32 with two variable shifts.
#pragma once

#include <cstdint>

#include "quant/k_quants.h"

namespace fish {

inline constexpr int kFq3Groups = 8;  // 32-value groups per super-block
inline constexpr int kFq3Nmax = 7;    // codes 0..7
// The per-group fit's candidate inverse scales: (kFq3Rmin + 0.1 * is + 7) / (max - min), is = 0..
// kFq3Nstep (make_qkx2_quants); shared with the SIMD quantisers (kernels/quantize_fast_lanes.h).
// Q4_K's grid: on N(0,1) weights it gave relative RMS 14.775% vs 14.794% for Q5_K's (-0.5, 15).
inline constexpr float kFq3Rmin = -1.0f;
inline constexpr int kFq3Nstep = 20;

struct BlockFQ3 {
  uint16_t d;                   // f16 super-block scale for the group scales
  uint16_t dmin;                // f16 super-block scale for the group mins
  uint8_t scales[kKScaleSize];  // 8 scales + 8 mins, 6 bits each (Q4_K packing)
  uint32_t q[kFq3Groups][3];    // per group: A, B, C (see layout above)
};
static_assert(sizeof(BlockFQ3) == 112, "FQ3 is 112 bytes per 256 values (seed 000)");

// The 32 codes (0..7) of one group, in value order, from its words A, B, C.
inline void fq3_unpack_group(const uint32_t abc[3], uint8_t q[32]) {
  for (int s = 0; s < 8; ++s) {
    const uint32_t four = (((s < 4 ? abc[0] : abc[1]) >> (2 * (s & 3))) & 0x03030303u) |
                          (((abc[2] >> s) & 0x01010101u) << 2);
    for (int j = 0; j < 4; ++j) q[4 * s + j] = uint8_t(four >> (8 * j));
  }
}

// Inverse of fq3_unpack_group. Precondition: every q[i] <= 7.
void fq3_pack_group(const uint8_t q[32], uint32_t abc[3]);

// n % kQK_K == 0 for all three.
void dequantize_row_fq3(const BlockFQ3* x, float* y, int64_t n);
// Per group a least-squares (scale, min) fit over a grid of candidate scales (make_qkx2_quants,
// weighted by rms + |x| as Q4_K), then the scales and mins quantised to 6 bits under f16
// super-scales (quantize_superblock_k4, Q4_K's scheme with 8 levels).
void quantize_row_fq3_ref(const float* x, BlockFQ3* y, int64_t n);
// As quantize_row_fq3_ref with each value's fit weight multiplied by importance[i] (n values,
// each >= 0; e.g. the mean squared activation of the input column), for an activation-aware fit.
void quantize_row_fq3_weighted(const float* x, BlockFQ3* y, int64_t n, const float* importance);

}  // namespace fish
