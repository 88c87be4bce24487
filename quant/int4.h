// Packed int4 weights for the CPU W4A8 / W4A16 paths (seed 002): groups of 32, 64 or 128 weights
// along K (one output row's input dimension), 4-bit codes q in 0..15, an f16 scale per group, and
// either the constant zero point 8 (sym) or a per-group zero point z in 0..15 (asym):
//   w = scale * (q - z).
// sym:  scale = (the group's value of largest magnitude) / -8, z = 8 (as ggml q4_0: the extreme
//       lands on code 0 exactly, the full 16 codes are used).
// asym: scale = (max - min) / 15, z = round(-min / scale) clamped to 0..15.
// Codes are computed with the f16-rounded scale, so dequantisation reproduces what was fitted.
//
// Two layouts of the same codes, scales and zero points:
//
// Int4Vnni16 — the W4A8 layout, 16-row tiles interleaved for VNNI / AMX:
//   qs     [ceil(n_out / 16)][n_in / 8][16 rows][4 bytes]   tile t, k-octet j, row r, byte i
//                                   (0..3): low nibble = code of (row 16t + r, k = 8j + i), high
//                                   nibble = code of (row 16t + r, k = 8j + i + 4);
//   scales [ceil(n_out / 16)][n_in / group][16]   f16;
//   zeros  [ceil(n_out / 16)][n_in / group][16]   0..15, asym only (empty for sym).
//   Rows past n_out in the last tile are padding (codes, scales and zeros 0).
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
//   zeros  [n_out][n_in / group]    0..15, asym only (empty for sym).
//
// Int4Blocks64 — the W4A16 layout, exactly the seed's tinygemm layout:
//   qs     [n_out / 64][n_in][32 bytes]   full blocks: byte d of (block b, k) holds output channel
//                                         64b + d in its low nibble and 64b + d + 32 in its high
//                                         nibble — the same permutation for every k and block;
//          then the tail block when n_out % 64 = T != 0: [n_in][h bytes], h = ceil(T / 2), byte d
//          low nibble = channel 64*(n_out/64) + d, high nibble = channel ... + d + h (the last high
//          nibble is padding, code 0, when T is odd);
//   scales [n_in / group][n_out]          f16, channel-contiguous so a block reads 64 at once;
//   zeros  [n_in / group][n_out]          0..15, asym only.
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
// it). Loading converts the codes into Int4Vnni16 / Int4Blocks64 exactly (no re-fitting).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace fish {

enum class Int4ZeroPoint : uint8_t { sym, asym };

inline constexpr int kInt4SymZero = 8;         // the constant zero point of the sym grid
inline constexpr int kInt4BlockChannels = 64;  // output channels per Int4Blocks64 block
inline constexpr int kInt4ChunkWeights = 32;   // weights per 16-byte Int4Rows chunk

std::string_view int4_zero_point_name(Int4ZeroPoint z);  // "sym", "asym"
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

// Rows of the GGUF types (n % G == 0): the asym fit (quantize_int4_group_ref), and back to f32.
template <int G>
void quantize_row_fish_i4_ref(const float* x, BlockFishI4<G>* y, int64_t n);
template <int G>
void dequantize_row_fish_i4(const BlockFishI4<G>* x, float* y, int64_t n);
// Same with an explicit fit (sym writes z = 8).
template <int G>
void quantize_row_fish_i4_fit(const float* x, BlockFishI4<G>* y, int64_t n, Int4ZeroPoint zp);

struct Int4Format {
  int group_size = 128;  // weights per group along n_in: 32, 64 or 128
  Int4ZeroPoint zero_point = Int4ZeroPoint::sym;
};

// Fits one group of `group_size` weights: codes (one per byte, 0..15), f16 scale, zero point.
// Precondition: is_valid_int4_group_size(fmt.group_size); w finite.
void quantize_int4_group_ref(const float* w, Int4Format fmt, uint8_t* codes, uint16_t* scale_f16,
                             uint8_t* zero);

inline constexpr int kInt4TileRows = 16;  // output rows per Int4Vnni16 tile

struct Int4Vnni16 {
  int64_t n_out = 0;
  int64_t n_in = 0;
  Int4Format fmt;
  std::vector<uint8_t> qs;       // [tiles][n_in/8][16][4], see above
  std::vector<uint16_t> scales;  // [tiles][n_in/group][16] f16
  std::vector<uint8_t> zeros;    // [tiles][n_in/group][16] (asym), empty (sym)

