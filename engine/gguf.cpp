// GGUF reader: a bounds-checked parser over untrusted bytes, plus GgufValue helpers.
// Validity rules and the file layout are documented in gguf.h.
#include "engine/gguf.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace fish {

// ---- GgufValue ---------------------------------------------------------------------------------

std::string_view gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
      return "u8";
    case GgufValueType::i8:
      return "i8";
    case GgufValueType::u16:
      return "u16";
    case GgufValueType::i16:
      return "i16";
    case GgufValueType::u32:
      return "u32";
    case GgufValueType::i32:
      return "i32";
    case GgufValueType::f32:
      return "f32";
    case GgufValueType::boolean:
      return "bool";
    case GgufValueType::string:
      return "string";
    case GgufValueType::array:
      return "array";
    case GgufValueType::u64:
      return "u64";
    case GgufValueType::i64:
      return "i64";
    case GgufValueType::f64:
      return "f64";
  }
  return "unknown";
}

// The variant's alternatives are declared in GgufValueType order, so the index is the type id.
static_assert(
    std::is_same_v<std::variant_alternative_t<9, GgufValue::Storage>, std::shared_ptr<GgufArray>>);
static_assert(std::is_same_v<std::variant_alternative_t<12, GgufValue::Storage>, double>);
GgufValueType GgufValue::type() const {
  return GgufValueType(uint32_t(v.index()));
}

std::optional<int64_t> GgufValue::as_int() const {
  return std::visit(
      [](const auto& x) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          return x ? 1 : 0;
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          if (x > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return int64_t(x);
        } else if constexpr (std::is_integral_v<T>) {
          return int64_t(x);
        } else if constexpr (std::is_floating_point_v<T>) {
          // Only exact conversions: 3.0 -> 3, 3.5 -> nullopt. 2^63 itself does not fit.
          if (!std::isfinite(x) || std::trunc(x) != x) return std::nullopt;
          if (double(x) < -9223372036854775808.0 || double(x) >= 9223372036854775808.0)
            return std::nullopt;
          return int64_t(x);
        } else {
          return std::nullopt;
        }
      },
      v);
}

std::optional<uint64_t> GgufValue::as_uint() const {
  if (const uint64_t* u = std::get_if<uint64_t>(&v)) return *u;
  if (std::holds_alternative<float>(v) || std::holds_alternative<double>(v)) {
    const double d =
        std::holds_alternative<float>(v) ? double(std::get<float>(v)) : std::get<double>(v);
    if (!std::isfinite(d) || std::trunc(d) != d || d < 0 || d >= 18446744073709551616.0)
      return std::nullopt;
    return uint64_t(d);
  }
  std::optional<int64_t> i = as_int();
  if (!i || *i < 0) return std::nullopt;
  return uint64_t(*i);
}

std::optional<double> GgufValue::as_double() const {
  return std::visit(
      [](const auto& x) -> std::optional<double> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_arithmetic_v<T>) {
          return double(x);
        } else {
          return std::nullopt;
        }
      },
      v);
}

const std::string* GgufValue::as_string() const {
  return std::get_if<std::string>(&v);
}

const GgufArray* GgufValue::as_array() const {
  const auto* p = std::get_if<std::shared_ptr<GgufArray>>(&v);
  return p ? p->get() : nullptr;
}

GgufValue gguf_u8(uint8_t x) {
  return GgufValue{x};
}
GgufValue gguf_i8(int8_t x) {
  return GgufValue{x};
}
GgufValue gguf_u16(uint16_t x) {
  return GgufValue{x};
}
GgufValue gguf_i16(int16_t x) {
  return GgufValue{x};
}
GgufValue gguf_u32(uint32_t x) {
  return GgufValue{x};
}
GgufValue gguf_i32(int32_t x) {
  return GgufValue{x};
}
GgufValue gguf_u64(uint64_t x) {
  return GgufValue{x};
}
GgufValue gguf_i64(int64_t x) {
  return GgufValue{x};
}
GgufValue gguf_f32(float x) {
  return GgufValue{x};
}
GgufValue gguf_f64(double x) {
  return GgufValue{x};
}
GgufValue gguf_bool(bool x) {
  return GgufValue{x};
}
GgufValue gguf_str(std::string s) {
  return GgufValue{std::move(s)};
}

