// fish quantize-w4 (engine/quantize_w4.h) on the real SmolLM2 model: which tensors become
// fish_i4, that the file reads back through the GGUF reader and the model loader, that the int4
// codes convert exactly into the kernels' layouts, the exact fp repack of q4_1, and the errors
// for bad options.
#include "engine/quantize_w4.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/gguf.h"
#include "engine/model.h"
#include "quant/dequantize.h"
#include "quant/error_metrics.h"
#include "test_env.h"

namespace fish {
namespace {

const std::string kSmol = "SmolLM2-135M-Instruct.Q4_1.gguf";

std::vector<float> dequant_all(const GgufTensorInfo& t) {
  std::vector<float> out(size_t(t.n_elems));
  EXPECT_TRUE(dequantize_row_checked(t.type, t.data, out.data(), int64_t(t.n_elems), t.name).ok());
  return out;
}

TEST(QuantizeW4, PacksLinearLayersAndUntiesTheHeadOfATiedModel) {
  test::TempDir dir;
  const std::string out = dir.file("smol_w4.gguf");
  QuantizeW4Options opt;
  opt.fmt = {64, Int4ZeroPoint::asym};
  auto r = quantize_w4_gguf(test::model_path(kSmol), out, opt);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r.value().untied_head);
  EXPECT_EQ(r.value().tensors_packed, 30 * 7 + 1);

  auto in = GgufFile::open(test::model_path(kSmol));
  auto q = GgufFile::open(out);
  ASSERT_TRUE(in.ok() && q.ok());
  EXPECT_EQ(q.value().get_int("fish.int4.group_size").value(), 64);
  EXPECT_EQ(q.value().get_string("fish.int4.zero_point").value(), "asym");
  for (const GgufTensorInfo& t : q.value().tensors()) {
    const bool linear = t.name.starts_with("blk.") && t.dims.size() == 2;
    if (linear || t.name == "output.weight") {
      ASSERT_EQ(t.type, GgmlType::fish_i4_g64) << t.name;
    } else {
      ASSERT_NE(t.type, GgmlType::fish_i4_g64) << t.name;
    }
  }
  // The head is the embedding's int4 copy; a layer matrix stays close to its Q4_1 original.
  const GgufTensorInfo* head = q.value().find_tensor("output.weight");
  const GgufTensorInfo* embd = in.value().find_tensor("token_embd.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_LT(relative_rms_error(dequant_all(*embd), dequant_all(*head)), 0.15);
  const GgufTensorInfo* up_q = q.value().find_tensor("blk.3.ffn_up.weight");
  const GgufTensorInfo* up = in.value().find_tensor("blk.3.ffn_up.weight");
  EXPECT_LT(relative_rms_error(dequant_all(*up), dequant_all(*up_q)), 0.15);

  // The model loader accepts the file (untied head) and the codes convert exactly.
  auto model = Model::load(out);
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_FALSE(model.value()->params().tied_output);
  Int4Vnni16 v;
  Int4Blocks64 b;
  ASSERT_TRUE(int4_from_fish_i4(up_q->data, up_q->n_rows(), up_q->dims[0], opt.fmt, &v, &b));
  std::vector<float> from_vnni(size_t(up_q->n_elems));
  dequantize_int4_vnni16_ref(v, 0, v.n_out, from_vnni.data());
  EXPECT_EQ(from_vnni, dequant_all(*up_q));
}

TEST(QuantizeW4, SymKeepsTheHeadWhenAskedAndWritesZeroPointEight) {
  test::TempDir dir;
  const std::string out = dir.file("smol_sym.gguf");
  QuantizeW4Options opt;
  opt.fmt = {32, Int4ZeroPoint::sym};
  opt.quantize_head = false;
  auto r = quantize_w4_gguf(test::model_path(kSmol), out, opt);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r.value().untied_head);
  auto q = GgufFile::open(out);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.value().find_tensor("output.weight"), nullptr);
  const GgufTensorInfo* t = q.value().find_tensor("blk.0.attn_q.weight");
  ASSERT_EQ(t->type, GgmlType::fish_i4_g32);
  Int4Vnni16 v;
  EXPECT_TRUE(int4_from_fish_i4(t->data, t->n_rows(), t->dims[0], opt.fmt, &v, nullptr));
}

TEST(QuantizeW4, FpAtGroup32RepacksTheQ4_1LayersBitExactlyAndFitsTheQ8_0Head) {
  test::TempDir dir;
  const std::string out = dir.file("smol_fp.gguf");
  QuantizeW4Options opt;
  opt.fmt = {32, Int4ZeroPoint::fp};
  auto r = quantize_w4_gguf(test::model_path(kSmol), out, opt);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().tensors_packed, 30 * 7 + 1);
  EXPECT_EQ(r.value().tensors_exact, 30 * 7);  // the q8_0 head (untied embedding) is fitted
  const auto& err = r.value().error_by_type;
  ASSERT_EQ(err.count(GgmlType::q4_1), 1u);
  ASSERT_EQ(err.count(GgmlType::q8_0), 1u);
  EXPECT_EQ(err.at(GgmlType::q4_1).tensors, 30 * 7);
  EXPECT_EQ(err.at(GgmlType::q4_1).err_sq, 0.0);
  EXPECT_GT(err.at(GgmlType::q8_0).rel_rms(), 0.0);
  EXPECT_LT(err.at(GgmlType::q8_0).rel_rms(), 0.15);

  auto in = GgufFile::open(test::model_path(kSmol));
  auto q = GgufFile::open(out);
  ASSERT_TRUE(in.ok() && q.ok());
  EXPECT_EQ(q.value().get_string("fish.int4.zero_point").value(), "fp");
  const GgufTensorInfo* up_q = q.value().find_tensor("blk.3.ffn_up.weight");
  const GgufTensorInfo* up = in.value().find_tensor("blk.3.ffn_up.weight");
  ASSERT_EQ(up_q->type, GgmlType::fish_i4fp_g32);
  EXPECT_EQ(dequant_all(*up_q), dequant_all(*up));  // the q4_1 blocks, unchanged
  Int4Blocks64 b;
  ASSERT_TRUE(int4_from_fish_i4(up_q->data, up_q->n_rows(), up_q->dims[0], opt.fmt, nullptr, &b));
  std::vector<float> from_blocks(size_t(up_q->n_elems));
  dequantize_int4_blocks64_ref(b, 0, b.n_out, from_blocks.data());
  EXPECT_EQ(from_blocks, dequant_all(*up));
}

TEST(QuantizeW4, RejectsABadGroupSizeAndAMissingInput) {
  test::TempDir dir;
  QuantizeW4Options opt;
  opt.fmt.group_size = 96;
  auto r = quantize_w4_gguf(test::model_path(kSmol), dir.file("x.gguf"), opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("group size 96"), std::string::npos) << r.error().message;
  opt.fmt.group_size = 128;
  auto missing = quantize_w4_gguf(dir.file("absent.gguf"), dir.file("y.gguf"), opt);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("absent.gguf"), std::string::npos);
}

TEST(QuantizeW4, RejectsRowsThatAreNotWholeGroups) {
  test::TempDir dir;
  QuantizeW4Options opt;
  opt.fmt.group_size = 128;  // SmolLM2's n_embd 576 = 4.5 x 128
  auto r = quantize_w4_gguf(test::model_path(kSmol), dir.file("z.gguf"), opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not a multiple of the group size 128"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace fish
