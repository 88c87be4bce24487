// GGUF v3 writer: validates everything the reader would check, then streams header, metadata,
// tensor infos and aligned tensor data to PATH.tmp through a large buffer, fsyncs and renames.
//
// Speed: small pieces go through a 4 MiB buffer; tensor data of at least that size is written
// straight from the caller's span (no copy), so a multi-GB model costs one write() per tensor.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "engine/gguf.h"

namespace fish {
namespace {

constexpr size_t kWriteBufferBytes = size_t(4) << 20;  // batches the many small metadata writes
constexpr size_t kMaxWriteCall = size_t(1) << 30;      // Linux caps one write() at ~2 GiB

// A file descriptor with a write buffer; every error names the path and the byte offset.
class BufferedFile {
 public:
  explicit BufferedFile(std::string path) : path_(std::move(path)) {}
  ~BufferedFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  Status open() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return make_error("gguf: {}: cannot create: {}", path_, std::strerror(errno));
    buf_.resize(kWriteBufferBytes);
    return Status::success();
  }

  uint64_t offset() const { return written_ + used_; }

  Status write(const void* p, size_t n) {
    if (n == 0) return Status::success();  // p may be null (an empty span); memcpy forbids it
    const auto* src = static_cast<const uint8_t*>(p);
    if (n >= buf_.size()) {  // large: bypass the buffer
      FISH_TRY(flush());
      return write_all(src, n);
    }
    if (n > buf_.size() - used_) FISH_TRY(flush());
    std::memcpy(buf_.data() + used_, src, n);
    used_ += n;
    return Status::success();
  }

  template <typename T>
  Status pod(T x) {
    return write(&x, sizeof(T));  // little-endian host (static_assert in gguf.cpp)
  }

  Status pad_to(size_t alignment) {
    static const uint8_t kZeros[256] = {};
    uint64_t pad = (alignment - offset() % alignment) % alignment;
    while (pad > 0) {
      const size_t n = size_t(std::min<uint64_t>(pad, sizeof(kZeros)));
      FISH_TRY(write(kZeros, n));
      pad -= n;
    }
    return Status::success();
  }

  Status flush() {
    if (used_ == 0) return Status::success();
    const size_t n = used_;
    used_ = 0;
    return write_all(buf_.data(), n);
  }

  // Flushes, fsyncs and closes: after this the bytes are on disk.
  Status finish() {
    FISH_TRY(flush());
    if (::fsync(fd_) != 0) return make_error("gguf: {}: fsync: {}", path_, std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return make_error("gguf: {}: close: {}", path_, std::strerror(errno));
    return Status::success();
  }

 private:
  Status write_all(const uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, std::min(n, kMaxWriteCall));
      if (w < 0) {
        if (errno == EINTR) continue;
        return make_error("gguf: {}: write of {} bytes at byte {} failed: {}", path_, n, written_,
                          std::strerror(errno));
      }
      p += w;
      n -= size_t(w);
      written_ += uint64_t(w);
    }
    return Status::success();
  }

  std::string path_;
  int fd_ = -1;
  std::vector<uint8_t> buf_;
  size_t used_ = 0;
  uint64_t written_ = 0;  // bytes handed to the kernel
};

// Checks that a value is what the reader accepts: array items match elem_type, depth bounded.
Status check_value(const GgufValue& v, const std::string& key, int depth) {
  const GgufArray* a = v.as_array();
  if (!a) return Status::success();
  if (depth >= kGgufMaxArrayDepth) {
    return make_error("gguf writer: key {}: arrays nested deeper than {} levels", key,
                      kGgufMaxArrayDepth);
  }
  for (size_t i = 0; i < a->items.size(); ++i) {
    if (a->items[i].type() != a->elem_type) {
      return make_error("gguf writer: key {}: array element {} has type {}, the array declares {}",
                        key, i, gguf_value_type_name(a->items[i].type()),
                        gguf_value_type_name(a->elem_type));
    }
    FISH_TRY(check_value(a->items[i], key, depth + 1));
  }
  return Status::success();
}

Status write_string(BufferedFile& out, const std::string& s) {
  FISH_TRY(out.pod<uint64_t>(s.size()));
  return out.write(s.data(), s.size());
}

// Writes the value's payload (without its type tag).
Status write_value(BufferedFile& out, const GgufValue& v) {
  return std::visit(
      [&](const auto& x) -> Status {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return write_string(out, x);
        } else if constexpr (std::is_same_v<T, std::shared_ptr<GgufArray>>) {
          FISH_TRY(out.pod<uint32_t>(uint32_t(x->elem_type)));
          FISH_TRY(out.pod<uint64_t>(x->items.size()));
          for (const GgufValue& item : x->items) FISH_TRY(write_value(out, item));
          return Status::success();
        } else if constexpr (std::is_same_v<T, bool>) {
          return out.pod<uint8_t>(x ? 1 : 0);
        } else {
          return out.pod<T>(x);
        }
      },
      v.v);
}

}  // namespace

GgufWriter::GgufWriter(size_t alignment) : alignment_(alignment) {}

