// GGUF writer: round trips through FISH's reader, cross-checks against the independent `gguf`
// Python package in both directions (scripts/gguf_dump.py reads, scripts/gguf_make_test_file.py
// writes), atomic replacement, and the writer's validation errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "engine/gguf.h"
#include "test_env.h"

namespace fish {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using json = nlohmann::json;

// ---- helpers
// -------------------------------------------------------------------------------------

using test::TempDir;

// Runs a shell command; returns its stdout, failing the test on a non-zero exit.
std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    ADD_FAILURE() << "popen failed: " << cmd;
    return out;
  }
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << "command failed: " << cmd;
  return out;
}

std::string script(const char* name) {
  return test::source_dir() + "/scripts/" + name;
}

// The gguf package's view of a file (scripts/gguf_dump.py).
json python_dump(const std::string& path) {
  std::string out = run_capture(test::python() + " " + script("gguf_dump.py") + " '" + path + "'");
  return json::parse(out, nullptr, /*allow_exceptions=*/false);
}

// FISH's view of a value, in gguf_dump.py's format.
json value_json(const GgufValue& v) {
  if (const GgufArray* a = v.as_array()) {
    json items = json::array();
    for (const GgufValue& item : a->items) items.push_back(value_json(item));
    return {{"elem_type", std::string(gguf_value_type_name(a->elem_type))}, {"items", items}};
  }
  if (const std::string* s = v.as_string()) return *s;
  if (const bool* b = std::get_if<bool>(&v.v)) return *b;
  if (const float* f = std::get_if<float>(&v.v)) return double(*f);
  if (const double* d = std::get_if<double>(&v.v)) return *d;
  if (const uint64_t* u = std::get_if<uint64_t>(&v.v)) return *u;
  return *v.as_int();
}

// FISH's view of a whole file, in gguf_dump.py's format.
json file_json(const GgufFile& f) {
  json kvs = json::array();
  for (const GgufKv& kv : f.metadata()) {
    kvs.push_back({{"key", kv.key},
                   {"type", std::string(gguf_value_type_name(kv.value.type()))},
                   {"value", value_json(kv.value)}});
  }
  json tensors = json::array();
  for (const GgufTensorInfo& t : f.tensors()) {
    tensors.push_back({{"name", t.name},
                       {"type", uint32_t(t.type)},
                       {"dims", t.dims},
                       {"offset", t.offset},
                       {"n_bytes", t.n_bytes},
                       {"sha256", sha256_hex(t.data, size_t(t.n_bytes))}});
  }
  return {{"version", f.version()},
          {"alignment", f.alignment()},
          {"data_offset", f.data_offset()},
          {"kvs", kvs},
          {"tensors", tensors}};
}

// Reports the first differing entry instead of two multi-megabyte JSON dumps.
void expect_same_json(const json& fish, const json& python) {
  ASSERT_FALSE(python.is_discarded()) << "gguf_dump.py printed invalid JSON";
  for (const char* k : {"version", "alignment", "data_offset"}) {
    EXPECT_EQ(fish[k], python[k]) << k;
  }
  for (const char* list : {"kvs", "tensors"}) {
    ASSERT_EQ(fish[list].size(), python[list].size()) << list;
    for (size_t i = 0; i < fish[list].size(); ++i) {
      EXPECT_EQ(fish[list][i], python[list][i])
          << list << "[" << i << "]: FISH " << fish[list][i].dump().substr(0, 400) << "\n python "
          << python[list][i].dump().substr(0, 400);
    }
  }
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (uint8_t& x : b) x = uint8_t(rng());
  return b;
}

uint64_t tensor_bytes(GgmlType t, const std::vector<int64_t>& dims) {
  uint64_t n = 1;
  for (int64_t d : dims) n *= uint64_t(d);
  const TypeInfo& ti = type_info(t);
  return n / uint64_t(ti.block_elems) * ti.block_bytes;
}

