// x16 K-quant layout: packing, unpacking, the scalar tile kernels and the threaded matmul; see
// kquant_x16.h. The scalar kernels are the arithmetic of kernels/vec_dot_ref.cpp read from the
// interleaved bytes (compiled with -ffp-contract=off, like the AVX2 file).
#include "kernels/kquant_x16.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstring>
#include <vector>

#include "base/env_knobs.h"
#include "kernels/amx.h"
#include "quant/f16.h"
#include "quant/k_quants.h"
#include "quant/q4_k.h"
#include "quant/q5_0.h"
#include "quant/q5_k.h"
#include "quant/q6_k.h"
#include "quant/q8_0.h"

namespace fish {
namespace {

constexpr int R = int(kKx16Rows);

// Offsets inside one panel super-block (see kquant_x16.h).
namespace q4 {
constexpr size_t d = 0, dmin = 32, sc = 64, mn = 192, qs = 320, bytes = 2368;
}
namespace q5 {
constexpr size_t d = 0, dmin = 32, sc = 64, mn = 192, qh = 320, qs = 832, bytes = 2880;
}
namespace q6 {
constexpr size_t d = 0, sc = 32, ql = 288, qh = 2336, bytes = 3360;
}
namespace q8 {
constexpr size_t d = 0, qs = 32, bytes = 544;
}
namespace q50 {
constexpr size_t d = 0, qh = 32, qs = 96, bytes = 352;
}

// Byte l (0..31) of a row's 32-byte group -> its place in a [8 quad][16 rows][4] interleave.
inline size_t quad_at(int l, int r) {
  return size_t(((l >> 2) * R + r) * 4 + (l & 3));
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

template <typename Block>
void pack_q45(const Block* src, uint8_t* dst, bool high) {
  // src: 16 blocks (rows), or nullptr entries handled by the caller as zero blocks.
  for (int r = 0; r < R; ++r) {
    const Block& b = src[r];
    std::memcpy(dst + q4::d + 2 * r, &b.d, 2);
    std::memcpy(dst + q4::dmin + 2 * r, &b.dmin, 2);
    for (int j = 0; j < 8; ++j) {
      uint8_t s, m;
      get_scale_min_k4(j, b.scales, &s, &m);
      dst[q4::sc + j * R + r] = s;
      dst[q4::mn + j * R + r] = m;
    }
    const size_t qs_off = high ? q5::qs : q4::qs;
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) dst[qs_off + c * 512 + quad_at(l, r)] = b.qs[32 * c + l];
    if constexpr (sizeof(Block) == sizeof(BlockQ5_K)) {
      for (int l = 0; l < 32; ++l) dst[q5::qh + quad_at(l, r)] = b.qh[l];
    }
  }
}

template <typename Block>
void unpack_q45(const uint8_t* src, int r, Block& b, bool high) {
  std::memcpy(&b.d, src + q4::d + 2 * r, 2);
  std::memcpy(&b.dmin, src + q4::dmin + 2 * r, 2);
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = src[q4::sc + j * R + r];
    lm[j] = src[q4::mn + j * R + r];
  }
  pack_scale_min_k4(ls, lm, b.scales);
  const size_t qs_off = high ? q5::qs : q4::qs;
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) b.qs[32 * c + l] = src[qs_off + c * 512 + quad_at(l, r)];
  if constexpr (sizeof(Block) == sizeof(BlockQ5_K)) {
    for (int l = 0; l < 32; ++l) b.qh[l] = src[q5::qh + quad_at(l, r)];
  }
}

void pack_q6(const BlockQ6_K* src, uint8_t* dst) {
  for (int r = 0; r < R; ++r) {
    const BlockQ6_K& b = src[r];
    std::memcpy(dst + q6::d + 2 * r, &b.d, 2);
    for (int s = 0; s < 16; ++s) dst[q6::sc + s * R + r] = uint8_t(b.scales[s]);
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 2; ++k)
        for (int l = 0; l < 32; ++l)
          dst[q6::ql + (h * 2 + k) * 512 + quad_at(l, r)] = b.ql[64 * h + 32 * k + l];
      for (int l = 0; l < 32; ++l) dst[q6::qh + h * 512 + quad_at(l, r)] = b.qh[32 * h + l];
    }
  }
}

