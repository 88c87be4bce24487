// Shared geometry and scale helpers of the K-quant family (Q2_K .. Q8_K): super-blocks of
// kQK_K = 256 weights split into sub-blocks of 16 or 32, whose scales are themselves quantised.
#pragma once

#include <cstdint>
#include <cstring>

namespace fish {

inline constexpr int kQK_K = 256;       // weights per super-block
inline constexpr int kKScaleSize = 12;  // bytes of packed 6-bit scales+mins (Q4_K, Q5_K)

// Q4_K/Q5_K: 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min packed into 12 bytes:
// bytes 0..3 hold scales 0..3 (low 6 bits), bytes 4..7 mins 0..3 (low 6 bits); for j = 4..7
// byte 8+(j-4) holds scale j low nibble / min j high nibble, and the 2 high bits of scale j / min j
// are the top 2 bits of bytes j-4 / j. (ggml-quants.c get_scale_min_k4.)
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q3_K: 16 sub-blocks of 16, each with a 6-bit scale stored with an offset of 32 in 12 bytes:
// bytes 0..7 hold the low nibbles (scale j in byte j%8, low nibble for j<8, high for j>=8), bytes
// 8..11 the 2 high bits (scale j in byte 8 + j%4, bit pair j/4). Returns the signed scales
// (already minus 32), as ggml's dequantize_row_q3_K computes them.
inline void unpack_scales_q3_k(const uint8_t* packed12, int8_t out[16]) {
  constexpr uint32_t kmask1 = 0x03030303;
  constexpr uint32_t kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, packed12, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  uint8_t raw[16];
  std::memcpy(raw, aux, 16);
  for (int i = 0; i < 16; ++i) out[i] = int8_t(int(raw[i]) - 32);
}

// Helpers of ggml's K-quant reference quantisers (ggml-quants.c), shared by q2_k .. q6_k.cpp.

// Round to nearest, ties to even, by the 1.5*2^23 trick; precondition |v| <= 4194303.
inline int nearest_int(float v) {
  const float shifted = v + 12582912.f;  // 1.5 * 2^23: the integer lands in the low mantissa bits
  int32_t i;
  std::memcpy(&i, &shifted, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

// Symmetric quantisation of n values to L[i] in 0..2*nmax-1 (value = scale * (L - nmax)) with a
// scale search minimising the weighted squared error; weights qw, or by rmse_type when qw is null
// (1: x^2, 2: 1, 3: |x|, else sqrt|x|). rmse_type 0: no search. Returns the scale.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* qw);

// As make_qx_quants with weights x^2 and coordinate-descent refinement (do_rmse), for Q3_K.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse);

// Asymmetric quantisation of n values to L[i] in 0..nmax (value = scale * L - the_min), searching
// nstep+1 scales (rmin + rdelta*is + nmax)/(max - min) for the least weighted squared (or absolute,
// use_mad) error, each with the least-squares scale and min. Returns the scale; Laux is scratch
// (n).
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad);

// Packs 8 six-bit scales and mins (each 0..63) into the 12-byte layout read by get_scale_min_k4.
void pack_scale_min_k4(const uint8_t ls[8], const uint8_t lm[8], uint8_t out[12]);

// The shared half of ggml's Q4_K / Q5_K reference quantisers for one 256-value super-block: fits
// (scale, min) per 32-value sub-block with make_qkx2_quants(nmax, rmin, 0.1, nstep) weighted by
// rms + |x|, stores them as 6-bit values under f16 super-scales (*d, *dmin, scales12), and writes
// each value's level 0..nmax against the stored scales to L (256). The caller packs L.
// Q4_K: nmax 15, rmin -1, nstep 20; Q5_K: nmax 31, rmin -0.5, nstep 15; FQ3: see quant/fq3.cpp.
// importance (256 values >= 0, or nullptr): multiplies each value's fit weight (activation-aware
// fits); nullptr is ggml's behaviour.
void quantize_superblock_k4(const float* x, int nmax, float rmin, int nstep, uint16_t* d,
                            uint16_t* dmin, uint8_t scales12[12], uint8_t L[256],
                            const float* importance = nullptr);

}  // namespace fish
