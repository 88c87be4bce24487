// GGUF reader: the two real models, and one test per malformed-file rule, each checking that the
// error names the right thing (file, key or tensor, byte offset, expected vs found).
#include "engine/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gguf_patch.h"
#include "test_env.h"

namespace fish {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Builds GGUF bytes by hand, so tests can write exactly the malformed field they are about.
class GgufBytes {
 public:
  std::vector<uint8_t> b;

  GgufBytes& raw(std::string_view s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  template <typename T>
  GgufBytes& pod(T x) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &x, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
    return *this;
  }
  GgufBytes& u8(uint8_t x) { return pod(x); }
  GgufBytes& u32(uint32_t x) { return pod(x); }
  GgufBytes& u64(uint64_t x) { return pod(x); }
  GgufBytes& str(std::string_view s) { return u64(s.size()).raw(s); }
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kvs, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kvs);
  }
  GgufBytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  GgufBytes& kv_str(std::string_view key, std::string_view v) { return str(key).u32(8).str(v); }
  GgufBytes& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type,
                    uint64_t offset) {
    str(name).u32(uint32_t(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  GgufBytes& pad(size_t alignment) {
    while (b.size() % alignment) b.push_back(0);
    return *this;
  }
  GgufBytes& fill(size_t n, uint8_t v = 0x5a) {
    b.insert(b.end(), n, v);
    return *this;
  }
  size_t size() const { return b.size(); }
};

constexpr uint32_t kQ8_0 = 8;  // 32 values in 34 bytes
constexpr uint32_t kF32 = 0;

// A valid file: two keys, tensor "w" = q8_0 [32, 2] (68 bytes) at offset 0.
GgufBytes valid_file() {
  GgufBytes g;
  g.header(1, 2).kv_str("general.architecture", "test").kv_u32("test.n", 7);
  g.tensor("w", {32, 2}, kQ8_0, 0).pad(32).fill(68);
  return g;
}

std::string parse_error(const GgufBytes& g, std::string name = "model.gguf") {
  auto r = GgufFile::parse(g.b, std::move(name));
  if (r.ok()) return "(parsed OK)";
  return r.error().message;
}

// ---- real models -------------------------------------------------------------------------------

void expect_data_inside_file(const GgufFile& f) {
  const uint8_t* begin = f.bytes().data();
  const uint8_t* end = begin + f.bytes().size();
  for (const GgufTensorInfo& t : f.tensors()) {
    EXPECT_GE(t.data, begin + f.data_offset()) << t.name;
    EXPECT_LE(t.data + t.n_bytes, end) << t.name;
    EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
    EXPECT_EQ(t.data, begin + f.data_offset() + t.offset) << t.name;
    const TypeInfo& ti = type_info(t.type);
    EXPECT_EQ(t.n_bytes, t.n_elems / uint64_t(ti.block_elems) * ti.block_bytes) << t.name;
    EXPECT_EQ(uint64_t(t.n_rows()) * t.row_bytes(), t.n_bytes) << t.name;
  }
}

TEST(GgufReader, ReadsSmolLm2) {
  const std::string path = test::model_path(test::kSmolLm2);
  if (path.empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 33u);
  EXPECT_EQ(f->tensors().size(), 272u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->get_string("general.architecture").value(), "llama");
  EXPECT_EQ(f->get_int("llama.block_count").value(), 30);
  EXPECT_EQ(f->get_int("llama.embedding_length").value(), 576);
  EXPECT_EQ(f->get_int("llama.attention.head_count").value(), 9);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv").value(), 3);
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.error().message;
  EXPECT_EQ(tokens->size(), 49152u);

  const GgufTensorInfo* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, GgmlType::q8_0);
  EXPECT_EQ(emb->dims, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(emb->n_rows(), 49152);
  EXPECT_EQ(emb->row_bytes(), 576u / 32 * 34);
  const GgufTensorInfo* up = f->find_tensor("blk.0.ffn_up.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->type, GgmlType::q4_1);
  EXPECT_EQ(up->dims, (std::vector<int64_t>{576, 1536}));
  const GgufTensorInfo* norm = f->find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, GgmlType::f32);
  EXPECT_EQ(norm->dims, (std::vector<int64_t>{576}));
  EXPECT_EQ(f->find_tensor("no.such.tensor"), nullptr);
  expect_data_inside_file(*f);
  EXPECT_NE(f->mapping(), nullptr);
}

TEST(GgufReader, ReadsGemma3) {
  const std::string path = test::model_path(test::kGemma3);
  if (path.empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->tensors().size(), 236u);
  EXPECT_EQ(f->get_string("general.architecture").value(), "gemma3");
  EXPECT_EQ(f->get_int("gemma3.block_count").value(), 18);
  EXPECT_EQ(f->get_int("gemma3.embedding_length").value(), 640);
  EXPECT_EQ(f->get_int("gemma3.attention.key_length").value(), 256);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->size(), 262144u);
  EXPECT_EQ(f->get_f32_array("tokenizer.ggml.scores")->size(), 262144u);
  std::set<GgmlType> types;
  for (const GgufTensorInfo& t : f->tensors()) types.insert(t.type);
  EXPECT_EQ(types, (std::set<GgmlType>{GgmlType::f32, GgmlType::q5_0, GgmlType::q4_k,
                                       GgmlType::q8_0, GgmlType::q6_k}));
  const GgufTensorInfo* q = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dims, (std::vector<int64_t>{640, 1024}));
  expect_data_inside_file(*f);
}

