// The FISH_* knob table and its parser; see env_knobs.h.
#include "base/env_knobs.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "base/fault_injection.h"

namespace fish {
namespace {

// Switch words: the first four turn a thing off. A function, not a global: the table may be
// built during static initialisation (the Vulkan backend registers itself before main).
std::vector<std::string_view> switch_words() {
  return {"0", "off", "false", "no", "1", "on", "true", "yes"};
}

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return r;
}

bool parse_int(std::string_view s, int64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

bool has_word(const EnvKnob& k, std::string_view w) {
  return std::find(k.words.begin(), k.words.end(), w) != k.words.end();
}

bool takes_ints(const EnvKnob& k) {
  return k.min <= k.max;
}

std::string allowed_text(const EnvKnob& k) {
  std::string words;
  for (std::string_view w : k.words) words += fmt::format("{}{}", words.empty() ? "" : ", ", w);
  const std::string ints = fmt::format("an integer {} to {}", k.min, k.max);
  if (!takes_ints(k)) return "one of " + words;
  if (k.words.empty()) return ints;
  return words + " or " + ints;
}

}  // namespace

std::span<const EnvKnob> env_knobs() {
  using S = EnvScope;
  // name, scope, words, min, max, doc[, own check]. Sorted by name.
  static const std::vector<EnvKnob> table = {
      {"FISH_COMMIT", S::harness, {}, 0, -1, "commit recorded in results context lines"},
      {"FISH_FAULT",
       S::all,
       {},
       0,
       -1,
       "tests only: KIND@SITE[:N] throws bad_alloc or runtime_error the N-th time model_load or "
       "session_create is reached (base/fault_injection.h)",
       &check_fault_spec},
      {"FISH_GPU",
       S::gpu,
       {"0", "off", "false", "no", "1", "on", "true", "yes", "cpu"},
       0,
       -1,
       "0/off/false/no: no GPU backend at all; cpu: also allow CPU Vulkan implementations "
       "(lavapipe)"},
      {"FISH_GPU_DEVICE",
       S::gpu,
       {},
       0,
       65536,
       "Vulkan physical device index (fish gpu lists them)"},
      {"FISH_GPU_LAYERS", S::gpu, {}, 0, 1 << 20, "at most this many layers on the GPU"},
      {"FISH_GPU_PROFILE", S::gpu, {"0", "2"}, 0, -1, "2: per-stage GPU time of the layer span"},
      {"FISH_GPU_REQUANT",
       S::gpu,
       {},
       0,
       3,
       "re-quantisation mode of the device copy of the weights (kernels/requant.h)"},
      {"FISH_GPU_SPAN", S::gpu, switch_words(), 0, -1, "0/off/false/no: no stage 2 layer span"},
      {"FISH_GPU_VERBOSE", S::gpu, switch_words(), 0, -1,
       "print the opened device or why the GPU is off"},
      {"FISH_ISA",
       S::all,
       {"scalar", "avx2", "avx512"},
       0,
       -1,
       "cap on the CPU kernel ISA (unset: the best the CPU runs)"},
      {"FISH_MODELS_DIR",
       S::harness,
       {},
       0,
       -1,
       "where fish run also looks for a model, by file name"},
      {"FISH_RAM_BUDGET_MB",
       S::all,
       {},
       1,
       int64_t(1) << 30,
       "FISH's ceiling on host memory for a session's KV cache and buffers (default: "
       "MemAvailable and the cgroup / rlimit caps)"},
      {"FISH_SHARD_COUNT",
       S::harness,
       {},
       0,
       -1,
       "fish run: shard count beside JOB_COMPLETION_INDEX (checked by the shard parser)"},
      {"FISH_SYNTHETIC_DIR",
       S::harness,
       {},
       0,
       -1,
       "where fish run writes synthetic:... models (default ~/.cache/fish/synthetic)"},
      {"FISH_THREADS",
       S::all,
       {},
       1,
       512,
       "threads when a command or config says 0 (default: all hardware threads)"},
      {"FISH_VK_ATTN_SPLIT",
       S::gpu,
       {"auto"},
       0,
       64,
       "span attention KV splits: auto (the rule), 0 one pass, N splits"},
      {"FISH_VK_MATVEC", S::gpu, {"0", "1"}, 0, -1, "1: decode with the generic matvec1 kernels"},
      {"FISH_VK_QUEUE",
       S::gpu,
       {"universal", "compute"},
       0,
       -1,
       "queue family: compute-only (default) or graphics+compute"},
      {"FISH_VK_VALIDATE", S::gpu, switch_words(), 0, -1, "1: add the Khronos validation layer"},
      {"FISH_VRAM_BUDGET_MB",
       S::gpu,
       {},
       1,
       int64_t(1) << 30,
       "FISH's ceiling on device memory in MiB (default 85% of free at open)"},
  };
  return table;
}

const EnvKnob* find_env_knob(std::string_view name) {
  for (const EnvKnob& k : env_knobs())
    if (k.name == name) return &k;
  return nullptr;
}

std::optional<std::string> env_value(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

Status check_env_value(const EnvKnob& k, std::string_view value) {
  if (k.check != nullptr) return k.check(value);
  if (k.free_text()) return Status::success();
  if (has_word(k, lower(value))) return Status::success();
  int64_t x = 0;
  if (takes_ints(k) && parse_int(value, x) && x >= k.min && x <= k.max) return Status::success();
  return make_error("{}='{}': expected {}", k.name, value, allowed_text(k));
}

Result<std::optional<std::string>> env_word(std::string_view name) {
  const EnvKnob* k = find_env_knob(name);
  assert(k != nullptr);
  const std::optional<std::string> v = env_value(name);
  if (!v) return std::optional<std::string>();
  FISH_TRY(check_env_value(*k, *v));
  return std::optional<std::string>(has_word(*k, lower(*v)) ? lower(*v) : *v);
}

Result<std::optional<int64_t>> env_int(std::string_view name) {
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> w, env_word(name));
  int64_t x = 0;
  if (!w || !parse_int(*w, x) || has_word(*find_env_knob(name), *w))
    return std::optional<int64_t>();
  return std::optional<int64_t>(x);
}

bool is_off_word(std::string_view value) {
  const std::string s = lower(value);
  return s == "0" || s == "off" || s == "false" || s == "no";
}

Result<bool> env_switch(std::string_view name, bool fallback) {
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> w, env_word(name));
  if (!w) return fallback;
  return !is_off_word(*w);
}

Status check_env_knobs(bool with_gpu) {
  std::string problems;
  for (const EnvKnob& k : env_knobs()) {
    if (k.scope == EnvScope::harness || (k.scope == EnvScope::gpu && !with_gpu)) continue;
    const std::optional<std::string> v = env_value(k.name);
    if (!v) continue;
    if (Status st = check_env_value(k, *v); !st.ok())
      problems += (problems.empty() ? "" : "\n") + st.error().message;
  }
  if (problems.empty()) return Status::success();
  return Error{problems};
}

std::string env_knobs_help() {
  std::string out = "| variable | allowed | a bad value breaks | meaning |\n|---|---|---|---|\n";
  for (const EnvKnob& k : env_knobs()) {
    const std::string allowed = k.check ? "see meaning" : k.free_text() ? "any" : allowed_text(k);
    const char* scope = k.scope == EnvScope::all   ? "every path"
                        : k.scope == EnvScope::gpu ? "the gpu path"
                                                   : "(not checked)";
    out += fmt::format("| `{}` | {} | {} | {} |\n", k.name, allowed, scope, k.doc);
  }
  return out;
}

}  // namespace fish
