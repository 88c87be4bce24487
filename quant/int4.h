// Packed int4 weights for the CPU W4A8 / W4A16 paths (seed 002): groups of 32, 64 or 128 weights
// along K (one output row's input dimension), 4-bit codes q in 0..15, an f16 scale d per group,
// and one of three zero points:
//   sym:  w = d * (q - 8)   constant zero 8; d = (the group's value of largest magnitude) / -8 (as
//                            ggml q4_0: the extreme lands on code 0 exactly, all 16 codes used);
//   asym: w = d * (q - z)   integer z in 0..15 per group; d = (max - min) / 15,
//                            z = round(-min / d) clamped to 0..15 (as GPTQ);
//   fp:   w = d * q + m     f16 offset m per group (a float zero point, as PyTorch tinygemm's bf16
//                            zeros): the least-squares fit of (d, m) to the group (min/max start,
//                            then alternating code / (d, m) least-squares steps, keeping the
//                            lowest squared error after f16 rounding).
// Codes are computed with the f16-rounded scale (and offset), so dequantisation reproduces what
// was fitted.
//
// Why fp: it makes the 4-bit GGUF types repack exactly, with no second 4-bit fit (a second fit
// adds an error as large as the first). int4_repack_is_exact() lists the exact sources:
//   q4_0 -> g32 sym / asym / fp   (d, z = 8, codes as they are; fp: m = -8 d, exact in f16, and
//                                 d q + m = d (q - 8) exactly, but +0 where q4_0 gives -0)
//   q4_1 -> g32 fp                (its {f16 d, f16 m, 16 bytes} block IS the fish_i4fp_g32 block)
//   q4_k -> g32 fp                d' = f16(d * sc), m' = f16(-dmin * mn) per 32-weight sub-block:
//                                 only the f16 rounding of the two products, so per weight
//                                 |w' - w| <= 2^-11 (15 |d sc| + |dmin mn|) + 2^-23 |w| + 2^-21
//                                 (the last term only where a product is an f16 subnormal).
// Every other source (q5/q6/q8, f16, other group sizes) is dequantised to f32 and fitted: lossy.
// Exact means the f32 dequantisation equals the GGUF dequantiser's bit for bit (q4_1; q4_0 up to
// the sign of zero under fp).
//
// Two layouts of the same codes, scales and zero points:
//
// Int4Vnni16 — the W4A8 layout, 16-row tiles interleaved for VNNI / AMX:
//   qs     [ceil(n_out / 16)][n_in / 8][16 rows][4 bytes]   tile t, k-octet j, row r, byte i
//                                   (0..3): low nibble = code of (row 16t + r, k = 8j + i), high
//                                   nibble = code of (row 16t + r, k = 8j + i + 4);
//   scales [ceil(n_out / 16)][n_in / group][16]   f16;
//   zeros  [ceil(n_out / 16)][n_in / group][16]   0..15, asym only (empty for sym and fp);
//   mins   [ceil(n_out / 16)][n_in / group][16]   f16 offsets m, fp only (empty otherwise).
//   Rows past n_out in the last tile are padding (codes, scales, zeros and mins 0).
//   Why: 64 bytes masked with 0x0F are, per row lane, the codes of k..k+3 as one VNNI dword, and
//   shifted right by 4 those of k+4..k+7. One vpdpbusd with a broadcast activation dword adds 64
//   products into 16 row sums that are already in lanes (no horizontal sums, no shuffles; a
//   group's scales are one 16-lane load), and the same 64 bytes are one AMX B-tile row
//   (B[k/4][4n + k%4]), so prefill builds tiles with a mask and a shift.
//
// Int4Rows — row-major groups (the row-major duplicate the W4A16 prefill reads when direct
// dequantisation is off):
//   qs     [n_out][n_in / 2]        each 32-weight chunk of a row is 16 bytes: byte j low nibble =
//                                   weight j, high nibble = weight j + 16 (ggml q4_0 order);
//   scales [n_out][n_in / group]    f16;
//   zeros  [n_out][n_in / group]    0..15, asym only (empty for sym and fp);
//   mins   [n_out][n_in / group]    f16 offsets, fp only.
//
// Int4Blocks64 — the W4A16 layout, exactly the seed's tinygemm layout:
//   qs     [n_out / 64][n_in][32 bytes]   full blocks: byte d of (block b, k) holds output channel
//                                         64b + d in its low nibble and 64b + d + 32 in its high
//                                         nibble — the same permutation for every k and block;
//          then the tail block when n_out % 64 = T != 0: [n_in][h bytes], h = ceil(T / 2), byte d
//          low nibble = channel 64*(n_out/64) + d, high nibble = channel ... + d + h (the last high
//          nibble is padding, code 0, when T is odd);
//   scales [n_in / group][n_out]          f16, channel-contiguous so a block reads 64 at once;
//   zeros  [n_in / group][n_out]          0..15, asym only;
//   mins   [n_in / group][n_out]          f16 offsets, fp only.
//   The tail is narrower than a block, so a reshape that assumes [N/64][K][32] misreads it:
//   supports_direct_dequant() is false for such matrices and their prefill keeps a row-major
//   (Int4Rows) duplicate instead.
//
// GGUF storage — FISH tensor types fish_i4_g32 / fish_i4_g64 / fish_i4_g128 (ids kFishTypeBase +
// group size, outside GGML's range), written by `fish quantize-w4`: row-major blocks, one per
// group:
//   BlockFishI4<G> { f16 d; u8 z; u8 reserved (0); qs[G/2] }  w = d * (q - z),
// qs in Int4Rows chunk order (per 32 weights: byte j low = weight j, high = weight j + 16). The
// zero point is stored for sym too (always 8; GGUF key fish.int4.zero_point says which fit made
// it). The fp zero point has its own types fish_i4fp_g32 / g64 / g128 (ids kFishTypeBase + 256 +
// group size; fish.int4.zero_point = "fp"), the same bytes per block with u8 z + reserved
// replaced by the f16 offset:
//   BlockFishI4Fp<G> { f16 d; f16 m; qs[G/2] }  w = d * q + m   (G = 32: byte-identical to q4_1).
// Loading converts the codes into Int4Vnni16 / Int4Blocks64 exactly (no re-fitting).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "quant/types.h"