TEST(GgufReader, ReadsVocabOnlyFilesWithoutTensors) {
  for (const char* name : {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"}) {
    auto f = GgufFile::open(test::testdata_dir() + "/vocab/" + name);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_TRUE(f->tensors().empty());
    EXPECT_GT(f->get_string_array("tokenizer.ggml.tokens")->size(), 1000u) << name;
  }
}

TEST(GgufReader, OpenNamesAMissingFile) {
  auto f = GgufFile::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().message, HasSubstr("/nonexistent/dir/model.gguf"));
}

// ---- a valid hand-built file and the typed getters ---------------------------------------------

TEST(GgufReader, ParsesHandBuiltFile) {
  GgufBytes g = valid_file();
  auto f = GgufFile::parse(g.b, "model.gguf");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->data_offset(), 160u);  // 131 bytes of header, kvs and tensor info, padded to 32
  ASSERT_EQ(f->tensors().size(), 1u);
  const GgufTensorInfo& t = f->tensors()[0];
  EXPECT_EQ(t.n_elems, 64u);
  EXPECT_EQ(t.n_bytes, 68u);
  EXPECT_EQ(t.data, g.b.data() + 160);
  EXPECT_EQ(f->metadata()[1].key, "test.n");
  EXPECT_EQ(f->metadata()[1].file_offset, 24u + 8 + 20 + 4 + 8 + 4);
}

TEST(GgufReader, AcceptsVersion2) {
  GgufBytes g = valid_file();
  g.b[4] = 2;
  auto f = GgufFile::parse(g.b, "model.gguf");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version(), 2u);
}

TEST(GgufReader, AcceptsEmptyTensor) {
  GgufBytes g;
  g.header(2, 0).tensor("empty", {0, 4}, kF32, 0).tensor("one", {1}, kF32, 0).pad(32).fill(4);
  auto f = GgufFile::parse(g.b, "model.gguf");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->tensors()[0].n_bytes, 0u);
  EXPECT_EQ(f->tensors()[0].n_rows(), 0);
}

