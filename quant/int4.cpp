// Packed int4 weights: the group fit, the two layouts' packers and their scalar dequantisers.
// Layouts and the fit are specified in int4.h.
#include "quant/int4.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "quant/f16.h"
#include "quant/k_quants.h"
#include "quant/q4_0.h"
#include "quant/q4_1.h"
#include "quant/q4_k.h"

namespace fish {
namespace {

int clamp_code(float v) {
  return std::clamp(int(std::floor(v + 0.5f)), 0, 15);
}

// Codes, scales and zeros (sym, asym) or mins (fp) of one row, group by group; the other of
// zeros / mins gets 0.
void fit_row(const float* w, int64_t n_in, Int4Format fmt, uint8_t* codes, uint16_t* scales,
             uint8_t* zeros, uint16_t* mins) {
  const int64_t groups = n_in / fmt.group_size;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t at = g * fmt.group_size;
    if (fmt.zero_point == Int4ZeroPoint::fp) {
      quantize_int4_group_fp_ref(w + at, fmt.group_size, codes + at, &scales[g], &mins[g]);
      zeros[g] = 0;
    } else {
      quantize_int4_group_ref(w + at, fmt, codes + at, &scales[g], &zeros[g]);
      mins[g] = 0;
    }
  }
}

// Codes of n weights for w ~ f32(d16) * q + f32(m16), and their squared error.
double fp_codes(const float* w, int n, uint16_t d16, uint16_t m16, uint8_t* codes) {
  const float d = f16_to_f32(d16);
  const float m = f16_to_f32(m16);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  double err = 0.0;
  for (int i = 0; i < n; ++i) {
    codes[i] = uint8_t(d != 0.0f ? clamp_code((w[i] - m) * id) : 0);
    const double e = double(w[i]) - double(d * float(codes[i]) + m);
    err += e * e;
  }
  return err;
}

// Packs 32 codes (weights j and j + 16 share byte j) into 16 bytes.
void pack_chunk(const uint8_t* codes, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(codes[j] | (codes[j + 16] << 4));
}

void check_shape(int64_t n_out, int64_t n_in, Int4Format fmt) {
  assert(n_out >= 1);
  assert(is_valid_int4_group_size(fmt.group_size));
  assert(n_in > 0 && n_in % fmt.group_size == 0);
  (void)n_out;
  (void)n_in;
  (void)fmt;
}

}  // namespace

std::string_view int4_zero_point_name(Int4ZeroPoint z) {
  return z == Int4ZeroPoint::sym ? "sym" : z == Int4ZeroPoint::asym ? "asym" : "fp";
}

std::optional<Int4ZeroPoint> parse_int4_zero_point(std::string_view s) {
  if (s == "sym") return Int4ZeroPoint::sym;
  if (s == "asym") return Int4ZeroPoint::asym;
  if (s == "fp") return Int4ZeroPoint::fp;
  return std::nullopt;
}

bool is_valid_int4_group_size(int64_t group_size) {
  return group_size == 32 || group_size == 64 || group_size == 128;
}

void quantize_int4_group_ref(const float* w, Int4Format fmt, uint8_t* codes, uint16_t* scale_f16,
                             uint8_t* zero) {
  assert(fmt.zero_point != Int4ZeroPoint::fp);
  const int n = fmt.group_size;
  if (fmt.zero_point == Int4ZeroPoint::sym) {
    float extreme = 0.0f;  // signed value of largest magnitude (first one on ties)
    for (int i = 0; i < n; ++i) {
      if (std::fabs(w[i]) > std::fabs(extreme)) extreme = w[i];
    }
    *scale_f16 = f32_to_f16(extreme / -8.0f);
    *zero = uint8_t(kInt4SymZero);
  } else {
    float lo = 0.0f;  // the range always includes 0, so z lands in 0..15 (as GPTQ)
    float hi = 0.0f;
    for (int i = 0; i < n; ++i) {
      lo = std::min(lo, w[i]);
      hi = std::max(hi, w[i]);
    }
    *scale_f16 = f32_to_f16((hi - lo) / 15.0f);
    const float d = f16_to_f32(*scale_f16);
    *zero = uint8_t(d != 0.0f ? clamp_code(-lo / d) : 0);
  }
  const float d = f16_to_f32(*scale_f16);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) codes[i] = uint8_t(clamp_code(w[i] * id + float(*zero)));
}