namespace fish {

enum class Int4ZeroPoint : uint8_t { sym, asym, fp };

inline constexpr int kInt4SymZero = 8;         // the constant zero point of the sym grid
inline constexpr int kInt4BlockChannels = 64;  // output channels per Int4Blocks64 block
inline constexpr int kInt4ChunkWeights = 32;   // weights per 16-byte Int4Rows chunk

std::string_view int4_zero_point_name(Int4ZeroPoint z);  // "sym", "asym", "fp"
std::optional<Int4ZeroPoint> parse_int4_zero_point(std::string_view s);
bool is_valid_int4_group_size(int64_t group_size);  // 32, 64 or 128

template <int G>
struct BlockFishI4 {
  uint16_t d;        // f16 scale
  uint8_t z;         // zero point (8 for sym)
  uint8_t reserved;  // 0
  uint8_t qs[G / 2];
};
static_assert(sizeof(BlockFishI4<32>) == 20, "fish_i4_g32: 5 bits per weight");
static_assert(sizeof(BlockFishI4<64>) == 36, "fish_i4_g64: 4.5 bits per weight");
static_assert(sizeof(BlockFishI4<128>) == 68, "fish_i4_g128: 4.25 bits per weight");

template <int G>
struct BlockFishI4Fp {
  uint16_t d;  // f16 scale
  uint16_t m;  // f16 offset: w = d * q + m
  uint8_t qs[G / 2];
};
static_assert(sizeof(BlockFishI4Fp<32>) == 20, "fish_i4fp_g32: 5 bits per weight (as q4_1)");
static_assert(sizeof(BlockFishI4Fp<64>) == 36, "fish_i4fp_g64: 4.5 bits per weight");
static_assert(sizeof(BlockFishI4Fp<128>) == 68, "fish_i4fp_g128: 4.25 bits per weight");

// Rows of the GGUF types (n % G == 0): the asym fit (quantize_int4_group_ref), and back to f32.
template <int G>
void quantize_row_fish_i4_ref(const float* x, BlockFishI4<G>* y, int64_t n);
template <int G>
void dequantize_row_fish_i4(const BlockFishI4<G>* x, float* y, int64_t n);
// Same with an explicit fit, sym or asym (sym writes z = 8); fp rows are BlockFishI4Fp, below.
template <int G>
void quantize_row_fish_i4_fit(const float* x, BlockFishI4<G>* y, int64_t n, Int4ZeroPoint zp);
// The fp types (n % G == 0): the fp fit (quantize_int4_group_fp_ref), and back to f32
// (w = f32(d) * f32(q) + f32(m): d * q is exact in f32, so one rounding, as ggml's q4_1).
template <int G>
void quantize_row_fish_i4fp_ref(const float* x, BlockFishI4Fp<G>* y, int64_t n);
template <int G>
void dequantize_row_fish_i4fp(const BlockFishI4Fp<G>* x, float* y, int64_t n);

struct Int4Format {
  int group_size = 128;  // weights per group along n_in: 32, 64 or 128
  Int4ZeroPoint zero_point = Int4ZeroPoint::sym;
};

// Fits one group of `group_size` weights: codes (one per byte, 0..15), f16 scale, zero point.
// Precondition: is_valid_int4_group_size(fmt.group_size); fmt.zero_point is sym or asym; w finite.
void quantize_int4_group_ref(const float* w, Int4Format fmt, uint8_t* codes, uint16_t* scale_f16,
                             uint8_t* zero);
// The fp fit of n weights (any n >= 1): codes, f16 scale d and f16 offset m, w ~ d * q + m.
// Precondition: w finite.
void quantize_int4_group_fp_ref(const float* w, int n, uint8_t* codes, uint16_t* scale_f16,
                                uint16_t* min_f16);

// The GGUF type that stores fmt: fish_i4_g<G> (sym, asym) or fish_i4fp_g<G> (fp).
// Precondition: is_valid_int4_group_size(fmt.group_size).
GgmlType fish_i4_type(Int4Format fmt);
// Whether rows of `src` become rows of fish_i4_type(fmt) with their own codes, scales and
// offsets (no f32 round trip and re-fit): q4_0 at g32 (any zero point), q4_1 and q4_k at g32 fp.
bool int4_repack_is_exact(GgmlType src, Int4Format fmt);
// One row of n weights of type `src` as a row of fish_i4_type(fmt): the exact repack when
// int4_repack_is_exact, otherwise dequantised (type_info(src).dequantize_row, into scratch, n
// floats) and fitted. Preconditions: n % fmt.group_size == 0 (and n % 256 for q4_k), src
// decodable (type_info(src).dequantize_row != nullptr). Returns whether the row was repacked
// exactly (false also when an exact source's f16 scale or offset would overflow: fitted then).
bool pack_row_fish_i4(GgmlType src, const void* row, int64_t n, Int4Format fmt, void* dst,
                      float* scratch);

inline constexpr int kInt4TileRows = 16;  // output rows per Int4Vnni16 tile

struct Int4Vnni16 {
  int64_t n_out = 0;
  int64_t n_in = 0;
  Int4Format fmt;
  std::vector<uint8_t> qs;       // [tiles][n_in/8][16][4], see above
  std::vector<uint16_t> scales;  // [tiles][n_in/group][16] f16
  std::vector<uint8_t> zeros;    // [tiles][n_in/group][16] (asym), empty (sym, fp)
  std::vector<uint16_t> mins;    // [tiles][n_in/group][16] f16 offsets (fp), empty otherwise