TEST(GgufReader, TypedGettersConvertFittingIntegersAndNameMismatches) {
  GgufBytes g;
  g.header(0, 6).kv_u32("a.u32", 7).kv_str("a.str", "x");
  g.str("a.f64arr").u32(9).u32(12).u64(2).pod(0.5).pod(1e300);  // f64 array
  g.str("a.big").u32(10).u64(~uint64_t(0));                     // u64 max
  g.str("a.f32").u32(6).pod(1.5f);                              // f32
  g.str("a.arr").u32(9).u32(4).u64(3).u32(1).u32(2).u32(3);     // u32 array
  auto f = GgufFile::parse(g.b, "m.gguf");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->get_int("a.u32").value(), 7);
  EXPECT_EQ(f->get_float("a.u32").value(), 7.0);
  EXPECT_EQ(f->get_float("a.f32").value(), 1.5);
  EXPECT_EQ(f->get_int_array("a.arr").value(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(f->get_f32_array("a.arr").value(), (std::vector<float>{1, 2, 3}));
  EXPECT_THAT(f->get_int("a.str").error().message,
              AllOf(StartsWith("gguf: m.gguf: key a.str"), HasSubstr("expected an integer"),
                    HasSubstr("found string")));
  EXPECT_THAT(f->get_int("a.f32").error().message, HasSubstr("found f32"));
  EXPECT_THAT(f->get_int("a.big").error().message,
              HasSubstr("18446744073709551615 does not fit in int64"));
  EXPECT_THAT(f->get_string("a.missing").error().message, HasSubstr("key a.missing is missing"));
  EXPECT_THAT(f->get_string_array("a.arr").error().message,
              HasSubstr("expected an array of string, found array of 3 u32"));
  EXPECT_THAT(f->get_bool("a.u32").error().message, HasSubstr("expected a bool, found u32"));
  EXPECT_EQ(f->find("a.missing"), nullptr);
  EXPECT_THAT(f->get_f32_array("a.f64arr").error().message,
              HasSubstr("key a.f64arr[1]: value 1e+300 does not fit in f32"));
  ASSERT_NE(f->find("a.big"), nullptr);
  EXPECT_EQ(f->find("a.big")->as_uint(), ~uint64_t(0));
  EXPECT_EQ(f->find("a.big")->as_int(), std::nullopt);
}

// ---- malformed files: one rule per test ---------------------------------------------------------

TEST(GgufReader, RejectsTruncatedHeaderNamingTheFieldAtEachCutPoint) {
  const GgufBytes full = valid_file();
  const struct {
    size_t cut;
    const char* what;
  } cases[] = {{0, "reading magic"},     {2, "reading magic"},        {4, "reading version"},
               {7, "reading version"},   {8, "reading tensor count"}, {15, "reading tensor count"},
               {16, "reading kv count"}, {23, "reading kv count"}};
  for (const auto& c : cases) {
    GgufBytes g;
    g.b.assign(full.b.begin(), full.b.begin() + long(c.cut));
    EXPECT_THAT(parse_error(g),
                AllOf(StartsWith("gguf: model.gguf: header: truncated at byte"), HasSubstr(c.what)))
        << "cut at " << c.cut;
  }
}

TEST(GgufReader, RejectsEveryTruncationOfAValidFile) {
  const GgufBytes full = valid_file();
  for (size_t cut = 0; cut < full.size(); ++cut) {
    GgufBytes g;
    g.b.assign(full.b.begin(), full.b.begin() + long(cut));
    EXPECT_THAT(parse_error(g), StartsWith("gguf: model.gguf: ")) << "cut at " << cut;
  }
}

TEST(GgufReader, RejectsTruncationInsideATensorInfoNamingTheTensor) {
  GgufBytes g;
  // 44 bytes after the header pass the tensor-count bound; the second dimension is missing.
  g.header(1, 0).str("blk.0.attn_output.weight").u32(2).u64(32);
  EXPECT_THAT(parse_error(g),
              AllOf(HasSubstr("tensor blk.0.attn_output.weight: truncated at byte 68"),
                    HasSubstr("reading dimension: need 8 bytes, 0 left")));
}

TEST(GgufReader, RejectsBadMagic) {
  GgufBytes g = valid_file();
  std::memcpy(g.b.data(), "GGML", 4);
  EXPECT_THAT(parse_error(g), AllOf(HasSubstr("bad magic"), HasSubstr("expected \"GGUF\""),
                                    HasSubstr("found 47 47 4d 4c")));
}

TEST(GgufReader, RejectsVersion1WithAClearMessage) {
  GgufBytes g = valid_file();
  g.b[4] = 1;
  EXPECT_THAT(parse_error(g),
              AllOf(HasSubstr("GGUF version 1 is not supported"), HasSubstr("expected 2 or 3")));
}

TEST(GgufReader, RejectsUnsupportedVersion) {
  GgufBytes g = valid_file();
  g.b[4] = 4;
  EXPECT_THAT(parse_error(g), HasSubstr("unsupported GGUF version 4 at byte 4, expected 2 or 3"));
}

TEST(GgufReader, RejectsBigEndianFile) {
  GgufBytes g = valid_file();
  g.b[4] = 0;
  g.b[7] = 3;
  EXPECT_THAT(parse_error(g), HasSubstr("big-endian GGUF (version bytes 00 00 00 03)"));
}

TEST(GgufReader, RejectsAbsurdTensorCount) {
  GgufBytes g = valid_file();
  const uint64_t n = uint64_t(1) << 40;
  std::memcpy(g.b.data() + 8, &n, 8);
  EXPECT_THAT(parse_error(g), AllOf(HasSubstr("absurd tensor count 1099511627776 at byte 8"),
                                    HasSubstr("the 204 bytes after the header hold at most 6")));
}

TEST(GgufReader, RejectsAbsurdKvCount) {
  GgufBytes g = valid_file();
  const uint64_t n = ~uint64_t(0);
  std::memcpy(g.b.data() + 16, &n, 8);
  EXPECT_THAT(parse_error(g), AllOf(HasSubstr("absurd kv count 18446744073709551615 at byte 16"),
                                    HasSubstr("hold at most 13 key-value pairs")));
}

TEST(GgufReader, RejectsDimensionsWhoseProductOverflows) {
  GgufBytes g;
  g.header(1, 0).tensor("big", {uint64_t(1) << 32, uint64_t(1) << 32}, kF32, 0).pad(32).fill(4);
  EXPECT_THAT(parse_error(g),
              HasSubstr("tensor big: dimensions [4294967296, 4294967296] at byte 39: element "
                        "count overflows int64"));
}

TEST(GgufReader, RejectsDimensionOf2To63OrMore) {
  GgufBytes g;
  g.header(1, 0).tensor("neg", {4, uint64_t(1) << 63}, kF32, 0).pad(32).fill(4);
  EXPECT_THAT(parse_error(g),
              HasSubstr("tensor neg: dimension 1 at byte 47 is 9223372036854775808, "
                        "expected < 2^63"));
}

TEST(GgufReader, RejectsDimensionCountOutside1To4) {
  for (uint32_t n : {0u, 5u}) {
    GgufBytes g;
    g.header(1, 0).str("t").u32(n);
    for (uint32_t i = 0; i < n; ++i) g.u64(1);
    g.u32(kF32).u64(0).pad(32).fill(4);
    EXPECT_THAT(
        parse_error(g),
        HasSubstr(fmt::format("tensor t: dimension count {} at byte 33, expected 1 to 4", n)));
  }
}

TEST(GgufReader, RejectsTensorOffsetPastEndOfFile) {
  GgufBytes g;
  g.header(1, 0).tensor("w", {32, 2}, kQ8_0, 1 << 20).pad(32).fill(68);
  EXPECT_THAT(parse_error(g), HasSubstr("tensor w: data offset 1048576 (data section at byte 96) "
                                        "is past the end of the file, file is 164 bytes"));
}

TEST(GgufReader, RejectsTensorOffsetThatOverflows) {
  GgufBytes g;
  g.header(1, 0).tensor("w", {32, 2}, kQ8_0, ~uint64_t(31)).pad(32).fill(68);
  EXPECT_THAT(parse_error(g), HasSubstr("tensor w: data offset 18446744073709551584"));
  EXPECT_THAT(parse_error(g), HasSubstr("past the end of the file"));
}

TEST(GgufReader, RejectsTensorDataPastEndOfFile) {
  GgufBytes g = valid_file();
  g.b.pop_back();
  EXPECT_THAT(parse_error(g), HasSubstr("gguf: model.gguf: tensor w: data ends at byte 228 (68 "
                                        "bytes from byte 160), file is 227 bytes"));
}

TEST(GgufReader, RejectsMisalignedTensorOffset) {
  GgufBytes g;
  g.header(1, 0).tensor("w", {32, 2}, kQ8_0, 8).pad(32).fill(100);
  EXPECT_THAT(
      parse_error(g),
      HasSubstr("tensor w: data offset 8 at byte 57 is not a multiple of the alignment 32"));
}

TEST(GgufReader, RejectsUnknownTypeId) {
  for (uint32_t id : {4u, 99u, 0xffffffffu}) {  // 4 was removed from GGML
    GgufBytes g;
    g.header(1, 0).tensor("w", {32}, id, 0).pad(32).fill(200);
    EXPECT_THAT(parse_error(g),
                HasSubstr(fmt::format("tensor w: unknown type id {} at byte 45", id)));
  }
}

TEST(GgufReader, RejectsRowNotAMultipleOfTheBlockSize) {
  GgufBytes g;
  g.header(1, 0).tensor("w", {33, 2}, kQ8_0, 0).pad(32).fill(200);
  EXPECT_THAT(parse_error(g), HasSubstr("tensor w: row length 33 (dims [33, 2]) is not a multiple "
                                        "of the q8_0 block size 32"));
}

// FISH's own fq3 (id kFishTypeBase + 1, 112 bytes per 256 values) is read like any GGML type,
// with the same size checks; the ids between GGML's and FISH's stay unknown.
TEST(GgufReader, ReadsFishFq3TensorsWithTheirBlockGeometry) {
  const uint32_t fq3 = uint32_t(GgmlType::fq3);
  GgufBytes g;
  g.header(1, 0).tensor("w", {512, 3}, fq3, 0).pad(32).fill(2 * 112 * 3);
  auto r = GgufFile::parse(g.b, "model.gguf");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r.value().tensors().size(), 1u);
  EXPECT_EQ(r.value().tensors()[0].type, GgmlType::fq3);
  EXPECT_EQ(r.value().tensors()[0].n_bytes, 2u * 112 * 3);
}