GgufValue gguf_array(GgufValueType elem_type, std::vector<GgufValue> items) {
  return GgufValue{std::make_shared<GgufArray>(GgufArray{elem_type, std::move(items)})};
}
GgufValue gguf_str_array(const std::vector<std::string>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (const std::string& s : items) v.push_back(gguf_str(s));
  return gguf_array(GgufValueType::string, std::move(v));
}
GgufValue gguf_f32_array(const std::vector<float>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (float x : items) v.push_back(gguf_f32(x));
  return gguf_array(GgufValueType::f32, std::move(v));
}
GgufValue gguf_i32_array(const std::vector<int32_t>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (int32_t x : items) v.push_back(gguf_i32(x));
  return gguf_array(GgufValueType::i32, std::move(v));
}

// ---- Parser ------------------------------------------------------------------------------------

namespace {

constexpr uint32_t kMaxValueType = 12;            // GgufValueType::f64
constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;  // magic, version, tensor_count, kv_count
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;       // empty key, value type, 1-byte value
// Empty name, n_dims, one dimension (n_dims >= 1), type id, offset.
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr size_t kMaxNameInMessage = 96;  // longer names are cut in error messages
// Tensor / key counts up to this are ones a real model may have (the largest have ~10^4 tensors):
// a file too short for them was cut short, not corrupted.
constexpr uint64_t kPlausibleCount = uint64_t(1) << 24;

// Bytes one encoded value of type t takes at least: its scalar size, a string's length field,
// an array's elem_type + count.
uint64_t min_encoded_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::boolean:
      return 1;
    case GgufValueType::u16:
    case GgufValueType::i16:
      return 2;
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::f32:
      return 4;
    case GgufValueType::u64:
    case GgufValueType::i64:
    case GgufValueType::f64:
    case GgufValueType::string:
      return 8;
    case GgufValueType::array:
      return 12;
  }
  return 1;
}

// Names from untrusted files go into messages escaped and cut, so a hostile name cannot produce
// a multi-megabyte or terminal-garbling error.
std::string printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxNameInMessage; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > kMaxNameInMessage) out += fmt::format("...({} bytes)", s.size());
  return out;
}

std::string hex_bytes(std::span<const uint8_t> b) {
  std::string out;
  for (size_t i = 0; i < b.size(); ++i) out += fmt::format("{}{:02x}", i ? " " : "", b[i]);
  return out;
}

template <typename T>
T load_le(const uint8_t* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));  // GGUF is little-endian, as is every host FISH supports
  return x;
}
static_assert(std::endian::native == std::endian::little, "FISH reads GGUF on little-endian hosts");

