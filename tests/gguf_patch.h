// Test helper: where a tensor's info fields sit in GGUF bytes, so a test can corrupt exactly one
// field of a real or synthetic file (its type id, its data offset).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace fish::test {

// Byte position of tensor `name`'s type id (u32; its data offset, u64, follows) in the tensor
// infos: found as the name's u64 length + bytes, then skipping n_dims and the dims.
inline size_t tensor_type_pos(const std::vector<uint8_t>& b, const std::string& name) {
  std::vector<uint8_t> pat(8);
  const uint64_t n = name.size();
  std::memcpy(pat.data(), &n, 8);
  pat.insert(pat.end(), name.begin(), name.end());
  const auto it = std::search(b.begin(), b.end(), pat.begin(), pat.end());
  EXPECT_NE(it, b.end()) << name;
  if (it == b.end()) return 0;
  const size_t p = size_t(it - b.begin()) + pat.size();
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, b.data() + p, 4);
  return p + 4 + 8 * size_t(n_dims);
}

}  // namespace fish::test
