// Loader, instance, device selection (vulkan_device.h).
#include "engine/vulkan/vulkan_device.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>

#include "engine/vulkan/coopmat.h"
#include "engine/vulkan/vk_check.h"

namespace fish::vk {
namespace {

// Opens the loader once per process; never closed (no driver code at process exit). The value
// is the error message, empty on success.
const std::string& loader_error() {
  static const std::string error = []() -> std::string {
    void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return fmt::format(
          "cannot open the Vulkan loader libvulkan.so.1 ({}); install a Vulkan "
          "driver (e.g. Debian libvulkan1 + mesa-vulkan-drivers)",
          dlerror());
    auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
    if (!gipa) return "libvulkan.so.1 has no vkGetInstanceProcAddr";
    volkInitializeCustom(gipa);
    return {};
  }();
  return error;
}

bool has_ext(const std::vector<VkExtensionProperties>& exts, const char* name) {
  return std::any_of(exts.begin(), exts.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

std::string api_string(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v),
                     VK_API_VERSION_PATCH(v));
}

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 1;
    default:
      return 0;
  }
}

// The queue family to use, or -1: compute-only preferred unless `universal`.
int pick_queue_family(VkPhysicalDevice pd, bool universal, bool* compute_only) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fams.data());
  int any = -1, only = -1, both = -1;
  for (uint32_t i = 0; i < n; ++i) {
    const VkQueueFlags f = fams[i].queueFlags;
    if (!(f & VK_QUEUE_COMPUTE_BIT) || fams[i].queueCount == 0) continue;
    if (any < 0) any = int(i);
    if (!(f & VK_QUEUE_GRAPHICS_BIT) && only < 0) only = int(i);
    if ((f & VK_QUEUE_GRAPHICS_BIT) && both < 0) both = int(i);
  }
  int pick = universal ? (both >= 0 ? both : any) : (only >= 0 ? only : any);
  if (pick >= 0) *compute_only = !(fams[size_t(pick)].queueFlags & VK_QUEUE_GRAPHICS_BIT);
  return pick;
}

