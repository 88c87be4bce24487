// create_compute_layout (compute_layout.h).
#include "engine/vulkan/compute_layout.h"

#include <vector>

#include "engine/vulkan/vk_check.h"

namespace fish::vk {

Result<ComputeLayout> create_compute_layout(const VolkDeviceTable& vk, VkDevice device,
                                            uint32_t n_buffers, uint32_t push_bytes) {
  std::vector<VkDescriptorSetLayoutBinding> b(n_buffers);
  for (uint32_t i = 0; i < n_buffers; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = n_buffers;
  dl.pBindings = b.data();
  ComputeLayout out;
  FISH_VK_CHECK(vk.vkCreateDescriptorSetLayout(device, &dl, nullptr, &out.set));
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &out.set;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &pcr;
  const VkResult r = vk.vkCreatePipelineLayout(device, &pli, nullptr, &out.pipeline);
  if (r < 0) {
    vk.vkDestroyDescriptorSetLayout(device, out.set, nullptr);
    FISH_VK_CHECK(r);
  }
  return out;
}

}  // namespace fish::vk