// Metadata with every value type, extremes, UTF-8 and NUL bytes, empty and nested arrays.
void add_every_value_type(GgufWriter& w) {
  w.set("general.architecture", gguf_str("test"));
  w.set("t.u8", gguf_u8(255));
  w.set("t.i8", gguf_i8(-128));
  w.set("t.u16", gguf_u16(65535));
  w.set("t.i16", gguf_i16(-32768));
  w.set("t.u32", gguf_u32(4294967295u));
  w.set("t.i32", gguf_i32(std::numeric_limits<int32_t>::min()));
  w.set("t.u64", gguf_u64(std::numeric_limits<uint64_t>::max()));
  w.set("t.i64", gguf_i64(std::numeric_limits<int64_t>::min()));
  w.set("t.f32", gguf_f32(-0.15625f));
  w.set("t.f32_tiny", gguf_f32(1e-40f));  // subnormal
  w.set("t.f64", gguf_f64(1.0e300));
  w.set("t.bool_true", gguf_bool(true));
  w.set("t.bool_false", gguf_bool(false));
  w.set("t.str", gguf_str("h\u00e9llo \u2713"));
  w.set("t.str_empty", gguf_str(""));
  w.set("t.str_nul", gguf_str(std::string("a\0b", 3)));
  w.set("t.str_array", gguf_str_array({"<s>", "", " world", "\u2581x"}));
  w.set("t.f32_array", gguf_f32_array({0.5f, -1.25f, 3e38f}));
  w.set("t.i32_array", gguf_i32_array({1, -2, 2147483647}));
  w.set("t.empty_array", gguf_array(GgufValueType::u32, {}));
  w.set("t.u8_array", gguf_array(GgufValueType::u8, {gguf_u8(0), gguf_u8(200)}));
  w.set("t.bool_array", gguf_array(GgufValueType::boolean, {gguf_bool(true), gguf_bool(false)}));
  w.set("t.u64_array", gguf_array(GgufValueType::u64, {gguf_u64(1), gguf_u64(~uint64_t(0))}));
  w.set("t.f64_array", gguf_array(GgufValueType::f64, {gguf_f64(-2.5)}));
  w.set("t.nested",
        gguf_array(GgufValueType::array, {gguf_i32_array({1, 2, 3}), gguf_str_array({"x", "yz"}),
                                          gguf_array(GgufValueType::f32, {})}));
  GgufValue deep = gguf_array(GgufValueType::u32, {gguf_u32(42)});
  for (int i = 1; i < kGgufMaxArrayDepth; ++i) deep = gguf_array(GgufValueType::array, {deep});
  w.set("t.deepest", deep);
}

struct TensorSpec {
  const char* name;
  GgmlType type;
  std::vector<int64_t> dims;
};
// Several types (plain, 32-value blocks, 256-value super-blocks), ranks 1..4 and an empty tensor.
const std::vector<TensorSpec>& tensor_specs() {
  static const std::vector<TensorSpec> specs = {
      {"t.f32", GgmlType::f32, {5, 3}},
      {"t.f16", GgmlType::f16, {7, 2}},
      {"t.bf16", GgmlType::bf16, {3}},
      {"t.q4_0", GgmlType::q4_0, {64, 2}},
      {"t.q8_0", GgmlType::q8_0, {32, 3, 1}},
      {"t.q4_k", GgmlType::q4_k, {256, 1}},
      {"t.q6_k", GgmlType::q6_k, {256, 2, 1, 1}},
      {"t.i32", GgmlType::i32, {6}},
      {"t.empty", GgmlType::f32, {0, 4}},
  };
  return specs;
}