TEST(GgufReader, RejectsMalformedFq3Sizes) {
  const uint32_t fq3 = uint32_t(GgmlType::fq3);
  GgufBytes row;
  row.header(1, 0).tensor("w", {320, 2}, fq3, 0).pad(32).fill(4096);
  EXPECT_THAT(parse_error(row), HasSubstr("tensor w: row length 320 (dims [320, 2]) is not a "
                                          "multiple of the fq3 block size 256"));
  GgufBytes data;
  data.header(1, 0).tensor("w", {256, 4}, fq3, 0).pad(32).fill(4 * 112 - 1);
  EXPECT_THAT(parse_error(data), HasSubstr("tensor w"));
  EXPECT_NE(parse_error(data), "(parsed OK)");
  for (uint32_t id : {kFishTypeBase, kFishTypeBase + 2, 40u}) {
    GgufBytes g;
    g.header(1, 0).tensor("w", {256}, id, 0).pad(32).fill(200);
    EXPECT_THAT(parse_error(g), HasSubstr(fmt::format("tensor w: unknown type id {}", id)));
  }
}

TEST(GgufReader, RejectsDuplicateTensorName) {
  GgufBytes g;
  g.header(2, 0).tensor("w", {32}, kF32, 0).tensor("w", {32}, kF32, 128).pad(32).fill(256);
  EXPECT_THAT(parse_error(g),
              HasSubstr("tensor w: duplicate tensor name at byte 57, first defined as tensor #0"));
}

