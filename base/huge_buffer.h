// Anonymous memory for the large read-mostly arrays a decode step streams (the x16 weight
// copies): 2 MiB aligned, with transparent huge pages asked for (madvise MADV_HUGEPAGE). A GB
// streamed through 4 KiB pages touches ~262,000 page-table entries; through 2 MiB pages, 512.
// Where the kernel has THP off ("never") or grants none, the buffer is ordinary pages; where
// FISH_HUGEPAGES=0 it never asks (the A/B).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/result.h"

namespace fish {

class HugeBuffer {
 public:
  static constexpr size_t kHugePage = size_t(2) << 20;

  HugeBuffer() = default;
  HugeBuffer(HugeBuffer&& o) noexcept;
  HugeBuffer& operator=(HugeBuffer&& o) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  ~HugeBuffer();

  // `bytes` (> 0) of zeroed memory, its size rounded up to whole 2 MiB pages, followed by an
  // inaccessible guard page (which also keeps the kernel from merging the mapping with a
  // neighbour, so huge_bytes() counts this buffer alone). huge: ask for huge pages.
  // Errors: bytes 0, or the mapping fails (out of memory, naming the size).
  static Result<HugeBuffer> allocate(size_t bytes, bool huge);

  uint8_t* data() const { return data_; }
  size_t size() const { return bytes_; }
  bool huge_requested() const { return huge_; }
  // Bytes of this buffer the kernel backs with huge pages now (AnonHugePages of its mapping in
  // /proc/self/smaps); 0 when none or unknown (no /proc).
  uint64_t huge_bytes() const;

 private:
  void reset();
  void* map_ = nullptr;  // the whole mapping, alignment slack unmapped
  size_t map_bytes_ = 0;
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;  // rounded to kHugePage
  bool huge_ = false;
};

// FISH_HUGEPAGES (default on): whether weight copies ask for huge pages. Errors: a value that is
// not a switch word.
Result<bool> huge_pages_wanted();

}  // namespace fish