void unpack_q6(const uint8_t* src, int r, BlockQ6_K& b) {
  std::memcpy(&b.d, src + q6::d + 2 * r, 2);
  for (int s = 0; s < 16; ++s) b.scales[s] = int8_t(src[q6::sc + s * R + r]);
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 2; ++k)
      for (int l = 0; l < 32; ++l)
        b.ql[64 * h + 32 * k + l] = src[q6::ql + (h * 2 + k) * 512 + quad_at(l, r)];
    for (int l = 0; l < 32; ++l) b.qh[32 * h + l] = src[q6::qh + h * 512 + quad_at(l, r)];
  }
}

void pack_q8(const BlockQ8_0* src, uint8_t* dst) {
  for (int r = 0; r < R; ++r) {
    std::memcpy(dst + q8::d + 2 * r, &src[r].d, 2);
    for (int l = 0; l < 32; ++l) dst[q8::qs + quad_at(l, r)] = uint8_t(src[r].qs[l]);
  }
}

void unpack_q8(const uint8_t* src, int r, BlockQ8_0& b) {
  std::memcpy(&b.d, src + q8::d + 2 * r, 2);
  for (int l = 0; l < 32; ++l) b.qs[l] = int8_t(src[q8::qs + quad_at(l, r)]);
}

// A Q5_0 row's fifth bits: GGUF bit j (weight j) <-> bit 8 * (j % 4) + j / 4 of the x16 word
// (bit k of byte b = weight 4k + b), and back.
inline uint32_t q5_0_qh_to_x16(uint32_t v) {
  uint32_t o = 0;
  for (int j = 0; j < 32; ++j) o |= ((v >> j) & 1u) << (8 * (j & 3) + (j >> 2));
  return o;
}
inline uint32_t q5_0_qh_from_x16(uint32_t o) {
  uint32_t v = 0;
  for (int j = 0; j < 32; ++j) v |= ((o >> (8 * (j & 3) + (j >> 2))) & 1u) << j;
  return v;
}

void pack_q5_0(const BlockQ5_0* src, uint8_t* dst) {
  for (int r = 0; r < R; ++r) {
    std::memcpy(dst + q50::d + 2 * r, &src[r].d, 2);
    uint32_t qh;
    std::memcpy(&qh, src[r].qh, 4);
    qh = q5_0_qh_to_x16(qh);
    std::memcpy(dst + q50::qh + 4 * r, &qh, 4);
    for (int l = 0; l < 16; ++l) dst[q50::qs + quad_at(l, r)] = src[r].qs[l];
  }
}

void unpack_q5_0(const uint8_t* src, int r, BlockQ5_0& b) {
  std::memcpy(&b.d, src + q50::d + 2 * r, 2);
  uint32_t qh;
  std::memcpy(&qh, src + q50::qh + 4 * r, 4);
  qh = q5_0_qh_from_x16(qh);
  std::memcpy(b.qh, &qh, 4);
  for (int l = 0; l < 16; ++l) b.qs[l] = src[q50::qs + quad_at(l, r)];
}

template <typename Block, typename PackFn>
void pack_matrix(const void* w, int64_t n_out, int64_t n_in, void* dst, int64_t p0, int64_t p1,
                 size_t block_bytes, int64_t block_elems, PackFn pack) {
  const int64_t nb = n_in / block_elems;
  const auto* rows = static_cast<const Block*>(w);
  auto* out = static_cast<uint8_t*>(dst);
  Block tile[R];
  for (int64_t p = p0; p < p1; ++p) {
    for (int64_t i = 0; i < nb; ++i) {
      for (int r = 0; r < R; ++r) {
        const int64_t row = p * R + r;
        if (row < n_out) {
          tile[r] = rows[row * nb + i];
        } else {
          std::memset(&tile[r], 0, sizeof(Block));
        }
      }
      pack(tile, out + size_t(p * nb + i) * block_bytes);
    }
  }
}

