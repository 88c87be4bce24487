// The Vulkan loader, instance and the one device/queue FISH computes on.
//
// Loader: libvulkan.so.1 by name only (the system's library search, never the working
// directory), opened once per process and never closed; entry points come from
// vkGetInstanceProcAddr (volk's process-wide table) and, per device, a VolkDeviceTable.
// Instance: Vulkan 1.1 (1.3 where the loader has it and coopmat2 may be enabled: its SPIR-V is
// 1.6), VK_KHR_portability_enumeration when present, the Khronos validation layer with
// FISH_VK_VALIDATE=1 when installed.
// Device: discrete > integrated > virtual GPU; CPU implementations (lavapipe) only with
// FISH_GPU=cpu; FISH_GPU_DEVICE=<index> forces one. Requires API 1.1, a compute queue and
// subgroup arithmetic in compute shaders; a compute-only queue family is preferred
// (FISH_VK_QUEUE=universal takes the graphics+compute one). VK_EXT_memory_budget when present.
// Optional features (DeviceFeatures) are enabled whenever the device offers them, through their
// extensions (the instance is Vulkan 1.1): 8/16-bit storage, shaderInt8 / shaderFloat16, integer
// dot product, subgroup size control; VK_KHR_cooperative_matrix (with VK_KHR_vulkan_memory_model
// and shaderFloat16, which its shaders need) unless FISH_VK_COOPMAT=0, when the device has an
// f16 x f16 -> f32 subgroup shape; with it VK_NV_cooperative_matrix2 (workgroup scope, flexible
// dimensions, tensor addressing, block loads, per-element operations) and
// VK_KHR_buffer_device_address (its decode functions take block pointers) and VK_KHR_maintenance4
// (a workgroup size by specialisation constant in SPIR-V 1.6) unless FISH_VK_COOPMAT2=0, when the
// device is used at Vulkan 1.3 and has a flexible f16 x f16 -> f32 workgroup shape and 16-bit
// storage (matmul_cm2.comp.glsl).
#pragma once

#include <volk.h>

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/vulkan/coopmat.h"
#include "engine/vulkan/vulkan_options.h"

namespace fish::vk {

// One physical device as enumerated, for `fish gpu` and the status line.
struct DeviceEntry {
  uint32_t index = 0;  // vkEnumeratePhysicalDevices order (FISH_GPU_DEVICE)
  std::string name;
  std::string type;         // "discrete", "integrated", "virtual", "cpu", "other"
  std::string api;          // "1.3.230"
  uint64_t heap_bytes = 0;  // largest device-local heap
  std::string verdict;      // "selected", or why it was not
};

// What the opened device offers beyond Vulkan 1.1 (each flag: offered AND enabled), for kernel
// choice at run time (`fish gpu` prints describe()).
struct DeviceFeatures {
  uint32_t subgroup_size = 0;                        // the default (what gl_SubgroupSize reads)
  uint32_t subgroup_min = 0, subgroup_max = 0;       // VK_EXT_subgroup_size_control's range
  bool subgroup_size_control = false;                // a pipeline may require a size in the range
  bool storage_8bit = false, storage_16bit = false;  // 8/16-bit types in storage buffers
  bool shader_int8 = false, shader_float16 = false;  // 8-bit int / 16-bit float arithmetic
  bool integer_dot = false;           // VK_KHR_shader_integer_dot_product (OpSDot/OpUDot)
  bool integer_dot_4x8_fast = false;  // ... packed 4x8-bit signed dot is accelerated
  bool coopmat_khr_listed = false;    // VK_KHR_cooperative_matrix offered
  bool coopmat = false;               // ... and enabled: matmul_cm_<type> can run
  uint32_t coopmat_m = 0, coopmat_n = 0, coopmat_k = 0;  // its f16 x f16 -> f32 subgroup shape
  std::string coopmat_shapes;       // every f16 -> f32 subgroup shape, "16x16x16, 16x8x16"
  uint32_t sm_count = 0;            // VK_NV_shader_sm_builtins' shaderSMCount (0: unknown)
  bool coopmat2_nv_listed = false;  // VK_NV_cooperative_matrix2 offered
  bool coopmat2 = false;            // ... and enabled: matmul_cm2_<type> can run
  std::vector<Coopmat2Shape> coopmat2_shapes;  // its f16 x f16 -> f32 (and -> f16) workgroup shapes
  uint32_t coopmat2_max_dim = 0;               // cooperativeMatrixFlexibleDimensionsMaxDimension
  uint32_t coopmat2_max_threads = 0;           // cooperativeMatrixWorkgroupScopeMaxWorkgroupSize
  uint32_t timestamp_bits = 0;                 // of the compute queue family (0: no timestamps)
  double timestamp_ns = 1.0;                   // nanoseconds per timestamp tick
  uint32_t max_shared_bytes = 0;               // maxComputeSharedMemorySize
  // "subgroup 32 (32..32, control), int8, f16, 8/16-bit storage, int dot (4x8 fast), coopmat
  // 16x16x16 f16->f32 (of 16x16x16, 16x8x16, 16x8x8), coopmat2 (4 workgroup shapes), 132 SMs,
  // timestamps 64 bits"
  std::string describe() const;
};

class VulkanDevice {
 public:
  // Errors: no loader, no Vulkan 1.1, instance/device creation failures (FISH_VK_CHECK), no
  // usable device (the message lists each device and why it was skipped, with a hint).
  // `seen` receives the enumerated devices even when opening fails after enumeration.
  static Result<std::unique_ptr<VulkanDevice>> open(const VulkanOptions& opt,
                                                    std::vector<DeviceEntry>* seen);
  ~VulkanDevice();
  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;

  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  bool queue_compute_only = false;
  VolkDeviceTable vk{};  // device-level entry points
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties mem{};
  bool has_memory_budget = false;  // VK_EXT_memory_budget enabled
  bool validation = false;         // validation layer enabled
  uint32_t subgroup_size = 0;
  DeviceFeatures features;
  std::string notes;  // e.g. "validation layer requested but not installed"

  // budget - usage of `heap` (VK_EXT_memory_budget); precondition has_memory_budget.
  uint64_t heap_budget_free(uint32_t heap) const;

 private:
  VulkanDevice() = default;
};

const char* device_type_name(VkPhysicalDeviceType t);

}  // namespace fish::vk
