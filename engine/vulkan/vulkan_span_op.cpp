// run_span_op (vulkan_span.h): one span-op dispatch over host-visible copies of its buffers,
// so each shader is tested against its CPU reference in isolation.
#include <algorithm>
#include <cstring>

#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/vulkan_shaders.h"
#include "engine/vulkan/vulkan_span.h"
#include "fish_vk_span.h"

namespace fish::vk {

namespace {
constexpr uint64_t kNsTimeout = 120ull * 1000 * 1000 * 1000;  // a hung device, not a slow one
}  // namespace

Status run_span_op(SpanHost h, const std::string& name, const SpanPush& pc, uint32_t gx,
                   uint32_t gy, std::vector<float>& arena, const std::vector<float>& params,
                   std::vector<uint32_t>& kv) {
  std::lock_guard lock(*h.mu);
  if (!h.is_open()) return make_error("span: the device is not open");
  const std::span<const uint32_t> code = embedded_shader(name);
  if (code.empty()) return make_error("span: no embedded shader '{}'", name);
  const VolkDeviceTable& vk = h.dev->vk;
  const VkDevice dev = h.dev->device;
  SpanBuffer bufs[3];
  VkDescriptorSetLayout sl = VK_NULL_HANDLE;
  VkPipelineLayout pl = VK_NULL_HANDLE;
  VkDescriptorPool dp = VK_NULL_HANDLE;
  VkShaderModule mod = VK_NULL_HANDLE;
  VkPipeline pipe = VK_NULL_HANDLE;
  VkCommandPool cp = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  Status s = [&]() -> Status {
    const size_t sizes[3] = {arena.size() * 4, params.size() * 4, kv.size() * 4};
    const void* src[3] = {arena.data(), params.data(), kv.data()};
    for (int i = 0; i < 3; ++i) {
      FISH_ASSIGN_OR_RETURN(bufs[i], h.alloc(std::max<size_t>(sizes[i], 16) + 16,
                                             VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, true, name));
      std::memcpy(bufs[i].mapped, src[i], sizes[i]);
    }
    VkDescriptorSetLayoutBinding b[3] = {};
    for (uint32_t i = 0; i < 3; ++i) {
      b[i].binding = i;
      b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      b[i].descriptorCount = 1;
      b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    dl.bindingCount = 3;
    dl.pBindings = b;
    FISH_VK_CHECK(vk.vkCreateDescriptorSetLayout(dev, &dl, nullptr, &sl));
    VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(SpanPush)};
    VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &sl;
    pli.pushConstantRangeCount = 1;
    pli.pPushConstantRanges = &pcr;
    FISH_VK_CHECK(vk.vkCreatePipelineLayout(dev, &pli, nullptr, &pl));
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3};
    VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpi.maxSets = 1;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &ps;
    FISH_VK_CHECK(vk.vkCreateDescriptorPool(dev, &dpi, nullptr, &dp));
    VkDescriptorSetAllocateInfo dai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    dai.descriptorPool = dp;
    dai.descriptorSetCount = 1;
    dai.pSetLayouts = &sl;
    VkDescriptorSet set;
    FISH_VK_CHECK(vk.vkAllocateDescriptorSets(dev, &dai, &set));
    VkDescriptorBufferInfo bi[3];
    VkWriteDescriptorSet wr[3];
    for (uint32_t i = 0; i < 3; ++i) {
      bi[i] = {bufs[i].buf, 0, VK_WHOLE_SIZE};
      wr[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      wr[i].dstSet = set;
      wr[i].dstBinding = i;
      wr[i].descriptorCount = 1;
      wr[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      wr[i].pBufferInfo = &bi[i];
    }
    vk.vkUpdateDescriptorSets(dev, 3, wr, 0, nullptr);
    VkShaderModuleCreateInfo si{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    si.codeSize = code.size_bytes();
    si.pCode = code.data();
    FISH_VK_CHECK(vk.vkCreateShaderModule(dev, &si, nullptr, &mod));
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = mod;
    ci.stage.pName = "main";
    ci.layout = pl;
    FISH_VK_CHECK(vk.vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, nullptr, &pipe));
    VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    cpi.queueFamilyIndex = h.dev->queue_family;
    FISH_VK_CHECK(vk.vkCreateCommandPool(dev, &cpi, nullptr, &cp));
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = cp;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VkCommandBuffer cmd;
    FISH_VK_CHECK(vk.vkAllocateCommandBuffers(dev, &cai, &cmd));
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    FISH_VK_CHECK(vk.vkCreateFence(dev, &fci, nullptr, &fence));
    VkCommandBufferBeginInfo cbi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    cbi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    FISH_VK_CHECK(vk.vkBeginCommandBuffer(cmd, &cbi));
    vk.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vk.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &set, 0, nullptr);
    vk.vkCmdPushConstants(cmd, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
    vk.vkCmdDispatch(cmd, gx, gy, 1);
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                            0, 1, &mb, 0, nullptr, 0, nullptr);
    FISH_VK_CHECK(vk.vkEndCommandBuffer(cmd));
    VkSubmitInfo sub{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    sub.commandBufferCount = 1;
    sub.pCommandBuffers = &cmd;
    FISH_VK_CHECK(vk.vkQueueSubmit(h.dev->queue, 1, &sub, fence));
    FISH_VK_CHECK(vk.vkWaitForFences(dev, 1, &fence, VK_TRUE, kNsTimeout));
    std::memcpy(arena.data(), bufs[0].mapped, sizes[0]);
    std::memcpy(kv.data(), bufs[2].mapped, sizes[2]);
    return Status::success();
  }();
  if (fence) vk.vkDestroyFence(dev, fence, nullptr);
  if (cp) vk.vkDestroyCommandPool(dev, cp, nullptr);
  if (pipe) vk.vkDestroyPipeline(dev, pipe, nullptr);
  if (mod) vk.vkDestroyShaderModule(dev, mod, nullptr);
  if (dp) vk.vkDestroyDescriptorPool(dev, dp, nullptr);
  if (pl) vk.vkDestroyPipelineLayout(dev, pl, nullptr);
  if (sl) vk.vkDestroyDescriptorSetLayout(dev, sl, nullptr);
  for (SpanBuffer& b : bufs)
    if (b.buf) h.free(b);
  return s;
}

}  // namespace fish::vk