void quantize_int4_group_fp_ref(const float* w, int n, uint8_t* codes, uint16_t* scale_f16,
                                uint16_t* min_f16) {
  assert(n >= 1 && n <= 256);
  float lo = w[0];
  float hi = w[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  // Start: the min/max grid (as q4_1), then least-squares (d, m) for the current codes, re-coded
  // with the f16-rounded pair, while the squared error drops.
  uint16_t best_d = f32_to_f16((hi - lo) / 15.0f);
  uint16_t best_m = f32_to_f16(lo);
  double best = fp_codes(w, n, best_d, best_m, codes);
  uint8_t trial[256];
  std::copy(codes, codes + n, trial);
  for (int iter = 0; iter < 4; ++iter) {
    double sq = 0, sqq = 0, sw = 0, sqw = 0;
    for (int i = 0; i < n; ++i) {
      const double q = trial[i];
      sq += q;
      sqq += q * q;
      sw += w[i];
      sqw += q * double(w[i]);
    }
    const double det = double(n) * sqq - sq * sq;
    if (det <= 0.0) break;  // every code equal: nothing to fit
    const double d = (double(n) * sqw - sq * sw) / det;
    const double m = (sw - d * sq) / double(n);
    const uint16_t d16 = f32_to_f16(float(d));
    const uint16_t m16 = f32_to_f16(float(m));
    if (!(d > 0.0) || !std::isfinite(f16_to_f32(d16)) || !std::isfinite(f16_to_f32(m16))) break;
    const double err = fp_codes(w, n, d16, m16, trial);
    if (!(err < best)) break;
    best = err;
    best_d = d16;
    best_m = m16;
    std::copy(trial, trial + n, codes);
  }
  *scale_f16 = best_d;
  *min_f16 = best_m;
}

GgmlType fish_i4_type(Int4Format fmt) {
  const bool fp = fmt.zero_point == Int4ZeroPoint::fp;
  switch (fmt.group_size) {
    case 32:
      return fp ? GgmlType::fish_i4fp_g32 : GgmlType::fish_i4_g32;
    case 64:
      return fp ? GgmlType::fish_i4fp_g64 : GgmlType::fish_i4_g64;
    default:
      return fp ? GgmlType::fish_i4fp_g128 : GgmlType::fish_i4_g128;
  }
}

bool int4_repack_is_exact(GgmlType src, Int4Format fmt) {
  if (fmt.group_size != 32) return false;
  if (src == GgmlType::q4_0) return true;
  return fmt.zero_point == Int4ZeroPoint::fp && (src == GgmlType::q4_1 || src == GgmlType::q4_k);
}

namespace {

// The exact repacks of int4_repack_is_exact; false when an f16 offset or scale would overflow
// (then the caller fits instead).
bool repack_row_exact(GgmlType src, const void* row, int64_t n, Int4Format fmt, void* dst) {
  if (src == GgmlType::q4_1) {  // the same 20-byte block: {f16 d, f16 m, qs in chunk order}
    static_assert(sizeof(BlockQ4_1) == sizeof(BlockFishI4Fp<32>));
    std::memcpy(dst, row, size_t(n / 32) * sizeof(BlockQ4_1));
    return true;
  }
  if (src == GgmlType::q4_0) {
    const auto* x = static_cast<const BlockQ4_0*>(row);
    for (int64_t b = 0; b < n / 32; ++b) {
      if (fmt.zero_point == Int4ZeroPoint::fp) {
        auto& y = static_cast<BlockFishI4Fp<32>*>(dst)[b];
        y.d = x[b].d;
        y.m = f32_to_f16(-8.0f * f16_to_f32(x[b].d));  // exact unless it overflows f16
        if (!std::isfinite(f16_to_f32(y.m))) return false;
        std::memcpy(y.qs, x[b].qs, 16);
      } else {
        auto& y = static_cast<BlockFishI4<32>*>(dst)[b];
        y.d = x[b].d;
        y.z = uint8_t(kInt4SymZero);
        y.reserved = 0;
        std::memcpy(y.qs, x[b].qs, 16);
      }
    }
    return true;
  }
  // q4_k: per 32-weight sub-block s, d' = f16(d sc_s), m' = f16(-dmin m_s); chunk c of 64 weights
  // holds sub-block 2c in the low nibbles of qs[32c..32c+31] and 2c+1 in the high ones.
  const auto* x = static_cast<const BlockQ4_K*>(row);
  auto* y = static_cast<BlockFishI4Fp<32>*>(dst);
  uint8_t codes[32];
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = f16_to_f32(x[b].d);
    const float dmin = f16_to_f32(x[b].dmin);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, mn;
      get_scale_min_k4(s, x[b].scales, &sc, &mn);
      BlockFishI4Fp<32>& out = y[b * 8 + s];
      out.d = f32_to_f16(d * float(sc));
      out.m = f32_to_f16(-(dmin * float(mn)));
      if (!std::isfinite(f16_to_f32(out.d)) || !std::isfinite(f16_to_f32(out.m))) return false;
      const uint8_t* q = x[b].qs + 32 * (s / 2);
      for (int l = 0; l < 32; ++l) codes[l] = s % 2 == 0 ? q[l] & 0xF : q[l] >> 4;
      pack_chunk(codes, out.qs);
    }
  }
  return true;
}

}  // namespace

