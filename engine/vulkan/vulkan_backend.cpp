// The Vulkan ComputeBackend (vulkan_backend.h): device memory and budgets, weight upload,
// pipelines, matmul dispatch, and the start-up registration.
#include "engine/vulkan/vulkan_backend.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "base/env_knobs.h"
#include "engine/vulkan/compute_layout.h"
#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/vram_budget.h"
#include "engine/vulkan/vulkan_device.h"
#include "engine/vulkan/vulkan_shaders.h"
#include "engine/vulkan/vulkan_span.h"
#include "fish_vk_layout.h"
#include "kernels/requant.h"
#include "kernels/thread_pool.h"

namespace fish::vk {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr uint64_t kBufferPad = 16;            // funnel reads touch the word after a row's end
constexpr uint64_t kStagingBytes = 64 * kMiB;  // upload chunk (host-visible, transient)
constexpr uint32_t kMaxSetsPerSubmit = 256;    // descriptor sets per matmul_group submit

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}
double mb(uint64_t b) {
  return double(b) / double(kMiB);
}

struct Buffer {
  VkBuffer buf = VK_NULL_HANDLE;
  VkDeviceMemory mem = VK_NULL_HANDLE;
  uint64_t bytes = 0;        // usable size
  uint64_t alloc_bytes = 0;  // what the allocation counts against the budget
  void* mapped = nullptr;    // host-visible buffers only
};

// A run of whole rows of a weight in one storage buffer (maxStorageBufferRange bounds one
// binding: 128 MB on lavapipe, 4 GB on desktop GPUs).
struct Part {
  Buffer buf;
  uint32_t row0 = 0, n_rows = 0;
};

struct Weight {
  std::string name;
  GgmlType type = GgmlType::f32;  // on the device
  GgmlType from = GgmlType::f32;  // in the model (!= type: re-quantised at upload)
  uint64_t from_bytes = 0;        // the model's bytes of this weight
  uint32_t n_in = 0;              // as in the file
  uint32_t n_in_pad = 0;          // K the kernels see (f32/f16 padded to FISH_K_ALIGN)
  uint32_t n_out = 0;
  uint32_t row_bytes = 0;  // device row stride
  std::vector<Part> parts;
  uint64_t bytes = 0;
};

bool kernel_type(GgmlType t) {
  const std::string name = fmt::format("matvec_{}", type_name(t));
  return !embedded_shader(name).empty() &&
         !embedded_shader(fmt::format("matmul_{}", type_name(t))).empty();
}

}  // namespace

struct VulkanBackend::Impl {
  Result<VulkanOptions> opt;
  mutable std::mutex mu;
  enum class State { unopened, open, failed } state = State::unopened;
  std::string error;  // why it failed
  std::vector<DeviceEntry> devices;
  std::unique_ptr<VulkanDevice> dev;

  uint32_t weight_type = 0, weight_heap = 0, host_type = 0;
  VramBudget budget;
  std::atomic<uint64_t> own_bytes{0};

  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout pipe_layout = VK_NULL_HANDLE;
  VkDescriptorPool desc_pool = VK_NULL_HANDLE;
  VkCommandPool cmd_pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  std::map<std::string, VkPipeline> pipelines;

  std::map<WeightHandle, Weight> weights;
  std::optional<int> run_requant;            // set_run_requant; else opt->requant
  std::unique_ptr<ThreadPool> requant_pool;  // first re-quantising upload creates it
  int requant_threads = 0;                   // set_requant_threads; 0: default_thread_count()
  int requant_mode() const { return run_requant ? *run_requant : opt.ok() ? opt->requant : 0; }
  GgmlType device_type(const MatrixView& w) const;
  WeightHandle next_handle = 1;
  std::vector<const LayerSpan*> spans;  // live layer spans (describe)
  // Matmul scratch: x and y staged in host-visible memory and copied to/from device-local
  // buffers inside the submit, so kernels never read or write across the bus (every workgroup
  // reads all of x).
  Buffer x_host, x_dev, y_host, y_dev;
  void free_scratch() {
    for (Buffer* b : {&x_host, &x_dev, &y_host, &y_dev}) free_buffer(*b, true);
  }

  explicit Impl(Result<VulkanOptions> o) : opt(std::move(o)) {}

  const VolkDeviceTable& vk() const { return dev->vk; }

  Status open_locked(VulkanBackend* self);
  Status create_objects();
  void destroy_all();

  uint64_t live_free() const;
  uint64_t allocatable() const;
  Result<Buffer> alloc(uint64_t bytes, VkBufferUsageFlags usage, bool host, bool counted,
                       std::string_view what);
  void free_buffer(Buffer& b, bool counted);
  Status ensure_scratch(Buffer& b, uint64_t bytes, VkBufferUsageFlags usage, bool host,
                        std::string_view what);
  Result<VkPipeline> pipeline(const std::string& name);
  Status submit_and_wait(std::string_view what);
  Status upload_part(const MatrixView& w, const Weight& wt, Part& part, Buffer& staging);
  Status run(std::span<const MatmulOp> ops, const float* x, int64_t n_tok);
  void fail(VulkanBackend* self, std::string why);
  std::string status_text() const;
};