uint64_t largest_device_heap(const VkPhysicalDeviceMemoryProperties& m) {
  uint64_t best = 0;
  for (uint32_t i = 0; i < m.memoryHeapCount; ++i)
    if (m.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      best = std::max<uint64_t>(best, m.memoryHeaps[i].size);
  return best;
}

// The optional features FISH enables when offered, as a pNext chain for vkCreateDevice; the
// structs live here while the device is created. Each extension is listed only when the device
// offers it (the instance is 1.1, so 1.2/1.3 features come through their extensions).
struct FeatureChain {
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures s16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDevice8BitStorageFeaturesKHR s8{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES_KHR};
  VkPhysicalDeviceShaderFloat16Int8FeaturesKHR f16i8{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR};
  VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR idot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT ssc{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  VkPhysicalDeviceVulkanMemoryModelFeaturesKHR vmm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES_KHR};
  VkPhysicalDeviceCooperativeMatrix2FeaturesNV cm2{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
  VkPhysicalDeviceBufferDeviceAddressFeaturesKHR bda{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES_KHR};
  VkPhysicalDeviceMaintenance4FeaturesKHR m4{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES_KHR};
  std::vector<const char*> extensions;

  // Queries what `pd` offers (exts: its extension list), keeps only that in the chain, and
  // fills `out`'s flags. Call once; the chain then starts at f2. want_coopmat: FISH_VK_COOPMAT
  // is not 0; want_coopmat2: nor FISH_VK_COOPMAT2.
  void probe(VkInstance inst, VkPhysicalDevice pd, const std::vector<VkExtensionProperties>& exts,
             bool want_coopmat, bool want_coopmat2, DeviceFeatures* out) {
    void** tail = &f2.pNext;
    auto link = [&](auto* s) {
      *tail = s;
      tail = &s->pNext;
    };
    link(&s16);  // core in 1.1
    const bool has_s8 = has_ext(exts, VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
    const bool has_f16i8 = has_ext(exts, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    const bool has_idot = has_ext(exts, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    const bool has_ssc = has_ext(exts, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    if (has_s8) link(&s8);
    if (has_f16i8) link(&f16i8);
    if (has_idot) link(&idot);
    if (has_ssc) link(&ssc);
    const bool has_cm = want_coopmat && has_ext(exts, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    const bool has_vmm = has_ext(exts, VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
    void** cm_link = tail;  // cut here when cooperative matrices end up unused (last links)
    if (has_cm && has_vmm && has_f16i8) {
      link(&cm);
      link(&vmm);
    }
    const bool has_cm2 = want_coopmat2 && has_cm && has_vmm && has_f16i8 &&
                         has_ext(exts, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME) &&
                         has_ext(exts, VK_KHR_BUFFER_DEVICE_ADDRESS_EXTENSION_NAME) &&
                         has_ext(exts, VK_KHR_MAINTENANCE_4_EXTENSION_NAME);
    void** cm2_link = tail;  // ... and here when only the workgroup-scope ones do
    if (has_cm2) {
      link(&cm2);
      link(&bda);
      link(&m4);
    }
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    // Only what is used: everything else in the queried structs off.
    const VkBool32 sb16 = s16.storageBuffer16BitAccess, sb8 = s8.storageBuffer8BitAccess;
    const VkBool32 f16 = f16i8.shaderFloat16, i8 = f16i8.shaderInt8;
    const VkBool32 dot = idot.shaderIntegerDotProduct;
    const VkBool32 sizes = ssc.subgroupSizeControl, full = ssc.computeFullSubgroups;
    const VkBool32 coop = cm.cooperativeMatrix, model = vmm.vulkanMemoryModel;
    // What matmul_cm2.comp.glsl declares: workgroup-scope matrices of flexible dimensions, tensor
    // layouts with block sizes and decode functions (block pointers: buffer device addresses),
    // per-element operations (its element-wise store).
    const bool coop2 = cm2.cooperativeMatrixWorkgroupScope &&
                       cm2.cooperativeMatrixFlexibleDimensions &&
                       cm2.cooperativeMatrixTensorAddressing && cm2.cooperativeMatrixBlockLoads &&
                       cm2.cooperativeMatrixPerElementOperations && bda.bufferDeviceAddress &&
                       m4.maintenance4;  // SPIR-V 1.6's LocalSizeId (a workgroup size by
                                         // specialisation constant)
    f2.features = VkPhysicalDeviceFeatures{};
    s16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, s16.pNext};
    s16.storageBuffer16BitAccess = sb16;
    s8 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES_KHR, s8.pNext};
    s8.storageBuffer8BitAccess = sb8;
    f16i8 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR, f16i8.pNext};
    f16i8.shaderFloat16 = f16;
    f16i8.shaderInt8 = i8;
    idot = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR, idot.pNext};
    idot.shaderIntegerDotProduct = dot;
    ssc = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT, ssc.pNext};
    ssc.subgroupSizeControl = sizes;
    ssc.computeFullSubgroups = full;
    cm = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, cm.pNext};
    vmm = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES_KHR, vmm.pNext};
    cm2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, cm2.pNext};
    bda = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES_KHR, bda.pNext};
    m4 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES_KHR, m4.pNext};
    // Cooperative matrices: an f16 x f16 -> f32 subgroup shape (16x16x16 preferred, else the
    // first listed), and the memory model and f16 arithmetic their shaders declare.
    if (has_cm && has_vmm && has_f16i8 && coop && model && f16) {
      auto props = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>(
          vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
      uint32_t n = 0;
      if (props && props(pd, &n, nullptr) == VK_SUCCESS && n > 0) {
        std::vector<VkCooperativeMatrixPropertiesKHR> list(
            n,
            VkCooperativeMatrixPropertiesKHR{VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR});
        if (props(pd, &n, list.data()) >= 0) {
          list.resize(n);
          for (const VkCooperativeMatrixPropertiesKHR& p : list) {
            if (p.AType != VK_COMPONENT_TYPE_FLOAT16_KHR ||
                p.BType != VK_COMPONENT_TYPE_FLOAT16_KHR ||
                p.CType != VK_COMPONENT_TYPE_FLOAT32_KHR ||
                p.ResultType != VK_COMPONENT_TYPE_FLOAT32_KHR || p.scope != VK_SCOPE_SUBGROUP_KHR ||
                p.saturatingAccumulation || kCoopmatK % p.KSize != 0)
              continue;
            out->coopmat_shapes += fmt::format(
                "{}{}x{}x{}", out->coopmat_shapes.empty() ? "" : ", ", p.MSize, p.NSize, p.KSize);
            const bool square16 = p.MSize == 16 && p.NSize == 16 && p.KSize == 16;
            if (!out->coopmat || square16) {
              out->coopmat = true;
              out->coopmat_m = p.MSize;
              out->coopmat_n = p.NSize;
              out->coopmat_k = p.KSize;
            }
          }
        }
      }
    }
    if (has_cm2 && out->coopmat && coop2 && sb16) probe_coopmat2(inst, pd, out);
    if (!out->coopmat2) *cm2_link = nullptr;  // no structs of extensions not enabled
    if (!out->coopmat) *cm_link = nullptr;
    if (out->coopmat) {
      cm.cooperativeMatrix = VK_TRUE;
      vmm.vulkanMemoryModel = VK_TRUE;
      extensions.push_back(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
      extensions.push_back(VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
    }
    if (out->coopmat2) {
      cm2.cooperativeMatrixWorkgroupScope = VK_TRUE;
      cm2.cooperativeMatrixFlexibleDimensions = VK_TRUE;
      cm2.cooperativeMatrixTensorAddressing = VK_TRUE;
      cm2.cooperativeMatrixBlockLoads = VK_TRUE;
      cm2.cooperativeMatrixPerElementOperations = VK_TRUE;
      bda.bufferDeviceAddress = VK_TRUE;
      m4.maintenance4 = VK_TRUE;
      extensions.push_back(VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
      extensions.push_back(VK_KHR_BUFFER_DEVICE_ADDRESS_EXTENSION_NAME);
      extensions.push_back(VK_KHR_MAINTENANCE_4_EXTENSION_NAME);
    }
    if (has_s8 && sb8) extensions.push_back(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
    if (has_f16i8 && (f16 || i8)) extensions.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    if (has_idot && dot) extensions.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    if (has_ssc && sizes) extensions.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    out->storage_16bit = sb16;
    out->storage_8bit = has_s8 && sb8;
    out->shader_float16 = has_f16i8 && f16;
    out->shader_int8 = has_f16i8 && i8;
    out->integer_dot = has_idot && dot;
    out->subgroup_size_control = has_ssc && sizes && full;
    out->coopmat_khr_listed = has_ext(exts, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    out->coopmat2_nv_listed = has_ext(exts, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);

    // Properties that go with them.
    VkPhysicalDeviceSubgroupSizeControlPropertiesEXT sp{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
    VkPhysicalDeviceShaderIntegerDotProductPropertiesKHR dp{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES_KHR};
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    void** ptail = &p2.pNext;
    if (has_ssc) {
      *ptail = &sp;
      ptail = &sp.pNext;
    }
    const bool has_sm = has_ext(exts, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    if (has_sm) {
      *ptail = &sm;
      ptail = &sm.pNext;
    }
    if (has_idot) *ptail = &dp;
    vkGetPhysicalDeviceProperties2(pd, &p2);
    out->subgroup_min = has_ssc ? sp.minSubgroupSize : out->subgroup_size;
    out->subgroup_max = has_ssc ? sp.maxSubgroupSize : out->subgroup_size;
    out->integer_dot_4x8_fast =
        out->integer_dot && dp.integerDotProduct4x8BitPackedSignedAccelerated;
    out->max_shared_bytes = p2.properties.limits.maxComputeSharedMemorySize;
    out->timestamp_ns = p2.properties.limits.timestampPeriod;
    out->sm_count = has_sm ? sm.shaderSMCount : 0;
  }

  // The flexible f16 x f16 -> f32 workgroup shapes and limits of VK_NV_cooperative_matrix2; sets
  // out->coopmat2 where there is at least one.
  static void probe_coopmat2(VkInstance inst, VkPhysicalDevice pd, DeviceFeatures* out) {
    auto flex =
        reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV>(
            vkGetInstanceProcAddr(
                inst, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"));
    uint32_t n = 0;
    if (!flex || flex(pd, &n, nullptr) != VK_SUCCESS || n == 0) return;
    std::vector<VkCooperativeMatrixFlexibleDimensionsPropertiesNV> list(
        n, VkCooperativeMatrixFlexibleDimensionsPropertiesNV{
               VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV});
    if (flex(pd, &n, list.data()) < 0) return;
    list.resize(n);
    // f16 x f16 -> f32 shapes (every tile), and f16 x f16 -> f16 ones (FISH_VK_COOPMAT2_ACC's
    // f16 sums).
    for (const VkCooperativeMatrixFlexibleDimensionsPropertiesNV& p : list) {
      if (p.AType != VK_COMPONENT_TYPE_FLOAT16_KHR || p.BType != VK_COMPONENT_TYPE_FLOAT16_KHR ||
          p.CType != p.ResultType || p.scope != VK_SCOPE_WORKGROUP_KHR || p.saturatingAccumulation)
        continue;
      if (p.CType == VK_COMPONENT_TYPE_FLOAT32_KHR || p.CType == VK_COMPONENT_TYPE_FLOAT16_KHR)
        out->coopmat2_shapes.push_back({p.MGranularity, p.NGranularity, p.KGranularity,
                                        p.workgroupInvocations,
                                        p.CType == VK_COMPONENT_TYPE_FLOAT16_KHR});
    }
    VkPhysicalDeviceCooperativeMatrix2PropertiesNV cp{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &cp};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    out->coopmat2_max_dim = cp.cooperativeMatrixFlexibleDimensionsMaxDimension;
    out->coopmat2_max_threads = cp.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
    out->coopmat2 = std::any_of(out->coopmat2_shapes.begin(), out->coopmat2_shapes.end(),
                                [](const Coopmat2Shape& s) { return !s.f16_acc; });
  }
};

// The process's Vulkan instances, one per validation setting and API version (1.1 / 1.3),
// created on first use and never destroyed (as the loader is never closed). A backend opens and
// closes devices, not instances: every vkCreateInstance / vkDestroyInstance pair makes the loader
// load and unload the driver, and on the H200's NVIDIA driver a process that had done that a few
// dozen times (one backend per test case) got VK_ERROR_INCOMPATIBLE_DRIVER from every later
// vkCreateInstance.
struct ProcessInstance {
  VkInstance handle = VK_NULL_HANDLE;
  uint32_t api = VK_API_VERSION_1_1;  // the apiVersion it was created with
  bool validation = false;            // the validation layer is on
  std::string notes;
};

// api13: ask for Vulkan 1.3 (the loader has it): coopmat2's SPIR-V 1.6 modules need a device
// used at 1.3; otherwise 1.1, as everything else needs.
Result<ProcessInstance> create_instance(bool validate, bool api13) {
  ProcessInstance inst;
  inst.api = api13 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_1;
  // Instance: 1.1, portability enumeration when present, validation when asked and installed.
  uint32_t n_ext = 0;
  FISH_VK_CHECK(vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, nullptr));
  std::vector<VkExtensionProperties> iexts(n_ext);
  FISH_VK_CHECK(vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, iexts.data()));
  std::vector<const char*> inst_exts;
  VkInstanceCreateFlags inst_flags = 0;
  if (has_ext(iexts, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    inst_exts.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    inst_flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  std::vector<const char*> layers;
  if (validate) {
    uint32_t n_layers = 0;
    FISH_VK_CHECK(vkEnumerateInstanceLayerProperties(&n_layers, nullptr));
    std::vector<VkLayerProperties> lp(n_layers);
    FISH_VK_CHECK(vkEnumerateInstanceLayerProperties(&n_layers, lp.data()));
    const char* kValidation = "VK_LAYER_KHRONOS_validation";
    if (std::any_of(lp.begin(), lp.end(), [&](const VkLayerProperties& l) {
          return std::strcmp(l.layerName, kValidation) == 0;
        })) {
      layers.push_back(kValidation);
      inst.validation = true;
    } else {
      inst.notes = "FISH_VK_VALIDATE=1 but VK_LAYER_KHRONOS_validation is not installed";
    }
  }
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "fish";
  app.pEngineName = "fish";
  app.apiVersion = inst.api;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.flags = inst_flags;
  ici.pApplicationInfo = &app;
  ici.enabledExtensionCount = uint32_t(inst_exts.size());
  ici.ppEnabledExtensionNames = inst_exts.data();
  ici.enabledLayerCount = uint32_t(layers.size());
  ici.ppEnabledLayerNames = layers.data();
  FISH_VK_CHECK(vkCreateInstance(&ici, nullptr, &inst.handle));
  return inst;
}

Result<ProcessInstance> process_instance(bool validate, bool api13) {
  static std::mutex mu;
  static std::optional<ProcessInstance> made[2][2];
  std::lock_guard lock(mu);
  std::optional<ProcessInstance>& slot = made[validate ? 1 : 0][api13 ? 1 : 0];
  if (!slot) {
    Result<ProcessInstance> r = create_instance(validate, api13);
    if (!r.ok()) return r.error();
    slot = std::move(r.value());
  }
  return *slot;
}

}  // namespace

std::string DeviceFeatures::describe() const {
  std::string s = fmt::format("subgroup {}", subgroup_size);
  if (subgroup_min != subgroup_max || subgroup_size_control)
    s += fmt::format(" ({}..{}{})", subgroup_min, subgroup_max,
                     subgroup_size_control ? ", size control" : "");
  if (shader_int8) s += ", int8";
  if (shader_float16) s += ", f16";
  if (storage_8bit || storage_16bit)
    s += fmt::format(", {}-bit storage", storage_8bit && storage_16bit ? "8/16"
                                         : storage_8bit                ? "8"
                                                                       : "16");
  if (integer_dot) s += integer_dot_4x8_fast ? ", int dot (4x8 accelerated)" : ", int dot";
  if (coopmat)
    s += fmt::format(", coopmat {}x{}x{} f16->f32 (of {})", coopmat_m, coopmat_n, coopmat_k,
                     coopmat_shapes);
  else if (coopmat_khr_listed)
    s += ", coopmat KHR listed (not enabled)";
  if (coopmat2) {
    const auto f16 = std::count_if(coopmat2_shapes.begin(), coopmat2_shapes.end(),
                                   [](const Coopmat2Shape& x) { return x.f16_acc; });
    s += fmt::format(", coopmat2 ({} workgroup shapes{}, max {} threads, dimension {})",
                     coopmat2_shapes.size() - size_t(f16),
                     f16 ? fmt::format(" + {} f16-sum", f16) : "", coopmat2_max_threads,
                     coopmat2_max_dim);
  } else if (coopmat2_nv_listed)
    s += ", coopmat2 NV listed (not enabled)";
  if (sm_count) s += fmt::format(", {} SMs", sm_count);
  s += timestamp_bits ? fmt::format(", timestamps {} bits", timestamp_bits) : ", no timestamps";
  s += fmt::format(", {} KB shared", max_shared_bytes / 1024);
  return s;
}

const char* device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

Result<std::unique_ptr<VulkanDevice>> VulkanDevice::open(const VulkanOptions& opt,
                                                         std::vector<DeviceEntry>* seen) {
  if (!loader_error().empty()) return Error{loader_error()};
  if (!vkEnumerateInstanceVersion)
    return make_error("the Vulkan loader is 1.0; FISH needs Vulkan 1.1 (update the loader)");
  uint32_t loader_version = 0;
  FISH_VK_CHECK(vkEnumerateInstanceVersion(&loader_version));
  if (loader_version < VK_API_VERSION_1_1)
    return make_error("the Vulkan loader is {}; FISH needs 1.1", api_string(loader_version));

  std::unique_ptr<VulkanDevice> d(new VulkanDevice());
  // Vulkan 1.3 where coopmat2 may be enabled (FISH_VK_COOPMAT2 not 0) and the loader has it.
  const bool api13 = opt.coopmat != 0 && opt.coopmat2 != 0 && loader_version >= VK_API_VERSION_1_3;
  Result<ProcessInstance> inst = process_instance(opt.validate, api13);
  if (!inst.ok()) return inst.error();
  d->instance = inst->handle;
  d->validation = inst->validation;
  d->notes = inst->notes;
  volkLoadInstanceOnly(d->instance);

  // Devices: rank every one, remember why the others were skipped.
  uint32_t n_dev = 0;
  FISH_VK_CHECK(vkEnumeratePhysicalDevices(d->instance, &n_dev, nullptr));
  std::vector<VkPhysicalDevice> devs(n_dev);
  FISH_VK_CHECK(vkEnumeratePhysicalDevices(d->instance, &n_dev, devs.data()));
  std::vector<DeviceEntry> entries;
  int best = -1, best_rank = -1;
  for (uint32_t i = 0; i < n_dev; ++i) {
    VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &sub;
    vkGetPhysicalDeviceProperties2(devs[i], &p2);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(devs[i], &mp);
    DeviceEntry e;
    e.index = i;
    e.name = p2.properties.deviceName;
    e.type = device_type_name(p2.properties.deviceType);
    e.api = api_string(p2.properties.apiVersion);
    e.heap_bytes = largest_device_heap(mp);
    bool compute_only = false;
    const bool forced = opt.device && *opt.device == i;
    if (opt.device && !forced) {
      e.verdict = fmt::format("skipped: FISH_GPU_DEVICE={}", *opt.device);
    } else if (p2.properties.apiVersion < VK_API_VERSION_1_1) {
      e.verdict = "skipped: Vulkan 1.0 device, FISH needs 1.1";
    } else if (p2.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && !opt.allow_cpu) {
      e.verdict = "skipped: CPU implementation (FISH_GPU=cpu allows it)";
    } else if (pick_queue_family(devs[i], opt.universal_queue, &compute_only) < 0) {
      e.verdict = "skipped: no compute queue";
    } else if (!(sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
               !(sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT)) {
      e.verdict = "skipped: no subgroup arithmetic in compute shaders";
    } else if (type_rank(p2.properties.deviceType) > best_rank) {
      best_rank = type_rank(p2.properties.deviceType);
      best = int(i);
    }
    entries.push_back(std::move(e));
  }
  for (DeviceEntry& e : entries)
    if (e.verdict.empty())
      e.verdict = int(e.index) == best ? "selected" : "skipped: a better device";
  if (seen) *seen = entries;
  if (opt.device && *opt.device >= n_dev)
    return make_error("FISH_GPU_DEVICE={} but there are {} Vulkan devices (indices 0..{})",
                      *opt.device, n_dev, n_dev == 0 ? 0 : n_dev - 1);
  if (best < 0) {
    std::string list;
    for (const DeviceEntry& e : entries)
      list += fmt::format("{}#{} {} ({}): {}", list.empty() ? "" : "; ", e.index, e.name, e.type,
                          e.verdict);
    if (n_dev == 0)
      return make_error(
          "no Vulkan device found; hint: install the GPU's Vulkan driver (or "
          "mesa-vulkan-drivers and FISH_GPU=cpu for the CPU implementation)");
    return make_error("no usable Vulkan device: {}", list);
  }

  d->phys = devs[size_t(best)];
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &sub;
  vkGetPhysicalDeviceProperties2(d->phys, &p2);
  d->props = p2.properties;
  d->subgroup_size = sub.subgroupSize;
  vkGetPhysicalDeviceMemoryProperties(d->phys, &d->mem);
  d->queue_family =
      uint32_t(pick_queue_family(d->phys, opt.universal_queue, &d->queue_compute_only));

  uint32_t n_dext = 0;
  FISH_VK_CHECK(vkEnumerateDeviceExtensionProperties(d->phys, nullptr, &n_dext, nullptr));
  std::vector<VkExtensionProperties> dexts(n_dext);
  FISH_VK_CHECK(vkEnumerateDeviceExtensionProperties(d->phys, nullptr, &n_dext, dexts.data()));
  std::vector<const char*> dev_exts;
  if (has_ext(dexts, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME)) {
    dev_exts.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    d->has_memory_budget = true;
  }
  // A portability (non-conformant, e.g. MoltenVK) device must have this enabled when listed.
  if (has_ext(dexts, "VK_KHR_portability_subset")) dev_exts.push_back("VK_KHR_portability_subset");
  d->features.subgroup_size = d->subgroup_size;
  FeatureChain chain;
  // coopmat2 only on a device used at 1.3 (its SPIR-V is 1.6; the device's version and the
  // instance's, whichever is lower).
  const bool used_at_13 =
      inst->api >= VK_API_VERSION_1_3 && d->props.apiVersion >= VK_API_VERSION_1_3;
  chain.probe(d->instance, d->phys, dexts, opt.coopmat != 0, opt.coopmat2 != 0 && used_at_13,
              &d->features);
  if (opt.coopmat == 1 && !d->features.coopmat)
    return make_error(
        "FISH_VK_COOPMAT=1 but {} has no usable cooperative matrices (needs "
        "VK_KHR_cooperative_matrix with an f16 x f16 -> f32 subgroup shape, "
        "VK_KHR_vulkan_memory_model, shaderFloat16; {})",
        d->props.deviceName, d->features.describe());
  if (opt.coopmat2 == 1 && !d->features.coopmat2)
    return make_error(
        "FISH_VK_COOPMAT2=1 but {} has no usable workgroup-scope cooperative matrices (needs the "
        "above plus VK_NV_cooperative_matrix2 with workgroup scope, flexible dimensions, tensor "
        "addressing, block loads, per-element operations and a flexible f16 x f16 -> f32 shape, "
        "VK_KHR_buffer_device_address, VK_KHR_maintenance4, 16-bit storage, Vulkan 1.3; {}); "
        "unset it to run without",
        d->props.deviceName, d->features.describe());
  dev_exts.insert(dev_exts.end(), chain.extensions.begin(), chain.extensions.end());
  {
    uint32_t n_fam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(d->phys, &n_fam, nullptr);
    std::vector<VkQueueFamilyProperties> fam(n_fam);
    vkGetPhysicalDeviceQueueFamilyProperties(d->phys, &n_fam, fam.data());
    d->features.timestamp_bits = fam[d->queue_family].timestampValidBits;
  }

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = d->queue_family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = uint32_t(dev_exts.size());
  dci.ppEnabledExtensionNames = dev_exts.data();
  dci.pNext = &chain.f2;
  FISH_VK_CHECK(vkCreateDevice(d->phys, &dci, nullptr, &d->device));
  volkLoadDeviceTable(&d->vk, d->device);
  d->vk.vkGetDeviceQueue(d->device, d->queue_family, 0, &d->queue);
  return d;
}

VulkanDevice::~VulkanDevice() {
  if (device) {
    vk.vkDeviceWaitIdle(device);
    vk.vkDestroyDevice(device, nullptr);
  }
  // The instance is the process's (process_instance): not destroyed here.
}

uint64_t VulkanDevice::heap_budget_free(uint32_t heap) const {
  VkPhysicalDeviceMemoryBudgetPropertiesEXT b{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 m2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
  m2.pNext = &b;
  vkGetPhysicalDeviceMemoryProperties2(phys, &m2);
  return b.heapBudget[heap] > b.heapUsage[heap] ? b.heapBudget[heap] - b.heapUsage[heap] : 0;
}

}  // namespace fish::vk