bool pack_row_fish_i4(GgmlType src, const void* row, int64_t n, Int4Format fmt, void* dst,
                      float* scratch) {
  assert(n % fmt.group_size == 0);
  if (int4_repack_is_exact(src, fmt) && repack_row_exact(src, row, n, fmt, dst)) return true;
  const TypeInfo& ti = type_info(src);
  assert(ti.dequantize_row != nullptr);
  ti.dequantize_row(row, scratch, n);
  switch (fish_i4_type(fmt)) {
    case GgmlType::fish_i4_g32:
      quantize_row_fish_i4_fit<32>(scratch, static_cast<BlockFishI4<32>*>(dst), n, fmt.zero_point);
      break;
    case GgmlType::fish_i4_g64:
      quantize_row_fish_i4_fit<64>(scratch, static_cast<BlockFishI4<64>*>(dst), n, fmt.zero_point);
      break;
    case GgmlType::fish_i4_g128:
      quantize_row_fish_i4_fit<128>(scratch, static_cast<BlockFishI4<128>*>(dst), n,
                                    fmt.zero_point);
      break;
    case GgmlType::fish_i4fp_g32:
      quantize_row_fish_i4fp_ref<32>(scratch, static_cast<BlockFishI4Fp<32>*>(dst), n);
      break;
    case GgmlType::fish_i4fp_g64:
      quantize_row_fish_i4fp_ref<64>(scratch, static_cast<BlockFishI4Fp<64>*>(dst), n);
      break;
    default:
      quantize_row_fish_i4fp_ref<128>(scratch, static_cast<BlockFishI4Fp<128>*>(dst), n);
  }
  return false;
}

