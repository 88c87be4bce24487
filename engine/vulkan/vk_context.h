// The one Vulkan device layer every GPU path of FISH runs on (the per-matmul backend, layer
// spans, span-op tests, bandwidth probes, prefill kernels): the opened device and its feature
// flags, a budgeted buffer allocator, a pipeline cache by module name, descriptor pools, a
// command recorder, and one submit-and-wait with one timeout policy.
//
// Threading: one mutex per device (mutex()); whoever records or submits holds it, and so does
// every call below except the const queries.
//
// Timeout and fault policy: submit_and_wait() returns success only when the fence signalled
// (VK_SUCCESS). A wait that times out (120 s; 16 min for a CPU implementation; VK_TIMEOUT, a
// positive VkResult that FISH_VK_CHECK lets through) means a hung device; it and every other
// submit/wait failure mark the context lost: the call returns an error naming the work, nothing is
// read back, every later submit_and_wait fails at once with the first reason, and the on_lost hook
// (the backend: unregister, status "vulkan: off: ...") runs once. FISH_VK_FAULT (vulkan_options.h)
// injects such a failure at the N-th compute submit, to test that path end to end.
//
// Memory: weights and work buffers in the first device-local memory type, staging and readback
// in host-visible coherent memory (cached where offered) mapped for their lifetime. Counted
// buffers go against VramBudget (vram_budget.h): a refusal names the buffer, the bytes asked,
// FISH's resident bytes and the limit hit.
#pragma once

#include <volk.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/vulkan/coopmat.h"
#include "engine/vulkan/vram_budget.h"
#include "engine/vulkan/vulkan_device.h"
#include "engine/vulkan/vulkan_options.h"
#include "quant/types.h"

namespace fish {
class LayerSpan;
}

namespace fish::vk {

// One buffer and its memory (one allocation per buffer).
struct Buffer {
  VkBuffer buf = VK_NULL_HANDLE;
  VkDeviceMemory mem = VK_NULL_HANDLE;
  uint64_t bytes = 0;        // usable size
  uint64_t alloc_bytes = 0;  // the allocation (what the budget counts)
  void* mapped = nullptr;    // host-visible buffers only, mapped while they live
  bool counted = false;      // against the budget
  explicit operator bool() const { return buf != VK_NULL_HANDLE; }
};

enum class Memory { device, host };  // device-local / host-visible coherent, mapped

// A binding: bytes of buf from offset (VK_WHOLE_SIZE: to the end).
struct BufferRange {
  VkBuffer buf = VK_NULL_HANDLE;
  uint64_t offset = 0;
  uint64_t bytes = VK_WHOLE_SIZE;
};

// Every FISH kernel takes storage buffers at bindings 0..n-1 of set 0 and at most
// kPushBytes of push constants (the minimum every device offers).
inline constexpr uint32_t kPushBytes = 128;

// A compute pipeline to build from an embedded SPIR-V module (vulkan_shaders.h).
struct PipelineSpec {
  std::string module;                          // "matvec_q4_k", "span_rmsnorm", ...
  std::vector<uint32_t> bindings = {1, 1, 1};  // descriptors (storage buffers) per binding
  std::vector<uint32_t> constants;             // specialisation constant i = constants[i]
  uint32_t subgroup_size = 0;  // required subgroup size (0: the device's choice); needs
                               // features().subgroup_size_control and a size in its range
};

struct Pipeline {
  VkPipeline pipe = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
};

// What a submit carries: only compute submits count towards FISH_VK_FAULT's N (uploads and KV
// copies are transfers).
enum class Work { transfer, compute };

class VkContext {
 public:
  // Opens the device (VulkanDevice::open) and picks memory types; `mu` is the device mutex
  // (the caller's, held by it during open). Errors: as VulkanDevice::open, no host-visible memory.
  static Result<std::unique_ptr<VkContext>> open(const VulkanOptions& opt, std::mutex* mu,
                                                 std::vector<DeviceEntry>* seen);
  ~VkContext();  // waits for the device (unless lost), then destroys pipelines and layouts
  VkContext(const VkContext&) = delete;
  VkContext& operator=(const VkContext&) = delete;

  std::mutex& mutex() const { return *mu_; }
  const VulkanDevice& device() const { return *dev_; }
  VkDevice handle() const { return dev_->device; }
  const VolkDeviceTable& vk() const { return dev_->vk; }
  const VkPhysicalDeviceLimits& limits() const { return dev_->props.limits; }
  const DeviceFeatures& features() const { return dev_->features; }
  const VulkanOptions& options() const { return opt_; }
  // Workgroups a f16 weight copy dispatch may take (dequant_groups' cap): the device's limit,
  // or FISH_VK_PREFILL_F16_COPY_WG's where lower.
  uint32_t copy_groups_max() const {
    const uint32_t dev = limits().maxComputeWorkGroupCount[0];
    return opt_.prefill_f16_copy_wg > 0 ? std::min(dev, opt_.prefill_f16_copy_wg) : dev;
  }