class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, const std::string& name) : b_(bytes), name_(name) {}

  size_t pos() const { return pos_; }
  size_t left() const { return b_.size() - pos_; }
  void set_context(std::string ctx) { ctx_ = std::move(ctx); }

  // "gguf: NAME: CONTEXT[i][j]: message" — the element path names where inside an array.
  template <typename... Args>
  Error fail(fmt::format_string<Args...> f, Args&&... args) const {
    std::string where = ctx_;
    for (uint64_t i : path_) where += fmt::format("[{}]", i);
    return Error{
        fmt::format("gguf: {}: {}: {}", name_, where, fmt::format(f, std::forward<Args>(args)...))};
  }

  template <typename T>
  Result<T> read(std::string_view what) {
    if (left() < sizeof(T)) {
      return fail("truncated at byte {} reading {}: need {} bytes, {} left", pos_, what, sizeof(T),
                  left());
    }
    T x = load_le<T>(b_.data() + pos_);
    pos_ += sizeof(T);
    return x;
  }

  Result<std::string> read_string(std::string_view what) {
    const size_t at = pos_;
    FISH_ASSIGN_OR_RETURN(uint64_t len, read<uint64_t>(what));
    if (len > left()) {
      return fail("{} length {} at byte {} runs past the end of the file ({} bytes left)", what,
                  len, at, left());
    }
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }

  Result<GgufValueType> read_value_type(std::string_view what) {
    const size_t at = pos_;
    FISH_ASSIGN_OR_RETURN(uint32_t t, read<uint32_t>(what));
    if (t > kMaxValueType) {
      return fail("unknown {} {} at byte {}, expected 0..{}", what, t, at, kMaxValueType);
    }
    return GgufValueType(t);
  }

  // depth = number of arrays enclosing this value.
  Result<GgufValue> read_value(GgufValueType t, int depth) {
    switch (t) {
      case GgufValueType::u8:
        return scalar<uint8_t>();
      case GgufValueType::i8:
        return scalar<int8_t>();
      case GgufValueType::u16:
        return scalar<uint16_t>();
      case GgufValueType::i16:
        return scalar<int16_t>();
      case GgufValueType::u32:
        return scalar<uint32_t>();
      case GgufValueType::i32:
        return scalar<int32_t>();
      case GgufValueType::f32:
        return scalar<float>();
      case GgufValueType::u64:
        return scalar<uint64_t>();
      case GgufValueType::i64:
        return scalar<int64_t>();
      case GgufValueType::f64:
        return scalar<double>();
      case GgufValueType::boolean: {
        const size_t at = pos_;
        FISH_ASSIGN_OR_RETURN(uint8_t x, read<uint8_t>("bool"));
        if (x > 1) return fail("bool at byte {} is {}, expected 0 or 1", at, x);
        return GgufValue{x == 1};
      }
      case GgufValueType::string: {
        FISH_ASSIGN_OR_RETURN(std::string s, read_string("string"));
        return GgufValue{std::move(s)};
      }
      case GgufValueType::array:
        return read_array(depth);
    }
    return fail("unknown value type {}", uint32_t(t));  // unreachable: read_value_type checked
  }

 private:
  template <typename T>
  Result<GgufValue> scalar() {
    FISH_ASSIGN_OR_RETURN(T x, read<T>(gguf_value_type_name(GgufValue{T{}}.type())));
    return GgufValue{x};
  }

  Result<GgufValue> read_array(int depth) {
    const size_t at = pos_;
    if (depth >= kGgufMaxArrayDepth) {
      return fail("array at byte {} is nested {} deep, at most {} levels are allowed", at,
                  depth + 1, kGgufMaxArrayDepth);
    }
    FISH_ASSIGN_OR_RETURN(GgufValueType elem, read_value_type("array element type"));
    const size_t count_at = pos_;
    FISH_ASSIGN_OR_RETURN(uint64_t count, read<uint64_t>("array count"));
    // Bound the count by what the rest of the file could hold before reserving anything.
    const uint64_t most = left() / min_encoded_bytes(elem);
    if (count > most) {
      return fail("array count {} at byte {} cannot fit: the {} bytes left hold at most {} {}",
                  count, count_at, left(), most, gguf_value_type_name(elem));
    }
    auto arr = std::make_shared<GgufArray>();
    arr->elem_type = elem;
    arr->items.reserve(size_t(count));
    path_.push_back(0);
    for (uint64_t i = 0; i < count; ++i) {
      path_.back() = i;
      FISH_ASSIGN_OR_RETURN(GgufValue item, read_value(elem, depth + 1));
      arr->items.push_back(std::move(item));
    }
    path_.pop_back();
    return GgufValue{std::move(arr)};
  }

  std::span<const uint8_t> b_;
  const std::string& name_;
  size_t pos_ = 0;
  std::string ctx_ = "header";
  std::vector<uint64_t> path_;  // indices of the array elements being read, outermost first
};

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// "blk.0.ffn_up.weight (q4_0 [576, 1536], 497664 bytes at data offset 1024)"
std::string tensor_text(const GgufTensorInfo& t) {
  return fmt::format("{} ({} {}, {} bytes at data offset {})", printable(t.name), type_name(t.type),
                     dims_text(t.dims), t.n_bytes, t.offset);
}