void GgufWriter::set(std::string key, GgufValue value) {
  for (auto& kv : kvs_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kvs_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> dims,
                            std::span<const uint8_t> data) {
  tensors_.push_back(PendingTensor{std::move(name), type, std::move(dims), data, nullptr});
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> dims,
                            Producer produce) {
  tensors_.push_back(PendingTensor{std::move(name), type, std::move(dims), {}, std::move(produce)});
}

Status GgufWriter::write(const std::string& path) const {
  // Validate everything first, so an invalid model never creates a file.
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0 ||
      alignment_ > std::numeric_limits<uint32_t>::max()) {
    return make_error("gguf writer: {}: alignment {} is not a power of two that fits in u32", path,
                      alignment_);
  }
  std::vector<std::pair<std::string, GgufValue>> extra;  // general.alignment when needed
  bool has_alignment_key = false;
  for (const auto& [key, value] : kvs_) {
    FISH_TRY(check_value(value, key, 0));
    if (key == "general.alignment") {
      has_alignment_key = true;
      const uint32_t* a = std::get_if<uint32_t>(&value.v);
      if (!a || *a != alignment_) {
        return make_error("gguf writer: {}: general.alignment is {} {}, the writer aligns to {}",
                          path, gguf_value_type_name(value.type()),
                          value.as_uint() ? std::to_string(*value.as_uint()) : "?", alignment_);
      }
    }
  }
  if (!has_alignment_key && alignment_ != kGgufDefaultAlignment) {
    extra.emplace_back("general.alignment", gguf_u32(uint32_t(alignment_)));
  }

  std::vector<uint64_t> n_bytes(tensors_.size());
  std::vector<uint64_t> offsets(tensors_.size());
  std::set<std::string_view> names;
  uint64_t data_bytes = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const PendingTensor& t = tensors_[i];
    if (!names.insert(t.name).second) {
      return make_error("gguf writer: {}: duplicate tensor name {}", path, t.name);
    }
    if (t.dims.empty() || t.dims.size() > kGgufMaxDims) {
      return make_error("gguf writer: {}: tensor {} has {} dimensions, expected 1 to {}", path,
                        t.name, t.dims.size(), kGgufMaxDims);
    }
    uint64_t n_elems = 1;
    for (int64_t d : t.dims) {
      if (d < 0) {
        return make_error("gguf writer: {}: tensor {} has negative dimension {}", path, t.name, d);
      }
      if (__builtin_mul_overflow(n_elems, uint64_t(d), &n_elems) ||
          n_elems > uint64_t(std::numeric_limits<int64_t>::max())) {
        return make_error("gguf writer: {}: tensor {}: element count overflows int64", path,
                          t.name);
      }
    }
    const TypeInfo* ti = find_type(uint32_t(t.type));
    if (!ti) {
      return make_error("gguf writer: {}: tensor {} has unknown type id {}", path, t.name,
                        uint32_t(t.type));
    }
    if (t.dims[0] % ti->block_elems != 0) {
      return make_error(
          "gguf writer: {}: tensor {}: row length {} is not a multiple of the {} block size {}",
          path, t.name, t.dims[0], ti->name, ti->block_elems);
    }
    if (__builtin_mul_overflow(n_elems / uint64_t(ti->block_elems), uint64_t(ti->block_bytes),
                               &n_bytes[i])) {
      return make_error("gguf writer: {}: tensor {}: byte size overflows 64 bits", path, t.name);
    }
    if (!t.produce && t.data.size() != n_bytes[i]) {
      return make_error(
          "gguf writer: {}: tensor {} ({}, {} elements): data is {} bytes, expected {}", path,
          t.name, ti->name, n_elems, t.data.size(), n_bytes[i]);
    }
    offsets[i] = data_bytes;
    const uint64_t padded = (n_bytes[i] + alignment_ - 1) / alignment_ * alignment_;
    if (__builtin_add_overflow(data_bytes, padded, &data_bytes)) {
      return make_error("gguf writer: {}: total data size overflows 64 bits", path);
    }
  }

  const std::string tmp = path + ".tmp";
  Status st = [&]() -> Status {
    BufferedFile out(tmp);
    FISH_TRY(out.open());
    FISH_TRY(out.write("GGUF", 4));
    FISH_TRY(out.pod<uint32_t>(3));
    FISH_TRY(out.pod<uint64_t>(tensors_.size()));
    FISH_TRY(out.pod<uint64_t>(kvs_.size() + extra.size()));
    for (const auto* list : {&kvs_, const_cast<const decltype(extra)*>(&extra)}) {
      for (const auto& [key, value] : *list) {
        FISH_TRY(write_string(out, key));
        FISH_TRY(out.pod<uint32_t>(uint32_t(value.type())));
        FISH_TRY(write_value(out, value));
      }
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const PendingTensor& t = tensors_[i];
      FISH_TRY(write_string(out, t.name));
      FISH_TRY(out.pod<uint32_t>(uint32_t(t.dims.size())));
      for (int64_t d : t.dims) FISH_TRY(out.pod<uint64_t>(uint64_t(d)));
      FISH_TRY(out.pod<uint32_t>(uint32_t(t.type)));
      FISH_TRY(out.pod<uint64_t>(offsets[i]));
    }
    FISH_TRY(out.pad_to(alignment_));
    std::vector<uint8_t> produced;  // reused: memory stays bounded by the largest tensor
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const PendingTensor& t = tensors_[i];
      if (t.produce) {
        produced.resize(size_t(n_bytes[i]));
        Status ps = t.produce(std::span<uint8_t>(produced));
        if (!ps.ok()) {
          return make_error("gguf writer: {}: tensor {}: {}", path, t.name, ps.error().message);
        }
        FISH_TRY(out.write(produced.data(), produced.size()));
      } else {
        FISH_TRY(out.write(t.data.data(), t.data.size()));
      }
      FISH_TRY(out.pad_to(alignment_));
    }
    return out.finish();
  }();
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return make_error("gguf writer: cannot rename {} to {}: {}", tmp, path, std::strerror(e));
  }
  return Status::success();
}

}  // namespace fish
