// `fish gpu`: the Vulkan backend's status, the devices it sees, the one it selected and the
// memory budget it applies (docs/gpu.md).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness/commands.h"
#include "harness/exit_codes.h"
// The one harness file that names the Vulkan backend (it lists Vulkan devices); its use of
// vk::startup_backend() also links vulkan_backend.o, whose static initializer registers the
// backend, into `fish` (the rest of the harness sees only ComputeBackend).
#if FISH_HAVE_VULKAN
#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_device.h"
#endif

namespace fish {

void add_gpu_command(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "gpu",
      "Show the GPU backend: status (why it is off, if it is), Vulkan devices and which one is "
      "selected, device memory free, FISH's ceiling (FISH_VRAM_BUDGET_MB) and headroom. "
      "Environment: FISH_GPU, FISH_GPU_DEVICE, FISH_VK_QUEUE, FISH_VK_VALIDATE, "
      "FISH_GPU_VERBOSE, FISH_VRAM_BUDGET_MB, FISH_GPU_REQUANT.");
  cmd->callback([exit_code] {
#if FISH_HAVE_VULKAN
    auto mb = [](uint64_t b) { return double(b) / double(1 << 20); };
    vk::VulkanBackend* b = vk::startup_backend();
    if (!b) {
      std::printf("status: %s\n", gpu::vulkan_status().c_str());
      *exit_code = kExitOk;
      return;
    }
    const vk::BackendInfo info = b->info();  // opens the device
    std::printf("status: %s\n", info.status.c_str());
    for (const vk::DeviceEntry& d : info.devices)
      std::printf("device %u: %s (%s, Vulkan %s, %.0f MB device-local): %s\n", d.index,
                  d.name.c_str(), d.type.c_str(), d.api.c_str(), mb(d.heap_bytes),
                  d.verdict.c_str());
    if (info.open) {
      std::printf("selected: %s, queue: %s, subgroup size %u\n", info.device.c_str(),
                  info.queue.c_str(), info.subgroup_size);
      std::printf("features: %s\n", info.features.c_str());
      std::printf(
          "memory: heap %.0f MB, free %.0f MB (%s), FISH ceiling %.0f MB (%s), headroom %.0f "
          "MB, may allocate %.0f MB, resident %.0f MB\n",
          mb(info.heap_bytes), mb(info.live_free_bytes),
          info.memory_budget_ext ? "VK_EXT_memory_budget" : "80% of heap - own",
          mb(info.ceiling_bytes),
          std::getenv("FISH_VRAM_BUDGET_MB") ? "FISH_VRAM_BUDGET_MB" : "85% of free at open",
          mb(info.headroom_bytes), mb(b->memory_free()), mb(info.resident_bytes));
      std::printf(
          "re-quantisation at upload: mode %d (FISH_GPU_REQUANT; 0 off, 1 all -> fq3, 2 "
          "q6_k -> q4_k, 3 q4_k -> fq3 and q6_k -> q4_k)\n",
          b->requant_mode());
    }
#else
    std::printf(
        "status: vulkan: off: built without the Vulkan backend (-DFISH_VULKAN=OFF or "
        "headers missing at configure time)\n");
#endif
    *exit_code = kExitOk;
  });
}

}  // namespace fish
