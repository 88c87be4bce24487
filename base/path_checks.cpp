// Input and output path checks; see path_checks.h.
#include "base/path_checks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace fish {

std::string_view file_kind_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

Result<RegularFile> open_regular_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return make_error("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error("{}: cannot stat: {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error("{}: is {}, expected a regular file", path, file_kind_name(st.st_mode));
  }
  // Reads of a regular file never block, but callers may hand the fd on: clear the flag.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return RegularFile{fd, uint64_t(st.st_size)};
}

namespace {

Error too_big(const std::string& path, uint64_t size, uint64_t max_bytes, std::string_view what) {
  return make_error("{}: {} bytes, over the {} MiB limit of {}", path, size, max_bytes >> 20, what);
}

// Refuses `out` when it resolves to an input or is a directory.
Status check_one_output(const std::string& out, std::span<const std::string> inputs) {
  struct stat o;
  if (::stat(out.c_str(), &o) != 0) return Status::success();  // not there yet (or unreachable)
  if (S_ISDIR(o.st_mode))
    return make_error("{}: is a directory, expected an output file path", out);
  for (const std::string& in : inputs) {
    struct stat i;
    if (::stat(in.c_str(), &i) != 0) continue;
    if (i.st_dev == o.st_dev && i.st_ino == o.st_ino)
      return make_error("{}: is the input {} (the same file{}); write the output to another path",
                        out, in, out == in ? "" : ", through a link");
  }
  return Status::success();
}

}  // namespace

Status check_input_file(const std::string& path, uint64_t max_bytes, std::string_view what) {
  FISH_ASSIGN_OR_RETURN(RegularFile f, open_regular_file(path));
  ::close(f.fd);
  if (f.size > max_bytes) return too_big(path, f.size, max_bytes, what);
  return Status::success();
}

Result<std::string> read_regular_file(const std::string& path, uint64_t max_bytes,
                                      std::string_view what) {
  FISH_ASSIGN_OR_RETURN(RegularFile f, open_regular_file(path));
  if (f.size > max_bytes) {
    ::close(f.fd);
    return too_big(path, f.size, max_bytes, what);
  }
  std::string text(size_t(f.size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(f.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(f.fd);
      return make_error("{}: read failed at byte {}: {}", path, done, std::strerror(e));
    }
    if (n == 0) break;  // shrank since the fstat: keep what is there
    done += size_t(n);
  }
  ::close(f.fd);
  text.resize(done);
  return text;
}

Status check_output_path(const std::string& out, std::span<const std::string> inputs,
                         std::string_view temp_suffix) {
  FISH_TRY(check_one_output(out, inputs));
  if (!temp_suffix.empty()) FISH_TRY(check_one_output(out + std::string(temp_suffix), inputs));
  return Status::success();
}

std::string fish_cache_dir() {
  if (const char* c = std::getenv("FISH_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/fish";
}

}  // namespace fish
