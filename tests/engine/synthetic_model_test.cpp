#include "engine/synthetic_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "base/sha256.h"
#include "engine/gguf.h"
#include "test_env.h"

namespace fish {
namespace {

// The type of every tensor in a real llama.cpp-quantised file, by name.
std::map<std::string, GgmlType> real_types(const std::string& path) {
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
  std::map<std::string, GgmlType> m;
  if (f.ok())
    for (const GgufTensorInfo& t : f->tensors()) m[t.name] = t.type;
  return m;
}

void expect_same_tensors_as_real_file(const char* shape_name, const char* ftype_name,
                                      const char* model_file) {
  const std::string path = test::model_path(model_file);
  ASSERT_FALSE(path.empty()) << model_file << " missing: run scripts/setup.sh";
  const auto real = real_types(path);
  auto ft = parse_file_type(ftype_name);
  ASSERT_TRUE(ft.ok()) << ft.error().message;
  const auto synth = synthetic_tensors(*find_model_shape(shape_name), ft.value());
  ASSERT_EQ(synth.size(), real.size());
  for (const SyntheticTensor& t : synth) {
    auto it = real.find(t.name);
    ASSERT_NE(it, real.end()) << "synthetic tensor " << t.name << " is not in " << model_file;
    EXPECT_EQ(type_name(t.type), type_name(it->second)) << t.name;
  }
}

TEST(SyntheticModel, Gemma3Q4KMHasTheRealFilesTypeMix) {
  // The real file exercises every rule: q6_k head (tied -> token_embd) falling back to q8_0 at
  // row 640, use_more_bits() layers, and q4_k -> q5_0 fallbacks.
  expect_same_tensors_as_real_file("gemma3-270m", "q4_k_m", test::kGemma3);
}

TEST(SyntheticModel, SmolLM2Q41HasTheRealFilesTypeMix) {
  expect_same_tensors_as_real_file("smollm2-135m", "q4_1", test::kSmolLm2);
}

TEST(SyntheticModel, FileIsIdenticalForAnyThreadCountAndLoads) {
  const auto dir = test::temp_dir();
  const std::string a = (dir / "fish_synth_1t.gguf").string();
  const std::string b = (dir / "fish_synth_3t.gguf").string();
  auto ft = parse_file_type("q4_k_m");
  ASSERT_TRUE(ft.ok());
  const ModelShape& shape = *find_model_shape("tiny");
  ASSERT_TRUE(write_synthetic_model(shape, ft.value(), {7, 1}, a).ok());
  ASSERT_TRUE(write_synthetic_model(shape, ft.value(), {7, 3}, b).ok());
  EXPECT_EQ(sha256_file_hex(a).value(), sha256_file_hex(b).value());

  auto f = GgufFile::open(a);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->get_string("general.architecture").value(), "llama");
  EXPECT_EQ(f->get_int("llama.block_count").value(), shape.n_layer);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").value().size(), size_t(shape.n_vocab));
  const GgufTensorInfo* q = f->find_tensor("blk.1.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GgmlType::q4_k);
  EXPECT_EQ(q->dims, (std::vector<int64_t>{shape.n_embd, int64_t(shape.n_head) * shape.head_dim}));
  // Random weights with std 0.02: the decoded tensor must look like that, not zeros or noise.
  std::vector<float> row(size_t(q->dims[0]));
  type_info(q->type).dequantize_row(q->data, row.data(), q->dims[0]);
  double ss = 0;
  for (float x : row) ss += double(x) * x;
  const double rms = std::sqrt(ss / double(row.size()));
  EXPECT_GT(rms, 0.015);
  EXPECT_LT(rms, 0.025);

  auto other_seed = write_synthetic_model(shape, ft.value(), {8, 1}, b);
  ASSERT_TRUE(other_seed.ok());
  EXPECT_NE(sha256_file_hex(a).value(), sha256_file_hex(b).value());
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(SyntheticModel, UnknownFileTypeListsTheChoices) {
  auto ft = parse_file_type("q3_xl");
  ASSERT_FALSE(ft.ok());
  EXPECT_NE(ft.error().message.find("q3_xl"), std::string::npos);
  EXPECT_NE(ft.error().message.find("q4_k_m"), std::string::npos);
}

}  // namespace
}  // namespace fish
