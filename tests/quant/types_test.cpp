// The type registry (quant/types.h) and the checked dequantiser (quant/dequantize.h).
#include "quant/types.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <vector>

#include "quant/dequantize.h"
#include "quant/q4_0.h"
#include "quant_reference.h"

namespace fish {
namespace {

TEST(QuantTypes, EveryGgmlEnumeratorIsRegisteredInIdOrder) {
  // clang-format off
  const std::vector<uint32_t> ids = {
      0,  1,  2,  3,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
      25, 26, 27, 28, 29, 30, 34, 35, 39, kFishTypeBase + 1, kFishTypeBase + 32, kFishTypeBase + 64,
      kFishTypeBase + 128, kFishTypeBase + 288, kFishTypeBase + 320,
      kFishTypeBase + 384};  // + FISH's fq3, fish_i4_g32/64/128, fish_i4fp_g32/64/128
  // clang-format on
  ASSERT_EQ(all_types().size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(uint32_t(all_types()[i].type), ids[i]);
    const TypeInfo* t = find_type(ids[i]);
    ASSERT_NE(t, nullptr) << "id " << ids[i];
    EXPECT_EQ(&type_info(t->type), t);
    EXPECT_GT(t->block_elems, 0);
    EXPECT_GT(t->block_bytes, 0u);
  }
}

TEST(QuantTypes, FishOwnTypesLieAboveEveryGgmlId) {
  for (const TypeInfo& t : all_types()) {
    EXPECT_EQ(is_fish_type(t.type), t.type == GgmlType::fq3 || is_fish_i4_type(t.type)) << t.name;
  }
  EXPECT_EQ(find_type(kFishTypeBase), nullptr);
  EXPECT_EQ(parse_type_name("FQ3"), GgmlType::fq3);
  EXPECT_EQ(row_bytes(GgmlType::fq3, 4096), 4096u / 256 * 112);
  EXPECT_DOUBLE_EQ(type_info(GgmlType::fq3).bits_per_weight(), 3.5);
}

TEST(QuantTypes, FindTypeRejectsUnknownIds) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 40u, 41u, 1000u, 0xffffffffu}) {
    EXPECT_EQ(find_type(id), nullptr) << "id " << id;
  }
}

TEST(QuantTypes, ParseTypeNameAcceptsLowerAndUpperCase) {
  EXPECT_EQ(parse_type_name("q4_k"), GgmlType::q4_k);
  EXPECT_EQ(parse_type_name("Q4_K"), GgmlType::q4_k);
  EXPECT_EQ(parse_type_name("BF16"), GgmlType::bf16);
  EXPECT_EQ(parse_type_name("iq2_xxs"), GgmlType::iq2_xxs);
  EXPECT_EQ(parse_type_name("mxfp4"), GgmlType::mxfp4);
  EXPECT_FALSE(parse_type_name("q4k").has_value());
  EXPECT_FALSE(parse_type_name("").has_value());
  EXPECT_FALSE(parse_type_name("q4_k ").has_value());
  for (const TypeInfo& t : all_types()) {
    EXPECT_EQ(parse_type_name(t.name), t.type) << t.name;
    EXPECT_EQ(type_name(t.type), t.name);
  }
}

TEST(QuantTypes, RowBytesIsWholeBlocksTimesBlockBytes) {
  EXPECT_EQ(row_bytes(GgmlType::f32, 7), 28u);
  EXPECT_EQ(row_bytes(GgmlType::q4_0, 4096), 4096u / 32 * 18);
  EXPECT_EQ(row_bytes(GgmlType::q4_k, 4096), 4096u / 256 * 144);
  EXPECT_EQ(row_bytes(GgmlType::q6_k, 0), 0u);
  EXPECT_DOUBLE_EQ(type_info(GgmlType::q4_k).bits_per_weight(), 4.5);
  EXPECT_DOUBLE_EQ(type_info(GgmlType::q6_k).bits_per_weight(), 6.5625);
  EXPECT_TRUE(type_info(GgmlType::q8_0).is_quantized());
  EXPECT_FALSE(type_info(GgmlType::bf16).is_quantized());
}