  // ---- memory ---------------------------------------------------------------------------------
  // A counted buffer is refused under budget().under(run_ceiling) (the caller's run ceiling,
  // UploadOptions::budget_bytes; nullopt: the budget at open).
  // Errors: the budget refuses (counted buffers), no memory type fits, allocation failures; each
  // names `what`.
  Result<Buffer> alloc(uint64_t bytes, VkBufferUsageFlags usage, Memory where, bool counted,
                       std::string_view what, std::optional<uint64_t> run_ceiling = std::nullopt);
  void free(Buffer& b);                              // and resets b; an empty buffer is ignored
  uint64_t own_bytes() const { return own_bytes_; }  // counted bytes held now
  uint64_t live_free() const;                        // device memory free on the live budget
  // The largest counted alloc allowed now under run_ceiling (as alloc).
  uint64_t allocatable(std::optional<uint64_t> run_ceiling = std::nullopt) const;
  const VramBudget& budget() const { return budget_; }  // the rules at open
  // Bytes a storage binding may span, and the alignment of a binding's offset.
  uint64_t max_binding_bytes() const;
  uint64_t binding_align() const;

  // ---- pipelines --------------------------------------------------------------------------------
  // Built on first use and cached for the context's life (by module, bindings, constants, size).
  // Errors: no embedded module of that name, a subgroup size the device cannot require, Vulkan.
  Result<Pipeline> pipeline(const PipelineSpec& spec);
  Result<Pipeline> pipeline(std::string_view module) {
    PipelineSpec spec;
    spec.module = std::string(module);
    return pipeline(spec);
  }

  // ---- cooperative-matrix prefill (coopmat.h) -------------------------------------------------
  // The tiles on this device's shape, largest first (empty: no cooperative matrices).
  std::span<const CoopmatTile> coopmat_tiles() const { return cm_tiles_; }
  // The tile of a matmul of n_out rows x n_tok tokens (the rule, or FISH_VK_COOPMAT_TILE); null
  // below kCoopmatMinTok tokens or without cooperative matrices: the f32 tiled kernel / matvec.
  const CoopmatTile* coopmat_tile(GgmlType type, uint32_t n_out, uint32_t n_tok) const;
  // matmul_cm_<type> (matmul_cm2_<type> for a cm2 tile) specialised for tile t (the device's
  // subgroup size required where it can). A cm2 tile whose pipeline fails is marked unavailable
  // (coopmat_tile and coopmat_tile_reachable skip it from then on) and the error returned.
  Result<Pipeline> coopmat_pipeline(GgmlType type, const CoopmatTile& t);

  // ---- submission -----------------------------------------------------------------------------
  // Submits cmd (ended by the caller) and waits for `fence` (reset here) up to the timeout; the
  // policy in the header comment. `what` names the work in errors ("span forward").
  // `meanwhile` (may be empty) runs on this thread between the submit and the wait: host work
  // that overlaps the GPU's (the span records its next forward there). It must not submit.
  Status submit_and_wait(VkCommandBuffer cmd, VkFence fence, Work work, std::string_view what,
                         const std::function<void()>& meanwhile = {});
  // The two halves of submit_and_wait, for work kept in flight across calls (a span's pipelined
  // decode: step N+1 queued before step N's fence is waited on). submit returns the fault
  // FISH_VK_FAULT injected at this submit (none normally); wait takes it back, so an injected
  // timeout still waits for the work first. Same policy and errors as submit_and_wait.
  Result<DeviceFaultKind> submit(VkCommandBuffer cmd, VkFence fence, Work work,
                                 std::string_view what);
  Status wait(VkFence fence, DeviceFaultKind injected, std::string_view what);
  bool lost() const { return !lost_reason_.empty(); }
  const std::string& lost_reason() const { return lost_reason_; }
  // Marks the context lost (idempotent: the first reason stays) and runs the on_lost hook.
  void mark_lost(std::string reason);
  void set_on_lost(std::function<void(const std::string& reason)> hook) {
    on_lost_ = std::move(hook);
  }
  uint64_t compute_submits() const { return compute_submits_; }
  // Replaces FISH_VK_FAULT's plan: the n-th compute submit from now fails as kind (tests).
  void inject_fault(DeviceFaultKind kind, uint64_t n);

  // ---- live layer spans (for describe()) ------------------------------------------------------
  void add_span(const LayerSpan* s) { spans_.push_back(s); }
  void remove_span(const LayerSpan* s);
  const std::vector<const LayerSpan*>& spans() const { return spans_; }

 private:
  VkContext(const VulkanOptions& opt, std::mutex* mu) : opt_(opt), mu_(mu) {}
  Result<VkPipelineLayout> layout(const std::vector<uint32_t>& bindings,
                                  VkDescriptorSetLayout* set_layout);

