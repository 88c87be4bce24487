// Every tensor of both real models, dequantised by FISH, is bit-identical to the gguf package's
// dequantisation. Independent of FISH's GGUF reader: scripts/quant_reference.py lists each tensor's
// type, absolute file offset and size with gguf.GGUFReader and hashes gguf's float32 values; this
// test dequantises the bytes at that offset from a MappedFile and compares sha256 hashes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/sha256.h"
#include "quant/dequantize.h"
#include "quant/types.h"
#include "quant_reference.h"

namespace fish {
namespace {

// The reference JSON is cached in the build tree: gguf needs tens of seconds per model, and the
// script reuses it only while the model file, the gguf version and the script are unchanged.
nlohmann::json model_reference(const std::string& model, const std::string& file_name,
                               const test::TempDir& dir) {
  const std::filesystem::path cache_dir =
      std::filesystem::path(test::binary_dir()) / "quant_reference";
  std::filesystem::create_directories(cache_dir);
  const std::string json_path = (cache_dir / (file_name + ".json")).string();
  const std::string err = test::run_quant_reference(dir, {"tensors " + model + " " + json_path});
  EXPECT_EQ(err, "");
  std::ifstream in(json_path);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// On a hash mismatch: the first differing value, from a dump of gguf's values of that tensor.
std::string describe_mismatch(const std::string& model, const std::string& name,
                              const std::vector<float>& got, const test::TempDir& dir) {
  const std::string dump = dir.file("tensor.f32");
  const std::string err =
      test::run_quant_reference(dir, {"dump " + model + " " + name + " " + dump});
  if (!err.empty()) return err;
  const std::vector<float> want = test::read_floats(dump);
  const int64_t i = test::first_bit_mismatch(got, want);
  if (i < 0) return "no differing value found in the dump";
  if (size_t(i) >= got.size() || size_t(i) >= want.size()) {
    return "sizes differ: FISH " + std::to_string(got.size()) + ", gguf " +
           std::to_string(want.size());
  }
  return "first differing value " + std::to_string(i) + ": FISH " + std::to_string(got[size_t(i)]) +
         " gguf " + std::to_string(want[size_t(i)]);
}

void expect_every_tensor_matches(const char* file_name) {
  const std::string model = test::model_path(file_name);
  if (model.empty()) FAIL() << file_name << " not in FISH_MODELS_DIR (scripts/setup.sh)";
  test::TempDir dir;
  const nlohmann::json ref = model_reference(model, file_name, dir);
  ASSERT_TRUE(ref.is_object() && ref.contains("tensors")) << "no reference for " << model;
  auto file = MappedFile::open(model);
  ASSERT_TRUE(file.ok()) << file.error().message;

  std::map<std::string, int> tensors_per_type;
  std::vector<float> values;
  for (const nlohmann::json& t : ref["tensors"]) {
    const std::string name = t["name"].get<std::string>();
    const uint32_t type_id = t["type"].get<uint32_t>();
    const auto offset = t["offset"].get<size_t>();
    const auto n_bytes = t["n_bytes"].get<size_t>();
    const auto n = t["n_elements"].get<int64_t>();
    const TypeInfo* info = find_type(type_id);
    ASSERT_NE(info, nullptr) << name << ": type id " << type_id;
    ASSERT_EQ(row_bytes(info->type, n), n_bytes) << name;
    ASSERT_LE(offset + n_bytes, file->size()) << name;

    values.assign(size_t(n), 0.f);
    const Status s =
        dequantize_row_checked(info->type, file->data() + offset, values.data(), n, name);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ++tensors_per_type[std::string(info->name)];
    const std::string hash = sha256_hex(values.data(), values.size() * sizeof(float));
    if (hash != t["sha256"].get<std::string>()) {
      ADD_FAILURE() << file_name << ": tensor " << name << " (" << info->name << ", " << n
                    << " values at offset " << offset
                    << "): " << describe_mismatch(model, name, values, dir);
    }
  }
  std::string summary;
  for (const auto& [type, count] : tensors_per_type) {
    summary += type + ":" + std::to_string(count) + " ";
  }
  std::cout << file_name << ": " << ref["tensors"].size() << " tensors checked (" << summary
            << ")\n";
  EXPECT_GT(ref["tensors"].size(), 0u);
}

TEST(ModelTensors, SmolLm2EveryTensorDequantMatchesGgufPackage) {
  expect_every_tensor_matches(test::kSmolLm2);
}

TEST(ModelTensors, Gemma3EveryTensorDequantMatchesGgufPackage) {
  expect_every_tensor_matches(test::kGemma3);
}

}  // namespace
}  // namespace fish