// ---- scalar tile kernels: per row, the reference's integer sums and float steps ----

// Walks every (panel, token, row, super-block) of a tile: y[t * ldy + row] = the sum over i of
// term(block i of the row's panel, activation block i, r), added in block order as the reference.
template <typename Act, typename Term>
void ref_tile(const void* w, size_t block_bytes, int64_t nb, int64_t np, const void* x, size_t xs,
              int64_t nt, float* y, int64_t ldy, int64_t rows, Term term) {
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int64_t p = 0; p < np; ++p) {
    for (int64_t t = 0; t < nt; ++t) {
      const auto* xt = reinterpret_cast<const Act*>(static_cast<const uint8_t*>(x) + t * xs);
      for (int r = 0; r < R; ++r) {
        const int64_t row = p * R + r;
        if (row >= rows) break;
        float sum = 0.0f;
        for (int64_t i = 0; i < nb; ++i)
          sum += term(wb + size_t(p * nb + i) * block_bytes, xt[i], r);
        y[t * ldy + row] = sum;
      }
    }
  }
}

// Q4_K / Q5_K: dall * isum - dmin * summs (vec_dot_q4_k_q8_k_ref / q5_k).
template <bool kHigh>
float term_q45(const uint8_t* blk, const BlockQ8_K& b, int r) {
  const size_t qs_off = kHigh ? q5::qs : q4::qs;
  int isum = 0, summs = 0;
  for (int c = 0; c < 4; ++c) {
    int dot0 = 0, dot1 = 0;
    for (int l = 0; l < 32; ++l) {
      const uint8_t q = blk[qs_off + c * 512 + quad_at(l, r)];
      int h0 = 0, h1 = 0;
      if constexpr (kHigh) {
        const uint8_t qh = blk[q5::qh + quad_at(l, r)];
        h0 = ((qh >> (2 * c)) & 1) << 4;
        h1 = ((qh >> (2 * c + 1)) & 1) << 4;
      }
      dot0 += ((q & 0xF) | h0) * b.qs[64 * c + l];
      dot1 += ((q >> 4) | h1) * b.qs[64 * c + 32 + l];
    }
    const int sc0 = blk[q4::sc + (2 * c) * R + r], sc1 = blk[q4::sc + (2 * c + 1) * R + r];
    const int m0 = blk[q4::mn + (2 * c) * R + r], m1 = blk[q4::mn + (2 * c + 1) * R + r];
    isum += sc0 * dot0 + sc1 * dot1;
    summs +=
        m0 * (b.bsums[4 * c] + b.bsums[4 * c + 1]) + m1 * (b.bsums[4 * c + 2] + b.bsums[4 * c + 3]);
  }
  const float dall = b.d * f16_to_f32(load_u16(blk + q4::d + 2 * r));
  const float dmin = b.d * f16_to_f32(load_u16(blk + q4::dmin + 2 * r));
  return dall * float(isum) - dmin * float(summs);
}

