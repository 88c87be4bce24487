// A read-only memory mapping of a whole file (POSIX mmap). Move-only; unmapped on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"

namespace fish {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Errors: the file cannot be opened or mapped (message names the path and errno text).
  // An empty file maps to data() == nullptr, size() == 0.
  static Result<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Advises the kernel that [offset, offset+n) will be read soon / is no longer needed.
  void prefetch(size_t offset, size_t n) const;
  void evict(size_t offset, size_t n) const;

 private:
  void reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace fish
