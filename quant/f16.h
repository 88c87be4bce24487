// Scalar IEEE binary16 (f16) and bfloat16 (bf16) <-> f32 conversions, bit-exact with ggml's
// reference (ggml_compute_fp32_to_fp16 / ggml_compute_fp32_to_bf16) and numpy's astype.
//
// f32 -> f16 rounds to nearest, ties to even; overflow gives +-inf; subnormals are kept; NaN
// stays NaN (quiet). f32 -> bf16 rounds to nearest even on the dropped 16 bits; NaN is quieted
// (ggml: keep the top 16 bits and set bit 6, the bf16 quiet bit).
#pragma once

#include <cstdint>
#include <cstring>

namespace fish {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Exact: every f16 value is representable as f32. Rebiases the exponent with integer adds
// (F. Giesen's half_to_float_fast); subnormals are renormalised by one exact f32 subtraction.
inline float f16_to_f32(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;  // f16 exponent field, in f32 position
  uint32_t o = uint32_t(h & 0x7fffu) << 13;        // exponent and mantissa
  const uint32_t exp = kShiftedExp & o;
  o += (127u - 15u) << 23;                            // rebias 15 -> 127
  o += exp == kShiftedExp ? (128u - 16u) << 23 : 0u;  // inf / NaN: exponent all ones
  // Subnormal: 2^-14 * (1 + m/1024) - 2^-14 = m * 2^-24, exactly. Selects, not branches, so
  // row loops vectorise.
  const uint32_t sub = f32_bits(f32_from_bits(o + (1u << 23)) - f32_from_bits(113u << 23));
  o = exp == 0 ? sub : o;
  return f32_from_bits(o | (uint32_t(h & 0x8000u) << 16));
}

// Round to nearest even, like the hardware F16C vcvtps2ph with rounding mode 0.
inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN, quiet
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to inf (and inf)
  if (abs < 0x38800000u) {
    // Result is an f16 subnormal (or zero): value / 2^-24, rounded to nearest even.
    if (abs < 0x33000000u) return uint16_t(sign);  // < 2^-25: rounds to zero (tie at 2^-25 -> 0)
    const uint32_t exp = abs >> 23;                // biased f32 exponent, 102..112
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;  // 24-bit significand with implicit 1
    const uint32_t shift = 126 - exp;  // bits to drop so the lsb is 2^-24: 14..24
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return uint16_t(sign | q);  // q may reach 0x400: the smallest normal, still correct
  }
  // Normal: rebias exponent, round 23-bit mantissa to 10 bits (carry may bump the exponent).
  uint32_t r = abs - ((127u - 15u) << 23);
  r += 0xfffu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
}

inline float bf16_to_f32(uint16_t h) {
  return f32_from_bits(uint32_t(h) << 16);
}

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 64u);  // NaN: force quiet
  return uint16_t((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

}  // namespace fish

namespace fish {

// Rows of plain float types (GGML f32/f16/bf16: block of 1 value). Any n >= 0.
void dequantize_row_f32(const float* x, float* y, int64_t n);
void quantize_row_f32_ref(const float* x, float* y, int64_t n);
void dequantize_row_f16(const uint16_t* x, float* y, int64_t n);
void quantize_row_f16_ref(const float* x, uint16_t* y, int64_t n);
void dequantize_row_bf16(const uint16_t* x, float* y, int64_t n);
void quantize_row_bf16_ref(const float* x, uint16_t* y, int64_t n);

}  // namespace fish
