// Packed int4 weights (quant/int4.h): where every nibble lands in each layout, the group fit,
// and that both layouts dequantise to the same values.
#include "quant/int4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "quant/f16.h"
#include "quant/types.h"

namespace fish {
namespace {

std::vector<float> random_weights(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n));
  for (float& v : w) v = dist(rng);
  return w;
}

int nibble(const std::vector<uint8_t>& bytes, size_t i) {  // nibble i: byte i/2, low first
  return (i % 2 == 0) ? bytes[i / 2] & 0xF : bytes[i / 2] >> 4;
}

// Packs an all-zero matrix and, for every (o, k), the same matrix with one non-zero weight, and
// returns the position of the one nibble that changed (-1 if not exactly one did).
template <typename Pack>
std::vector<int64_t> one_hot_positions(int64_t n_out, int64_t n_in, Pack pack) {
  std::vector<float> w(size_t(n_out * n_in), 0.0f);
  const std::vector<uint8_t> base = pack(w);
  std::vector<int64_t> where;
  for (int64_t i = 0; i < n_out * n_in; ++i) {
    w[size_t(i)] = 1.0f;
    const std::vector<uint8_t> hot = pack(w);
    w[size_t(i)] = 0.0f;
    int64_t found = -1;
    int changed = 0;
    for (size_t b = 0; b < 2 * base.size(); ++b) {
      if (nibble(base, b) != nibble(hot, b)) {
        found = int64_t(b);
        ++changed;
      }
    }
    where.push_back(changed == 1 ? found : -1);
  }
  return where;
}

TEST(Int4Layout, Blocks64NibblesLandWhereTheSeedSaysIncludingTheTail) {
  const int64_t n_out = 80, n_in = 64;  // one 64-channel block + a 16-channel tail (h = 8)
  const Int4Format fmt{32, Int4ZeroPoint::sym};
  const std::vector<int64_t> pos = one_hot_positions(n_out, n_in, [&](const std::vector<float>& w) {
    return pack_int4_blocks64_ref(w.data(), n_out, n_in, fmt).qs;
  });
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t k = 0; k < n_in; ++k) {
      int64_t byte, high;
      if (o < 64) {  // [N/64][K][32]: byte d = channel d low, d + 32 high
        byte = k * 32 + o % 32;
        high = o >= 32;
      } else {  // tail after the full blocks: [K][8], byte d = channel d low, d + 8 high
        const int64_t c = o - 64;
        byte = 64 * n_in / 2 + k * 8 + c % 8;
        high = c >= 8;
      }
      ASSERT_EQ(pos[size_t(o * n_in + k)], 2 * byte + high) << "o=" << o << " k=" << k;
    }
  }
}

TEST(Int4Layout, Vnni16NibblesLandInRowLanesOfKOctets) {
  const int64_t n_out = 20, n_in = 64;  // a full 16-row tile + a padded one
  const Int4Format fmt{32, Int4ZeroPoint::sym};
  const std::vector<int64_t> pos = one_hot_positions(n_out, n_in, [&](const std::vector<float>& w) {
    return pack_int4_vnni16_ref(w.data(), n_out, n_in, fmt).qs;
  });
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t k = 0; k < n_in; ++k) {
      const int64_t byte = (o / 16) * n_in * 8 + (k / 8) * 64 + (o % 16) * 4 + k % 4;
      const int64_t high = (k % 8) >= 4;
      ASSERT_EQ(pos[size_t(o * n_in + k)], 2 * byte + high) << "o=" << o << " k=" << k;
    }
  }
}

TEST(Int4Layout, RowsChunksFollowQ4_0Order) {
  const int64_t n_out = 3, n_in = 64;
  const Int4Format fmt{64, Int4ZeroPoint::asym};
  const std::vector<int64_t> pos = one_hot_positions(n_out, n_in, [&](const std::vector<float>& w) {
    return pack_int4_rows_ref(w.data(), n_out, n_in, fmt).qs;
  });
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t k = 0; k < n_in; ++k) {
      const int64_t byte = o * n_in / 2 + (k / 32) * 16 + k % 16;
      ASSERT_EQ(pos[size_t(o * n_in + k)], 2 * byte + (k % 32 >= 16)) << o << " " << k;
    }
  }
}

