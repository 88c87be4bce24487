// The one descriptor-set shape FISH's compute kernels use: bindings 0..n-1, each one storage
// buffer seen by the compute stage, plus a push-constant block of push_bytes. The matmul
// kernels (W, X, Y) and the span ops (arena, params, KV) both take 3 buffers.
#pragma once

#include <volk.h>

#include <cstdint>

#include "base/result.h"

namespace fish::vk {

struct ComputeLayout {
  VkDescriptorSetLayout set = VK_NULL_HANDLE;
  VkPipelineLayout pipeline = VK_NULL_HANDLE;
};

// Creates both objects; the caller destroys them. On error nothing is left created.
// Errors: a failed vkCreate* call (FISH_VK_CHECK's message).
Result<ComputeLayout> create_compute_layout(const VolkDeviceTable& vk, VkDevice device,
                                            uint32_t n_buffers, uint32_t push_bytes);

}  // namespace fish::vk
