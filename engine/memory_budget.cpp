// Host memory budget; see memory_budget.h.
#include "engine/memory_budget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include "base/env_knobs.h"

namespace fish {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  uint64_t x = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return x;
}

// cgroup v2: memory.max - memory.current of this process's cgroup; nullopt when unlimited.
std::optional<uint64_t> cgroup_left() {
  std::istringstream lines(slurp("/proc/self/cgroup"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string dir = "/sys/fs/cgroup" + line.substr(3);
    const std::optional<uint64_t> max = parse_u64(slurp(dir + "/memory.max"));  // "max": none
    const std::optional<uint64_t> cur = parse_u64(slurp(dir + "/memory.current"));
    if (!max || !cur) return std::nullopt;
    return *max > *cur ? *max - *cur : 0;
  }
  return std::nullopt;
}

// RLIMIT_AS less the address space already mapped; nullopt when unlimited.
std::optional<uint64_t> rlimit_left() {
  struct rlimit r;
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return std::nullopt;
  std::istringstream statm(slurp("/proc/self/statm"));
  uint64_t pages = 0;
  statm >> pages;
  const uint64_t used = pages * uint64_t(sysconf(_SC_PAGESIZE));
  return uint64_t(r.rlim_cur) > used ? uint64_t(r.rlim_cur) - used : 0;
}

}  // namespace

std::optional<uint64_t> parse_mem_available(std::string_view meminfo) {
  const size_t at = meminfo.find("MemAvailable:");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = meminfo.substr(at + 13);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  uint64_t kb = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kb);
  if (ec != std::errc() || p == rest.data()) return std::nullopt;
  return kb * 1024;  // the file's unit is kB (KiB)
}

Result<HostMemory> host_memory_available() {
  HostMemory h{UINT64_MAX, "no limit known"};
  auto consider = [&](std::optional<uint64_t> bytes, const char* source) {
    if (bytes && *bytes < h.bytes) h = {*bytes, source};
  };
  consider(parse_mem_available(slurp("/proc/meminfo")), "MemAvailable");
  consider(cgroup_left(), "the cgroup's memory.max");
  consider(rlimit_left(), "RLIMIT_AS");
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> mb, env_int("FISH_RAM_BUDGET_MB"));
  if (mb) consider(uint64_t(*mb) << 20, "FISH_RAM_BUDGET_MB");
  return h;
}

std::string bytes_text(uint64_t n) {
  if (n >= (uint64_t(1) << 30)) return fmt::format("{:.1f} GiB", double(n) / double(1 << 30));
  if (n >= (uint64_t(1) << 20)) return fmt::format("{:.1f} MiB", double(n) / double(1 << 20));
  if (n >= (uint64_t(1) << 10)) return fmt::format("{:.1f} KiB", double(n) / double(1 << 10));
  return fmt::format("{} B", n);
}

Status check_host_memory(const SessionMemory& need, const HostMemory& have, std::string_view what,
                         std::string_view hint) {
  if (need.total() <= have.bytes) return Status::success();
  std::string parts;  // the parts that are there, in allocation order
  const std::pair<const char*, uint64_t> named[] = {{"KV", need.kv},
                                                    {"attention scores", need.scores},
                                                    {"work buffers", need.buffers},
                                                    {"int4 weights", need.int4},
                                                    {"x16 weight copies", need.x16}};
  for (const auto& [name, bytes] : named)
    if (bytes > 0)
      parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", name, bytes_text(bytes));
  return make_error("{} needs {} of host memory ({}), have {} ({}) (hint: {})", what,
                    bytes_text(need.total()), parts, bytes_text(have.bytes), have.source, hint);
}

}  // namespace fish