TEST(Int4Layout, AllLayoutsHoldTheSameCodesScalesAndValues) {
  for (int gs : {32, 64, 128}) {
    for (Int4ZeroPoint zp : {Int4ZeroPoint::sym, Int4ZeroPoint::asym}) {
      const int64_t n_out = 67, n_in = 3 * gs;  // odd tail (T = 3: a padding nibble), 3 groups
      const Int4Format fmt{gs, zp};
      const std::vector<float> w = random_weights(n_out * n_in, 7);
      const Int4Blocks64 b = pack_int4_blocks64_ref(w.data(), n_out, n_in, fmt);
      const Int4Rows r = pack_int4_rows_ref(w.data(), n_out, n_in, fmt);
      const Int4Vnni16 v = pack_int4_vnni16_ref(w.data(), n_out, n_in, fmt);
      const Int4Rows converted = int4_rows_from_blocks64(b);
      EXPECT_EQ(converted.qs, r.qs);
      EXPECT_EQ(converted.scales, r.scales);
      EXPECT_EQ(converted.zeros, r.zeros);
      EXPECT_FALSE(b.supports_direct_dequant());
      std::vector<float> db(w.size()), dr(w.size()), dv(w.size());
      dequantize_int4_blocks64_ref(b, 0, n_out, db.data());
      dequantize_int4_rows_ref(r, 0, n_out, dr.data());
      dequantize_int4_vnni16_ref(v, 0, n_out, dv.data());
      EXPECT_EQ(db, dr);
      EXPECT_EQ(db, dv);
      for (int64_t o = 0; o < n_out; o += 11) {
        for (int64_t k = 0; k < n_in; k += 5) {
          ASSERT_EQ(int4_blocks64_code(b, o, k), int4_rows_code(r, o, k));
          ASSERT_EQ(int4_vnni16_code(v, o, k), int4_rows_code(r, o, k));
        }
      }
    }
  }
}

TEST(Int4Fit, ErrorIsWithinHalfAStepAndSymUsesTheConstantZero) {
  for (int gs : {32, 64, 128}) {
    for (Int4ZeroPoint zp : {Int4ZeroPoint::sym, Int4ZeroPoint::asym}) {
      const Int4Format fmt{gs, zp};
      const std::vector<float> w = random_weights(gs * 4, 3);
      for (int g = 0; g < 4; ++g) {
        std::vector<uint8_t> codes(static_cast<size_t>(gs));
        uint16_t scale = 0;
        uint8_t zero = 0;
        quantize_int4_group_ref(w.data() + g * gs, fmt, codes.data(), &scale, &zero);
        const float d = f16_to_f32(scale);
        if (zp == Int4ZeroPoint::sym) {
          EXPECT_EQ(zero, kInt4SymZero);
        }
        EXPECT_LE(zero, 15);
        const float lo = std::min(d * float(0 - int(zero)), d * float(15 - int(zero)));
        const float hi = std::max(d * float(0 - int(zero)), d * float(15 - int(zero)));
        for (int i = 0; i < gs; ++i) {
          ASSERT_LE(codes[size_t(i)], 15);
          const float v = w[size_t(g * gs + i)];
          const float back = d * float(int(codes[size_t(i)]) - int(zero));
          // Within half a step of v clamped to the grid's range (sym clips the side opposite
          // the extreme beyond 7 steps), plus the f16 rounding of the scale over 15 steps.
          const float clipped = std::clamp(v, lo, hi);
          EXPECT_NEAR(back, v,
                      std::fabs(v - clipped) + std::fabs(d) * (0.5f + 15 * 0x1p-11f) + 1e-6f)
              << "gs=" << gs << " " << int4_zero_point_name(zp);
          if (zp == Int4ZeroPoint::asym) {  // the grid covers the range up to z's rounding
            EXPECT_LE(std::fabs(v - clipped), std::fabs(d) * (0.5f + 15 * 0x1p-11f) + 1e-6f);
          }
        }
      }
    }
  }
}