// Block geometry of every type must agree with gguf's GGML_QUANT_SIZES: a GGUF reader validates
// tensor extents with it. One known exception: gguf-py lists Q8_1 as 40 bytes (the historical
// f32 d and s); ggml's block_q8_1 is 36 bytes (f16 d, f16 s) and no GGUF file stores Q8_1.
TEST(QuantTypes, GeometryMatchesGgufPackageForEveryType) {
  test::TempDir dir;
  const std::string out = dir.file("sizes.json");
  const std::string err = test::run_quant_reference(dir, {"sizes " + out});
  ASSERT_EQ(err, "");
  std::ifstream in(out);
  const nlohmann::json sizes = nlohmann::json::parse(in);
  for (const TypeInfo& t : all_types()) {
    if (is_fish_type(t.type)) continue;  // FISH's own formats (fq3) are not GGML's
    const std::string id = std::to_string(uint32_t(t.type));
    ASSERT_TRUE(sizes.contains(id)) << t.name << " (id " << id << ") unknown to gguf";
    EXPECT_EQ(sizes[id][0].get<int64_t>(), t.block_elems) << t.name;
    if (t.type == GgmlType::q8_1) {
      EXPECT_EQ(t.block_bytes, 36u);
      continue;
    }
    EXPECT_EQ(sizes[id][1].get<size_t>(), t.block_bytes) << t.name;
  }
}

TEST(QuantTypes, DecodableTypesHaveDequantizersAndOthersDoNot) {
  for (GgmlType t :
       {GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q4_0, GgmlType::q4_1,
        GgmlType::q5_0, GgmlType::q5_1, GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k,
        GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::q8_k, GgmlType::fq3}) {
    EXPECT_NE(type_info(t).dequantize_row, nullptr) << type_name(t);
    EXPECT_NE(type_info(t).quantize_row, nullptr) << type_name(t);
  }
  for (GgmlType t : {GgmlType::iq2_xxs, GgmlType::iq4_xs, GgmlType::tq1_0, GgmlType::mxfp4,
                     GgmlType::i32, GgmlType::f64}) {
    EXPECT_EQ(type_info(t).dequantize_row, nullptr) << type_name(t);
  }
}

TEST(QuantTypes, CheckedDequantizeOfUnsupportedTypeNamesTensorAndType) {
  std::vector<uint8_t> block(66, 0);
  std::vector<float> out(256);
  const Status s = dequantize_row_checked(GgmlType::iq2_xxs, block.data(), out.data(), 256,
                                          "blk.3.ffn_up.weight");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("blk.3.ffn_up.weight"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("iq2_xxs"), std::string::npos) << s.error().message;
}

TEST(QuantTypes, CheckedDequantizeRejectsPartialBlocksAndUnknownIds) {
  std::vector<uint8_t> blocks(2 * sizeof(BlockQ4_0), 0);
  std::vector<float> out(64);
  const Status partial =
      dequantize_row_checked(GgmlType::q4_0, blocks.data(), out.data(), 40, "token_embd.weight");
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().message.find("token_embd.weight"), std::string::npos);
  EXPECT_NE(partial.error().message.find("q4_0"), std::string::npos);
  const Status unknown =
      dequantize_row_checked(GgmlType(31), blocks.data(), out.data(), 32, "output.weight");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("31"), std::string::npos);
}

TEST(QuantTypes, CheckedDequantizeDecodesSupportedType) {
  BlockQ4_0 b{};
  b.d = 0x3c00;  // f16 1.0
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  std::vector<float> out(32, -1.f);
  ASSERT_TRUE(dequantize_row_checked(GgmlType::q4_0, &b, out.data(), 32, "t").ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], float(j - 8));
    EXPECT_EQ(out[j + 16], float(15 - j - 8));
  }
}

}  // namespace
}  // namespace fish