VulkanBackend::VulkanBackend(Result<VulkanOptions> options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

VulkanBackend::~VulkanBackend() {
  if (gpu_backend() == this) set_gpu_backend(nullptr);
  std::lock_guard lock(impl_->mu);
  impl_->destroy_all();
}

void VulkanBackend::Impl::destroy_all() {
  if (!dev) return;
  vk().vkDeviceWaitIdle(dev->device);
  for (auto& [h, w] : weights)
    for (Part& p : w.parts) free_buffer(p.buf, true);
  weights.clear();
  free_scratch();
  for (auto& [name, p] : pipelines) vk().vkDestroyPipeline(dev->device, p, nullptr);
  pipelines.clear();
  if (fence) vk().vkDestroyFence(dev->device, fence, nullptr);
  if (cmd_pool) vk().vkDestroyCommandPool(dev->device, cmd_pool, nullptr);
  if (desc_pool) vk().vkDestroyDescriptorPool(dev->device, desc_pool, nullptr);
  if (pipe_layout) vk().vkDestroyPipelineLayout(dev->device, pipe_layout, nullptr);
  if (set_layout) vk().vkDestroyDescriptorSetLayout(dev->device, set_layout, nullptr);
  fence = VK_NULL_HANDLE;
  cmd_pool = VK_NULL_HANDLE;
  desc_pool = VK_NULL_HANDLE;
  pipe_layout = VK_NULL_HANDLE;
  set_layout = VK_NULL_HANDLE;
  dev.reset();
}

void VulkanBackend::Impl::fail(VulkanBackend* self, std::string why) {
  state = State::failed;
  error = std::move(why);
  if (gpu_backend() == self) set_gpu_backend(nullptr);
  const bool verbose = opt.ok() ? opt->verbose : std::getenv("FISH_GPU_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "fish: vulkan: off: %s\n", error.c_str());
}

Status VulkanBackend::open() {
  std::lock_guard lock(impl_->mu);
  return impl_->open_locked(this);
}

Status VulkanBackend::Impl::open_locked(VulkanBackend* self) {
  if (state == State::open) return Status::success();
  if (state == State::failed) return Error{error};
  if (!opt.ok()) {
    fail(self, opt.error().message);
    return Error{error};
  }
  if (!opt->enabled) {
    fail(self, "disabled by FISH_GPU");
    return Error{error};
  }
  auto d = VulkanDevice::open(*opt, &devices);
  if (!d.ok()) {
    fail(self, d.error().message);
    return Error{error};
  }
  dev = std::move(d).value();
  if (Status s = create_objects(); !s.ok()) {
    destroy_all();
    fail(self, s.error().message);
    return Error{error};
  }
  state = State::open;
  if (opt->verbose) std::fprintf(stderr, "fish: %s\n", status_text().c_str());
  return Status::success();
}

Status VulkanBackend::Impl::create_objects() {
  const VkPhysicalDeviceMemoryProperties& m = dev->mem;
  // Weights: the first device-local type (any type when none is, e.g. some software drivers).
  int wt = -1, ht = -1, ht_cached = -1;
  for (uint32_t i = 0; i < m.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = m.memoryTypes[i].propertyFlags;
    if (wt < 0 && (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) wt = int(i);
    const VkMemoryPropertyFlags host =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if ((f & host) == host) {
      if (ht < 0) ht = int(i);
      if (ht_cached < 0 && (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)) ht_cached = int(i);
    }
  }
  if (wt < 0) wt = 0;
  if (ht < 0)
    return make_error("vulkan: {}: no host-visible coherent memory type", dev->props.deviceName);
  weight_type = uint32_t(wt);
  weight_heap = m.memoryTypes[weight_type].heapIndex;
  host_type = uint32_t(ht_cached >= 0 ? ht_cached : ht);  // y is read back by the CPU
  budget.heap_bytes = m.memoryHeaps[weight_heap].size;    // live_free() below needs it
  budget = VramBudget::at_open(m.memoryHeaps[weight_heap].size, live_free(), opt->budget_bytes);

  static_assert(FISH_BINDING_W == 0 && FISH_BINDING_X == 1 && FISH_BINDING_Y == 2);
  FISH_ASSIGN_OR_RETURN(const ComputeLayout cl,
                        create_compute_layout(vk(), dev->device, 3, sizeof(MatmulPush)));
  set_layout = cl.set;
  pipe_layout = cl.pipeline;
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3 * kMaxSetsPerSubmit};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dpi.maxSets = kMaxSetsPerSubmit;
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &ps;
  FISH_VK_CHECK(vk().vkCreateDescriptorPool(dev->device, &dpi, nullptr, &desc_pool));
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = dev->queue_family;
  FISH_VK_CHECK(vk().vkCreateCommandPool(dev->device, &cpi, nullptr, &cmd_pool));
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = cmd_pool;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  FISH_VK_CHECK(vk().vkAllocateCommandBuffers(dev->device, &cai, &cmd));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  FISH_VK_CHECK(vk().vkCreateFence(dev->device, &fci, nullptr, &fence));
  return Status::success();
}

uint64_t VulkanBackend::Impl::live_free() const {
  if (dev->has_memory_budget) return dev->heap_budget_free(weight_heap);
  return VramBudget::fallback_free(budget.heap_bytes, own_bytes);
}

uint64_t VulkanBackend::Impl::allocatable() const {
  return budget.allocatable(own_bytes, live_free());
}

Result<Buffer> VulkanBackend::Impl::alloc(uint64_t bytes, VkBufferUsageFlags usage, bool host,
                                          bool counted, std::string_view what) {
  Buffer b;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = bytes;
  bi.usage = usage;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  FISH_VK_CHECK(vk().vkCreateBuffer(dev->device, &bi, nullptr, &b.buf));
  VkMemoryRequirements req;
  vk().vkGetBufferMemoryRequirements(dev->device, b.buf, &req);
  if (counted) {
    const std::string refusal = budget.refusal(req.size, own_bytes, live_free());
    if (!refusal.empty()) {
      vk().vkDestroyBuffer(dev->device, b.buf, nullptr);
      return make_error("vulkan: {}: allocation refused: {}", what, refusal);
    }
  }
  uint32_t type = host ? host_type : weight_type;
  if (!(req.memoryTypeBits & (1u << type))) {
    // Fall back to any allowed type with the needed properties.
    const VkMemoryPropertyFlags need =
        host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT : 0;
    type = UINT32_MAX;
    for (uint32_t i = 0; i < dev->mem.memoryTypeCount && type == UINT32_MAX; ++i)
      if ((req.memoryTypeBits & (1u << i)) &&
          (dev->mem.memoryTypes[i].propertyFlags & need) == need)
        type = i;
    if (type == UINT32_MAX) {
      vk().vkDestroyBuffer(dev->device, b.buf, nullptr);
      return make_error("vulkan: {}: no memory type fits the buffer", what);
    }
  }
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  if (VkResult r = vk().vkAllocateMemory(dev->device, &ai, nullptr, &b.mem); r < 0) {
    vk().vkDestroyBuffer(dev->device, b.buf, nullptr);
    return make_error("vulkan: {}: vkAllocateMemory of {:.1f} MB failed: {}", what, mb(req.size),
                      vk_result_name(r));
  }
  b.bytes = bytes;
  b.alloc_bytes = req.size;
  Status bound = [&]() -> Status {
    FISH_VK_CHECK(vk().vkBindBufferMemory(dev->device, b.buf, b.mem, 0));
    if (host) FISH_VK_CHECK(vk().vkMapMemory(dev->device, b.mem, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    return Status::success();
  }();
  if (!bound.ok()) {
    free_buffer(b, false);
    return bound.take_error();
  }
  if (counted) own_bytes += b.alloc_bytes;
  return b;
}

void VulkanBackend::Impl::free_buffer(Buffer& b, bool counted) {
  if (b.buf) vk().vkDestroyBuffer(dev->device, b.buf, nullptr);
  if (b.mem) vk().vkFreeMemory(dev->device, b.mem, nullptr);  // unmaps implicitly
  if (counted && b.mem) own_bytes -= b.alloc_bytes;
  b = Buffer{};
}

Status VulkanBackend::Impl::ensure_scratch(Buffer& b, uint64_t bytes, VkBufferUsageFlags usage,
                                           bool host, std::string_view what) {
  if (b.bytes >= bytes) return Status::success();
  const uint64_t want = std::max<uint64_t>(align_up(bytes, 64 * 1024), b.bytes * 2);
  free_buffer(b, true);
  auto nb = alloc(want, usage, host, true, what);
  if (!nb.ok() && want > bytes) nb = alloc(bytes, usage, host, true, what);
  if (!nb.ok()) return nb.take_error();
  b = std::move(nb).value();
  return Status::success();
}

Result<VkPipeline> VulkanBackend::Impl::pipeline(const std::string& name) {
  if (auto it = pipelines.find(name); it != pipelines.end()) return it->second;
  const std::span<const uint32_t> code = embedded_shader(name);
  if (code.empty()) return make_error("vulkan: no embedded shader '{}'", name);
  VkShaderModuleCreateInfo si{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  si.codeSize = code.size_bytes();
  si.pCode = code.data();
  VkShaderModule mod;
  FISH_VK_CHECK(vk().vkCreateShaderModule(dev->device, &si, nullptr, &mod));
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = mod;
  ci.stage.pName = "main";
  ci.layout = pipe_layout;
  VkPipeline p;
  const VkResult r =
      vk().vkCreateComputePipelines(dev->device, VK_NULL_HANDLE, 1, &ci, nullptr, &p);
  vk().vkDestroyShaderModule(dev->device, mod, nullptr);
  if (r < 0)
    return make_error("vulkan: vkCreateComputePipelines({}) failed: {} ({}:{})", name,
                      vk_result_name(r), source_location(__FILE__), __LINE__);
  pipelines.emplace(name, p);
  return p;
}

Status VulkanBackend::Impl::submit_and_wait(std::string_view what) {
  FISH_VK_CHECK(vk().vkEndCommandBuffer(cmd));
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  FISH_VK_CHECK(vk().vkQueueSubmit(dev->queue, 1, &si, fence));
  constexpr uint64_t kTimeoutNs = 120ull * 1000 * 1000 * 1000;  // a hung device, not a slow one
  const VkResult r = vk().vkWaitForFences(dev->device, 1, &fence, VK_TRUE, kTimeoutNs);
  if (r == VK_TIMEOUT) return make_error("vulkan: {}: no completion after 120 s", what);
  FISH_VK_CHECK(r);
  FISH_VK_CHECK(vk().vkResetFences(dev->device, 1, &fence));
  return Status::success();
}

std::string VulkanBackend::status() const {
  std::lock_guard lock(impl_->mu);
  return impl_->status_text();
}

std::string VulkanBackend::Impl::status_text() const {
  const Impl& m = *this;
  switch (m.state) {
    case Impl::State::unopened:
      return "vulkan: registered, device not opened yet (opens on first use)";
    case Impl::State::failed:
      return "vulkan: off: " + m.error;
    case Impl::State::open:
      break;
  }
  const VulkanDevice& d = *m.dev;
  const uint32_t v = d.props.apiVersion;
  return fmt::format(
      "vulkan: {} ({}, Vulkan {}.{}.{}, {} queue family {}, subgroup {}, {}){}{}",
      d.props.deviceName, device_type_name(d.props.deviceType), VK_API_VERSION_MAJOR(v),
      VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v),
      d.queue_compute_only ? "compute-only" : "graphics+compute", d.queue_family, d.subgroup_size,
      d.has_memory_budget ? "VK_EXT_memory_budget" : "no memory budget extension",
      d.validation ? ", validation layer on" : "", d.notes.empty() ? "" : "; " + d.notes);
}

std::string VulkanBackend::describe() const {
  std::lock_guard lock(impl_->mu);
  const Impl& m = *impl_;
  if (m.state != Impl::State::open) return {};
  struct Entry {
    int count = 0;
    uint64_t bytes = 0, from_bytes = 0;
    bool converted = false;
  };
  std::map<std::string, Entry> by_type;  // "q4_1", or "q4_k->fq3" for re-quantised weights
  uint64_t total = 0;
  for (const auto& [h, w] : m.weights) {
    const bool converted = w.from != w.type;
    Entry& e = by_type[converted ? fmt::format("{}->{}", type_name(w.from), type_name(w.type))
                                 : std::string(type_name(w.type))];
    e.count += 1;
    e.bytes += w.bytes;
    e.from_bytes += w.from_bytes;
    e.converted = converted;
    total += w.bytes;
  }
  std::string s = fmt::format("vulkan {}: {:.0f} MB weights", m.dev->props.deviceName, mb(total));
  for (const auto& [name, e] : by_type) {
    s += fmt::format(", {} x {} {:.0f} MB", e.count, name, mb(e.bytes));
    if (e.converted) s += fmt::format(" (from {:.0f})", mb(e.from_bytes));
  }
  for (const LayerSpan* sp : m.spans)
    s += fmt::format("; span {} layers, KV {:.0f} MB f16", sp->n_layers(), mb(sp->kv_bytes()));
  return s;
}

BackendInfo VulkanBackend::info() {
  BackendInfo bi;
  (void)open();
  bi.status = status();
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  bi.devices = m.devices;
  if (m.state != Impl::State::open) return bi;
  bi.open = true;
  bi.device = m.dev->props.deviceName;
  bi.queue =
      fmt::format("{} family {}", m.dev->queue_compute_only ? "compute-only" : "graphics+compute",
                  m.dev->queue_family);
  bi.subgroup_size = m.dev->subgroup_size;
  bi.memory_budget_ext = m.dev->has_memory_budget;
  bi.heap_bytes = m.budget.heap_bytes;
  bi.live_free_bytes = m.live_free();
  bi.ceiling_bytes = m.budget.ceiling_bytes;
  bi.headroom_bytes = m.budget.headroom_bytes;
  bi.resident_bytes = m.own_bytes;
  return bi;
}

Result<double> VulkanBackend::device_copy_bytes_per_s(uint64_t bytes, int reps) {
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  FISH_TRY(m.open_locked(this));
  const VkBufferUsageFlags usage =
      VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  auto a = m.alloc(bytes, usage, false, true, "copy bandwidth source");
  if (!a.ok()) return a.take_error();
  auto b = m.alloc(bytes, usage, false, true, "copy bandwidth destination");
  if (!b.ok()) {
    m.free_buffer(*a, true);
    return b.take_error();
  }
  auto run = [&](int n) -> Result<double> {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    FISH_VK_CHECK(m.vk().vkBeginCommandBuffer(m.cmd, &bi));
    const VkBufferCopy region{0, 0, bytes};
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    for (int i = 0; i < n; ++i) {
      // Alternate directions; the barrier orders each copy after the previous one.
      if (i % 2 == 0)
        m.vk().vkCmdCopyBuffer(m.cmd, a->buf, b->buf, 1, &region);
      else
        m.vk().vkCmdCopyBuffer(m.cmd, b->buf, a->buf, 1, &region);
      m.vk().vkCmdPipelineBarrier(m.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                  VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0,
                                  nullptr);
    }
    const auto t0 = std::chrono::steady_clock::now();
    FISH_TRY(m.submit_and_wait("copy bandwidth"));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // A 1-copy submit first: the difference removes submit and wait latency from the timing.
  auto t1 = run(1);
  auto tn = t1.ok() ? run(reps + 1) : t1;
  m.free_buffer(*a, true);
  m.free_buffer(*b, true);
  if (!tn.ok()) return tn.take_error();
  const double dt = std::max(tn.value() - t1.value(), 1e-9);
  return 2.0 * double(bytes) * double(reps) / dt;
}

Result<double> VulkanBackend::shader_copy_bytes_per_s(uint64_t bytes, int reps) {
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  FISH_TRY(m.open_locked(this));
  if (bytes == 0 || bytes % 16 != 0 || bytes > m.dev->props.limits.maxStorageBufferRange ||
      bytes / 16 > UINT32_MAX || reps < 1)
    return make_error(
        "vulkan: shader copy of {} bytes x {}: expected a positive multiple of 16 bytes within "
        "the storage buffer range ({}) and reps >= 1",
        bytes, reps, m.dev->props.limits.maxStorageBufferRange);
  FISH_ASSIGN_OR_RETURN(VkPipeline pipe, m.pipeline("copy_u4"));
  const VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  Buffer bufs[3];  // a, b (device), host pattern / readback
  auto free_all = [&] {
    m.free_buffer(bufs[0], true);
    m.free_buffer(bufs[1], true);
    m.free_buffer(bufs[2], false);
  };
  const char* what[3] = {"shader copy source", "shader copy destination", "shader copy staging"};
  for (int i = 0; i < 3; ++i) {
    auto nb = m.alloc(bytes,
                      i < 2 ? usage
                            : VkBufferUsageFlags(VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                                 VK_BUFFER_USAGE_TRANSFER_DST_BIT),
                      i == 2, i < 2, what[i]);
    if (!nb.ok()) {
      free_all();
      return nb.take_error();
    }
    bufs[i] = std::move(nb).value();
  }
  // A pattern no stuck, skipped or shifted vector reproduces: a hash of the word index.
  const uint64_t n_words = bytes / 4;
  auto pattern = [](uint64_t i) { return uint32_t(i * 2654435761u) ^ 0x5bd1e995u; };
  auto* host = static_cast<uint32_t*>(bufs[2].mapped);
  for (uint64_t i = 0; i < n_words; ++i) host[i] = pattern(i);

  auto body = [&]() -> Result<double> {
    const VkBufferCopy whole{0, 0, bytes};
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    FISH_VK_CHECK(m.vk().vkBeginCommandBuffer(m.cmd, &bi));
    m.vk().vkCmdCopyBuffer(m.cmd, bufs[2].buf, bufs[0].buf, 1, &whole);
    FISH_TRY(m.submit_and_wait("shader copy upload"));
    // Set 0: a -> b, set 1: b -> a (X bound to the source too: every binding is valid).
    FISH_VK_CHECK(m.vk().vkResetDescriptorPool(m.dev->device, m.desc_pool, 0));
    VkDescriptorSet sets[2];
    for (int s = 0; s < 2; ++s) {
      VkDescriptorSetAllocateInfo dai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      dai.descriptorPool = m.desc_pool;
      dai.descriptorSetCount = 1;
      dai.pSetLayouts = &m.set_layout;
      FISH_VK_CHECK(m.vk().vkAllocateDescriptorSets(m.dev->device, &dai, &sets[s]));
      const VkBuffer src = bufs[s].buf, dst = bufs[1 - s].buf;
      VkDescriptorBufferInfo infos[3] = {{src, 0, bytes}, {src, 0, bytes}, {dst, 0, bytes}};
      VkWriteDescriptorSet wr[3];
      for (uint32_t b = 0; b < 3; ++b) {
        wr[b] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        wr[b].dstSet = sets[s];
        wr[b].dstBinding = b;
        wr[b].descriptorCount = 1;
        wr[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        wr[b].pBufferInfo = &infos[b];
      }
      m.vk().vkUpdateDescriptorSets(m.dev->device, 3, wr, 0, nullptr);
    }
    MatmulPush pc{};
    pc.n_in = uint32_t(bytes / 16);
    const uint64_t per_group = uint64_t(FISH_COPY_WG) * 4;  // ~4 vectors per thread
    const uint32_t groups = uint32_t(std::clamp<uint64_t>(
        (pc.n_in + per_group - 1) / per_group, 1, m.dev->props.limits.maxComputeWorkGroupCount[0]));
    auto run = [&](int n) -> Result<double> {
      FISH_VK_CHECK(m.vk().vkBeginCommandBuffer(m.cmd, &bi));
      VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
      m.vk().vkCmdPipelineBarrier(
          m.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
      m.vk().vkCmdBindPipeline(m.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
      m.vk().vkCmdPushConstants(m.cmd, m.pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc,
                                &pc);
      for (int i = 0; i < n; ++i) {
        // Alternate directions; the barrier orders each copy after the previous one.
        m.vk().vkCmdBindDescriptorSets(m.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, m.pipe_layout, 0, 1,
                                       &sets[i % 2], 0, nullptr);
        m.vk().vkCmdDispatch(m.cmd, groups, 1, 1);
        m.vk().vkCmdPipelineBarrier(m.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0,
                                    nullptr);
      }
      const auto t0 = std::chrono::steady_clock::now();
      FISH_TRY(m.submit_and_wait("shader copy bandwidth"));
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    // A 1-copy submit first: the difference removes submit and wait latency from the timing.
    FISH_ASSIGN_OR_RETURN(const double t1, run(1));
    FISH_ASSIGN_OR_RETURN(const double tn, run(reps + 1));
    // Both buffers now hold the pattern; b was last written by a shader copy (a -> b first).
    std::memset(host, 0, bytes);
    FISH_VK_CHECK(m.vk().vkBeginCommandBuffer(m.cmd, &bi));
    VkMemoryBarrier to_copy{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    to_copy.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    to_copy.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
    m.vk().vkCmdPipelineBarrier(m.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &to_copy, 0, nullptr, 0,
                                nullptr);
    m.vk().vkCmdCopyBuffer(m.cmd, bufs[1].buf, bufs[2].buf, 1, &whole);
    VkMemoryBarrier to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    to_host.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    m.vk().vkCmdPipelineBarrier(m.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                                0, 1, &to_host, 0, nullptr, 0, nullptr);
    FISH_TRY(m.submit_and_wait("shader copy readback"));
    for (uint64_t i = 0; i < n_words; ++i)
      if (host[i] != pattern(i))
        return make_error(
            "vulkan: copy_u4: byte {} of {} differs after the copies ({:#x}, "
            "expected {:#x})",
            4 * i, bytes, host[i], pattern(i));
    return 2.0 * double(bytes) * double(reps) / std::max(tn - t1, 1e-9);
  };
  Result<double> r = body();
  free_all();
  return r;
}

Status VulkanBackend::set_run_budget(std::optional<uint64_t> bytes) {
  std::lock_guard lock(impl_->mu);
  FISH_TRY(impl_->open_locked(this));
  impl_->budget.set_run_ceiling(bytes);
  return Status::success();
}

GgmlType VulkanBackend::Impl::device_type(const MatrixView& w) const {
  const int mode = requant_mode();
  if (mode == 0) return w.type;
  const std::optional<GgmlType> to = requant_target(mode, w.type);
  if (!to || w.n_in <= 0 || w.n_in % type_info(*to).block_elems != 0 || !kernel_type(*to))
    return w.type;
  return *to;
}

Status VulkanBackend::set_run_requant(std::optional<int> mode) {
  if (mode && (*mode < 0 || *mode > kRequantModeMax))
    return make_error(
        "vulkan: gpu_requant {} is not one of 0..{} (0 off, 1 every quantised weight -> fq3, 2 "
        "q6_k -> q4_k, 3 q4_k -> fq3 and q6_k -> q4_k)",
        *mode, kRequantModeMax);
  std::lock_guard lock(impl_->mu);
  impl_->run_requant = mode;
  return Status::success();
}

void VulkanBackend::set_requant_threads(int n_threads) {
  std::lock_guard lock(impl_->mu);
  impl_->requant_threads = std::max(0, n_threads);
}

int VulkanBackend::requant_mode() const {
  std::lock_guard lock(impl_->mu);
  return impl_->requant_mode();
}

GgmlType VulkanBackend::device_type(const MatrixView& w) const {
  std::lock_guard lock(impl_->mu);
  return impl_->device_type(w);
}

bool VulkanBackend::supports(GgmlType t) {
  return open().ok() && kernel_type(t);
}

uint64_t VulkanBackend::memory_free() {
  std::lock_guard lock(impl_->mu);
  if (!impl_->open_locked(this).ok()) return 0;
  return impl_->allocatable();
}

uint64_t VulkanBackend::bytes_resident() const {
  return impl_->own_bytes;
}

Status VulkanBackend::Impl::upload_part(const MatrixView& w, const Weight& wt, Part& part,
                                        Buffer& staging) {
  const size_t src_row = row_bytes(w.type, w.n_in);
  const size_t elem = w.type == GgmlType::f32 ? 4 : 2;  // only f32/f16 rows are repacked
  const uint32_t rows_per_chunk = uint32_t(staging.bytes / wt.row_bytes);
  for (uint32_t r = 0; r < part.n_rows; r += rows_per_chunk) {
    const uint32_t n = std::min(rows_per_chunk, part.n_rows - r);
    const uint8_t* src = static_cast<const uint8_t*>(w.data) + size_t(part.row0 + r) * src_row;
    auto* dst = static_cast<uint8_t*>(staging.mapped);
    if (wt.type != w.type) {  // FISH_GPU_REQUANT: quantised rows, n_in_pad == n_in
      const int threads = requant_threads > 0 ? requant_threads : default_thread_count();
      if (!requant_pool || requant_pool->size() != threads)
        requant_pool = std::make_unique<ThreadPool>(threads);
      requantize_rows(w.type, src, wt.type, dst, n, w.n_in, *requant_pool);
    } else if (wt.n_in_pad == wt.n_in) {
      std::memcpy(dst, src, size_t(n) * src_row);
    } else {
      for (uint32_t i = 0; i < n; ++i) {
        std::memcpy(dst + size_t(i) * wt.row_bytes, src + size_t(i) * src_row, src_row);
        std::memset(dst + size_t(i) * wt.row_bytes + src_row, 0,
                    size_t(wt.n_in_pad - wt.n_in) * elem);
      }
    }
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    FISH_VK_CHECK(vk().vkBeginCommandBuffer(cmd, &bi));
    VkBufferCopy region{0, uint64_t(r) * wt.row_bytes, uint64_t(n) * wt.row_bytes};
    vk().vkCmdCopyBuffer(cmd, staging.buf, part.buf.buf, 1, &region);
    FISH_TRY(submit_and_wait(w.name));
  }
  return Status::success();
}

Result<WeightHandle> VulkanBackend::upload(const MatrixView& w) {
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  FISH_TRY(m.open_locked(this));
  const GgmlType dev_type = m.device_type(w);
  if (!kernel_type(dev_type))
    return make_error("vulkan: {}: type {} has no Vulkan kernel", w.name, type_name(dev_type));
  const TypeInfo& ti = type_info(w.type);
  if (w.n_in <= 0 || w.n_out <= 0 || w.n_in % ti.block_elems != 0 || !w.data)
    return make_error(
        "vulkan: {}: bad shape {} x {} for {} (n_in must be a positive multiple of {})", w.name,
        w.n_out, w.n_in, ti.name, ti.block_elems);
  if (w.n_bytes != row_bytes(w.type, w.n_in) * size_t(w.n_out))
    return make_error("vulkan: {}: {} bytes, expected {} for {} x {} {}", w.name, w.n_bytes,
                      row_bytes(w.type, w.n_in) * size_t(w.n_out), w.n_out, w.n_in, ti.name);
  Weight wt;
  wt.name = w.name;
  wt.type = dev_type;
  wt.from = w.type;
  wt.from_bytes = w.n_bytes;
  wt.n_in = uint32_t(w.n_in);
  wt.n_in_pad =
      uint32_t(ti.is_quantized() ? w.n_in : int64_t(align_up(uint64_t(w.n_in), FISH_K_ALIGN)));
  assert(wt.n_in_pad % FISH_K_ALIGN == 0);  // quantised blocks are 32 or 256 values
  const uint64_t dev_row = row_bytes(wt.type, wt.n_in_pad);
  uint64_t max_binding =
      std::min<uint64_t>(m.dev->props.limits.maxStorageBufferRange, uint64_t(UINT32_MAX)) -
      kBufferPad;
  if (m.opt->max_part_bytes) max_binding = std::min(max_binding, m.opt->max_part_bytes);
  if (dev_row > max_binding || w.n_out > int64_t(UINT32_MAX) / 2)
    return make_error("vulkan: {}: a row of {} bytes exceeds the device's storage buffer range",
                      w.name, dev_row);
  wt.row_bytes = uint32_t(dev_row);
  wt.n_out = uint32_t(w.n_out);
  const uint32_t rows_per_part = uint32_t(std::min<uint64_t>(max_binding / dev_row, wt.n_out));

  auto staging =
      m.alloc(std::min<uint64_t>(kStagingBytes,
                                 std::max<uint64_t>(dev_row, uint64_t(rows_per_part) * dev_row)),
              VK_BUFFER_USAGE_TRANSFER_SRC_BIT, true, false, w.name + " staging");
  if (!staging.ok()) return staging.take_error();
  if (staging->bytes < dev_row) {
    m.free_buffer(*staging, false);
    return make_error("vulkan: {}: a row of {} bytes exceeds the staging buffer", w.name, dev_row);
  }
  Status s;
  for (uint32_t r0 = 0; r0 < wt.n_out && s.ok(); r0 += rows_per_part) {
    Part p;
    p.row0 = r0;
    p.n_rows = std::min(rows_per_part, wt.n_out - r0);
    auto buf = m.alloc(uint64_t(p.n_rows) * dev_row + kBufferPad,
                       VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, false,
                       true, w.name);
    if (!buf.ok()) {
      s = buf.take_error();
      break;
    }
    p.buf = std::move(buf).value();
    wt.bytes += p.buf.alloc_bytes;
    wt.parts.push_back(p);
    s = m.upload_part(w, wt, wt.parts.back(), *staging);
  }
  m.free_buffer(*staging, false);
  if (!s.ok()) {
    for (Part& p : wt.parts) m.free_buffer(p.buf, true);
    if (m.weights.empty()) {
      m.free_scratch();
    }
    return s.take_error();
  }
  const WeightHandle h = m.next_handle++;
  m.weights.emplace(h, std::move(wt));
  return h;
}

void VulkanBackend::release(WeightHandle h) {
  if (h == 0) return;
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  auto it = m.weights.find(h);
  assert(it != m.weights.end() && "release: not a live handle of this backend");
  if (it == m.weights.end()) return;
  m.vk().vkDeviceWaitIdle(m.dev->device);
  for (Part& p : it->second.parts) m.free_buffer(p.buf, true);
  m.weights.erase(it);
  if (m.weights.empty()) {  // scratch goes with the last weight: resident bytes back to zero
    m.free_scratch();
  }
}

Status VulkanBackend::matmul(WeightHandle w, const float* x, int64_t n_tok, float* y) {
  const MatmulOp op{w, y};
  return matmul_group({&op, 1}, x, n_tok);
}

Status VulkanBackend::matmul_group(std::span<const MatmulOp> ops, const float* x, int64_t n_tok) {
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  if (m.state != Impl::State::open)
    return make_error("vulkan: matmul on a backend that is not open");
  Status s = m.run(ops, x, n_tok);
  if (!s.ok() && s.error().message.find("VK_ERROR_DEVICE_LOST") != std::string::npos)
    m.fail(this, s.error().message);
  return s;
}

Status VulkanBackend::Impl::run(std::span<const MatmulOp> ops, const float* x, int64_t n_tok) {
  assert(n_tok >= 1 && !ops.empty());
  std::vector<const Weight*> ws;
  for (const MatmulOp& op : ops) {
    auto it = weights.find(op.w);
    assert(it != weights.end() && "matmul: not a live handle of this backend");
    if (it == weights.end()) return make_error("vulkan: matmul: unknown weight handle {}", op.w);
    ws.push_back(&it->second);
  }
  const uint32_t n_in = ws[0]->n_in, x_stride = ws[0]->n_in_pad;
  for (const Weight* w : ws) {
    assert(w->n_in == n_in);
    if (w->n_in != n_in)
      return make_error("vulkan: matmul_group: {} has n_in {}, expected {}", w->name, w->n_in,
                        n_in);
  }
  // Inputs: n_tok rows of x_stride floats (zero padding for f32/f16 rows).
  const uint64_t x_bytes = uint64_t(n_tok) * x_stride * 4 + kBufferPad;
  FISH_TRY(ensure_scratch(x_host, x_bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, true, "matmul input"));
  FISH_TRY(ensure_scratch(x_dev, x_bytes,
                          VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                          false, "matmul input"));
  auto* xd = static_cast<float*>(x_host.mapped);
  if (x_stride == n_in) {
    std::memcpy(xd, x, size_t(n_tok) * n_in * 4);
  } else {
    for (int64_t t = 0; t < n_tok; ++t) {
      std::memcpy(xd + t * x_stride, x + t * n_in, size_t(n_in) * 4);
      std::memset(xd + t * x_stride + n_in, 0, size_t(x_stride - n_in) * 4);
    }
  }
  // Outputs: one aligned region per op.
  const uint64_t align = std::max<uint64_t>(16, dev->props.limits.minStorageBufferOffsetAlignment);
  std::vector<uint64_t> y_off(ops.size());
  uint64_t y_bytes = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    y_off[i] = y_bytes;
    y_bytes = align_up(y_bytes + uint64_t(n_tok) * ws[i]->n_out * 4, align);
  }
  FISH_TRY(
      ensure_scratch(y_host, y_bytes, VK_BUFFER_USAGE_TRANSFER_DST_BIT, true, "matmul output"));
  FISH_TRY(ensure_scratch(y_dev, y_bytes,
                          VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                          false, "matmul output"));

  const bool vec = n_tok <= FISH_MATVEC_MAX_TOK;
  FISH_VK_CHECK(vk().vkResetDescriptorPool(dev->device, desc_pool, 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  FISH_VK_CHECK(vk().vkBeginCommandBuffer(cmd, &bi));
  const VkBufferCopy x_copy{0, 0, x_bytes};
  vk().vkCmdCopyBuffer(cmd, x_host.buf, x_dev.buf, 1, &x_copy);
  VkMemoryBarrier to_compute{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  to_compute.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  to_compute.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
  vk().vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &to_compute, 0, nullptr, 0,
                            nullptr);
  uint32_t n_sets = 0;
  const uint32_t max_groups_x = dev->props.limits.maxComputeWorkGroupCount[0];
  for (size_t i = 0; i < ops.size(); ++i) {
    const Weight& w = *ws[i];
    FISH_ASSIGN_OR_RETURN(
        VkPipeline p,
        pipeline(fmt::format("{}_{}", vec ? (opt->matvec1 ? "matvec1" : "matvec") : "matmul",
                             type_name(w.type))));
    vk().vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    for (const Part& part : w.parts) {
      if (++n_sets > kMaxSetsPerSubmit)
        return make_error("vulkan: matmul_group: more than {} weight parts", kMaxSetsPerSubmit);
      VkDescriptorSetAllocateInfo dai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      dai.descriptorPool = desc_pool;
      dai.descriptorSetCount = 1;
      dai.pSetLayouts = &set_layout;
      VkDescriptorSet set;
      FISH_VK_CHECK(vk().vkAllocateDescriptorSets(dev->device, &dai, &set));
      VkDescriptorBufferInfo bufs[3] = {
          {part.buf.buf, 0, VK_WHOLE_SIZE},
          {x_dev.buf, 0, VK_WHOLE_SIZE},
          {y_dev.buf, y_off[i], uint64_t(n_tok) * w.n_out * 4},
      };
      VkWriteDescriptorSet wr[3];
      for (uint32_t b = 0; b < 3; ++b) {
        wr[b] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        wr[b].dstSet = set;
        wr[b].dstBinding = b;
        wr[b].descriptorCount = 1;
        wr[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        wr[b].pBufferInfo = &bufs[b];
      }
      vk().vkUpdateDescriptorSets(dev->device, 3, wr, 0, nullptr);
      vk().vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe_layout, 0, 1, &set, 0,
                                   nullptr);
      MatmulPush pc{};
      pc.n_in = w.n_in_pad;
      pc.n_out = part.n_rows;
      pc.n_tok = uint32_t(n_tok);
      pc.row_bytes = w.row_bytes;
      pc.x_stride = x_stride;
      pc.y_stride = w.n_out;
      pc.y_offset = part.row0;
      uint32_t gx, gy;
      if (vec) {
        pc.n_groups = (part.n_rows + FISH_MATVEC_ROWS - 1) / FISH_MATVEC_ROWS;
        pc.groups_x = std::min(pc.n_groups, max_groups_x);
        gx = pc.groups_x;
        gy = (pc.n_groups + gx - 1) / gx;
      } else {
        gx = (part.n_rows + FISH_TILE_ROWS - 1) / FISH_TILE_ROWS;
        gy = uint32_t((n_tok + FISH_TILE_TOK - 1) / FISH_TILE_TOK);
        pc.groups_x = gx;
        pc.n_groups = gx * gy;
      }
      vk().vkCmdPushConstants(cmd, pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
      vk().vkCmdDispatch(cmd, gx, gy, 1);
    }
  }
  // y back to host-visible memory, then visible to the host read after the fence.
  VkMemoryBarrier to_copy{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  to_copy.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  to_copy.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
  vk().vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                            VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &to_copy, 0, nullptr, 0, nullptr);
  const VkBufferCopy y_copy{0, 0, y_bytes};
  vk().vkCmdCopyBuffer(cmd, y_dev.buf, y_host.buf, 1, &y_copy);
  VkMemoryBarrier to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  to_host.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vk().vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                            &to_host, 0, nullptr, 0, nullptr);
  FISH_TRY(submit_and_wait("matmul"));
  const auto* yd = static_cast<const uint8_t*>(y_host.mapped);
  for (size_t i = 0; i < ops.size(); ++i)
    std::memcpy(ops[i].y, yd + y_off[i], size_t(n_tok) * ws[i]->n_out * 4);
  return Status::success();
}

// ---- layer spans (the span itself is vulkan_span.cpp) ----------------------------------------

Result<std::unique_ptr<LayerSpan>> VulkanBackend::span_create(const SpanDesc& desc) {
  FISH_TRY(open());
  return create_vulkan_span(span_host(), desc);
}

Status VulkanBackend::run_span_op(const std::string& name, const SpanPush& pc, uint32_t gx,
                                  uint32_t gy, std::vector<float>& arena,
                                  const std::vector<float>& params, std::vector<uint32_t>& kv) {
  FISH_TRY(open());
  return vk::run_span_op(span_host(), name, pc, gx, gy, arena, params, kv);
}

Result<double> VulkanBackend::run_span_ops(std::span<const SpanDispatch> dispatches, int reps,
                                           std::vector<float>& arena,
                                           const std::vector<float>& params,
                                           std::vector<uint32_t>& kv) {
  FISH_TRY(open());
  return vk::run_span_ops(span_host(), dispatches, reps, arena, params, kv);
}

SpanHost VulkanBackend::span_host() {
  Impl& m = *impl_;
  SpanHost h;
  h.dev = m.dev.get();
  h.mu = &m.mu;
  h.alloc = [&m](uint64_t bytes, VkBufferUsageFlags usage, bool host,
                 std::string_view what) -> Result<SpanBuffer> {
    FISH_ASSIGN_OR_RETURN(Buffer b, m.alloc(bytes, usage, host, true, what));
    return SpanBuffer{b.buf, b.mem, b.bytes, b.alloc_bytes, b.mapped};
  };
  h.free = [&m](SpanBuffer& sb) {
    Buffer b{sb.buf, sb.mem, sb.bytes, sb.alloc_bytes, sb.mapped};
    m.free_buffer(b, true);
    sb = SpanBuffer{};
  };
  // FISH_VK_MATVEC=1 (the generic decode kernels, for A/B runs) applies to spans too.
  h.matmul_pipeline = [&m](const std::string& name) {
    const bool generic = m.opt.ok() && m.opt->matvec1 && name.rfind("matvec_", 0) == 0;
    return m.pipeline(generic ? "matvec1_" + name.substr(7) : name);
  };
  h.matmul_set_layout = m.set_layout;
  h.matmul_layout = m.pipe_layout;
  h.weight = [&m](WeightHandle wh) -> Result<SpanWeight> {
    auto it = m.weights.find(wh);
    if (it == m.weights.end()) return make_error("span: unknown weight handle {}", wh);
    const Weight& w = it->second;
    SpanWeight sw{w.name, w.type, w.n_in, w.n_in_pad, w.n_out, w.row_bytes, {}};
    for (const Part& p : w.parts) sw.parts.push_back({p.buf.buf, p.row0, p.n_rows});
    return sw;
  };
  h.is_open = [&m] { return m.state == Impl::State::open; };
  h.failed = [this](const std::string& why) { impl_->fail(this, why); };
  h.registry = [&m](const LayerSpan* sp, bool live) {
    if (live)
      m.spans.push_back(sp);
    else
      m.spans.erase(std::remove(m.spans.begin(), m.spans.end(), sp), m.spans.end());
  };
  const auto prof = env_word("FISH_GPU_PROFILE");  // checked by VulkanOptions::from_env
  h.profile = prof.ok() && prof.value() == "2";
  if (m.opt.ok()) h.attn_split = m.opt->attn_split;
  return h;
}

// ---- start-up registration --------------------------------------------------------------------

namespace {
// Registers the process's backend before main(); touches no driver (seed: a Vulkan instance
// created under a loader lock can deadlock). Leaked on purpose: no teardown at exit.
VulkanBackend* register_at_startup() {
  if (gpu_disabled_by(std::getenv("FISH_GPU"))) return nullptr;
  auto* b = new VulkanBackend(VulkanOptions::from_env());
  set_gpu_backend(b);
  return b;
}
VulkanBackend* const g_startup_backend = register_at_startup();
}  // namespace

VulkanBackend* startup_backend() {
  return g_startup_backend;
}

}  // namespace fish::vk

namespace fish::gpu {

std::string vulkan_status() {
  if (!vk::startup_backend()) {
    const char* v = std::getenv("FISH_GPU");
    return fmt::format("vulkan: off: disabled by FISH_GPU={}", v ? v : "");
  }
  return vk::startup_backend()->status();
}

std::string vulkan_describe() {
  if (!vk::startup_backend()) return vulkan_status();
  const std::string d = vk::startup_backend()->describe();
  return d.empty() ? vulkan_status() : d;
}

}  // namespace fish::gpu