// The data ranges, in offset order: no two tensors may share bytes, and each tensor's room (up
// to the next tensor, or the end of the file for the last) must be its type's byte size rounded
// up to the alignment, as every GGUF writer lays them out. A type relabelled to a smaller one
// (q4_1 -> q4_0 keeps the dims valid) leaves room the tensor does not fill. Empty tensors take
// no room and are not checked.
Status check_tensor_layout(const std::vector<GgufTensorInfo>& tensors, uint64_t data_offset,
                           uint64_t file_bytes, uint64_t alignment, Parser& p) {
  std::vector<const GgufTensorInfo*> order;
  for (const GgufTensorInfo& t : tensors)
    if (t.n_bytes > 0) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 0; i < order.size(); ++i) {
    const GgufTensorInfo& t = *order[i];
    p.set_context(fmt::format("tensor {}", printable(t.name)));
    const uint64_t padded = (t.n_bytes + alignment - 1) / alignment * alignment;
    if (i + 1 < order.size()) {
      const GgufTensorInfo& next = *order[i + 1];
      const uint64_t room = next.offset - t.offset;
      if (room < t.n_bytes)
        return p.fail("data overlaps tensor {}: {} ends at data offset {}, {} bytes into it",
                      tensor_text(next), tensor_text(t), t.offset + t.n_bytes,
                      t.offset + t.n_bytes - next.offset);
      if (room > padded)
        return p.fail(
            "byte size does not match the data: {} has {} bytes of room up to tensor {} (its "
            "type x element count, padded to the alignment {}, is {}): the type or dims were "
            "changed",
            tensor_text(t), room, printable(next.name), alignment, padded);
    } else {
      const uint64_t room = file_bytes - data_offset - t.offset;
      if (room > padded)
        return p.fail(
            "byte size does not match the data: {} is the last tensor, with {} bytes of room to "
            "the end of the file (its type x element count, padded to the alignment {}, is {}): "
            "the type or dims were changed",
            tensor_text(t), room, alignment, padded);
    }
  }
  return Status::success();
}

}  // namespace

// ---- GgufFile ----------------------------------------------------------------------------------

Result<GgufFile> GgufFile::open(const std::string& path) {
  FISH_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  auto owned = std::make_unique<MappedFile>(std::move(map));
  // The mapping's address does not change when the unique_ptr moves, so the parsed data
  // pointers stay valid.
  FISH_ASSIGN_OR_RETURN(GgufFile f,
                        parse(std::span<const uint8_t>(owned->data(), owned->size()), path));
  f.map_ = std::move(owned);
  return f;
}

