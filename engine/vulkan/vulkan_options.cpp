// Environment parsing for the Vulkan backend's knobs (vulkan_options.h).
#include "engine/vulkan/vulkan_options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <string_view>

#include "fish_vk_span.h"
#include "kernels/requant.h"

namespace fish::vk {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return r;
}

// An unsigned decimal from an env var, or an error naming it.
Result<uint64_t> parse_uint(const char* var, const char* value, uint64_t max) {
  const std::string_view s(value);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v > max)
    return make_error("{}='{}': expected an integer in 0..{}", var, s, max);
  return v;
}

bool is_one(const char* value) {
  return value &&
         (std::string_view(value) == "1" || lower(value) == "true" || lower(value) == "on");
}

}  // namespace

Result<FaultPlan> parse_fault(std::string_view value) {
  const size_t colon = value.find(':');
  const std::string_view kind = value.substr(0, colon);
  FaultPlan f;
  f.kind = kind == "lost"      ? FaultKind::lost
           : kind == "timeout" ? FaultKind::timeout
                               : FaultKind::none;
  uint64_t n = 0;
  const std::string_view num = colon == std::string_view::npos ? "" : value.substr(colon + 1);
  auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), n);
  if (f.kind == FaultKind::none || num.empty() || ec != std::errc() ||
      end != num.data() + num.size() || n < 1)
    return make_error(
        "FISH_VK_FAULT='{}': expected lost:N or timeout:N (N >= 1, the compute submit that fails)",
        value);
  f.at = n;
  return f;
}

bool gpu_disabled_by(const char* v) {
  if (!v) return false;
  const std::string s = lower(v);
  return s == "0" || s == "off" || s == "false" || s == "no";
}

Result<VulkanOptions> VulkanOptions::from_env() {
  VulkanOptions o;
  const char* gpu = std::getenv("FISH_GPU");
  o.enabled = !gpu_disabled_by(gpu);
  o.allow_cpu = gpu && lower(gpu) == "cpu";
  if (const char* d = std::getenv("FISH_GPU_DEVICE"); d && *d) {
    FISH_ASSIGN_OR_RETURN(uint64_t idx, parse_uint("FISH_GPU_DEVICE", d, 1u << 16));
    o.device = uint32_t(idx);
  }
  if (const char* q = std::getenv("FISH_VK_QUEUE"); q && *q) {
    const std::string s = lower(q);
    if (s != "universal" && s != "compute")
      return make_error("FISH_VK_QUEUE='{}': expected 'universal' or 'compute'", q);
    o.universal_queue = s == "universal";
  }
  o.validate = is_one(std::getenv("FISH_VK_VALIDATE"));
  o.verbose = is_one(std::getenv("FISH_GPU_VERBOSE"));
  if (const char* m = std::getenv("FISH_VK_MATVEC"); m && *m) {
    const std::string_view v(m);
    if (v != "0" && v != "1") return make_error("FISH_VK_MATVEC='{}': expected 0 or 1", v);
    o.matvec1 = v == "1";
  }
  if (const char* a = std::getenv("FISH_VK_ATTN_SPLIT"); a && *a && lower(a) != "auto") {
    FISH_ASSIGN_OR_RETURN(uint64_t n,
                          parse_uint("FISH_VK_ATTN_SPLIT", a, FISH_SPAN_ATTN_MAX_SPLIT));
    o.attn_split = int(n);
  }
  if (const char* b = std::getenv("FISH_VRAM_BUDGET_MB"); b && *b) {
    FISH_ASSIGN_OR_RETURN(uint64_t mb, parse_uint("FISH_VRAM_BUDGET_MB", b, uint64_t(1) << 30));
    if (mb == 0) return make_error("FISH_VRAM_BUDGET_MB='0': expected a positive number of MB");
    o.budget_bytes = mb << 20;
  }
  if (const char* r = std::getenv("FISH_GPU_REQUANT"); r && *r) {
    FISH_ASSIGN_OR_RETURN(uint64_t mode, parse_uint("FISH_GPU_REQUANT", r, kRequantModeMax));
    o.requant = int(mode);
  }
  if (const char* p = std::getenv("FISH_GPU_PROFILE"); p && *p) {
    const std::string_view v(p);
    if (v != "0" && v != "1" && v != "2")
      return make_error("FISH_GPU_PROFILE='{}': expected 0, 1 or 2 (2: per-stage span timestamps)",
                        v);
    o.profile = v == "2";
  }
  if (const char* f = std::getenv("FISH_VK_FAULT"); f && *f) {
    FISH_ASSIGN_OR_RETURN(o.fault, parse_fault(f));
  }
  return o;
}

}  // namespace fish::vk