TEST(Int4Fit, AsymFitsAnAllPositiveGroupBetterThanSym) {
  std::vector<float> w(32);
  for (int i = 0; i < 32; ++i) w[size_t(i)] = 1.0f + 0.03f * float(i);
  double err[2] = {0, 0};
  for (Int4ZeroPoint zp : {Int4ZeroPoint::sym, Int4ZeroPoint::asym}) {
    const Int4Rows r = pack_int4_rows_ref(w.data(), 1, 32, {32, zp});
    std::vector<float> back(32);
    dequantize_int4_rows_ref(r, 0, 1, back.data());
    for (int i = 0; i < 32; ++i) err[int(zp)] += std::fabs(double(back[size_t(i)] - w[size_t(i)]));
  }
  EXPECT_LT(err[1], err[0]);
}

TEST(Int4Names, ZeroPointsAndGroupSizesParse) {
  EXPECT_EQ(parse_int4_zero_point("sym"), Int4ZeroPoint::sym);
  EXPECT_EQ(parse_int4_zero_point("asym"), Int4ZeroPoint::asym);
  EXPECT_FALSE(parse_int4_zero_point("symmetric").has_value());
  EXPECT_TRUE(is_valid_int4_group_size(128));
  EXPECT_FALSE(is_valid_int4_group_size(96));
  EXPECT_FALSE(is_valid_int4_group_size(16));
}

}  // namespace
}  // namespace fish

namespace fish {
namespace {

template <int G>
void check_fish_i4_roundtrip(Int4ZeroPoint zp) {
  const int64_t n_out = 70, n_in = 3 * G;
  const std::vector<float> w = random_weights(n_out * n_in, G);
  std::vector<BlockFishI4<G>> rows(size_t(n_out * n_in / G));
  for (int64_t o = 0; o < n_out; ++o) {
    quantize_row_fish_i4_fit<G>(w.data() + o * n_in, rows.data() + o * n_in / G, n_in, zp);
  }
  const Int4Format fmt{G, zp};
  Int4Vnni16 v;
  Int4Blocks64 b;
  ASSERT_TRUE(
      int4_from_fish_i4(reinterpret_cast<const uint8_t*>(rows.data()), n_out, n_in, fmt, &v, &b));
  const Int4Vnni16 v_ref = pack_int4_vnni16_ref(w.data(), n_out, n_in, fmt);
  const Int4Blocks64 b_ref = pack_int4_blocks64_ref(w.data(), n_out, n_in, fmt);
  EXPECT_EQ(v.qs, v_ref.qs);
  EXPECT_EQ(v.scales, v_ref.scales);
  EXPECT_EQ(v.zeros, v_ref.zeros);
  EXPECT_EQ(b.qs, b_ref.qs);
  EXPECT_EQ(b.scales, b_ref.scales);
  EXPECT_EQ(b.zeros, b_ref.zeros);
  std::vector<float> from_gguf(w.size()), from_layout(w.size());
  type_info(GgmlType(kFishTypeBase + G))
      .dequantize_row(rows.data(), from_gguf.data(), n_out * n_in);
  dequantize_int4_rows_ref(pack_int4_rows_ref(w.data(), n_out, n_in, fmt), 0, n_out,
                           from_layout.data());
  EXPECT_EQ(from_gguf, from_layout);
  if (zp == Int4ZeroPoint::asym) {
    rows[1].z = 3;  // not 8: must be refused as sym
    EXPECT_FALSE(int4_from_fish_i4(reinterpret_cast<const uint8_t*>(rows.data()), n_out, n_in,
                                   {G, Int4ZeroPoint::sym}, &v, &b));
  }
}

TEST(Int4Gguf, FishI4RowsConvertExactlyIntoTheKernelLayouts) {
  for (Int4ZeroPoint zp : {Int4ZeroPoint::sym, Int4ZeroPoint::asym}) {
    check_fish_i4_roundtrip<32>(zp);
    check_fish_i4_roundtrip<64>(zp);
    check_fish_i4_roundtrip<128>(zp);
  }
  EXPECT_EQ(type_info(GgmlType::fish_i4_g128).block_bytes, sizeof(BlockFishI4<128>));
  EXPECT_TRUE(is_fish_type(GgmlType::fish_i4_g32));
  EXPECT_FALSE(is_fish_type(GgmlType::q4_k));
  EXPECT_TRUE(is_fish_i4_type(GgmlType::fish_i4_g128));
  EXPECT_FALSE(is_fish_i4_type(GgmlType::fq3));  // a FISH type, not an int4 one
}

}  // namespace
}  // namespace fish