Result<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
  GgufFile f;
  f.name_ = std::move(name);
  f.bytes_ = bytes;
  Parser p(bytes, f.name_);

  // Header.
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) != 0) {
    return p.fail("bad magic: expected \"GGUF\" (47 47 55 46), found {}",
                  hex_bytes(bytes.first(4)));
  }
  FISH_ASSIGN_OR_RETURN(uint32_t magic, p.read<uint32_t>("magic"));
  (void)magic;
  FISH_ASSIGN_OR_RETURN(uint32_t version, p.read<uint32_t>("version"));
  if (version != 2 && version != 3) {
    const uint32_t swapped = __builtin_bswap32(version);
    if (swapped >= 1 && swapped <= 3) {
      return p.fail(
          "big-endian GGUF (version bytes {}) is not supported; convert it on a "
          "little-endian machine",
          hex_bytes(bytes.subspan(4, 4)));
    }
    if (version == 1) {
      return p.fail(
          "GGUF version 1 is not supported (it has 32-bit counts), expected 2 or 3; "
          "re-convert the model with a current llama.cpp");
    }
    return p.fail("unsupported GGUF version {} at byte 4, expected 2 or 3", version);
  }
  f.version_ = version;
  FISH_ASSIGN_OR_RETURN(uint64_t tensor_count, p.read<uint64_t>("tensor count"));
  FISH_ASSIGN_OR_RETURN(uint64_t kv_count, p.read<uint64_t>("kv count"));
  // Every entry takes a minimum number of bytes, so a count the rest of the file cannot hold is a
  // lie: reject it before reserving memory for it.
  // A count a real file could have but the rest of this one cannot hold means the file was cut
  // short; a count beyond any real file is corruption.
  const uint64_t left = p.left();
  if (tensor_count > left / kMinTensorInfoBytes) {
    if (tensor_count <= kPlausibleCount)
      return p.fail(
          "truncated file: {} bytes in all, but the header's {} tensor infos need at least {} "
          "bytes after the header, which has {} (the file was cut short; download or copy it "
          "again)",
          bytes.size(), tensor_count, tensor_count * kMinTensorInfoBytes, left);
    return p.fail(
        "absurd tensor count {} at byte 8: the {} bytes after the header hold at most {} "
        "tensor infos of >= {} bytes",
        tensor_count, left, left / kMinTensorInfoBytes, kMinTensorInfoBytes);
  }
  const uint64_t left_for_kvs = left - tensor_count * kMinTensorInfoBytes;
  if (kv_count > left_for_kvs / kMinKvBytes) {
    if (kv_count <= kPlausibleCount)
      return p.fail(
          "truncated file: {} bytes in all, but the header's {} key-value pairs and {} tensor "
          "infos need at least {} bytes after the header, which has {} (the file was cut short; "
          "download or copy it again)",
          bytes.size(), kv_count, tensor_count,
          kv_count * kMinKvBytes + tensor_count * kMinTensorInfoBytes, left);
    return p.fail(
        "absurd kv count {} at byte 16: the {} bytes after the header (less {} for the "
        "{} tensor infos) hold at most {} key-value pairs of >= {} bytes",
        kv_count, left, left - left_for_kvs, tensor_count, left_for_kvs / kMinKvBytes, kMinKvBytes);
  }
  static_assert(kHeaderBytes == 24);

  // Metadata.
  f.kvs_.reserve(size_t(kv_count));
  for (uint64_t i = 0; i < kv_count; ++i) {
    const size_t at = p.pos();
    p.set_context(fmt::format("key #{} (at byte {})", i, at));
    FISH_ASSIGN_OR_RETURN(std::string key, p.read_string("key"));
    p.set_context(fmt::format("key {}", printable(key)));
    if (auto it = f.kv_index_.find(key); it != f.kv_index_.end()) {
      return p.fail("duplicate key at byte {}, first defined at byte {}", at,
                    f.kvs_[it->second].file_offset);
    }
    FISH_ASSIGN_OR_RETURN(GgufValueType type, p.read_value_type("value type"));
    FISH_ASSIGN_OR_RETURN(GgufValue value, p.read_value(type, 0));
    f.kv_index_.emplace(key, f.kvs_.size());
    f.kvs_.push_back(GgufKv{std::move(key), std::move(value), at});
  }

  if (auto it = f.kv_index_.find("general.alignment"); it != f.kv_index_.end()) {
    const GgufKv& kv = f.kvs_[it->second];
    p.set_context("key general.alignment");
    const uint32_t* a = std::get_if<uint32_t>(&kv.value.v);
    if (!a) {
      return p.fail("at byte {}: expected type u32, found {}", kv.file_offset,
                    gguf_value_type_name(kv.value.type()));
    }
    if (*a == 0 || (*a & (*a - 1)) != 0) {
      return p.fail("at byte {}: alignment must be a non-zero power of two, found {}",
                    kv.file_offset, *a);
    }
    f.alignment_ = *a;
  }

  // Tensor infos.
  f.tensors_.reserve(size_t(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    const size_t at = p.pos();
    p.set_context(fmt::format("tensor #{} (at byte {})", i, at));
    FISH_ASSIGN_OR_RETURN(std::string tname, p.read_string("tensor name"));
    p.set_context(fmt::format("tensor {}", printable(tname)));
    if (auto it = f.tensor_index_.find(tname); it != f.tensor_index_.end()) {
      return p.fail("duplicate tensor name at byte {}, first defined as tensor #{}", at,
                    it->second);
    }
    GgufTensorInfo t;
    t.name = std::move(tname);
    const size_t n_dims_at = p.pos();
    FISH_ASSIGN_OR_RETURN(uint32_t n_dims, p.read<uint32_t>("dimension count"));
    if (n_dims == 0 || n_dims > kGgufMaxDims) {
      return p.fail("dimension count {} at byte {}, expected 1 to {}", n_dims, n_dims_at,
                    kGgufMaxDims);
    }
    t.dims.reserve(n_dims);
    const size_t dims_at = p.pos();
    for (uint32_t d = 0; d < n_dims; ++d) {
      FISH_ASSIGN_OR_RETURN(uint64_t dim, p.read<uint64_t>("dimension"));
      if (dim > uint64_t(std::numeric_limits<int64_t>::max())) {
        return p.fail("dimension {} at byte {} is {}, expected < 2^63", d, dims_at + 8 * d, dim);
      }
      t.dims.push_back(int64_t(dim));
    }
    uint64_t n_elems = 1;
    for (int64_t dim : t.dims) {
      if (__builtin_mul_overflow(n_elems, uint64_t(dim), &n_elems) ||
          n_elems > uint64_t(std::numeric_limits<int64_t>::max())) {
        return p.fail("dimensions {} at byte {}: element count overflows int64", dims_text(t.dims),
                      dims_at);
      }
    }
    t.n_elems = n_elems;
    const size_t type_at = p.pos();
    FISH_ASSIGN_OR_RETURN(uint32_t type_id, p.read<uint32_t>("type id"));
    const TypeInfo* ti = find_type(type_id);
    if (!ti) return p.fail("unknown type id {} at byte {}", type_id, type_at);
    t.type = ti->type;
    if (t.dims[0] % ti->block_elems != 0) {
      return p.fail("row length {} (dims {}) is not a multiple of the {} block size {}", t.dims[0],
                    dims_text(t.dims), ti->name, ti->block_elems);
    }
    if (__builtin_mul_overflow(n_elems / uint64_t(ti->block_elems), uint64_t(ti->block_bytes),
                               &t.n_bytes)) {
      return p.fail("dimensions {} of type {}: byte size overflows 64 bits", dims_text(t.dims),
                    ti->name);
    }
    const size_t offset_at = p.pos();
    FISH_ASSIGN_OR_RETURN(uint64_t offset, p.read<uint64_t>("data offset"));
    if (offset % f.alignment_ != 0) {
      return p.fail("data offset {} at byte {} is not a multiple of the alignment {}", offset,
                    offset_at, f.alignment_);
    }
    t.offset = offset;
    f.tensor_index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }

  // Data section: starts at the next multiple of the alignment after the tensor infos.
  const uint64_t infos_end = p.pos();
  uint64_t data_offset = 0;
  if (__builtin_add_overflow(infos_end, f.alignment_ - 1, &data_offset)) {
    return p.fail("data section start overflows 64 bits");
  }
  data_offset -= data_offset % f.alignment_;
  f.data_offset_ = data_offset;
  const uint64_t file_bytes = bytes.size();
  for (GgufTensorInfo& t : f.tensors_) {
    p.set_context(fmt::format("tensor {}", printable(t.name)));
    uint64_t begin = 0;
    uint64_t end = 0;
    if (__builtin_add_overflow(data_offset, t.offset, &begin) || begin > file_bytes) {
      return p.fail(
          "data offset {} (data section at byte {}) is past the end of the file, "
          "file is {} bytes",
          t.offset, data_offset, file_bytes);
    }
    if (__builtin_add_overflow(begin, t.n_bytes, &end) || end > file_bytes) {
      const bool wraps = end < begin;
      return p.fail("data ends at byte {}{} ({} bytes from byte {}), file is {} bytes",
                    wraps ? "2^64 + " : "", end, t.n_bytes, begin, file_bytes);
    }
    t.data = bytes.data() + begin;
  }
  FISH_TRY(check_tensor_layout(f.tensors_, data_offset, file_bytes, f.alignment_, p));
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

// ---- typed getters -----------------------------------------------------------------------------

namespace {

bool is_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::u16:
    case GgufValueType::i16:
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::u64:
    case GgufValueType::i64:
      return true;
    default:
      return false;
  }
}
bool is_number_type(GgufValueType t) {
  return is_integer_type(t) || t == GgufValueType::f32 || t == GgufValueType::f64;
}