Int4Vnni16 pack_int4_vnni16_ref(const float* w, int64_t n_out, int64_t n_in, Int4Format fmt) {
  check_shape(n_out, n_in, fmt);
  Int4Vnni16 m;
  m.n_out = n_out;
  m.n_in = n_in;
  m.fmt = fmt;
  const int64_t groups = n_in / fmt.group_size;
  const int64_t tiles = m.tiles();
  m.qs.assign(size_t(tiles * n_in * 8), 0);
  m.scales.assign(size_t(tiles * groups * kInt4TileRows), 0);
  std::vector<uint8_t> zeros(size_t(tiles * groups * kInt4TileRows), 0);
  std::vector<uint16_t> mins(zeros.size(), 0);
  std::vector<uint8_t> codes(static_cast<size_t>(n_in));
  std::vector<uint16_t> row_scales(static_cast<size_t>(groups));
  std::vector<uint8_t> row_zeros(static_cast<size_t>(groups));
  std::vector<uint16_t> row_mins(static_cast<size_t>(groups));
  for (int64_t o = 0; o < n_out; ++o) {
    fit_row(w + o * n_in, n_in, fmt, codes.data(), row_scales.data(), row_zeros.data(),
            row_mins.data());
    const int64_t t = o / kInt4TileRows;
    const int64_t r = o % kInt4TileRows;
    for (int64_t g = 0; g < groups; ++g) {
      const size_t at = size_t((t * groups + g) * kInt4TileRows + r);
      m.scales[at] = row_scales[size_t(g)];
      zeros[at] = row_zeros[size_t(g)];
      mins[at] = row_mins[size_t(g)];
    }
    uint8_t* tile = m.qs.data() + size_t(t * n_in * 8);
    for (int64_t j = 0; j < n_in / 8; ++j) {
      for (int i = 0; i < 4; ++i) {
        tile[j * 64 + r * 4 + i] =
            uint8_t(codes[size_t(8 * j + i)] | (codes[size_t(8 * j + i + 4)] << 4));
      }
    }
  }
  if (fmt.zero_point == Int4ZeroPoint::asym) m.zeros = std::move(zeros);
  if (fmt.zero_point == Int4ZeroPoint::fp) m.mins = std::move(mins);
  return m;
}

Int4Rows pack_int4_rows_ref(const float* w, int64_t n_out, int64_t n_in, Int4Format fmt) {
  check_shape(n_out, n_in, fmt);
  Int4Rows m;
  m.n_out = n_out;
  m.n_in = n_in;
  m.fmt = fmt;
  const int64_t groups = n_in / fmt.group_size;
  m.qs.assign(size_t(n_out * n_in / 2), 0);
  m.scales.assign(size_t(n_out * groups), 0);
  std::vector<uint8_t> zeros(size_t(n_out * groups));
  std::vector<uint16_t> mins(size_t(n_out * groups));
  std::vector<uint8_t> codes(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    fit_row(w + o * n_in, n_in, fmt, codes.data(), &m.scales[size_t(o * groups)],
            &zeros[size_t(o * groups)], &mins[size_t(o * groups)]);
    uint8_t* dst = &m.qs[size_t(o * n_in / 2)];
    for (int64_t c = 0; c < n_in / kInt4ChunkWeights; ++c) {
      for (int j = 0; j < 16; ++j) {
        dst[c * 16 + j] =
            uint8_t(codes[size_t(c * 32 + j)] | (codes[size_t(c * 32 + j + 16)] << 4));
      }
    }
  }
  if (fmt.zero_point == Int4ZeroPoint::asym) m.zeros = std::move(zeros);
  if (fmt.zero_point == Int4ZeroPoint::fp) m.mins = std::move(mins);
  return m;
}

