// FISH_FAULT parsing and the throw; see fault_injection.h.
#include "base/fault_injection.h"

#include <atomic>
#include <charconv>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

#include "base/env_knobs.h"

namespace fish {
namespace {

constexpr std::string_view kKinds[] = {"bad_alloc", "runtime_error"};
constexpr std::string_view kSites[] = {"model_load", "session_create"};

struct FaultSpec {
  std::string kind, site;
  int64_t nth = 1;
};

bool one_of(std::string_view s, std::span<const std::string_view> set) {
  for (std::string_view x : set)
    if (x == s) return true;
  return false;
}

// nullopt when the value is malformed.
std::optional<FaultSpec> parse(std::string_view v) {
  const size_t at = v.find('@');
  if (at == std::string_view::npos) return std::nullopt;
  FaultSpec f;
  f.kind = std::string(v.substr(0, at));
  std::string_view rest = v.substr(at + 1);
  const size_t colon = rest.find(':');
  f.site = std::string(rest.substr(0, colon));
  if (colon != std::string_view::npos) {
    const std::string_view n = rest.substr(colon + 1);
    auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), f.nth);
    if (n.empty() || ec != std::errc() || p != n.data() + n.size() || f.nth < 1)
      return std::nullopt;
  }
  if (!one_of(f.kind, kKinds) || !one_of(f.site, kSites)) return std::nullopt;
  return f;
}

}  // namespace

Status check_fault_spec(std::string_view value) {
  if (parse(value)) return Status::success();
  return make_error(
      "FISH_FAULT='{}': expected KIND@SITE[:N] with KIND bad_alloc or runtime_error, SITE "
      "model_load or session_create, N >= 1 (the N-th time the site is reached)",
      value);
}

Result<DeviceFault> parse_device_fault(std::string_view value) {
  const size_t colon = value.find(':');
  const std::string_view kind = value.substr(0, colon);
  DeviceFault f;
  f.kind = kind == "lost"      ? DeviceFaultKind::lost
           : kind == "timeout" ? DeviceFaultKind::timeout
                               : DeviceFaultKind::none;
  uint64_t n = 0;
  const std::string_view num = colon == std::string_view::npos ? "" : value.substr(colon + 1);
  auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), n);
  if (f.kind == DeviceFaultKind::none || num.empty() || ec != std::errc() ||
      end != num.data() + num.size() || n < 1)
    return make_error(
        "FISH_VK_FAULT='{}': expected lost:N or timeout:N (N >= 1, the compute submit that fails)",
        value);
  f.at = n;
  return f;
}

Status check_device_fault_spec(std::string_view value) {
  FISH_TRY(parse_device_fault(value));
  return Status::success();
}

void inject_fault(std::string_view site) {
  const std::optional<std::string> v = env_value("FISH_FAULT");
  if (!v) return;
  const std::optional<FaultSpec> f = parse(*v);
  if (!f || f->site != site) return;
  static std::atomic<int64_t> hits{0};  // one spec per process, so one counter
  if (++hits != f->nth) return;
  if (f->kind == "bad_alloc") throw std::bad_alloc();
  throw std::runtime_error("FISH_FAULT=" + *v + ": injected fault");
}

}  // namespace fish