std::string found_text(const GgufValue& v) {
  if (const GgufArray* a = v.as_array()) {
    return fmt::format("array of {} {}", a->items.size(), gguf_value_type_name(a->elem_type));
  }
  return std::string(gguf_value_type_name(v.type()));
}

}  // namespace

#define FISH_GGUF_LOOKUP(v, key)  \
  const GgufValue* v = find(key); \
  if (!v) return make_error("gguf: {}: key {} is missing", name_, printable(key))

Result<std::string> GgufFile::get_string(std::string_view key) const {
  FISH_GGUF_LOOKUP(v, key);
  if (const std::string* s = v->as_string()) return *s;
  return make_error("gguf: {}: key {}: expected a string, found {}", name_, key, found_text(*v));
}

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  FISH_GGUF_LOOKUP(v, key);
  if (!is_integer_type(v->type())) {
    return make_error("gguf: {}: key {}: expected an integer, found {}", name_, key,
                      found_text(*v));
  }
  std::optional<int64_t> i = v->as_int();
  if (!i) {
    return make_error("gguf: {}: key {}: value {} does not fit in int64", name_, key,
                      std::get<uint64_t>(v->v));
  }
  return *i;
}

Result<double> GgufFile::get_float(std::string_view key) const {
  FISH_GGUF_LOOKUP(v, key);
  if (!is_number_type(v->type())) {
    return make_error("gguf: {}: key {}: expected a number, found {}", name_, key, found_text(*v));
  }
  return *v->as_double();
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  FISH_GGUF_LOOKUP(v, key);
  if (const bool* b = std::get_if<bool>(&v->v)) return *b;
  return make_error("gguf: {}: key {}: expected a bool, found {}", name_, key, found_text(*v));
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  FISH_GGUF_LOOKUP(v, key);
  const GgufArray* a = v->as_array();
  if (!a || a->elem_type != GgufValueType::string) {
    return make_error("gguf: {}: key {}: expected an array of string, found {}", name_, key,
                      found_text(*v));
  }
  std::vector<std::string> out;
  out.reserve(a->items.size());
  for (const GgufValue& item : a->items) out.push_back(*item.as_string());
  return out;
}

