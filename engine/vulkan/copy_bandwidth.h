// Device memory bandwidth references for kernel GB/s (VulkanBackend::device_copy_bytes_per_s /
// shader_copy_bytes_per_s document the contracts): vkCmdCopyBuffer (the copy engine) and a
// compute-shader copy (shaders/copy_u4.comp.glsl), each `reps` copies back and forth between two
// device-local buffers in one submit, after a 1-copy submit whose time is subtracted (submit and
// wait latency). Bytes read + written per second. The caller holds ctx.mutex().
#pragma once

#include <cstdint>

#include "base/result.h"
#include "engine/vulkan/vk_context.h"

namespace fish::vk {

Result<double> copy_engine_bytes_per_s(VkContext& ctx, uint64_t bytes, int reps);
// The buffers start with a host pattern that is read back and compared after the copies.
Result<double> shader_copy_bytes_per_s(VkContext& ctx, uint64_t bytes, int reps);

}  // namespace fish::vk