TEST(GgufReader, RejectsDuplicateKey) {
  GgufBytes g;
  g.header(0, 2).kv_u32("test.n", 1).kv_u32("test.n", 2);
  EXPECT_THAT(parse_error(g),
              HasSubstr("key test.n: duplicate key at byte 46, first defined at byte 24"));
}

TEST(GgufReader, RejectsKeyLongerThanTheFile) {
  GgufBytes g;
  g.header(0, 1).u64(1000000000).raw("general.name").u32(8).str("x");
  EXPECT_THAT(parse_error(g),
              HasSubstr("key #0 (at byte 24): key length 1000000000 at byte 24 runs "
                        "past the end of the file (25 bytes left)"));
}

TEST(GgufReader, RejectsStringValueLongerThanTheFile) {
  GgufBytes g;
  g.header(0, 1).str("general.name").u32(8).u64(~uint64_t(0)).raw("abc");
  EXPECT_THAT(parse_error(g), HasSubstr("key general.name: string length 18446744073709551615 at "
                                        "byte 48 runs past the end of the file (3 bytes left)"));
}

TEST(GgufReader, NamesTheArrayElementOfABadString) {
  GgufBytes g;
  g.header(0, 1).str("tok").u32(9).u32(8).u64(2).str("ok").u64(99).raw("x");
  EXPECT_THAT(parse_error(g),
              HasSubstr("key tok[1]: string length 99 at byte 61 runs past the end of the file (1 "
                        "bytes left)"));
}

