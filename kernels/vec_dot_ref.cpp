// Scalar reference dot products (one weight row x one activation row), ported from ggml-quants.c
// ggml_vec_dot_*_generic. Each block's integer dot is exact; it is then scaled by the weight and
// activation scales in f32 and summed in block order. The SIMD variants must match these within
// float summation-order error; these in turn match the f32 dot of the dequantised rows.
#include <cassert>
#include <cstring>

#include "kernels/vec_dot.h"
#include "quant/f16.h"
#include "quant/fq3.h"
#include "quant/q2_k.h"
#include "quant/q3_k.h"
#include "quant/q4_k.h"
#include "quant/q5_k.h"
#include "quant/q6_k.h"

namespace fish {

float vec_dot_q4_0_q8_0_ref(int64_t n, const void* w, const void* x) {
  assert(n % kQK4_0 == 0);
  const auto* a = static_cast<const BlockQ4_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      sumi += ((a[i].qs[j] & 0xF) - 8) * b[i].qs[j];
      sumi += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + kQK4_0 / 2];
    }
    sum += float(sumi) * (f16_to_f32(a[i].d) * f16_to_f32(b[i].d));
  }
  return sum;
}

float vec_dot_q4_1_q8_1_ref(int64_t n, const void* w, const void* x) {
  assert(n % kQK4_1 == 0);
  const auto* a = static_cast<const BlockQ4_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK4_1; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      sumi += (a[i].qs[j] & 0xF) * b[i].qs[j];
      sumi += (a[i].qs[j] >> 4) * b[i].qs[j + kQK4_1 / 2];
    }
    // sum_j (d q_j + m) * db a_j = d db sumi + m * (db sum_j a_j) = d db sumi + m s
    sum += float(sumi) * (f16_to_f32(a[i].d) * f16_to_f32(b[i].d)) +
           f16_to_f32(a[i].m) * f16_to_f32(b[i].s);
  }
  return sum;
}

namespace {
uint32_t load_qh(const uint8_t qh[4]) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;  // little-endian, as ggml stores it
}
}  // namespace

float vec_dot_q5_0_q8_0_ref(int64_t n, const void* w, const void* x) {
  assert(n % kQK5_0 == 0);
  const auto* a = static_cast<const BlockQ5_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK5_0; ++i) {
    const uint32_t qh = load_qh(a[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const int h0 = int((qh >> j) & 1u) << 4;
      const int h1 = int((qh >> (j + 16)) & 1u) << 4;
      sumi += (((a[i].qs[j] & 0xF) | h0) - 16) * b[i].qs[j];
      sumi += (((a[i].qs[j] >> 4) | h1) - 16) * b[i].qs[j + kQK5_0 / 2];
    }
    sum += float(sumi) * (f16_to_f32(a[i].d) * f16_to_f32(b[i].d));
  }
  return sum;
}

float vec_dot_q5_1_q8_1_ref(int64_t n, const void* w, const void* x) {
  assert(n % kQK5_1 == 0);
  const auto* a = static_cast<const BlockQ5_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK5_1; ++i) {
    const uint32_t qh = load_qh(a[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const int h0 = int((qh >> j) & 1u) << 4;
      const int h1 = int((qh >> (j + 16)) & 1u) << 4;
      sumi += ((a[i].qs[j] & 0xF) | h0) * b[i].qs[j];
      sumi += ((a[i].qs[j] >> 4) | h1) * b[i].qs[j + kQK5_1 / 2];
    }
    sum += float(sumi) * (f16_to_f32(a[i].d) * f16_to_f32(b[i].d)) +
           f16_to_f32(a[i].m) * f16_to_f32(b[i].s);
  }
  return sum;
}

float vec_dot_q8_0_q8_0_ref(int64_t n, const void* w, const void* x) {
  assert(n % kQK8_0 == 0);
  const auto* a = static_cast<const BlockQ8_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK8_0; ++j) sumi += a[i].qs[j] * b[i].qs[j];
    sum += float(sumi) * (f16_to_f32(a[i].d) * f16_to_f32(b[i].d));
  }
  return sum;
}

// ---- K-quants x Q8_K. Per super-block: d * db * sum_s scale_s * dot_s  -  dmin * db * sum_s
// min_s * bsum_s, with integer dot_s / bsum_s (Q8_K's bsums are sums of 16 activations). ----

float vec_dot_q2_k_q8_k_ref(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const BlockQ2_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int summs = 0;
    for (int s = 0; s < 16; ++s) summs += (a[i].scales[s] >> 4) * b[i].bsums[s];
    int isum = 0;
    const int8_t* q8 = b[i].qs;
    for (int h = 0; h < 2; ++h) {  // two halves of 128
      const uint8_t* q2 = a[i].qs + 32 * h;
      for (int k = 0; k < 4; ++k) {  // shift 2k: 32 weights = sub-blocks 8h+2k, 8h+2k+1
        for (int half = 0; half < 2; ++half) {
          const int sc = a[i].scales[8 * h + 2 * k + half] & 0xF;
          int dot = 0;
          for (int l = 0; l < 16; ++l) dot += ((q2[16 * half + l] >> (2 * k)) & 3) * q8[l];
          isum += sc * dot;
          q8 += 16;
        }
      }
    }
    const float dall = b[i].d * f16_to_f32(a[i].d);
    const float dmin = b[i].d * f16_to_f32(a[i].dmin);
    sum += dall * float(isum) - dmin * float(summs);
  }
  return sum;
}