Int4Blocks64 pack_int4_blocks64_ref(const float* w, int64_t n_out, int64_t n_in, Int4Format fmt) {
  check_shape(n_out, n_in, fmt);
  Int4Blocks64 m;
  m.n_out = n_out;
  m.n_in = n_in;
  m.fmt = fmt;
  const int64_t groups = n_in / fmt.group_size;
  m.qs.assign(size_t((m.full_blocks() * 32 + m.tail_half()) * n_in), 0);
  m.scales.assign(size_t(groups * n_out), 0);
  std::vector<uint8_t> zeros(size_t(groups * n_out));
  std::vector<uint16_t> mins(size_t(groups * n_out));
  std::vector<uint8_t> codes(static_cast<size_t>(n_in));
  std::vector<uint16_t> row_scales(static_cast<size_t>(groups));
  std::vector<uint8_t> row_zeros(static_cast<size_t>(groups));
  std::vector<uint16_t> row_mins(static_cast<size_t>(groups));
  const int64_t h = m.tail_half();
  for (int64_t o = 0; o < n_out; ++o) {
    fit_row(w + o * n_in, n_in, fmt, codes.data(), row_scales.data(), row_zeros.data(),
            row_mins.data());
    for (int64_t g = 0; g < groups; ++g) {
      m.scales[size_t(g * n_out + o)] = row_scales[size_t(g)];
      zeros[size_t(g * n_out + o)] = row_zeros[size_t(g)];
      mins[size_t(g * n_out + o)] = row_mins[size_t(g)];
    }
    const int64_t b = o / kInt4BlockChannels;
    const int64_t c = o % kInt4BlockChannels;  // channel within its block
    const bool tail = b == m.full_blocks();
    const int64_t width = tail ? h : 32;      // bytes per k in this block
    const int64_t d = tail ? c % h : c % 32;  // byte within the k row
    const int shift = (tail ? c >= h : c >= 32) ? 4 : 0;
    uint8_t* base = m.qs.data() + size_t(b * n_in * 32);
    for (int64_t k = 0; k < n_in; ++k) base[k * width + d] |= uint8_t(codes[size_t(k)] << shift);
  }
  if (fmt.zero_point == Int4ZeroPoint::asym) m.zeros = std::move(zeros);
  if (fmt.zero_point == Int4ZeroPoint::fp) m.mins = std::move(mins);
  return m;
}

template <int G>
void quantize_row_fish_i4_fit(const float* x, BlockFishI4<G>* y, int64_t n, Int4ZeroPoint zp) {
  assert(n % G == 0);
  uint8_t codes[G];
  for (int64_t b = 0; b < n / G; ++b, x += G) {
    quantize_int4_group_ref(x, {G, zp}, codes, &y[b].d, &y[b].z);
    y[b].reserved = 0;
    for (int c = 0; c < G / 32; ++c) {
      for (int j = 0; j < 16; ++j) {
        y[b].qs[c * 16 + j] = uint8_t(codes[c * 32 + j] | (codes[c * 32 + j + 16] << 4));
      }
    }
  }
}

template <int G>
void quantize_row_fish_i4_ref(const float* x, BlockFishI4<G>* y, int64_t n) {
  quantize_row_fish_i4_fit<G>(x, y, n, Int4ZeroPoint::asym);
}

template <int G>
void dequantize_row_fish_i4(const BlockFishI4<G>* x, float* y, int64_t n) {
  assert(n % G == 0);
  for (int64_t b = 0; b < n / G; ++b, y += G) {
    const float d = f16_to_f32(x[b].d);
    const float z = float(x[b].z);
    for (int c = 0; c < G / 32; ++c) {
      for (int j = 0; j < 16; ++j) {
        y[c * 32 + j] = d * (float(x[b].qs[c * 16 + j] & 0xF) - z);
        y[c * 32 + j + 16] = d * (float(x[b].qs[c * 16 + j] >> 4) - z);
      }
    }
  }
}

template <int G>
void quantize_row_fish_i4fp_ref(const float* x, BlockFishI4Fp<G>* y, int64_t n) {
  assert(n % G == 0);
  uint8_t codes[G];
  for (int64_t b = 0; b < n / G; ++b, x += G) {
    quantize_int4_group_fp_ref(x, G, codes, &y[b].d, &y[b].m);
    for (int c = 0; c < G / 32; ++c) pack_chunk(codes + c * 32, y[b].qs + c * 16);
  }
}

