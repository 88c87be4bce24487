#include "base/huge_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/env_knobs.h"

namespace fish {

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept
    : map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)),
      data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      huge_(std::exchange(o.huge_, false)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    huge_ = std::exchange(o.huge_, false);
  }
  return *this;
}

HugeBuffer::~HugeBuffer() {
  reset();
}

void HugeBuffer::reset() {
  if (map_ != nullptr) munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
  data_ = nullptr;
  bytes_ = 0;
}

Result<HugeBuffer> HugeBuffer::allocate(size_t bytes, bool huge) {
  if (bytes == 0) return make_error("huge buffer: 0 bytes requested");
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Slack for the 2 MiB alignment, then the guard page.
  const size_t want = rounded + kHugePage + page;
  void* m = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return make_error("huge buffer: cannot map {:.1f} MB: {}", double(want) / 1e6,
                      std::strerror(errno));
  auto* base = static_cast<uint8_t*>(m);
  auto* data = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) /
                                          kHugePage * kHugePage);
  // Give back the slack in front; keep one page after the data as the guard.
  if (data > base) munmap(base, size_t(data - base));
  uint8_t* guard = data + rounded;
  uint8_t* end = base + want;
  if (end > guard + page) munmap(guard + page, size_t(end - guard - page));
  mprotect(guard, page, PROT_NONE);
  HugeBuffer b;
  b.map_ = data;
  b.map_bytes_ = rounded + page;
  b.data_ = data;
  b.bytes_ = rounded;
  // Advice only: a kernel without THP says EINVAL, and the buffer is ordinary pages.
  b.huge_ = huge && madvise(data, rounded, MADV_HUGEPAGE) == 0;
  return b;
}

uint64_t HugeBuffer::huge_bytes() const {
  if (data_ == nullptr) return 0;
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return 0;
  const auto lo = reinterpret_cast<uintptr_t>(data_);
  char line[512];
  bool inside = false;
  uint64_t kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    uintptr_t a = 0, b = 0;
    // A mapping's header line: "start-end perms ..."; its fields follow.
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &a, &b) == 2) {
      inside = a == lo;
      continue;
    }
    uint64_t v = 0;
    if (inside && std::sscanf(line, "AnonHugePages: %" SCNu64 " kB", &v) == 1) {
      kb = v;
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

Result<bool> huge_pages_wanted() {
  return env_switch("FISH_HUGEPAGES", true);
}

}  // namespace fish