// Q6_K: db * d * isum (vec_dot_q6_k_q8_k_ref).
float term_q6(const uint8_t* blk, const BlockQ8_K& b, int r) {
  int isum = 0;
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t l0 = blk[q6::ql + (h * 2) * 512 + quad_at(l, r)];
      const uint8_t l1 = blk[q6::ql + (h * 2 + 1) * 512 + quad_at(l, r)];
      const uint8_t qh = blk[q6::qh + h * 512 + quad_at(l, r)];
      const int q0 = ((l0 & 0xF) | (((qh >> 0) & 3) << 4)) - 32;
      const int q1 = ((l1 & 0xF) | (((qh >> 2) & 3) << 4)) - 32;
      const int q2 = ((l0 >> 4) | (((qh >> 4) & 3) << 4)) - 32;
      const int q3 = ((l1 >> 4) | (((qh >> 6) & 3) << 4)) - 32;
      auto sc = [&](int s) { return int(int8_t(blk[q6::sc + s * R + r])); };
      const int s0 = 8 * h + l / 16;
      const int8_t* q8 = b.qs + 128 * h;
      isum += sc(s0) * q0 * q8[l] + sc(s0 + 2) * q1 * q8[l + 32] + sc(s0 + 4) * q2 * q8[l + 64] +
              sc(s0 + 6) * q3 * q8[l + 96];
    }
  }
  return b.d * f16_to_f32(load_u16(blk + q6::d + 2 * r)) * float(isum);
}

// Q8_0: sumi * (dw * dx) (vec_dot_q8_0_q8_0_ref).
float term_q8(const uint8_t* blk, const BlockQ8_0& b, int r) {
  int sumi = 0;
  for (int l = 0; l < 32; ++l) sumi += int8_t(blk[q8::qs + quad_at(l, r)]) * b.qs[l];
  return float(sumi) * (f16_to_f32(load_u16(blk + q8::d + 2 * r)) * f16_to_f32(b.d));
}

// Q5_0: sumi * (dw * dx) over the codes q - 16 (vec_dot_q5_0_q8_0_ref).
float term_q5_0(const uint8_t* blk, const BlockQ8_0& b, int r) {
  uint32_t qh;
  std::memcpy(&qh, blk + q50::qh + 4 * r, 4);
  int sumi = 0;
  for (int j = 0; j < 32; ++j) {
    const uint8_t q = blk[q50::qs + quad_at(j & 15, r)];
    const int lo = j < 16 ? (q & 0xF) : (q >> 4);
    const int hi = int((qh >> (8 * (j & 3) + (j >> 2))) & 1u) << 4;
    sumi += ((lo | hi) - 16) * b.qs[j];
  }
  return float(sumi) * (f16_to_f32(load_u16(blk + q50::d + 2 * r)) * f16_to_f32(b.d));
}

}  // namespace

void kx16_q4_k_ref(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  ref_tile<BlockQ8_K>(w, q4::bytes, nb, np, x, xs, nt, y, ldy, rows, term_q45<false>);
}
void kx16_q5_k_ref(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  ref_tile<BlockQ8_K>(w, q5::bytes, nb, np, x, xs, nt, y, ldy, rows, term_q45<true>);
}
void kx16_q6_k_ref(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  ref_tile<BlockQ8_K>(w, q6::bytes, nb, np, x, xs, nt, y, ldy, rows, term_q6);
}
void kx16_q8_0_ref(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  ref_tile<BlockQ8_0>(w, q8::bytes, nb, np, x, xs, nt, y, ldy, rows, term_q8);
}
void kx16_q5_0_ref(const void* w, int64_t nb, int64_t np, const void* x, size_t xs, int64_t nt,
                   float* y, int64_t ldy, int64_t rows) {
  ref_tile<BlockQ8_0>(w, q50::bytes, nb, np, x, xs, nt, y, ldy, rows, term_q5_0);
}

bool kx16_supported(GgmlType t) {
  return t == GgmlType::q4_k || t == GgmlType::q5_k || t == GgmlType::q6_k || t == GgmlType::q8_0 ||
         t == GgmlType::q5_0;
}

bool kx16_q8_0_act(GgmlType t) {
  return t == GgmlType::q8_0 || t == GgmlType::q5_0;
}

int64_t kx16_block_elems(GgmlType t) {
  return kx16_q8_0_act(t) ? kQK8_0 : kQK_K;
}

size_t kx16_block_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::q4_k:
      return q4::bytes;
    case GgmlType::q5_k:
      return q5::bytes;
    case GgmlType::q6_k:
      return q6::bytes;
    case GgmlType::q8_0:
      return q8::bytes;
    case GgmlType::q5_0:
      return q50::bytes;
    default:
      return 0;
  }
}