template <int G>
void dequantize_row_fish_i4fp(const BlockFishI4Fp<G>* x, float* y, int64_t n) {
  assert(n % G == 0);
  for (int64_t b = 0; b < n / G; ++b, y += G) {
    const float d = f16_to_f32(x[b].d);
    const float m = f16_to_f32(x[b].m);
    for (int c = 0; c < G / 32; ++c) {
      for (int j = 0; j < 16; ++j) {
        y[c * 32 + j] = float(x[b].qs[c * 16 + j] & 0xF) * d + m;
        y[c * 32 + j + 16] = float(x[b].qs[c * 16 + j] >> 4) * d + m;
      }
    }
  }
}

#define FISH_I4_INSTANTIATE(G)                                                           \
  template void quantize_row_fish_i4_fit<G>(const float*, BlockFishI4<G>*, int64_t,      \
                                            Int4ZeroPoint);                              \
  template void quantize_row_fish_i4_ref<G>(const float*, BlockFishI4<G>*, int64_t);     \
  template void dequantize_row_fish_i4<G>(const BlockFishI4<G>*, float*, int64_t);       \
  template void quantize_row_fish_i4fp_ref<G>(const float*, BlockFishI4Fp<G>*, int64_t); \
  template void dequantize_row_fish_i4fp<G>(const BlockFishI4Fp<G>*, float*, int64_t);
FISH_I4_INSTANTIATE(32)
FISH_I4_INSTANTIATE(64)
FISH_I4_INSTANTIATE(128)
#undef FISH_I4_INSTANTIATE

bool int4_from_fish_i4(const uint8_t* rows, int64_t n_out, int64_t n_in, Int4Format fmt,
                       Int4Vnni16* vnni, Int4Blocks64* blocks) {
  check_shape(n_out, n_in, fmt);
  const int gs = fmt.group_size;
  const size_t block_bytes = 4 + size_t(gs) / 2;
  const int64_t groups = n_in / gs;
  // Rebuild f32-free: codes, scales and zeros per row, then the same placement as the packers.
  std::vector<uint16_t> scales(size_t(n_out * groups));
  std::vector<uint8_t> zeros(size_t(n_out * groups));
  std::vector<uint16_t> mins(size_t(n_out * groups));
  std::vector<uint8_t> all_codes(size_t(n_out * n_in));
  const bool fp = fmt.zero_point == Int4ZeroPoint::fp;
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* blk = rows + size_t(o * groups + g) * block_bytes;
      std::memcpy(&scales[size_t(o * groups + g)], blk, 2);
      if (fp) {
        std::memcpy(&mins[size_t(o * groups + g)], blk + 2, 2);  // BlockFishI4Fp::m
      } else {
        zeros[size_t(o * groups + g)] = blk[2];
      }
      if (fmt.zero_point == Int4ZeroPoint::sym && blk[2] != kInt4SymZero) return false;
      for (int c = 0; c < gs / 32; ++c) {
        for (int j = 0; j < 16; ++j) {
          const uint8_t byte = blk[4 + c * 16 + j];
          all_codes[size_t(o * n_in + g * gs + c * 32 + j)] = byte & 0xF;
          all_codes[size_t(o * n_in + g * gs + c * 32 + j + 16)] = byte >> 4;
        }
      }
    }
  }
  const bool asym = fmt.zero_point == Int4ZeroPoint::asym;
  if (vnni != nullptr) {
    Int4Vnni16& m = *vnni;
    m = Int4Vnni16{};
    m.n_out = n_out;
    m.n_in = n_in;
    m.fmt = fmt;
    m.qs.assign(size_t(m.tiles() * n_in * 8), 0);
    m.scales.assign(size_t(m.tiles() * groups * kInt4TileRows), 0);
    if (asym) m.zeros.assign(m.scales.size(), 0);
    if (fp) m.mins.assign(m.scales.size(), 0);
    for (int64_t o = 0; o < n_out; ++o) {
      const int64_t t = o / kInt4TileRows, r = o % kInt4TileRows;
      for (int64_t g = 0; g < groups; ++g) {
        const size_t at = size_t((t * groups + g) * kInt4TileRows + r);
        m.scales[at] = scales[size_t(o * groups + g)];
        if (asym) m.zeros[at] = zeros[size_t(o * groups + g)];
        if (fp) m.mins[at] = mins[size_t(o * groups + g)];
      }
      uint8_t* tile = m.qs.data() + size_t(t * n_in * 8);
      const uint8_t* c = &all_codes[size_t(o * n_in)];
      for (int64_t j = 0; j < n_in / 8; ++j) {
        for (int i = 0; i < 4; ++i)
          tile[j * 64 + r * 4 + i] = uint8_t(c[8 * j + i] | (c[8 * j + i + 4] << 4));
      }
    }
  }
  if (blocks != nullptr) {
    Int4Blocks64& m = *blocks;
    m = Int4Blocks64{};
    m.n_out = n_out;
    m.n_in = n_in;
    m.fmt = fmt;
    m.qs.assign(size_t((m.full_blocks() * 32 + m.tail_half()) * n_in), 0);
    m.scales.assign(size_t(groups * n_out), 0);
    if (asym) m.zeros.assign(m.scales.size(), 0);
    if (fp) m.mins.assign(m.scales.size(), 0);
    const int64_t h = m.tail_half();
    for (int64_t o = 0; o < n_out; ++o) {
      for (int64_t g = 0; g < groups; ++g) {
        m.scales[size_t(g * n_out + o)] = scales[size_t(o * groups + g)];
        if (asym) m.zeros[size_t(g * n_out + o)] = zeros[size_t(o * groups + g)];
        if (fp) m.mins[size_t(g * n_out + o)] = mins[size_t(o * groups + g)];
      }
      const int64_t b = o / kInt4BlockChannels, c = o % kInt4BlockChannels;
      const bool tail = b == m.full_blocks();
      const int64_t width = tail ? h : 32;
      const int64_t d = tail ? c % h : c % 32;
      const int shift = (tail ? c >= h : c >= 32) ? 4 : 0;
      uint8_t* base = m.qs.data() + size_t(b * n_in * 32);
      for (int64_t k = 0; k < n_in; ++k) {
        base[k * width + d] |= uint8_t(all_codes[size_t(o * n_in + k)] << shift);
      }
    }
  }
  return true;
}