// Writes every value type and tensor_specs() with random data; returns the data per tensor.
std::vector<std::vector<uint8_t>> write_full_file(const std::string& path, size_t alignment) {
  GgufWriter w(alignment);
  add_every_value_type(w);
  std::vector<std::vector<uint8_t>> data;
  for (const TensorSpec& s : tensor_specs()) {
    data.push_back(random_bytes(size_t(tensor_bytes(s.type, s.dims)), uint32_t(data.size())));
  }
  for (size_t i = 0; i < data.size(); ++i) {
    const TensorSpec& s = tensor_specs()[i];
    w.add_tensor(s.name, s.type, s.dims, std::span<const uint8_t>(data[i]));
  }
  Status st = w.write(path);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return data;
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// ---- round trips
// ---------------------------------------------------------------------------------

TEST(GgufWriter, RoundTripPreservesEveryValueTypeAndTensorAtEachAlignment) {
  for (size_t alignment : {32, 64, 256, 1}) {
    SCOPED_TRACE(alignment);
    TempDir dir;
    const std::string path = dir.file("full.gguf");
    const auto data = write_full_file(path, alignment);
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->data_offset() % alignment, 0u);

    // Metadata: insertion order and values; general.alignment only when not the default.
    GgufWriter expected_writer(alignment);
    add_every_value_type(expected_writer);
    TempDir dir2;
    ASSERT_TRUE(expected_writer.write(dir2.file("kv.gguf")).ok());
    auto kv_only = GgufFile::open(dir2.file("kv.gguf"));
    ASSERT_TRUE(kv_only.ok());
    const size_t n_kv = kv_only->metadata().size();
    ASSERT_EQ(f->metadata().size(), n_kv);
    EXPECT_EQ(f->find("general.alignment") != nullptr, alignment != 32);
    EXPECT_EQ(f->metadata()[0].key, "general.architecture");
    EXPECT_EQ(*f->find("t.u64")->as_uint(), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(*f->find("t.i64")->as_int(), std::numeric_limits<int64_t>::min());
    EXPECT_EQ(std::get<float>(f->find("t.f32_tiny")->v), 1e-40f);
    EXPECT_EQ(*f->find("t.str_nul")->as_string(), std::string("a\0b", 3));
    EXPECT_EQ(f->get_string_array("t.str_array").value(),
              (std::vector<std::string>{"<s>", "", " world", "\u2581x"}));
    const GgufArray* nested = f->find("t.nested")->as_array();
    ASSERT_NE(nested, nullptr);
    ASSERT_EQ(nested->items.size(), 3u);
    EXPECT_EQ(nested->items[1].as_array()->elem_type, GgufValueType::string);
    EXPECT_TRUE(nested->items[2].as_array()->items.empty());
    const GgufValue* deep = f->find("t.deepest");
    for (int i = 1; i < kGgufMaxArrayDepth; ++i) deep = &deep->as_array()->items.at(0);
    EXPECT_EQ(deep->as_array()->items.at(0).as_int(), 42);

    // Tensors: declaration order, types, dims, aligned offsets, identical bytes.
    ASSERT_EQ(f->tensors().size(), tensor_specs().size());
    for (size_t i = 0; i < data.size(); ++i) {
      const GgufTensorInfo& t = f->tensors()[i];
      const TensorSpec& s = tensor_specs()[i];
      EXPECT_EQ(t.name, s.name);
      EXPECT_EQ(t.type, s.type) << s.name;
      EXPECT_EQ(t.dims, s.dims) << s.name;
      EXPECT_EQ(t.offset % alignment, 0u) << s.name;
      ASSERT_EQ(t.n_bytes, data[i].size()) << s.name;
      EXPECT_TRUE(std::equal(data[i].begin(), data[i].end(), t.data)) << s.name;
    }
  }
}

TEST(GgufWriter, KeepsValuesIdenticalThroughARoundTrip) {
  TempDir dir;
  GgufWriter w;
  add_every_value_type(w);
  ASSERT_TRUE(w.write(dir.file("a.gguf")).ok());
  auto a = GgufFile::open(dir.file("a.gguf"));
  ASSERT_TRUE(a.ok()) << a.error().message;
  // Writing what was read yields the same file: values survive exactly, order included.
  GgufWriter w2;
  for (const GgufKv& kv : a->metadata()) w2.set(kv.key, kv.value);
  ASSERT_TRUE(w2.write(dir.file("b.gguf")).ok());
  EXPECT_EQ(read_all(dir.file("a.gguf")), read_all(dir.file("b.gguf")));
  auto b = GgufFile::open(dir.file("b.gguf"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(file_json(*a)["kvs"], file_json(*b)["kvs"]);
}

TEST(GgufWriter, ProducerWritesTheSameBytesAsSpans) {
  TempDir dir;
  const auto data = write_full_file(dir.file("spans.gguf"), 64);
  GgufWriter w(64);
  add_every_value_type(w);
  size_t calls = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    const TensorSpec& s = tensor_specs()[i];
    w.add_tensor(s.name, s.type, s.dims, [&, i](std::span<uint8_t> out) -> Status {
      ++calls;
      if (out.size() != data[i].size())
        return make_error("size {} != {}", out.size(), data[i].size());
      std::copy(data[i].begin(), data[i].end(), out.begin());
      return Status::success();
    });
  }
  Status st = w.write(dir.file("produced.gguf"));
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(calls, data.size());
  EXPECT_EQ(read_all(dir.file("spans.gguf")), read_all(dir.file("produced.gguf")));
}

TEST(GgufWriter, SetReplacesAnExistingKeyInPlace) {
  TempDir dir;
  GgufWriter w;
  w.set("a", gguf_u32(1));
  w.set("b", gguf_u32(2));
  w.set("a", gguf_str("again"));
  ASSERT_TRUE(w.write(dir.file("m.gguf")).ok());
  auto f = GgufFile::open(dir.file("m.gguf"));
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].key, "a");
  EXPECT_EQ(f->get_string("a").value(), "again");
}

