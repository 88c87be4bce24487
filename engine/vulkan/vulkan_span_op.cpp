// run_span_ops / run_span_op (vulkan_span.h): span-op dispatches over device-local copies of
// their buffers, so each shader is tested against its CPU reference in isolation and a sequence
// (split-K attention + combine, over many layers) can be timed on its own.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "engine/vulkan/compute_layout.h"
#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/vulkan_shaders.h"
#include "engine/vulkan/vulkan_span.h"
#include "fish_vk_span.h"

namespace fish::vk {

namespace {
constexpr uint64_t kNsTimeout = 120ull * 1000 * 1000 * 1000;  // a hung device, not a slow one
}  // namespace

Result<double> run_span_ops(SpanHost h, std::span<const SpanDispatch> dispatches, int reps,
                            std::vector<float>& arena, const std::vector<float>& params,
                            std::vector<uint32_t>& kv) {
  std::lock_guard lock(*h.mu);
  if (!h.is_open()) return make_error("span: the device is not open");
  if (reps < 1 || dispatches.empty())
    return make_error("span: run_span_ops of {} dispatches x {} reps", dispatches.size(), reps);
  const VolkDeviceTable& vk = h.dev->vk;
  const VkDevice dev = h.dev->device;
  SpanBuffer bufs[3], staging[3];
  ComputeLayout cl;
  VkDescriptorPool dp = VK_NULL_HANDLE;
  std::map<std::string, VkPipeline> pipes;
  VkCommandPool cp = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkQueryPool queries = VK_NULL_HANDLE;
  double seconds = 0;
  Status s = [&]() -> Status {
    const size_t sizes[3] = {arena.size() * 4, params.size() * 4, kv.size() * 4};
    const void* src[3] = {arena.data(), params.data(), kv.data()};
    for (int i = 0; i < 3; ++i) {
      const uint64_t bytes = std::max<size_t>(sizes[i], 16) + 16;
      FISH_ASSIGN_OR_RETURN(
          bufs[i], h.alloc(bytes,
                           VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                               VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                           false, dispatches[0].name));
      FISH_ASSIGN_OR_RETURN(
          staging[i],
          h.alloc(bytes, VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT, true,
                  dispatches[0].name));
      std::memcpy(staging[i].mapped, src[i], sizes[i]);
    }
    FISH_ASSIGN_OR_RETURN(cl, create_compute_layout(vk, dev, 3, sizeof(SpanPush)));
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3};
    VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpi.maxSets = 1;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &ps;
    FISH_VK_CHECK(vk.vkCreateDescriptorPool(dev, &dpi, nullptr, &dp));
    VkDescriptorSetAllocateInfo dai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    dai.descriptorPool = dp;
    dai.descriptorSetCount = 1;
    dai.pSetLayouts = &cl.set;
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
    for (const SpanDispatch& d : dispatches) {
      if (pipes.count(d.name)) continue;
      const std::span<const uint32_t> code = embedded_shader(d.name);
      if (code.empty()) return make_error("span: no embedded shader '{}'", d.name);
      VkShaderModuleCreateInfo si{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
      si.codeSize = code.size_bytes();
      si.pCode = code.data();
      VkShaderModule mod;
      FISH_VK_CHECK(vk.vkCreateShaderModule(dev, &si, nullptr, &mod));
      VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
      ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
      ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
      ci.stage.module = mod;
      ci.stage.pName = "main";
      ci.layout = cl.pipeline;
      VkPipeline pipe;
      const VkResult r = vk.vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, nullptr, &pipe);
      vk.vkDestroyShaderModule(dev, mod, nullptr);
      FISH_VK_CHECK(r);
      pipes.emplace(d.name, pipe);
    }
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
    uint32_t n_fam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(h.dev->phys, &n_fam, nullptr);
    std::vector<VkQueueFamilyProperties> fam(n_fam);
    vkGetPhysicalDeviceQueueFamilyProperties(h.dev->phys, &n_fam, fam.data());
    if (h.dev->queue_family < n_fam && fam[h.dev->queue_family].timestampValidBits > 0) {
      VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = 2;
      FISH_VK_CHECK(vk.vkCreateQueryPool(dev, &qi, nullptr, &queries));
    }

    VkCommandBufferBeginInfo cbi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    cbi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    FISH_VK_CHECK(vk.vkBeginCommandBuffer(cmd, &cbi));
    auto barrier = [&](VkAccessFlags src_access, VkAccessFlags dst_access,
                       VkPipelineStageFlags src_stage, VkPipelineStageFlags dst_stage) {
      VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      mb.srcAccessMask = src_access;
      mb.dstAccessMask = dst_access;
      vk.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
    };
    for (int i = 0; i < 3; ++i) {
      const VkBufferCopy c{0, 0, std::max<size_t>(sizes[i], 16)};
      vk.vkCmdCopyBuffer(cmd, staging[i].buf, bufs[i].buf, 1, &c);
    }
    barrier(VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
    if (queries) {
      vk.vkCmdResetQueryPool(cmd, queries, 0, 2);
      // After the uploads have finished (a top-of-pipe stamp may be written before they do).
      vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, queries, 0);
    }
    vk.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, cl.pipeline, 0, 1, &set, 0,
                               nullptr);
    for (int r = 0; r < reps; ++r)
      for (size_t i = 0; i < dispatches.size(); ++i) {
        const SpanDispatch& d = dispatches[i];
        if (r > 0 || i > 0)
          barrier(VK_ACCESS_SHADER_WRITE_BIT,
                  VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
                  VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
        vk.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipes.at(d.name));
        vk.vkCmdPushConstants(cmd, cl.pipeline, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof d.pc, &d.pc);
        vk.vkCmdDispatch(cmd, d.gx, d.gy, d.gz);
      }
    if (queries) vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 1);
    barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT);
    for (int i : {0, 2}) {
      const VkBufferCopy c{0, 0, std::max<size_t>(sizes[i], 16)};
      vk.vkCmdCopyBuffer(cmd, bufs[i].buf, staging[i].buf, 1, &c);
    }
    barrier(VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_PIPELINE_STAGE_HOST_BIT);
    FISH_VK_CHECK(vk.vkEndCommandBuffer(cmd));
    VkSubmitInfo sub{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    sub.commandBufferCount = 1;
    sub.pCommandBuffers = &cmd;
    const auto t0 = std::chrono::steady_clock::now();
    FISH_VK_CHECK(vk.vkQueueSubmit(h.dev->queue, 1, &sub, fence));
    FISH_VK_CHECK(vk.vkWaitForFences(dev, 1, &fence, VK_TRUE, kNsTimeout));
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (queries) {
      uint64_t ts[2] = {0, 0};
      FISH_VK_CHECK(vk.vkGetQueryPoolResults(dev, queries, 0, 2, sizeof ts, ts, 8,
                                             VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
      seconds = double(ts[1] - ts[0]) * double(h.dev->props.limits.timestampPeriod) * 1e-9;
    }
    std::memcpy(arena.data(), staging[0].mapped, sizes[0]);
    std::memcpy(kv.data(), staging[2].mapped, sizes[2]);
    return Status::success();
  }();
  if (queries) vk.vkDestroyQueryPool(dev, queries, nullptr);
  if (fence) vk.vkDestroyFence(dev, fence, nullptr);
  if (cp) vk.vkDestroyCommandPool(dev, cp, nullptr);
  for (auto& [name, p] : pipes) vk.vkDestroyPipeline(dev, p, nullptr);
  if (dp) vk.vkDestroyDescriptorPool(dev, dp, nullptr);
  if (cl.pipeline) vk.vkDestroyPipelineLayout(dev, cl.pipeline, nullptr);
  if (cl.set) vk.vkDestroyDescriptorSetLayout(dev, cl.set, nullptr);
  for (SpanBuffer* b : {&bufs[0], &bufs[1], &bufs[2], &staging[0], &staging[1], &staging[2]})
    if (b->buf) h.free(*b);
  if (!s.ok()) return s.take_error();
  return seconds;
}

Status run_span_op(SpanHost h, const std::string& name, const SpanPush& pc, uint32_t gx,
                   uint32_t gy, std::vector<float>& arena, const std::vector<float>& params,
                   std::vector<uint32_t>& kv) {
  const SpanDispatch d{name, pc, gx, gy, 1};
  FISH_TRY(run_span_ops(std::move(h), std::span(&d, 1), 1, arena, params, kv));
  return Status::success();
}

}  // namespace fish::vk
