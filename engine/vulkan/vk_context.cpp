// The device layer (vk_context.h): memory, pipelines, submission with the timeout policy,
// descriptor pools and the command recorder.
#include "engine/vulkan/vk_context.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/vulkan_shaders.h"

namespace fish::vk {
namespace {

double mib(uint64_t b) {
  return double(b) / double(1u << 20);
}

// Access and stage masks of a Sync point.
VkAccessFlags access_of(Sync s, bool write) {
  switch (s) {
    case Sync::transfer:
      return write ? VK_ACCESS_TRANSFER_WRITE_BIT
                   : VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    case Sync::compute:
      return write ? VK_ACCESS_SHADER_WRITE_BIT
                   : VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    case Sync::host:
      return write ? VK_ACCESS_HOST_WRITE_BIT : VK_ACCESS_HOST_READ_BIT;
  }
  return 0;
}
VkPipelineStageFlags stage_of(Sync s) {
  switch (s) {
    case Sync::transfer:
      return VK_PIPELINE_STAGE_TRANSFER_BIT;
    case Sync::compute:
      return VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    case Sync::host:
      return VK_PIPELINE_STAGE_HOST_BIT;
  }
  return VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
}

std::string spec_key(const PipelineSpec& s) {
  std::string k = s.module + "|";
  for (uint32_t b : s.bindings) k += std::to_string(b) + ",";
  k += "|";
  for (uint32_t c : s.constants) k += std::to_string(c) + ",";
  return k + "|" + std::to_string(s.subgroup_size);
}

}  // namespace

// ---- open / close ---------------------------------------------------------------------------

Result<std::unique_ptr<VkContext>> VkContext::open(const VulkanOptions& opt, std::mutex* mu,
                                                   std::vector<DeviceEntry>* seen) {
  std::unique_ptr<VkContext> c(new VkContext(opt, mu));
  FISH_ASSIGN_OR_RETURN(c->dev_, VulkanDevice::open(opt, seen));
  const VkPhysicalDeviceMemoryProperties& m = c->dev_->mem;
  // Weights: the first device-local type (any type when none is, e.g. some software drivers).
  int dt = -1, ht = -1, ht_cached = -1;
  for (uint32_t i = 0; i < m.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = m.memoryTypes[i].propertyFlags;
    if (dt < 0 && (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) dt = int(i);
    const VkMemoryPropertyFlags host =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if ((f & host) == host) {
      if (ht < 0) ht = int(i);
      if (ht_cached < 0 && (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)) ht_cached = int(i);
    }
  }
  if (ht < 0)
    return make_error("vulkan: {}: no host-visible coherent memory type",
                      c->dev_->props.deviceName);
  c->device_type_ = uint32_t(std::max(dt, 0));
  c->device_heap_ = m.memoryTypes[c->device_type_].heapIndex;
  c->host_type_ = uint32_t(ht_cached >= 0 ? ht_cached : ht);    // results are read by the CPU
  c->budget_.heap_bytes = m.memoryHeaps[c->device_heap_].size;  // live_free() needs it
  c->budget_ = VramBudget::at_open(c->budget_.heap_bytes, c->live_free(), opt.budget_bytes);
  c->fault_ = opt.fault;
  // A CPU implementation (lavapipe) on a loaded machine can take minutes for a prefill that a
  // GPU runs in milliseconds; it is given longer before it counts as hung.
  if (c->dev_->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) c->timeout_ns_ *= 8;
  const DeviceFeatures& f = c->dev_->features;
  if (f.coopmat)
    c->cm_tiles_ =
        vk::coopmat_tiles(f.coopmat_m, f.coopmat_n, f.coopmat_k, f.subgroup_size,
                          f.max_shared_bytes, c->limits().maxComputeWorkGroupInvocations);
  if (f.coopmat && f.coopmat2) {  // after the KHR tiles: a span indexes its pipelines by position
    const size_t n_khr = c->cm_tiles_.size();
    for (const CoopmatTile& t : vk::coopmat2_tiles(
             f.coopmat2_shapes, f.coopmat2_max_dim,
             std::min(f.coopmat2_max_threads, c->limits().maxComputeWorkGroupInvocations),
             f.subgroup_size, opt.coopmat2_acc, opt.coopmat2_scales, opt.coopmat2_wide == 1))
      c->cm_tiles_.push_back(t);
    // f16 sums asked for on a device that lists no f16 x f16 -> f16 workgroup shape: said once,
    // whatever the verbosity (a forced coopmat2 tile would otherwise run the rule's kernel under
    // a row that records FISH_VK_COOPMAT2_ACC).
    if (opt.coopmat2_acc != kCoopmat2AccF32 && c->cm_tiles_.size() == n_khr)
      std::fprintf(stderr,
                   "fish: vulkan: FISH_VK_COOPMAT2_ACC=%s: %s lists no f16 x f16 -> f16 "
                   "workgroup shape for the coopmat2 tiles; none is offered\n",
                   coopmat2_acc_name(opt.coopmat2_acc), c->dev_->props.deviceName);
  }
  if (opt.coopmat == 1 && c->cm_tiles_.empty())
    return make_error("vulkan: FISH_VK_COOPMAT=1 but no cooperative-matrix tile fits {} ({})",
                      c->dev_->props.deviceName, f.describe());
  return c;
}

VkContext::~VkContext() {
  if (!dev_) return;
  if (!lost()) vk().vkDeviceWaitIdle(handle());
  for (auto& [key, p] : pipelines_) vk().vkDestroyPipeline(handle(), p.pipe, nullptr);
  for (auto& [key, l] : layouts_) {
    vk().vkDestroyPipelineLayout(handle(), l.pipe, nullptr);
    vk().vkDestroyDescriptorSetLayout(handle(), l.set, nullptr);
  }
}

// ---- memory ---------------------------------------------------------------------------------

uint64_t VkContext::live_free() const {
  if (dev_->has_memory_budget) return dev_->heap_budget_free(device_heap_);
  return VramBudget::fallback_free(budget_.heap_bytes, own_bytes_);
}

uint64_t VkContext::allocatable(std::optional<uint64_t> run_ceiling) const {
  return budget_.under(run_ceiling).allocatable(own_bytes_, live_free());
}

uint64_t VkContext::max_binding_bytes() const {
  return std::min<uint64_t>(limits().maxStorageBufferRange, UINT32_MAX);
}

uint64_t VkContext::binding_align() const {
  return std::max<uint64_t>(16, limits().minStorageBufferOffsetAlignment);
}

Result<Buffer> VkContext::alloc(uint64_t bytes, VkBufferUsageFlags usage, Memory where,
                                bool counted, std::string_view what,
                                std::optional<uint64_t> run_ceiling) {
  const bool host = where == Memory::host;
  Buffer b;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = std::max<uint64_t>(bytes, 16);
  // coopmat2 decode functions read weights and activations through block pointers: their
  // buffers need device addresses (VK_KHR_buffer_device_address, enabled with coopmat2).
  const bool addressed = features().coopmat2 && (usage & VK_BUFFER_USAGE_STORAGE_BUFFER_BIT) != 0;
  bi.usage = usage | (addressed ? VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT : 0);
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  FISH_VK_CHECK(vk().vkCreateBuffer(handle(), &bi, nullptr, &b.buf));
  VkMemoryRequirements req;
  vk().vkGetBufferMemoryRequirements(handle(), b.buf, &req);
  if (counted) {
    const std::string refusal =
        budget_.under(run_ceiling).refusal(req.size, own_bytes_, live_free());
    if (!refusal.empty()) {
      vk().vkDestroyBuffer(handle(), b.buf, nullptr);
      return make_error("vulkan: {}: allocation refused: {}", what, refusal);
    }
  }
  uint32_t type = host ? host_type_ : device_type_;
  if (!(req.memoryTypeBits & (1u << type))) {  // any allowed type with the needed properties
    const VkMemoryPropertyFlags need =
        host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT : 0;
    type = UINT32_MAX;
    for (uint32_t i = 0; i < dev_->mem.memoryTypeCount && type == UINT32_MAX; ++i)
      if ((req.memoryTypeBits & (1u << i)) &&
          (dev_->mem.memoryTypes[i].propertyFlags & need) == need)
        type = i;
    if (type == UINT32_MAX) {
      vk().vkDestroyBuffer(handle(), b.buf, nullptr);
      return make_error("vulkan: {}: no memory type fits the buffer", what);
    }
  }
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.pNext = addressed ? &flags : nullptr;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  if (VkResult r = vk().vkAllocateMemory(handle(), &ai, nullptr, &b.mem); r < 0) {
    vk().vkDestroyBuffer(handle(), b.buf, nullptr);
    return make_error("vulkan: {}: vkAllocateMemory of {:.1f} MB failed: {}", what, mib(req.size),
                      vk_result_name(r));
  }
  b.bytes = bytes;
  b.alloc_bytes = req.size;
  Status bound = [&]() -> Status {
    FISH_VK_CHECK(vk().vkBindBufferMemory(handle(), b.buf, b.mem, 0));
    if (host) FISH_VK_CHECK(vk().vkMapMemory(handle(), b.mem, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    return Status::success();
  }();
  if (!bound.ok()) {
    free(b);
    return bound.take_error();
  }
  b.counted = counted;
  if (counted) own_bytes_ += b.alloc_bytes;
  return b;
}

void VkContext::free(Buffer& b) {
  if (b.buf) vk().vkDestroyBuffer(handle(), b.buf, nullptr);
  if (b.mem) vk().vkFreeMemory(handle(), b.mem, nullptr);  // unmaps implicitly
  if (b.counted && b.mem) own_bytes_ -= b.alloc_bytes;
  b = Buffer{};
}

// ---- pipelines ------------------------------------------------------------------------------

Result<VkPipelineLayout> VkContext::layout(const std::vector<uint32_t>& bindings,
                                           VkDescriptorSetLayout* set_layout) {
  if (auto it = layouts_.find(bindings); it != layouts_.end()) {
    *set_layout = it->second.set;
    return it->second.pipe;
  }
  std::vector<VkDescriptorSetLayoutBinding> b(bindings.size());
  for (uint32_t i = 0; i < bindings.size(); ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = bindings[i];
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = uint32_t(b.size());
  dl.pBindings = b.data();
  Layout l;
  FISH_VK_CHECK(vk().vkCreateDescriptorSetLayout(handle(), &dl, nullptr, &l.set));
  const VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &l.set;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &pcr;
  if (VkResult r = vk().vkCreatePipelineLayout(handle(), &pli, nullptr, &l.pipe); r < 0) {
    vk().vkDestroyDescriptorSetLayout(handle(), l.set, nullptr);
    FISH_VK_CHECK(r);
  }
  layouts_.emplace(bindings, l);
  *set_layout = l.set;
  return l.pipe;
}

Result<Pipeline> VkContext::pipeline(const PipelineSpec& spec) {
  const std::string key = spec_key(spec);
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
  const std::span<const uint32_t> code = embedded_shader(spec.module);
  if (code.empty()) return make_error("vulkan: no embedded shader '{}'", spec.module);
  const DeviceFeatures& f = features();
  if (spec.subgroup_size && (!f.subgroup_size_control || spec.subgroup_size < f.subgroup_min ||
                             spec.subgroup_size > f.subgroup_max))
    return make_error("vulkan: {}: subgroup size {} cannot be required here ({})", spec.module,
                      spec.subgroup_size, f.describe());
  Pipeline p;
  FISH_ASSIGN_OR_RETURN(p.layout, layout(spec.bindings, &p.set_layout));
  VkShaderModuleCreateInfo si{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  si.codeSize = code.size_bytes();
  si.pCode = code.data();
  VkShaderModule mod;
  FISH_VK_CHECK(vk().vkCreateShaderModule(handle(), &si, nullptr, &mod));
  std::vector<VkSpecializationMapEntry> entries(spec.constants.size());
  for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, 4 * i, 4};
  const VkSpecializationInfo spi{uint32_t(entries.size()), entries.data(),
                                 spec.constants.size() * 4, spec.constants.data()};
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT rss{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO_EXT};
  rss.requiredSubgroupSize = spec.subgroup_size;
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = mod;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = entries.empty() ? nullptr : &spi;
  if (spec.subgroup_size) {
    ci.stage.pNext = &rss;
    ci.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
  }
  ci.layout = p.layout;
  const VkResult r =
      vk().vkCreateComputePipelines(handle(), VK_NULL_HANDLE, 1, &ci, nullptr, &p.pipe);
  vk().vkDestroyShaderModule(handle(), mod, nullptr);
  if (r < 0)
    return make_error("vulkan: vkCreateComputePipelines({}) failed: {} ({}:{})", spec.module,
                      vk_result_name(r), source_location(__FILE__), __LINE__);
  pipelines_.emplace(key, p);
  return p;
}

// ---- cooperative-matrix prefill --------------------------------------------------------------

const CoopmatTile* VkContext::coopmat_tile(GgmlType type, uint32_t n_out, uint32_t n_tok) const {
  if (n_tok < kCoopmatMinTok || cm_tiles_.empty()) return nullptr;
  return pick_coopmat_tile(cm_tiles_, n_out, n_tok, coopmat_target_groups(features().sm_count),
                           opt_.coopmat_tile, type);
}

Result<Pipeline> VkContext::coopmat_pipeline(GgmlType type, const CoopmatTile& t) {
  PipelineSpec s;
  s.module = fmt::format("{}_{}", t.cm2 ? "matmul_cm2" : "matmul_cm", type_name(type));
  s.constants = t.constants();
  // The shader counts on threads() / subgroup subgroups: where the size may vary, require it.
  const DeviceFeatures& f = features();
  if (f.subgroup_size_control && f.subgroup_min != f.subgroup_max) s.subgroup_size = t.subgroup;
  Result<Pipeline> p = pipeline(s);
  if (p.ok() || !t.cm2) return p;
  // A workgroup-scope kernel the driver (or this build: no module) rejects: the tile is off
  // from now on, so the rule, and a span's next pick, go on without it.
  for (CoopmatTile& x : cm_tiles_)
    if (x.name == t.name) x.unavailable = true;
  // Said once a tile, whatever the verbosity: a forced tile that silently falls back to the
  // rule would otherwise be measured under the wrong name.
  std::fprintf(stderr, "fish: vulkan: coopmat2 tile %s (%s) rejected, the rule takes over: %s\n",
               t.label().c_str(), s.module.c_str(), p.error().message.c_str());
  return make_error("vulkan: coopmat2 tile {} unavailable: {} (FISH_VK_COOPMAT2=0 keeps it off)",
                    t.label(), p.error().message);
}

// ---- submission -----------------------------------------------------------------------------

void VkContext::mark_lost(std::string reason) {
  if (lost()) return;
  lost_reason_ = reason.empty() ? "device lost" : std::move(reason);
  if (on_lost_) on_lost_(lost_reason_);
}

void VkContext::inject_fault(DeviceFaultKind kind, uint64_t n) {
  fault_ = DeviceFault{kind, compute_submits_ + n};
}

Status VkContext::submit_and_wait(VkCommandBuffer cmd, VkFence fence, Work work,
                                  std::string_view what, const std::function<void()>& meanwhile) {
  FISH_ASSIGN_OR_RETURN(const DeviceFaultKind injected, submit(cmd, fence, work, what));
  if (meanwhile) meanwhile();
  return wait(fence, injected, what);
}

Result<DeviceFaultKind> VkContext::submit(VkCommandBuffer cmd, VkFence fence, Work work,
                                          std::string_view what) {
  if (lost()) return make_error("vulkan: {}: the device is lost ({})", what, lost_reason_);
  DeviceFaultKind injected = DeviceFaultKind::none;
  if (work == Work::compute && ++compute_submits_ == fault_.at) injected = fault_.kind;
  auto fail = [&](std::string why) -> Error {
    mark_lost(fmt::format("{}: {}", what, why));
    return make_error("vulkan: {}", lost_reason_);
  };
  if (injected == DeviceFaultKind::lost)
    return fail(
        fmt::format("vkQueueSubmit: VK_ERROR_DEVICE_LOST (injected by FISH_VK_FAULT at "
                    "compute submit {})",
                    fault_.at));
  if (VkResult r = vk().vkResetFences(handle(), 1, &fence); r != VK_SUCCESS)
    return fail("vkResetFences: " + vk_result_name(r));
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  if (VkResult r = vk().vkQueueSubmit(dev_->queue, 1, &si, fence); r != VK_SUCCESS)
    return fail("vkQueueSubmit: " + vk_result_name(r));
  return injected;
}

Status VkContext::wait(VkFence fence, DeviceFaultKind injected, std::string_view what) {
  auto fail = [&](std::string why) -> Status {
    mark_lost(fmt::format("{}: {}", what, why));
    return make_error("vulkan: {}", lost_reason_);
  };
  // FISH_VK_FENCE_SPIN_US: poll the fence that long before blocking on it (a decode step's fence
  // signals within a few ms; a thread woken from the blocking wait may pay more than the poll).
  if (opt_.fence_spin_us > 0 && injected == DeviceFaultKind::none) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::microseconds(opt_.fence_spin_us);
    while (vk().vkGetFenceStatus(handle(), fence) == VK_NOT_READY &&
           std::chrono::steady_clock::now() < until) {
    }
  }
  // An injected timeout still waits for the work, so no buffer is freed while in use; then it
  // reports what a hung device would.
  VkResult r =
      vk().vkWaitForFences(handle(), 1, &fence, VK_TRUE,
                           injected == DeviceFaultKind::timeout ? UINT64_MAX : timeout_ns_);
  if (injected == DeviceFaultKind::timeout && r == VK_SUCCESS) r = VK_TIMEOUT;
  if (r == VK_TIMEOUT && injected == DeviceFaultKind::timeout)
    return fail(
        fmt::format("vkWaitForFences: VK_TIMEOUT (injected by FISH_VK_FAULT at compute "
                    "submit {}); the device is treated as hung",
                    fault_.at));
  if (r == VK_TIMEOUT)
    return fail(
        fmt::format("no completion after {:.0f} s (vkWaitForFences: VK_TIMEOUT); the "
                    "device is treated as hung",
                    double(timeout_ns_) * 1e-9));
  if (r != VK_SUCCESS) return fail("vkWaitForFences: " + vk_result_name(r));
  return Status::success();
}

void VkContext::remove_span(const LayerSpan* s) {
  spans_.erase(std::remove(spans_.begin(), spans_.end(), s), spans_.end());
}

// ---- descriptor pools -----------------------------------------------------------------------

Result<DescriptorPool> DescriptorPool::create(const VkContext& ctx, uint32_t max_sets,
                                              uint32_t max_buffers) {
  DescriptorPool d;
  d.ctx_ = &ctx;
  const VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(max_buffers, 1u)};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dpi.maxSets = std::max(max_sets, 1u);
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &ps;
  FISH_VK_CHECK(ctx.vk().vkCreateDescriptorPool(ctx.handle(), &dpi, nullptr, &d.pool_));
  return d;
}

DescriptorPool& DescriptorPool::operator=(DescriptorPool&& o) noexcept {
  std::swap(ctx_, o.ctx_);
  std::swap(pool_, o.pool_);
  return *this;
}

DescriptorPool::~DescriptorPool() {
  if (pool_) ctx_->vk().vkDestroyDescriptorPool(ctx_->handle(), pool_, nullptr);
}

Result<VkDescriptorSet> DescriptorPool::allocate(const Pipeline& p,
                                                 std::span<const BufferRange> ranges) {
  VkDescriptorSetAllocateInfo dai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  dai.descriptorPool = pool_;
  dai.descriptorSetCount = 1;
  dai.pSetLayouts = &p.set_layout;
  VkDescriptorSet set;
  FISH_VK_CHECK(ctx_->vk().vkAllocateDescriptorSets(ctx_->handle(), &dai, &set));
  write(set, ranges);
  return set;
}

void DescriptorPool::write(VkDescriptorSet set, std::span<const BufferRange> ranges) const {
  std::vector<VkDescriptorBufferInfo> infos(ranges.size());
  std::vector<VkWriteDescriptorSet> wr(ranges.size());
  for (uint32_t i = 0; i < ranges.size(); ++i) {
    infos[i] = {ranges[i].buf, ranges[i].offset, ranges[i].bytes};
    wr[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    wr[i].dstSet = set;
    wr[i].dstBinding = i;  // one descriptor per binding (the layouts FISH uses so far)
    wr[i].descriptorCount = 1;
    wr[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    wr[i].pBufferInfo = &infos[i];
  }
  ctx_->vk().vkUpdateDescriptorSets(ctx_->handle(), uint32_t(wr.size()), wr.data(), 0, nullptr);
}

Status DescriptorPool::reset() {
  FISH_VK_CHECK(ctx_->vk().vkResetDescriptorPool(ctx_->handle(), pool_, 0));
  return Status::success();
}

// ---- commands -------------------------------------------------------------------------------

Result<Commands> Commands::create(VkContext& ctx) {
  Commands c;
  c.ctx_ = &ctx;
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = ctx.device().queue_family;
  FISH_VK_CHECK(ctx.vk().vkCreateCommandPool(ctx.handle(), &cpi, nullptr, &c.pool_));
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = c.pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  FISH_VK_CHECK(ctx.vk().vkAllocateCommandBuffers(ctx.handle(), &cai, &c.cmd_));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  FISH_VK_CHECK(ctx.vk().vkCreateFence(ctx.handle(), &fci, nullptr, &c.fence_));
  return c;
}

Commands& Commands::operator=(Commands&& o) noexcept {
  std::swap(ctx_, o.ctx_);
  std::swap(pool_, o.pool_);
  std::swap(cmd_, o.cmd_);
  std::swap(fence_, o.fence_);
  std::swap(recording_, o.recording_);
  std::swap(in_flight_, o.in_flight_);
  std::swap(injected_, o.injected_);
  return *this;
}

Commands::~Commands() {
  if (!ctx_) return;
  if (fence_) ctx_->vk().vkDestroyFence(ctx_->handle(), fence_, nullptr);
  if (pool_) ctx_->vk().vkDestroyCommandPool(ctx_->handle(), pool_, nullptr);  // frees cmd_
}

Status Commands::begin() {
  if (recording_) {  // recorded and never submitted (a span's forward recorded ahead, unused):
    FISH_VK_CHECK(ctx_->vk().vkEndCommandBuffer(cmd_));  // closed, then reset by the begin
    recording_ = false;
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  FISH_VK_CHECK(ctx_->vk().vkBeginCommandBuffer(cmd_, &bi));
  recording_ = true;
  return Status::success();
}

void Commands::barrier(Sync from, Sync to) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = access_of(from, true);
  mb.dstAccessMask = access_of(to, false);
  ctx_->vk().vkCmdPipelineBarrier(cmd_, stage_of(from), stage_of(to), 0, 1, &mb, 0, nullptr, 0,
                                  nullptr);
}

void Commands::copy(const Buffer& src, const Buffer& dst, std::span<const VkBufferCopy> regions) {
  ctx_->vk().vkCmdCopyBuffer(cmd_, src.buf, dst.buf, uint32_t(regions.size()), regions.data());
}

void Commands::copy(const Buffer& src, uint64_t src_off, const Buffer& dst, uint64_t dst_off,
                    uint64_t bytes) {
  const VkBufferCopy c{src_off, dst_off, bytes};
  copy(src, dst, std::span(&c, 1));
}

void Commands::fill(const Buffer& dst, uint64_t off, uint64_t bytes, uint32_t word) {
  ctx_->vk().vkCmdFillBuffer(cmd_, dst.buf, off, bytes, word);
}

void Commands::bind(const Pipeline& p, VkDescriptorSet set) {
  ctx_->vk().vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipe);
  ctx_->vk().vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0,
                                     nullptr);
}

void Commands::bind(const Pipeline& p) {
  ctx_->vk().vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipe);
}

void Commands::push(const Pipeline& p, const void* data, uint32_t bytes) {
  ctx_->vk().vkCmdPushConstants(cmd_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, bytes, data);
}

void Commands::dispatch(uint32_t gx, uint32_t gy, uint32_t gz) {
  ctx_->vk().vkCmdDispatch(cmd_, gx, gy, gz);
}

void Commands::timestamp(VkQueryPool pool, uint32_t query) {
  ctx_->vk().vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, query);
}

Status Commands::submit_and_wait(Work work, std::string_view what,
                                 const std::function<void()>& meanwhile) {
  recording_ = false;
  FISH_VK_CHECK(ctx_->vk().vkEndCommandBuffer(cmd_));
  return ctx_->submit_and_wait(cmd_, fence_, work, what, meanwhile);
}

Status Commands::submit(Work work, std::string_view what) {
  recording_ = false;
  FISH_VK_CHECK(ctx_->vk().vkEndCommandBuffer(cmd_));
  FISH_ASSIGN_OR_RETURN(injected_, ctx_->submit(cmd_, fence_, work, what));
  in_flight_ = true;
  return Status::success();
}

Status Commands::wait(std::string_view what) {
  if (!in_flight_) return Status::success();
  in_flight_ = false;
  return ctx_->wait(fence_, std::exchange(injected_, DeviceFaultKind::none), what);
}

Result<VkQueryPool> create_timestamps(const VkContext& ctx, uint32_t n) {
  if (ctx.features().timestamp_bits == 0) return VkQueryPool(VK_NULL_HANDLE);
  VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qi.queryCount = n;
  VkQueryPool q;
  FISH_VK_CHECK(ctx.vk().vkCreateQueryPool(ctx.handle(), &qi, nullptr, &q));
  return q;
}

}  // namespace fish::vk