  int64_t tiles() const { return (n_out + kInt4TileRows - 1) / kInt4TileRows; }
  int64_t groups_per_row() const { return n_in / fmt.group_size; }
  const uint8_t* tile_qs(int64_t t) const { return qs.data() + size_t(t * n_in * 8); }
  const uint16_t* tile_scales(int64_t t) const {
    return scales.data() + size_t(t * groups_per_row() * kInt4TileRows);
  }
  const uint8_t* tile_zeros(int64_t t) const {  // nullptr for sym and fp
    return zeros.empty() ? nullptr : zeros.data() + size_t(t * groups_per_row() * kInt4TileRows);
  }
  const uint16_t* tile_mins(int64_t t) const {  // nullptr unless fp
    return mins.empty() ? nullptr : mins.data() + size_t(t * groups_per_row() * kInt4TileRows);
  }
  size_t bytes() const { return qs.size() + scales.size() * 2 + zeros.size() + mins.size() * 2; }
};

struct Int4Rows {
  int64_t n_out = 0;
  int64_t n_in = 0;
  Int4Format fmt;
  std::vector<uint8_t> qs;       // [n_out][n_in/2], chunk order above
  std::vector<uint16_t> scales;  // [n_out][n_in/group] f16
  std::vector<uint8_t> zeros;    // [n_out][n_in/group] (asym), empty (sym, fp)
  std::vector<uint16_t> mins;    // [n_out][n_in/group] f16 offsets (fp), empty otherwise