float vec_dot_q3_k_q8_k_ref(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const BlockQ3_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t scales[16];
    unpack_scales_q3_k(a[i].scales, scales);
    int isum = 0;
    const int8_t* q8 = b[i].qs;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q3 = a[i].qs + 32 * h;
      for (int k = 0; k < 4; ++k) {
        const uint8_t mbit = uint8_t(1u << (4 * h + k));
        for (int half = 0; half < 2; ++half) {
          int dot = 0;
          for (int l = 0; l < 16; ++l) {
            const int idx = 16 * half + l;
            const int q = ((q3[idx] >> (2 * k)) & 3) - ((a[i].hmask[idx] & mbit) ? 0 : 4);
            dot += q * q8[l];
          }
          isum += scales[8 * h + 2 * k + half] * dot;
          q8 += 16;
        }
      }
    }
    sum += b[i].d * f16_to_f32(a[i].d) * float(isum);
  }
  return sum;
}

float vec_dot_q4_k_q8_k_ref(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const BlockQ4_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0, summs = 0;
    for (int c = 0; c < 4; ++c) {  // 64-weight chunks: low nibbles = sub-block 2c, high = 2c+1
      uint8_t sc0, m0, sc1, m1;
      get_scale_min_k4(2 * c, a[i].scales, &sc0, &m0);
      get_scale_min_k4(2 * c + 1, a[i].scales, &sc1, &m1);
      const uint8_t* q4 = a[i].qs + 32 * c;
      const int8_t* q8 = b[i].qs + 64 * c;
      int dot0 = 0, dot1 = 0;
      for (int l = 0; l < 32; ++l) {
        dot0 += (q4[l] & 0xF) * q8[l];
        dot1 += (q4[l] >> 4) * q8[32 + l];
      }
      isum += sc0 * dot0 + sc1 * dot1;
      summs += m0 * (b[i].bsums[4 * c] + b[i].bsums[4 * c + 1]) +
               m1 * (b[i].bsums[4 * c + 2] + b[i].bsums[4 * c + 3]);
    }
    const float dall = b[i].d * f16_to_f32(a[i].d);
    const float dmin = b[i].d * f16_to_f32(a[i].dmin);
    sum += dall * float(isum) - dmin * float(summs);
  }
  return sum;
}

// As Q4_K with 3-bit codes in value order: group g's 32 codes meet activations qs[32g .. 32g+31],
// its min the bsums of those 32 values.
float vec_dot_fq3_q8_k_ref(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const BlockFQ3*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0, summs = 0;
    for (int g = 0; g < kFq3Groups; ++g) {
      uint8_t sc, m, q[32];
      get_scale_min_k4(g, a[i].scales, &sc, &m);
      fq3_unpack_group(a[i].q[g], q);
      const int8_t* q8 = b[i].qs + 32 * g;
      int dot = 0;
      for (int l = 0; l < 32; ++l) dot += q[l] * q8[l];
      isum += sc * dot;
      summs += m * (b[i].bsums[2 * g] + b[i].bsums[2 * g + 1]);
    }
    const float dall = b[i].d * f16_to_f32(a[i].d);
    const float dmin = b[i].d * f16_to_f32(a[i].dmin);
    sum += dall * float(isum) - dmin * float(summs);
  }
  return sum;
}

float vec_dot_q5_k_q8_k_ref(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const BlockQ5_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0, summs = 0;
    for (int c = 0; c < 4; ++c) {
      uint8_t sc0, m0, sc1, m1;
      get_scale_min_k4(2 * c, a[i].scales, &sc0, &m0);
      get_scale_min_k4(2 * c + 1, a[i].scales, &sc1, &m1);
      const uint8_t* q4 = a[i].qs + 32 * c;
      const int8_t* q8 = b[i].qs + 64 * c;
      int dot0 = 0, dot1 = 0;
      for (int l = 0; l < 32; ++l) {
        const int h0 = ((a[i].qh[l] >> (2 * c)) & 1) << 4;
        const int h1 = ((a[i].qh[l] >> (2 * c + 1)) & 1) << 4;
        dot0 += ((q4[l] & 0xF) | h0) * q8[l];
        dot1 += ((q4[l] >> 4) | h1) * q8[32 + l];
      }
      isum += sc0 * dot0 + sc1 * dot1;
      summs += m0 * (b[i].bsums[4 * c] + b[i].bsums[4 * c + 1]) +
               m1 * (b[i].bsums[4 * c + 2] + b[i].bsums[4 * c + 3]);
    }
    const float dall = b[i].d * f16_to_f32(a[i].d);
    const float dmin = b[i].d * f16_to_f32(a[i].dmin);
    sum += dall * float(isum) - dmin * float(summs);
  }
  return sum;
}

float vec_dot_q6_k_q8_k_ref(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const BlockQ6_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int h = 0; h < 2; ++h) {  // halves of 128: 4 rows of 32 = sub-blocks 8h + 2r + (l/16)
      const uint8_t* ql = a[i].ql + 64 * h;
      const uint8_t* qh = a[i].qh + 32 * h;
      const int8_t* q8 = b[i].qs + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        const int8_t* sc = a[i].scales + 8 * h + l / 16;
        isum += sc[0] * q0 * q8[l] + sc[2] * q1 * q8[l + 32] + sc[4] * q2 * q8[l + 64] +
                sc[6] * q3 * q8[l + 96];
      }
    }
    sum += b[i].d * f16_to_f32(a[i].d) * float(isum);
  }
  return sum;
}

// ---- float weights x f32 activations: plain sequential f32 sums ----

float vec_dot_f32_f32_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

float vec_dot_f16_f32_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const float*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += f16_to_f32(a[i]) * b[i];
  return sum;
}

float vec_dot_bf16_f32_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const float*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += bf16_to_f32(a[i]) * b[i];
  return sum;
}

}  // namespace fish