int int4_vnni16_code(const Int4Vnni16& m, int64_t o, int64_t k) {
  const int64_t t = o / kInt4TileRows;
  const int64_t r = o % kInt4TileRows;
  const uint8_t byte = m.tile_qs(t)[(k / 8) * 64 + r * 4 + (k % 8) % 4];
  return (k % 8) < 4 ? byte & 0xF : byte >> 4;
}

int int4_rows_code(const Int4Rows& m, int64_t o, int64_t k) {
  const uint8_t byte = m.qs[size_t(o * m.n_in / 2 + (k / 32) * 16 + (k % 32) % 16)];
  return (k % 32) < 16 ? byte & 0xF : byte >> 4;
}

int int4_blocks64_code(const Int4Blocks64& m, int64_t o, int64_t k) {
  const int64_t b = o / kInt4BlockChannels;
  const int64_t c = o % kInt4BlockChannels;
  if (b < m.full_blocks()) {
    const uint8_t byte = m.block(b)[k * 32 + c % 32];
    return c < 32 ? byte & 0xF : byte >> 4;
  }
  const int64_t h = m.tail_half();
  const uint8_t byte = m.tail()[k * h + c % h];
  return c < h ? byte & 0xF : byte >> 4;
}

Int4Rows int4_rows_from_blocks64(const Int4Blocks64& b) {
  Int4Rows m;
  m.n_out = b.n_out;
  m.n_in = b.n_in;
  m.fmt = b.fmt;
  const int64_t groups = b.n_in / b.fmt.group_size;
  m.qs.assign(size_t(b.n_out * b.n_in / 2), 0);
  m.scales.resize(size_t(b.n_out * groups));
  if (!b.zeros.empty()) m.zeros.resize(size_t(b.n_out * groups));
  if (!b.mins.empty()) m.mins.resize(size_t(b.n_out * groups));
  for (int64_t o = 0; o < b.n_out; ++o) {
    for (int64_t g = 0; g < groups; ++g) {
      m.scales[size_t(o * groups + g)] = b.scales[size_t(g * b.n_out + o)];
      if (!b.zeros.empty()) m.zeros[size_t(o * groups + g)] = b.zeros[size_t(g * b.n_out + o)];
      if (!b.mins.empty()) m.mins[size_t(o * groups + g)] = b.mins[size_t(g * b.n_out + o)];
    }
    uint8_t* dst = &m.qs[size_t(o * b.n_in / 2)];
    for (int64_t k = 0; k < b.n_in; ++k) {
      const int q = int4_blocks64_code(b, o, k);
      dst[(k / 32) * 16 + (k % 32) % 16] |= uint8_t((k % 32) < 16 ? q : q << 4);
    }
  }
  return m;
}

