// SHA-256 (FIPS 180-4) for model identity and cell ids. Streaming: update() any number of times.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace fish {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n_bytes);
  std::array<uint8_t, 32> finish();
  std::string finish_hex();  // 64 lowercase hex digits

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(const void* data, size_t n_bytes);
std::string sha256_hex(std::string_view s);
// Hashes a whole file; errors name the path.
Result<std::string> sha256_file_hex(const std::string& path);

}  // namespace fish