TEST(GgufReader, RejectsAlignmentThatIsNotAPowerOfTwo) {
  for (uint32_t a : {0u, 48u}) {
    GgufBytes g;
    g.header(0, 1).kv_u32("general.alignment", a);
    EXPECT_THAT(parse_error(g),
                HasSubstr(fmt::format("key general.alignment: at byte 24: alignment must be a "
                                      "non-zero power of two, found {}",
                                      a)));
  }
}

TEST(GgufReader, RejectsAlignmentOfAnotherType) {
  GgufBytes g;
  g.header(0, 1).str("general.alignment").u32(10).u64(64);
  EXPECT_THAT(parse_error(g),
              HasSubstr("key general.alignment: at byte 24: expected type u32, found u64"));
}

TEST(GgufReader, UsesACustomAlignmentForOffsetsAndTheDataSection) {
  GgufBytes g;
  g.header(1, 1).kv_u32("general.alignment", 256).tensor("w", {32, 2}, kQ8_0, 0).pad(256).fill(68);
  auto f = GgufFile::parse(g.b, "model.gguf");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->data_offset(), 256u);
}

TEST(GgufReader, RejectsTooDeeplyNestedArrays) {
  auto nested = [](int levels) {
    GgufBytes g;
    g.header(0, 1).str("deep").u32(9);
    for (int i = 1; i < levels; ++i) g.u32(9).u64(1);  // array of one array
    g.u32(4).u64(1).u32(42);                           // innermost: one u32
    return g;
  };
  auto ok = GgufFile::parse(nested(kGgufMaxArrayDepth).b, "model.gguf");
  EXPECT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_THAT(parse_error(nested(kGgufMaxArrayDepth + 1)),
              HasSubstr("key deep[0][0][0][0][0][0][0][0]: array at byte 136 is nested 9 deep, "
                        "at most 8 levels are allowed"));
}

TEST(GgufReader, RejectsArrayCountLargerThanTheRestOfTheFile) {
  GgufBytes g;
  g.header(0, 1).str("arr").u32(9).u32(4).u64(1000000).u32(1).u32(2);
  EXPECT_THAT(parse_error(g), HasSubstr("key arr: array count 1000000 at byte 43 cannot fit: the "
                                        "8 bytes left hold at most 2 u32"));
}