// ---- atomic replacement
// --------------------------------------------------------------------------

TEST(GgufWriter, ReplacesTheTargetOnlyAfterASuccessfulWrite) {
  TempDir dir;
  const std::string path = dir.file("model.gguf");
  { std::ofstream(path) << "old contents"; }
  const std::vector<uint8_t> old_bytes = read_all(path);

  GgufWriter failing;
  failing.set("a", gguf_u32(1));
  const std::vector<uint8_t> ok_data(4 * 32 * sizeof(float));
  failing.add_tensor("first", GgmlType::f32, {32, 4}, std::span<const uint8_t>(ok_data));
  failing.add_tensor("second", GgmlType::f32, {32},
                     [](std::span<uint8_t>) -> Status { return make_error("disk on fire"); });
  Status st = failing.write(path);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("tensor second: disk on fire"));
  EXPECT_EQ(read_all(path), old_bytes);     // untouched
  EXPECT_FALSE(fs::exists(path + ".tmp"));  // cleaned up
  EXPECT_EQ(dir.n_entries(), 1u);

  GgufWriter good;
  good.set("a", gguf_u32(1));
  ASSERT_TRUE(good.write(path).ok());
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->get_int("a").value(), 1);
}

TEST(GgufWriter, NamesThePathWhenItCannotCreateTheFile) {
  GgufWriter w;
  Status st = w.write("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("/nonexistent/dir/model.gguf.tmp: cannot create"));
}

// ---- validation
// ----------------------------------------------------------------------------------

// Writes and expects an error containing `what`, with no file (or .tmp) left behind.
void expect_write_error(const GgufWriter& w, const std::string& what) {
  TempDir dir;
  Status st = w.write(dir.file("bad.gguf"));
  ASSERT_FALSE(st.ok()) << "expected: " << what;
  EXPECT_THAT(st.error().message, HasSubstr(what));
  EXPECT_EQ(dir.n_entries(), 0u);
}

TEST(GgufWriter, RejectsDuplicateTensorName) {
  GgufWriter w;
  std::vector<uint8_t> d(128);
  w.add_tensor("w", GgmlType::f32, {32}, std::span<const uint8_t>(d));
  w.add_tensor("w", GgmlType::f32, {32}, std::span<const uint8_t>(d));
  expect_write_error(w, "duplicate tensor name w");
}

TEST(GgufWriter, RejectsDataOfTheWrongSize) {
  GgufWriter w;
  std::vector<uint8_t> d(67);
  w.add_tensor("w", GgmlType::q8_0, {32, 2}, std::span<const uint8_t>(d));
  expect_write_error(w, "tensor w (q8_0, 64 elements): data is 67 bytes, expected 68");
}

TEST(GgufWriter, RejectsRowNotAMultipleOfTheBlockSize) {
  GgufWriter w;
  std::vector<uint8_t> d(68);
  w.add_tensor("w", GgmlType::q8_0, {16, 4}, std::span<const uint8_t>(d));
  expect_write_error(w, "tensor w: row length 16 is not a multiple of the q8_0 block size 32");
}

TEST(GgufWriter, RejectsBadDimensions) {
  std::vector<uint8_t> d(4);
  for (const auto& dims : {std::vector<int64_t>{}, std::vector<int64_t>{1, 1, 1, 1, 1}}) {
    GgufWriter w;
    w.add_tensor("w", GgmlType::f32, dims, std::span<const uint8_t>(d));
    expect_write_error(w, fmt::format("tensor w has {} dimensions, expected 1 to 4", dims.size()));
  }
  GgufWriter neg;
  neg.add_tensor("w", GgmlType::f32, {4, -1}, std::span<const uint8_t>(d));
  expect_write_error(neg, "tensor w has negative dimension -1");
  GgufWriter big;
  big.add_tensor("w", GgmlType::f32, {int64_t(1) << 40, int64_t(1) << 40},
                 std::span<const uint8_t>(d));
  expect_write_error(big, "tensor w: element count overflows int64");
}

TEST(GgufWriter, RejectsArrayItemsThatDoNotMatchTheElementType) {
  GgufWriter w;
  w.set("arr", gguf_array(GgufValueType::u32, {gguf_u32(1), gguf_str("two")}));
  expect_write_error(w, "key arr: array element 1 has type string, the array declares u32");
}

TEST(GgufWriter, RejectsNestingDeeperThanTheReaderAccepts) {
  GgufValue deep = gguf_array(GgufValueType::u32, {});
  for (int i = 0; i < kGgufMaxArrayDepth; ++i) deep = gguf_array(GgufValueType::array, {deep});
  GgufWriter w;
  w.set("deep", deep);
  expect_write_error(w, "key deep: arrays nested deeper than 8 levels");
}

TEST(GgufWriter, RejectsAlignmentThatIsNotAPowerOfTwo) {
  expect_write_error(GgufWriter(48), "alignment 48 is not a power of two");
  expect_write_error(GgufWriter(0), "alignment 0 is not a power of two");
}

TEST(GgufWriter, RejectsAGeneralAlignmentKeyThatDisagreesWithTheWriter) {
  GgufWriter w(32);
  w.set("general.alignment", gguf_u32(64));
  expect_write_error(w, "general.alignment is u32 64, the writer aligns to 32");
  GgufWriter typed(64);
  typed.set("general.alignment", gguf_u64(64));
  expect_write_error(typed, "general.alignment is u64 64, the writer aligns to 64");
}

// ---- the independent gguf package
// ------------------------------------------------------------------

TEST(GgufWriter, GgufPackageReadsWhatFishWrote) {
  for (size_t alignment : {32, 64}) {
    SCOPED_TRACE(alignment);
    TempDir dir;
    const std::string path = dir.file("fish.gguf");
    write_full_file(path, alignment);
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.error().message;
    expect_same_json(file_json(*f), python_dump(path));
  }
}

TEST(GgufWriter, FishReadsWhatGgufPackageWrote) {
  for (const char* variant : {"full", "align64", "v2", "empty_tensor", "nested", "strings"}) {
    SCOPED_TRACE(variant);
    TempDir dir;
    const std::string path = dir.file(std::string(variant) + ".gguf");
    run_capture(test::python() + " " + script("gguf_make_test_file.py") + " '" + path +
                "' --variant " + variant);
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.error().message;
    expect_same_json(file_json(*f), python_dump(path));
  }
}

TEST(GgufWriter, FishAndGgufPackageAgreeOnSmolLm2) {
  const std::string path = test::model_path(test::kSmolLm2);
  if (path.empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  expect_same_json(file_json(*f), python_dump(path));
}

// Gemma's 262144-token vocabulary takes the Python reader ~30 s: opt in with FISH_SLOW_TESTS=1.
TEST(GgufWriter, FishAndGgufPackageAgreeOnGemma3) {
  const char* slow = std::getenv("FISH_SLOW_TESTS");
  if (!slow || std::string(slow) != "1") GTEST_SKIP() << "set FISH_SLOW_TESTS=1 to run";
  const std::string path = test::model_path(test::kGemma3);
  if (path.empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  expect_same_json(file_json(*f), python_dump(path));
}

TEST(GgufWriter, RewritingARealModelReproducesItByteForByte) {
  const std::string path = test::model_path(test::kSmolLm2);
  if (path.empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  GgufWriter w(f->alignment());
  for (const GgufKv& kv : f->metadata()) w.set(kv.key, kv.value);
  for (const GgufTensorInfo& t : f->tensors()) {
    w.add_tensor(t.name, t.type, t.dims, std::span<const uint8_t>(t.data, size_t(t.n_bytes)));
  }
  TempDir dir;
  const std::string copy = dir.file("copy.gguf");
  Status st = w.write(copy);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(sha256_file_hex(copy).value(), sha256_file_hex(path).value());
}

}  // namespace
}  // namespace fish