  int64_t groups_per_row() const { return n_in / fmt.group_size; }
  int zero(int64_t row, int64_t g) const {  // sym / asym only
    return zeros.empty() ? kInt4SymZero : zeros[size_t(row * groups_per_row() + g)];
  }
  size_t bytes() const { return qs.size() + scales.size() * 2 + zeros.size() + mins.size() * 2; }
};

struct Int4Blocks64 {
  int64_t n_out = 0;
  int64_t n_in = 0;
  Int4Format fmt;
  std::vector<uint8_t> qs;       // full blocks, then the tail block, see above
  std::vector<uint16_t> scales;  // [n_in/group][n_out] f16
  std::vector<uint8_t> zeros;    // [n_in/group][n_out] (asym), empty (sym, fp)
  std::vector<uint16_t> mins;    // [n_in/group][n_out] f16 offsets (fp), empty otherwise

  int64_t full_blocks() const { return n_out / kInt4BlockChannels; }
  int64_t tail_channels() const { return n_out % kInt4BlockChannels; }
  int64_t tail_half() const { return (tail_channels() + 1) / 2; }  // h: bytes per k of the tail
  const uint8_t* block(int64_t b) const { return qs.data() + size_t(b * n_in * 32); }
  const uint8_t* tail() const { return block(full_blocks()); }
  int zero(int64_t g, int64_t channel) const {  // sym / asym only
    return zeros.empty() ? kInt4SymZero : zeros[size_t(g * n_out + channel)];
  }
  // The seed's rule: direct dequantisation reshapes [N/64][K][32], so N must tile 64.
  bool supports_direct_dequant() const { return tail_channels() == 0; }
  size_t bytes() const { return qs.size() + scales.size() * 2 + zeros.size() + mins.size() * 2; }
};

// Packs n_out rows of n_in f32 weights (row-major). Preconditions: n_out >= 1,
// is_valid_int4_group_size(fmt.group_size), n_in % fmt.group_size == 0, w finite.
Int4Vnni16 pack_int4_vnni16_ref(const float* w, int64_t n_out, int64_t n_in, Int4Format fmt);
Int4Rows pack_int4_rows_ref(const float* w, int64_t n_out, int64_t n_in, Int4Format fmt);
Int4Blocks64 pack_int4_blocks64_ref(const float* w, int64_t n_out, int64_t n_in, Int4Format fmt);
// The same codes in the other layout (exact: no re-fitting).
Int4Rows int4_rows_from_blocks64(const Int4Blocks64& b);

// The codes of n_out GGUF rows (block_bytes * n_in / group bytes each, fish_i4_type(fmt)) in the
// kernels' layouts. Precondition: n_in % group == 0, group in 32/64/128. zero_point says how the
// rows read: fp rows are BlockFishI4Fp (offsets kept in mins); otherwise zeros are kept (asym) or
// must all be 8 (sym; other values make it return false).
bool int4_from_fish_i4(const uint8_t* rows, int64_t n_out, int64_t n_in, Int4Format fmt,
                       Int4Vnni16* vnni, Int4Blocks64* blocks);

// Code of (row o, input k), read through each layout's documented indexing.
int int4_vnni16_code(const Int4Vnni16& m, int64_t o, int64_t k);
int int4_rows_code(const Int4Rows& m, int64_t o, int64_t k);
int int4_blocks64_code(const Int4Blocks64& m, int64_t o, int64_t k);

// Dequantise: out gets rows [o_begin, o_end) x n_in f32, row-major, w = f32(scale) * f32(q - z),
// fp: f32(scale) * f32(q) + f32(m) (one rounding either way: the products are exact in f32; every
// layout gives bit-identical values for the same codes).
void dequantize_int4_vnni16_ref(const Int4Vnni16& m, int64_t o_begin, int64_t o_end, float* out);
void dequantize_int4_rows_ref(const Int4Rows& m, int64_t o_begin, int64_t o_end, float* out);
void dequantize_int4_blocks64_ref(const Int4Blocks64& m, int64_t o_begin, int64_t o_end,
                                  float* out);

}  // namespace fish