  VulkanOptions opt_;
  std::mutex* mu_;
  std::unique_ptr<VulkanDevice> dev_;
  uint32_t device_type_ = 0, host_type_ = 0, device_heap_ = 0;  // memory type / heap indices
  VramBudget budget_;
  std::atomic<uint64_t> own_bytes_{0};  // read without the mutex (bytes_resident)
  struct Layout {
    VkDescriptorSetLayout set = VK_NULL_HANDLE;
    VkPipelineLayout pipe = VK_NULL_HANDLE;
  };
  std::map<std::vector<uint32_t>, Layout> layouts_;  // by descriptors per binding
  std::map<std::string, Pipeline> pipelines_;        // by spec key
  std::string lost_reason_;
  std::function<void(const std::string&)> on_lost_;
  uint64_t compute_submits_ = 0;
  DeviceFault fault_;
  uint64_t timeout_ns_ = 120ull * 1000 * 1000 * 1000;  // a hung GPU, not a slow one (CPU: x8)
  std::vector<const LayerSpan*> spans_;
  std::vector<CoopmatTile> cm_tiles_;
};

// A descriptor pool for sets of FISH's layouts (storage buffers only).
class DescriptorPool {
 public:
  // Errors: Vulkan. max_buffers: storage-buffer descriptors over all sets.
  static Result<DescriptorPool> create(const VkContext& ctx, uint32_t max_sets,
                                       uint32_t max_buffers);
  DescriptorPool() = default;
  DescriptorPool(DescriptorPool&& o) noexcept { *this = std::move(o); }
  DescriptorPool& operator=(DescriptorPool&& o) noexcept;
  ~DescriptorPool();

  // A set of p's layout with binding i = ranges[i] (bindings of one descriptor each; a binding
  // with several descriptors takes that many consecutive ranges). Errors: the pool is full.
  Result<VkDescriptorSet> allocate(const Pipeline& p, std::span<const BufferRange> ranges);
  // Rewrites the bindings of a set of this pool (no command buffer using it may be pending).
  void write(VkDescriptorSet set, std::span<const BufferRange> ranges) const;
  Status reset();  // frees every set

 private:
  const VkContext* ctx_ = nullptr;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
};

// Where a barrier's memory comes from / goes to.
enum class Sync { transfer, compute, host };

// One command buffer, its pool and fence: record, then submit_and_wait through the context.
class Commands {
 public:
  static Result<Commands> create(VkContext& ctx);  // Errors: Vulkan
  Commands() = default;
  Commands(Commands&& o) noexcept { *this = std::move(o); }
  Commands& operator=(Commands&& o) noexcept;
  ~Commands();

  Status begin();  // resets and begins (one-time submit); ends an unsubmitted recording first
  VkCommandBuffer cmd() const { return cmd_; }
  // A global memory barrier: writes of `from` visible to reads and writes of `to`.
  void barrier(Sync from, Sync to);
  void copy(const Buffer& src, const Buffer& dst, std::span<const VkBufferCopy> regions);
  void copy(const Buffer& src, uint64_t src_off, const Buffer& dst, uint64_t dst_off,
            uint64_t bytes);
  // dst's bytes [off, off + bytes) (multiples of 4) set to the 32-bit word `word`.
  void fill(const Buffer& dst, uint64_t off, uint64_t bytes, uint32_t word);
  void bind(const Pipeline& p, VkDescriptorSet set);  // pipeline and set 0
  void bind(const Pipeline& p);  // pipeline only (set 0 stays: every layout of one shape is one)
  void push(const Pipeline& p, const void* data, uint32_t bytes);  // bytes <= kPushBytes
  void dispatch(uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
  void timestamp(VkQueryPool pool, uint32_t query);  // after all earlier work
  // Ends the command buffer and submits it (VkContext::submit_and_wait, `meanwhile` included).
  Status submit_and_wait(Work work, std::string_view what,
                         const std::function<void()>& meanwhile = {});
  // The same in two calls (VkContext::submit, VkContext::wait): submit ends and queues the
  // buffer, wait waits for its fence. One submit in flight a Commands; wait without a submit in
  // flight returns at once.
  Status submit(Work work, std::string_view what);
  Status wait(std::string_view what);
  bool in_flight() const { return in_flight_; }

 private:
  VkContext* ctx_ = nullptr;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  bool recording_ = false;  // begun and not yet ended (ended by submit_and_wait or a next begin)
  bool in_flight_ = false;  // submitted by submit() and not yet waited for
  DeviceFaultKind injected_ = DeviceFaultKind::none;  // what that submit injected
};

// A timestamp query pool of n queries; null (no error) when the queue has no timestamps.
Result<VkQueryPool> create_timestamps(const VkContext& ctx, uint32_t n);

}  // namespace fish::vk
