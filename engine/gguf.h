// GGUF v2/v3 reader and v3 writer.
//
// File layout (little-endian): magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
// kv_count x (string key, u32 value_type, value), tensor_count x (string name, u32 n_dims,
// n_dims x u64 dim, u32 ggml_type, u64 offset), padding to general.alignment (default 32),
// data section. A string is u64 length + bytes (no NUL). An array is u32 elem_type, u64 count,
// elements; arrays may nest. Tensor offsets are relative to the data section start and must be
// multiples of the alignment. dims[0] is the innermost (row) dimension.
//
// The parser trusts nothing: every count, string length, dimension product, type id, offset and
// size is checked (including integer overflow) before use, and errors name the file, the key or
// tensor, the byte offset, and expected vs found.
//
// Validity rules (decided here, shared by reader and writer):
// - version 2 or 3; v1 (32-bit counts) and big-endian files are rejected with a clear message.
// - keys and tensor names are unique; general.alignment, when present, is a u32 power of two.
// - a tensor has 1..kGgufMaxDims dimensions (GGML_MAX_DIMS = 4), each in [0, 2^63); 0 makes an
//   empty tensor (0 bytes). The running product of dims must not overflow int64 (checked in dim
//   order, so [2^62, 4, 0] is rejected although its product is 0). dims[0] (the row) must be a
//   multiple of the type's block size. The type id must be known to quant/types.h.
// - tensor offsets are multiples of the alignment and [data_offset + offset, + n_bytes) lies in
//   the file. Tensors may be in any order, but no two share a byte, and in offset order each
//   tensor's room (to the next one, or to the end of the file for the last) is its n_bytes padded
//   to the alignment, as every writer lays them out: a type relabelled to a smaller one (q4_1 ->
//   q4_0) is an error, not garbage. A file shorter than its header's counts need is "truncated".
// - arrays nest at most kGgufMaxArrayDepth deep; a bool byte is 0 or 1.
// Memory: counts are checked against the bytes left before anything is reserved, so the parsed
// metadata takes at most ~48 bytes per file byte (a GgufValue per 1-byte array element) and in
// practice ~5x the metadata size (the tokenizer's string arrays).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/mapped_file.h"
#include "base/result.h"
#include "quant/types.h"

namespace fish {

inline constexpr uint32_t kGgufMaxDims = 4;          // GGML_MAX_DIMS
inline constexpr int kGgufMaxArrayDepth = 8;         // arrays inside arrays; real files use 1
inline constexpr size_t kGgufDefaultAlignment = 32;  // when general.alignment is absent

// clang-format off
enum class GgufValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8,
  array = 9, u64 = 10, i64 = 11, f64 = 12,
};
// clang-format on
std::string_view gguf_value_type_name(GgufValueType t);

struct GgufArray;
// One metadata value. Alternatives are in GgufValueType order for the scalar types.
struct GgufValue {
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, std::shared_ptr<GgufArray>, uint64_t, int64_t, double>;
  Storage v;
  GgufValueType type() const;

  // Numeric conversion of any integer / float / bool alternative; nullopt for strings/arrays
  // and for integers that do not fit.
  std::optional<int64_t> as_int() const;
  std::optional<uint64_t> as_uint() const;
  std::optional<double> as_double() const;
  const std::string* as_string() const;  // nullptr unless a string
  const GgufArray* as_array() const;     // nullptr unless an array
};

struct GgufArray {
  GgufValueType elem_type;
  std::vector<GgufValue> items;
};

// Convenience constructors for writers.
GgufValue gguf_u8(uint8_t x);
GgufValue gguf_i8(int8_t x);
GgufValue gguf_u16(uint16_t x);
GgufValue gguf_i16(int16_t x);
GgufValue gguf_u32(uint32_t x);
GgufValue gguf_i32(int32_t x);
GgufValue gguf_u64(uint64_t x);
GgufValue gguf_i64(int64_t x);
GgufValue gguf_f32(float x);
GgufValue gguf_f64(double x);
GgufValue gguf_bool(bool x);
GgufValue gguf_str(std::string s);
GgufValue gguf_array(GgufValueType elem_type, std::vector<GgufValue> items);
GgufValue gguf_str_array(const std::vector<std::string>& items);
GgufValue gguf_f32_array(const std::vector<float>& items);
GgufValue gguf_i32_array(const std::vector<int32_t>& items);

struct GgufKv {
  std::string key;
  GgufValue value;
  uint64_t file_offset;  // where the key starts, for error messages
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // dims[0] = row length (innermost)
  GgmlType type;
  uint64_t offset;      // relative to the data section
  uint64_t n_elems;     // product of dims
  uint64_t n_bytes;     // n_elems / block_elems * block_bytes
  const uint8_t* data;  // points into the mapped file (or parsed bytes)

  int64_t n_rows() const { return n_elems == 0 ? 0 : int64_t(n_elems / uint64_t(dims[0])); }
  size_t row_bytes() const { return n_rows() == 0 ? 0 : size_t(n_bytes / uint64_t(n_rows())); }
};

class GgufFile {
 public:
  // Maps the file read-only and parses it. The tensors' data pointers stay valid while the
  // GgufFile lives (it owns the mapping).
  static Result<GgufFile> open(const std::string& path);
  // Parses bytes that the caller keeps alive; `name` is used in error messages. Used by tests
  // and the fuzz target.
  static Result<GgufFile> parse(std::span<const uint8_t> bytes, std::string name);

  uint32_t version() const { return version_; }
  const std::string& path() const { return name_; }
  size_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  std::span<const uint8_t> bytes() const { return bytes_; }
  const MappedFile* mapping() const { return map_.get(); }

  const std::vector<GgufKv>& metadata() const { return kvs_; }
  const GgufValue* find(std::string_view key) const;  // nullptr when absent

  // Typed getters: an error (naming file, key, expected and found type) when the key is
  // absent or has another type; numeric getters accept any integer type that fits.
  Result<std::string> get_string(std::string_view key) const;
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent

 private:
  std::unique_ptr<MappedFile> map_;
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> kv_index_;      // key -> index in kvs_
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> index in tensors_
};

// Writes GGUF v3. Metadata keeps insertion order; tensor data is aligned to `alignment` and
// written in declaration order. write() goes to PATH.tmp and renames it over PATH only after
// everything was written and flushed, so a failure never leaves a half-written model behind.
class GgufWriter {
 public:
  // alignment: a power of two; written as general.alignment when it is not the default 32.
  explicit GgufWriter(size_t alignment = kGgufDefaultAlignment);

  void set(std::string key, GgufValue value);  // replaces the value of an existing key

  // Fills `out` (exactly the tensor's byte size) with the tensor's packed data.
  using Producer = std::function<Status(std::span<uint8_t> out)>;
  // The data span must stay valid until write() returns.
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> dims,
                  std::span<const uint8_t> data);
  // The data is produced during write(), one tensor at a time (bounded memory).
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> dims, Producer produce);

  // Errors: a dims product not divisible by the type's block size, a duplicate tensor name, a
  // data span of the wrong size, or an I/O failure (message names the path). Also anything the
  // reader would reject: bad dims, an array whose items do not match its elem_type, nesting
  // deeper than kGgufMaxArrayDepth, or a general.alignment that disagrees with `alignment`.
  Status write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    std::span<const uint8_t> data;  // used when produce is empty
    Producer produce;
  };
  size_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kvs_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace fish
