// VkResult names for FISH_VK_CHECK messages.
#include "engine/vulkan/vk_check.h"

#include <string>

namespace fish::vk {

std::string vk_result_name(VkResult r) {
  switch (r) {
#define FISH_VK_NAME(x) \
  case x:               \
    return #x;
    FISH_VK_NAME(VK_SUCCESS)
    FISH_VK_NAME(VK_NOT_READY)
    FISH_VK_NAME(VK_TIMEOUT)
    FISH_VK_NAME(VK_INCOMPLETE)
    FISH_VK_NAME(VK_ERROR_OUT_OF_HOST_MEMORY)
    FISH_VK_NAME(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    FISH_VK_NAME(VK_ERROR_INITIALIZATION_FAILED)
    FISH_VK_NAME(VK_ERROR_DEVICE_LOST)
    FISH_VK_NAME(VK_ERROR_MEMORY_MAP_FAILED)
    FISH_VK_NAME(VK_ERROR_LAYER_NOT_PRESENT)
    FISH_VK_NAME(VK_ERROR_EXTENSION_NOT_PRESENT)
    FISH_VK_NAME(VK_ERROR_FEATURE_NOT_PRESENT)
    FISH_VK_NAME(VK_ERROR_INCOMPATIBLE_DRIVER)
    FISH_VK_NAME(VK_ERROR_TOO_MANY_OBJECTS)
    FISH_VK_NAME(VK_ERROR_FORMAT_NOT_SUPPORTED)
    FISH_VK_NAME(VK_ERROR_FRAGMENTED_POOL)
    FISH_VK_NAME(VK_ERROR_UNKNOWN)
    FISH_VK_NAME(VK_ERROR_OUT_OF_POOL_MEMORY)
    FISH_VK_NAME(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    FISH_VK_NAME(VK_ERROR_FRAGMENTATION)
#undef FISH_VK_NAME
    default:
      return "VkResult " + std::to_string(int(r));
  }
}

std::string_view source_location(std::string_view file) {
  const size_t at = file.rfind("/engine/");
  return at == std::string_view::npos ? file : file.substr(at + 1);
}

}  // namespace fish::vk
