#include "base/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/path_checks.h"

namespace fish {

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    path_ = std::move(o.path_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  reset();
}

void MappedFile::reset() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

Result<MappedFile> MappedFile::open(const std::string& path) {
  // Regular files only: a FIFO would block the open, a device would map nothing useful.
  FISH_ASSIGN_OR_RETURN(const RegularFile f, open_regular_file(path));
  const int fd = f.fd;
  MappedFile m;
  m.path_ = path;
  m.size_ = size_t(f.size);
  if (m.size_ > 0) {
    void* p = mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return make_error("{}: cannot mmap {} bytes: {}", path, m.size_, std::strerror(e));
    }
    m.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return m;
}

namespace {
void advise(const uint8_t* base, size_t size, size_t offset, size_t n, int advice) {
  if (!base || offset >= size) return;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t begin = offset / page * page;
  size_t end = std::min(size, offset + n);
  madvise(const_cast<uint8_t*>(base) + begin, end - begin, advice);
}
}  // namespace

void MappedFile::prefetch(size_t offset, size_t n) const {
  advise(data_, size_, offset, n, MADV_WILLNEED);
}
void MappedFile::evict(size_t offset, size_t n) const {
  advise(data_, size_, offset, n, MADV_DONTNEED);
}

}  // namespace fish