  int64_t tiles() const { return (n_out + kInt4TileRows - 1) / kInt4TileRows; }
  int64_t groups_per_row() const { return n_in / fmt.group_size; }
  const uint8_t* tile_qs(int64_t t) const { return qs.data() + size_t(t * n_in * 8); }
  const uint16_t* tile_scales(int64_t t) const {
    return scales.data() + size_t(t * groups_per_row() * kInt4TileRows);
  }
  const uint8_t* tile_zeros(int64_t t) const {  // nullptr for sym
    return zeros.empty() ? nullptr : zeros.data() + size_t(t * groups_per_row() * kInt4TileRows);
  }
  size_t bytes() const { return qs.size() + scales.size() * 2 + zeros.size(); }
};

struct Int4Rows {
  int64_t n_out = 0;
  int64_t n_in = 0;
  Int4Format fmt;
  std::vector<uint8_t> qs;       // [n_out][n_in/2], chunk order above
  std::vector<uint16_t> scales;  // [n_out][n_in/group] f16
  std::vector<uint8_t> zeros;    // [n_out][n_in/group] (asym), empty (sym)

  int64_t groups_per_row() const { return n_in / fmt.group_size; }
  int zero(int64_t row, int64_t g) const {
    return zeros.empty() ? kInt4SymZero : zeros[size_t(row * groups_per_row() + g)];
  }
  size_t bytes() const { return qs.size() + scales.size() * 2 + zeros.size(); }
};

struct Int4Blocks64 {
  int64_t n_out = 0;
  int64_t n_in = 0;
  Int4Format fmt;
  std::vector<uint8_t> qs;       // full blocks, then the tail block, see above
  std::vector<uint16_t> scales;  // [n_in/group][n_out] f16
  std::vector<uint8_t> zeros;    // [n_in/group][n_out] (asym), empty (sym)

  int64_t full_blocks() const { return n_out / kInt4BlockChannels; }
  int64_t tail_channels() const { return n_out % kInt4BlockChannels; }
  int64_t tail_half() const { return (tail_channels() + 1) / 2; }  // h: bytes per k of the tail
  const uint8_t* block(int64_t b) const { return qs.data() + size_t(b * n_in * 32); }
  const uint8_t* tail() const { return block(full_blocks()); }
  int zero(int64_t g, int64_t channel) const {
    return zeros.empty() ? kInt4SymZero : zeros[size_t(g * n_out + channel)];
  }
  // The seed's rule: direct dequantisation reshapes [N/64][K][32], so N must tile 64.
  bool supports_direct_dequant() const { return tail_channels() == 0; }
  size_t bytes() const { return qs.size() + scales.size() * 2 + zeros.size(); }
};

// Packs n_out rows of n_in f32 weights (row-major). Preconditions: n_out >= 1,
// is_valid_int4_group_size(fmt.group_size), n_in % fmt.group_size == 0, w finite.
Int4Vnni16 pack_int4_vnni16_ref(const float* w, int64_t n_out, int64_t n_in, Int4Format fmt);
Int4Rows pack_int4_rows_ref(const float* w, int64_t n_out, int64_t n_in, Int4Format fmt);
Int4Blocks64 pack_int4_blocks64_ref(const float* w, int64_t n_out, int64_t n_in, Int4Format fmt);
// The same codes in the other layout (exact: no re-fitting).
Int4Rows int4_rows_from_blocks64(const Int4Blocks64& b);

// The codes of n_out GGUF rows (block_bytes * n_in / group bytes each, fish_i4_g<group>) in the
// kernels' layouts. Precondition: n_in % group == 0, group in 32/64/128. zero_point only says
// whether zeros are kept (asym) or must all be 8 (sym; other values make it return false).
bool int4_from_fish_i4(const uint8_t* rows, int64_t n_out, int64_t n_in, Int4Format fmt,
                       Int4Vnni16* vnni, Int4Blocks64* blocks);

// Code of (row o, input k), read through each layout's documented indexing.
int int4_vnni16_code(const Int4Vnni16& m, int64_t o, int64_t k);
int int4_rows_code(const Int4Rows& m, int64_t o, int64_t k);
int int4_blocks64_code(const Int4Blocks64& m, int64_t o, int64_t k);

// Dequantise: out gets rows [o_begin, o_end) x n_in f32, row-major, w = f32(scale) * f32(q - z)
// (one rounding; both layouts give bit-identical values for the same codes).
void dequantize_int4_vnni16_ref(const Int4Vnni16& m, int64_t o_begin, int64_t o_end, float* out);
void dequantize_int4_rows_ref(const Int4Rows& m, int64_t o_begin, int64_t o_end, float* out);
void dequantize_int4_blocks64_ref(const Int4Blocks64& m, int64_t o_begin, int64_t o_end,
                                  float* out);

}  // namespace fish