void dequantize_int4_vnni16_ref(const Int4Vnni16& m, int64_t o_begin, int64_t o_end, float* out) {
  const int64_t groups = m.groups_per_row();
  const int gs = m.fmt.group_size;
  for (int64_t o = o_begin; o < o_end; ++o, out += m.n_in) {
    const int64_t t = o / kInt4TileRows;
    const int64_t r = o % kInt4TileRows;
    for (int64_t g = 0; g < groups; ++g) {
      const size_t at = size_t(g * kInt4TileRows + r);
      const float d = f16_to_f32(m.tile_scales(t)[at]);
      if (!m.mins.empty()) {
        const float mn = f16_to_f32(m.tile_mins(t)[at]);
        for (int64_t k = g * gs; k < (g + 1) * gs; ++k)
          out[k] = float(int4_vnni16_code(m, o, k)) * d + mn;
        continue;
      }
      const int z = m.zeros.empty() ? kInt4SymZero : m.tile_zeros(t)[at];
      for (int64_t k = g * gs; k < (g + 1) * gs; ++k) {
        out[k] = d * float(int4_vnni16_code(m, o, k) - z);
      }
    }
  }
}

void dequantize_int4_rows_ref(const Int4Rows& m, int64_t o_begin, int64_t o_end, float* out) {
  const int64_t groups = m.groups_per_row();
  const int gs = m.fmt.group_size;
  for (int64_t o = o_begin; o < o_end; ++o, out += m.n_in) {
    for (int64_t g = 0; g < groups; ++g) {
      const float d = f16_to_f32(m.scales[size_t(o * groups + g)]);
      if (!m.mins.empty()) {
        const float mn = f16_to_f32(m.mins[size_t(o * groups + g)]);
        for (int64_t k = g * gs; k < (g + 1) * gs; ++k)
          out[k] = float(int4_rows_code(m, o, k)) * d + mn;
        continue;
      }
      const int z = m.zero(o, g);
      for (int64_t k = g * gs; k < (g + 1) * gs; ++k)
        out[k] = d * float(int4_rows_code(m, o, k) - z);
    }
  }
}

void dequantize_int4_blocks64_ref(const Int4Blocks64& m, int64_t o_begin, int64_t o_end,
                                  float* out) {
  const int gs = m.fmt.group_size;
  for (int64_t o = o_begin; o < o_end; ++o, out += m.n_in) {
    for (int64_t k = 0; k < m.n_in; ++k) {
      const int64_t g = k / gs;
      const float d = f16_to_f32(m.scales[size_t(g * m.n_out + o)]);
      if (!m.mins.empty()) {
        out[k] =
            float(int4_blocks64_code(m, o, k)) * d + f16_to_f32(m.mins[size_t(g * m.n_out + o)]);
      } else {
        out[k] = d * float(int4_blocks64_code(m, o, k) - m.zero(g, o));
      }
    }
  }
}

}  // namespace fish