size_t kx16_matrix_bytes(GgmlType t, int64_t n_out, int64_t n_in) {
  return size_t((n_out + R - 1) / R) * size_t(n_in / kx16_block_elems(t)) * kx16_block_bytes(t);
}

void kx16_pack(GgmlType t, const void* w, int64_t n_out, int64_t n_in, void* dst, int64_t p0,
               int64_t p1) {
  assert(kx16_supported(t) && n_in % kx16_block_elems(t) == 0);
  const size_t bb = kx16_block_bytes(t);
  const int64_t be = kx16_block_elems(t);
  switch (t) {
    case GgmlType::q4_k:
      pack_matrix<BlockQ4_K>(w, n_out, n_in, dst, p0, p1, bb, be,
                             [](const BlockQ4_K* s, uint8_t* d) { pack_q45(s, d, false); });
      break;
    case GgmlType::q5_k:
      pack_matrix<BlockQ5_K>(w, n_out, n_in, dst, p0, p1, bb, be,
                             [](const BlockQ5_K* s, uint8_t* d) { pack_q45(s, d, true); });
      break;
    case GgmlType::q6_k:
      pack_matrix<BlockQ6_K>(w, n_out, n_in, dst, p0, p1, bb, be, pack_q6);
      break;
    case GgmlType::q8_0:
      pack_matrix<BlockQ8_0>(w, n_out, n_in, dst, p0, p1, bb, be, pack_q8);
      break;
    case GgmlType::q5_0:
      pack_matrix<BlockQ5_0>(w, n_out, n_in, dst, p0, p1, bb, be, pack_q5_0);
      break;
    default:
      break;
  }
}

void kx16_unpack_row(GgmlType t, const void* packed, int64_t n_in, int64_t row, void* dst) {
  assert(kx16_supported(t) && n_in % kx16_block_elems(t) == 0);
  const int64_t nb = n_in / kx16_block_elems(t);
  const size_t bb = kx16_block_bytes(t);
  const auto* src = static_cast<const uint8_t*>(packed) + size_t(row / R * nb) * bb;
  const int r = int(row % R);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = src + size_t(i) * bb;
    switch (t) {
      case GgmlType::q4_k:
        unpack_q45(blk, r, static_cast<BlockQ4_K*>(dst)[i], false);
        break;
      case GgmlType::q5_k:
        unpack_q45(blk, r, static_cast<BlockQ5_K*>(dst)[i], true);
        break;
      case GgmlType::q6_k:
        unpack_q6(blk, r, static_cast<BlockQ6_K*>(dst)[i]);
        break;
      case GgmlType::q8_0:
        unpack_q8(blk, r, static_cast<BlockQ8_0*>(dst)[i]);
        break;
      case GgmlType::q5_0:
        unpack_q5_0(blk, r, static_cast<BlockQ5_0*>(dst)[i]);
        break;
      default:
        break;
    }
  }
}

bool kx16_amx_usable() {
  return isa_supported(Isa::avx512) && amx_int8_usable();
}

