// The FISH_* knob table; see env_knobs.h. Keep it sorted by name; tests/harness/env_knobs_test.cpp
// fails when a source reads a FISH_* variable this table lacks, or the table lists one nobody
// reads.
#include "harness/env_knobs.h"

#include <fmt/format.h>

namespace fish {
namespace {

using E = KnobEffect;

const EnvKnob kKnobs[] = {
    {"FISH_GPU", E::results, "engine/vulkan/vulkan_options.cpp",
     "0|off|false|no: no GPU backend; cpu: also allow a CPU Vulkan device (lavapipe)"},
    {"FISH_GPU_DEVICE", E::results, "engine/vulkan/vulkan_options.cpp",
     "index of the Vulkan device to open (fish gpu lists them)"},
    {"FISH_GPU_LAYERS", E::results, "engine/gpu_placement.cpp",
     "at most N layers on the GPU (caps fish run's gpu_layers)"},
    {"FISH_GPU_PROFILE", E::instrumentation, "engine/vulkan/vulkan_backend.cpp",
     "2: timestamp queries around each span stage"},
    {"FISH_GPU_REQUANT", E::results, "engine/vulkan/vulkan_options.cpp",
     "0|1|2|3: re-quantise the device copy at upload (fish run's gpu_requant overrides it)"},
    {"FISH_GPU_SPAN", E::results, "engine/gpu_placement.cpp",
     "0|off|false|no: per-matmul offload of the placed layers, no layer span"},
    {"FISH_GPU_VERBOSE", E::instrumentation, "engine/vulkan/vulkan_options.cpp",
     "1: print the opened device, or why the backend is off, to stderr"},
    {"FISH_ISA", E::results, "kernels/cpu_features.cpp",
     "caps the CPU kernels' instruction set (scalar, avx2, avx512)"},
    {"FISH_MODELS_DIR", E::location, "harness/run_command.cpp",
     "where models are looked up by file name"},
    {"FISH_SHARD_COUNT", E::location, "harness/run_command.cpp",
     "shard count with JOB_COMPLETION_INDEX (recorded as the context's shard)"},
    {"FISH_SYNTHETIC_DIR", E::location, "harness/run_command.cpp",
     "where synthetic models are written"},
    {"FISH_THREADS", E::results, "kernels/thread_pool.cpp",
     "default thread count (config n_threads 0)"},
    {"FISH_VK_ATTN_SPLIT", E::results, "engine/vulkan/vulkan_options.cpp",
     "auto|0|N: KV splits of the span attention (auto: the grid-filling rule)"},
    {"FISH_VK_FAULT", E::results, "engine/vulkan/vulkan_options.cpp",
     "lost:N|timeout:N: the N-th compute submit fails (a device-fault test)"},
    {"FISH_VK_MATVEC", E::results, "engine/vulkan/vulkan_options.cpp",
     "1: decode with the generic matvec1_<type> kernels (A/B measurement)"},
    {"FISH_VK_QUEUE", E::results, "engine/vulkan/vulkan_options.cpp",
     "universal: the graphics+compute queue family instead of a compute-only one"},
    {"FISH_VK_VALIDATE", E::instrumentation, "engine/vulkan/vulkan_options.cpp",
     "1: add VK_LAYER_KHRONOS_validation when installed"},
    {"FISH_VRAM_BUDGET_MB", E::results, "engine/vulkan/vulkan_options.cpp",
     "ceiling on device memory in MiB (caps fish run's vram_budget_mb)"},
};

}  // namespace

std::span<const EnvKnob> env_knobs() {
  return kKnobs;
}

const EnvKnob* find_env_knob(std::string_view name) {
  for (const EnvKnob& k : kKnobs)
    if (k.name == name) return &k;
  return nullptr;
}

bool knob_affects_measurement(std::string_view name) {
  const EnvKnob* k = find_env_knob(name);
  return !k || k->effect != KnobEffect::location;
}

const char* knob_effect_name(KnobEffect e) {
  switch (e) {
    case KnobEffect::results:
      return "results";
    case KnobEffect::instrumentation:
      return "instrumentation";
    case KnobEffect::location:
      return "location";
  }
  return "?";
}

std::string env_knobs_markdown() {
  std::string md = "| variable | effect | read by | meaning |\n|---|---|---|---|\n";
  for (const EnvKnob& k : kKnobs) {
    std::string doc;
    for (char c : k.doc) doc += c == '|' ? std::string("\\|") : std::string(1, c);
    md += fmt::format("| `{}` | {} | `{}` | {} |\n", k.name, knob_effect_name(k.effect), k.read_by,
                      doc);
  }
  return md;
}

nlohmann::json env_knobs_json(const std::function<const char*(const char*)>& getenv) {
  nlohmann::json j = nlohmann::json::object();
  for (const EnvKnob& k : kKnobs)
    if (const char* v = getenv(std::string(k.name).c_str())) j[std::string(k.name)] = v;
  return j;
}

}  // namespace fish