TEST(GgufReader, RejectsUnknownValueType) {
  GgufBytes g;
  g.header(0, 1).str("k").u32(13).u32(0);
  EXPECT_THAT(parse_error(g), HasSubstr("key k: unknown value type 13 at byte 33, expected 0..12"));
}

TEST(GgufReader, RejectsBoolOtherThan0Or1) {
  GgufBytes g;
  g.header(0, 1).str("k").u32(7).u8(2);
  EXPECT_THAT(parse_error(g), HasSubstr("key k: bool at byte 37 is 2, expected 0 or 1"));
}

TEST(GgufReader, EscapesUnprintableNamesInErrors) {
  GgufBytes g;
  g.header(0, 2)
      .kv_u32(std::string_view("a\nb\x01", 4), 1)
      .kv_u32(std::string_view("a\nb\x01", 4), 2);
  EXPECT_THAT(parse_error(g), HasSubstr("key a\\x0ab\\x01: duplicate key"));
}

// ---- truncation, overlap and byte size ------------------------------------------------------

constexpr uint32_t kQ4_0 = 2;  // 32 values in 18 bytes
constexpr uint32_t kQ4_1 = 3;  // 32 values in 20 bytes

TEST(GgufReader, ReportsAFileCutShortAsTruncatedNotAsAnAbsurdCount) {
  // A header like SmolLM2's (272 tensors) in a 1 KB file: the count is fine, the file is short.
  GgufBytes g;
  g.header(272, 33).kv_str("general.architecture", "llama");
  g.fill(1024 - g.size());
  ASSERT_EQ(g.size(), 1024u);
  EXPECT_EQ(parse_error(g),
            "gguf: model.gguf: header: truncated file: 1024 bytes in all, but the header's 272 "
            "tensor infos need at least 8704 bytes after the header, which has 1000 (the file "
            "was cut short; download or copy it again)");
  GgufBytes k;
  k.header(0, 100).fill(200);
  EXPECT_THAT(parse_error(k), HasSubstr("header: truncated file: 224 bytes in all, but the "
                                        "header's 100 key-value pairs and 0 tensor infos"));
}