Result<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
  FISH_GGUF_LOOKUP(v, key);
  const GgufArray* a = v->as_array();
  if (!a || !is_number_type(a->elem_type)) {
    return make_error("gguf: {}: key {}: expected an array of numbers, found {}", name_, key,
                      found_text(*v));
  }
  std::vector<float> out;
  out.reserve(a->items.size());
  for (size_t i = 0; i < a->items.size(); ++i) {
    const double d = *a->items[i].as_double();
    // A finite double beyond float's range has no float value (the cast would be UB).
    if (std::isfinite(d) && std::fabs(d) > double(std::numeric_limits<float>::max())) {
      return make_error("gguf: {}: key {}[{}]: value {} does not fit in f32", name_, key, i, d);
    }
    out.push_back(float(d));
  }
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  FISH_GGUF_LOOKUP(v, key);
  const GgufArray* a = v->as_array();
  if (!a || !is_integer_type(a->elem_type)) {
    return make_error("gguf: {}: key {}: expected an array of integers, found {}", name_, key,
                      found_text(*v));
  }
  std::vector<int64_t> out;
  out.reserve(a->items.size());
  for (size_t i = 0; i < a->items.size(); ++i) {
    std::optional<int64_t> x = a->items[i].as_int();
    if (!x) {
      return make_error("gguf: {}: key {}[{}]: value {} does not fit in int64", name_, key, i,
                        std::get<uint64_t>(a->items[i].v));
    }
    out.push_back(*x);
  }
  return out;
}

#undef FISH_GGUF_LOOKUP

}  // namespace fish