Kx16Fn kx16_kernel(GgmlType t, Isa isa, Isa* got, bool allow_amx, bool* got_amx) {
  Isa level = Isa::scalar;
  if (isa >= Isa::avx512 && isa_supported(Isa::avx512)) {
    level = Isa::avx512;
  } else if (isa >= Isa::avx2 && isa_supported(Isa::avx2)) {
    level = Isa::avx2;
  }
  const bool amx = level == Isa::avx512 && allow_amx && kx16_amx_usable();
  if (got != nullptr) *got = level;
  if (got_amx != nullptr) *got_amx = amx;
  // One row per type: scalar, avx2, avx512, then the AMX variant (an avx512 one).
  struct Variants {
    GgmlType type;
    Kx16Fn fn[kIsaCount];
    Kx16Fn amx;
  };
  static constexpr Variants kTable[] = {
      {GgmlType::q4_k, {kx16_q4_k_ref, kx16_q4_k_avx2, kx16_q4_k_avx512}, kx16_q4_k_amx},
      {GgmlType::q5_k, {kx16_q5_k_ref, kx16_q5_k_avx2, kx16_q5_k_avx512}, kx16_q5_k_amx},
      {GgmlType::q6_k, {kx16_q6_k_ref, kx16_q6_k_avx2, kx16_q6_k_avx512}, kx16_q6_k_amx},
      {GgmlType::q8_0, {kx16_q8_0_ref, kx16_q8_0_avx2, kx16_q8_0_avx512}, kx16_q8_0_amx},
      {GgmlType::q5_0, {kx16_q5_0_ref, kx16_q5_0_avx2, kx16_q5_0_avx512}, kx16_q5_0_amx},
  };
  for (const Variants& v : kTable)
    if (v.type == t) return amx ? v.amx : v.fn[int(level)];
  return nullptr;
}

namespace {
// FISH_KX16_PREFETCH when set (commands refuse a bad value before they start:
// base/env_knobs.h), else kKx16PrefetchAuto (the per-format distances, kquant_x16.h).
size_t prefetch_from_env() {
  if (auto n = env_int("FISH_KX16_PREFETCH"); n.ok() && n.value()) return size_t(*n.value());
  return kKx16PrefetchAuto;
}

std::atomic<size_t>& prefetch_setting() {
  static std::atomic<size_t> bytes(prefetch_from_env());
  return bytes;
}
}  // namespace

size_t kx16_prefetch_bytes() {
  return prefetch_setting().load(std::memory_order_relaxed);
}
void kx16_set_prefetch_bytes(size_t bytes) {
  prefetch_setting().store(bytes, std::memory_order_relaxed);
}

const int32_t* kx16_q8_0_sums16(const void* x, size_t x_stride, int64_t n_tok, int64_t nb) {
  thread_local std::vector<int32_t> out;
  out.resize(size_t(n_tok * nb));
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* row =
        reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(x) + size_t(t) * x_stride);
    for (int64_t i = 0; i < nb; ++i) {
      int32_t s = 0;
      for (int l = 0; l < kQK8_0; ++l) s += row[i].qs[l];
      out[size_t(t * nb + i)] = 16 * s;
    }
  }
  return out.data();
}

void kx16_matmul(Kx16Fn kernel, GgmlType t, const void* w, int64_t n_out, int64_t n_in,
                 const void* xq, int64_t n_tok, float* y, ThreadPool& pool) {
  assert(kernel != nullptr && n_in % kx16_block_elems(t) == 0);
  const int64_t nb = n_in / kx16_block_elems(t);
  const int64_t np = (n_out + R - 1) / R;
  const size_t panel_bytes = size_t(nb) * kx16_block_bytes(t);
  const size_t xs = size_t(nb) * (kx16_q8_0_act(t) ? sizeof(BlockQ8_0) : sizeof(BlockQ8_K));
  const auto* wb = static_cast<const uint8_t*>(w);
  // Prefill: chunks of panels that stay in L2 (~192 KiB) are walked against every token; the
  // kernel itself takes 4 tokens per pass over a panel. Decode: the thread's panels in one call.
  const int64_t chunk =
      n_tok <= 4 ? np
                 : std::max<int64_t>(1, int64_t((192u << 10) / std::max<size_t>(panel_bytes, 1)));
  pool.parallel_for(np, [&](int64_t p0, int64_t p1, int) {
    for (int64_t c0 = p0; c0 < p1; c0 += chunk) {
      const int64_t c1 = std::min(p1, c0 + chunk);
      kernel(wb + size_t(c0) * panel_bytes, nb, c1 - c0, xq, xs, n_tok, y + c0 * R, n_out,
             std::min(n_out - c0 * R, (c1 - c0) * R));
    }
  });
}

}  // namespace fish
