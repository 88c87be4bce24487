// Vulkan error reporting (STYLE.md, errors tier 3): a failed call becomes an Error naming the
// call, the VkResult and file:line.
#pragma once

#include <volk.h>

#include <string>
#include <string_view>

#include "base/result.h"

namespace fish::vk {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY", or the number for a code this table lacks.
std::string vk_result_name(VkResult r);
// __FILE__ from "engine/" on, so messages do not carry the build machine's paths.
std::string_view source_location(std::string_view file);

}  // namespace fish::vk

// Returns an Error from the enclosing function (Status or Result<T>) when `call` fails:
//   FISH_VK_CHECK(vkCreateBuffer(dev, &info, nullptr, &buf));
// -> "vulkan: vkCreateBuffer(dev, &info, nullptr, &buf) failed: VK_ERROR_OUT_OF_DEVICE_MEMORY
//    (engine/vulkan/vulkan_backend.cpp:120)"
#define FISH_VK_CHECK(call)                                                       \
  do {                                                                            \
    const VkResult fish_vk_r_ = (call);                                           \
    if (fish_vk_r_ < 0)                                                           \
      return ::fish::make_error("vulkan: {} failed: {} ({}:{})", #call,           \
                                ::fish::vk::vk_result_name(fish_vk_r_),           \
                                ::fish::vk::source_location(__FILE__), __LINE__); \
  } while (0)