TEST(GgufReader, ReportsTheFirstKilobyteOfSmolLm2AsTruncated) {
  const std::string path = test::model_path(test::kSmolLm2);
  if (path.empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  auto full = MappedFile::open(path);
  ASSERT_TRUE(full.ok()) << full.error().message;
  auto r = GgufFile::parse(std::span<const uint8_t>(full->data(), 1024), "cut.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message,
              HasSubstr("gguf: cut.gguf: header: truncated file: 1024 bytes in all, but the "
                        "header's 272 tensor infos"));
}

TEST(GgufReader, RejectsOverlappingTensorDataNamingBothTensors) {
  // a = q8_0 [32, 4] (136 bytes) at 0; b starts at 64, inside a.
  GgufBytes g;
  g.header(2, 0).tensor("a", {32, 4}, kQ8_0, 0).tensor("b", {32, 2}, kQ8_0, 64).pad(32).fill(160);
  EXPECT_EQ(parse_error(g),
            "gguf: model.gguf: tensor a: data overlaps tensor b (q8_0 [32, 2], 68 bytes at data "
            "offset 64): a (q8_0 [32, 4], 136 bytes at data offset 0) ends at data offset 136, 72 "
            "bytes into it");
}

TEST(GgufReader, RejectsTwoTensorsSharingTheirData) {
  GgufBytes g;
  g.header(2, 0).tensor("x", {32, 2}, kQ8_0, 0).tensor("y", {32, 2}, kQ8_0, 0).pad(32).fill(96);
  EXPECT_THAT(parse_error(g), HasSubstr(": data overlaps tensor "));
}

TEST(GgufReader, RejectsATensorWhoseTypeWasRelabelledSmaller) {
  // w was q4_1 [256, 4] (640 bytes); relabelled q4_0 it claims 576 and leaves 64 bytes unread.
  GgufBytes g;
  g.header(2, 0).tensor("w", {256, 4}, kQ4_0, 0).tensor("n", {32}, kF32, 640).pad(32);
  g.fill(640 + 128);
  EXPECT_EQ(parse_error(g),
            "gguf: model.gguf: tensor w: byte size does not match the data: w (q4_0 [256, 4], 576 "
            "bytes at data offset 0) has 640 bytes of room up to tensor n (its type x element "
            "count, padded to the alignment 32, is 576): the type or dims were changed");
  // As q4_1 the same bytes are valid.
  GgufBytes ok;
  ok.header(2, 0).tensor("w", {256, 4}, kQ4_1, 0).tensor("n", {32}, kF32, 640).pad(32);
  ok.fill(640 + 128);
  EXPECT_EQ(parse_error(ok), "(parsed OK)");
}

TEST(GgufReader, RejectsALastTensorThatLeavesTheRestOfTheFileUnread) {
  GgufBytes g;
  g.header(1, 0).tensor("w", {256, 4}, kQ4_0, 0).pad(32).fill(640);
  EXPECT_THAT(parse_error(g),
              HasSubstr("tensor w: byte size does not match the data: w (q4_0 [256, 4], 576 bytes "
                        "at data offset 0) is the last tensor, with 640 bytes of room to the end "
                        "of the file"));
}

TEST(GgufReader, AcceptsTensorsInAnyOrderAndUnpaddedLastData) {
  GgufBytes g;  // declared b, a; laid out a (68 bytes, padded to 96), then b (68 bytes, no pad)
  g.header(2, 0).tensor("b", {32, 2}, kQ8_0, 96).tensor("a", {32, 2}, kQ8_0, 0).pad(32);
  g.fill(96 + 68);
  EXPECT_EQ(parse_error(g), "(parsed OK)");
}

TEST(GgufReader, RejectsSmolLm2WithAFfnTensorRelabelledQ4_1ToQ4_0) {
  const std::string path = test::model_path(test::kSmolLm2);
  if (path.empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  auto full = MappedFile::open(path);
  ASSERT_TRUE(full.ok()) << full.error().message;
  std::vector<uint8_t> b(full->data(), full->data() + full->size());
  const size_t at = test::tensor_type_pos(b, "blk.0.ffn_up.weight");
  ASSERT_EQ(b[at], kQ4_1);
  b[at] = kQ4_0;  // the dims stay valid for q4_0: only the layout shows the lie
  auto r = GgufFile::parse(b, "relabelled.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message,
              AllOf(HasSubstr("gguf: relabelled.gguf: tensor blk.0.ffn_up.weight: byte size does "
                              "not match the data: blk.0.ffn_up.weight (q4_0 [576, 1536], 497664 "
                              "bytes at data offset"),
                    HasSubstr("has 552960 bytes of room up to tensor")));
}

// Replays the fuzz corpus (tests/fuzz/corpus/gguf) in the ordinary test build, so a sanitizer
// build of the tests re-checks every input the fuzzer found interesting. The named seeds
// (*.gguf, written by scripts/gguf_make_test_file.py) are valid files.
TEST(GgufReader, ReplaysTheFuzzCorpusWithErrorsOrValidFiles) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(test::source_dir()) / "tests/fuzz/corpus/gguf";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  size_t n_files = 0;
  size_t n_valid = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    ++n_files;
    auto f = GgufFile::open(e.path().string());
    if (e.path().extension() == ".gguf") {
      EXPECT_TRUE(f.ok()) << e.path() << ": " << f.error().message;
    }
    if (f.ok()) {
      ++n_valid;
      expect_data_inside_file(*f);
    } else {
      EXPECT_THAT(f.error().message, StartsWith("gguf: " + e.path().string() + ": "));
    }
  }
  EXPECT_GE(n_files, 8u);
  EXPECT_GE(n_valid, 8u);
}

}  // namespace
}  // namespace fish
