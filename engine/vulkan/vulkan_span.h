// The Vulkan LayerSpan (engine/layer_span.h): a span's device buffers, descriptor sets built once
// at creation, and the one command buffer per forward (seed 000 "Span execution").
//
// Device memory (all counted against the backend's budget): ARENA (x for max_tok tokens + the
// per-chunk work rows: xn, q|k|v, att, tmp, gate|up for FISH_SPAN_CHUNK tokens), PARAMS (norm
// weights, biases, RoPE cos/sin for [0, n_ctx)), KV (per layer K then V, kv_capacity positions
// of kv_dim f16), and a host-visible x staging buffer. The span reaches the backend's device,
// allocator, matmul pipelines and weights through SpanHost, so vulkan_backend.cpp only adds the
// glue (VulkanBackend::span_create).
#pragma once

#include <volk.h>

#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/layer_span.h"
#include "engine/vulkan/vulkan_device.h"
#include "fish_vk_span.h"
#include "quant/types.h"

namespace fish::vk {

struct SpanBuffer {
  VkBuffer buf = VK_NULL_HANDLE;
  VkDeviceMemory mem = VK_NULL_HANDLE;
  uint64_t bytes = 0;        // usable size
  uint64_t alloc_bytes = 0;  // counted against the budget
  void* mapped = nullptr;    // host-visible buffers only
};

// A weight as the matmul kernels see it: rows split into parts of whole rows (one binding each).
struct SpanWeight {
  struct Part {
    VkBuffer buf = VK_NULL_HANDLE;
    uint32_t row0 = 0, n_rows = 0;
  };
  std::string name;
  GgmlType type = GgmlType::f32;
  uint32_t n_in = 0, n_in_pad = 0, n_out = 0, row_bytes = 0;
  std::vector<Part> parts;
};

// What the backend lends a span. Every callback is called with *mu held (the span takes it).
struct SpanHost {
  VulkanDevice* dev = nullptr;
  std::mutex* mu = nullptr;
  std::function<Result<SpanBuffer>(uint64_t bytes, VkBufferUsageFlags usage, bool host,
                                   std::string_view what)>
      alloc;                              // counted against the budget
  std::function<void(SpanBuffer&)> free;  // of a buffer from alloc
  std::function<Result<VkPipeline>(const std::string& name)> matmul_pipeline;  // "matvec_q4_k"
  VkDescriptorSetLayout matmul_set_layout = VK_NULL_HANDLE;  // W, X, Y (fish_vk_layout.h)
  VkPipelineLayout matmul_layout = VK_NULL_HANDLE;           // + MatmulPush
  std::function<Result<SpanWeight>(WeightHandle)> weight;
  std::function<bool()> is_open;                              // false after a lost device
  std::function<void(const std::string& why)> failed;         // a device error in a forward
  std::function<void(const LayerSpan*, bool live)> registry;  // for describe()
  bool profile = false;  // FISH_GPU_PROFILE=2: timestamp queries around each stage
  int attn_split = -1;   // FISH_VK_ATTN_SPLIT: -1 auto (attention_splits), 0 off, N forced
};

// KV splits of one attention dispatch (n_tok query tokens x n_head heads, the longest query's
// position range len_max keys) for split-K attention; 0 selects the one-pass kernel.
// Auto (forced < 0): 0 when n_head x n_tok >= FISH_SPAN_ATTN_TARGET_WG (prefill chunks fill the
// grid already), else S = min(max(ceil(TARGET / (n_head n_tok)), ceil(len_max / kAttnSplitKeys)),
// len_max / FISH_SPAN_ATTN_TILE (a split gets at least one full key tile),
// FISH_SPAN_ATTN_MAX_SPLIT, the scratch's share parts_cap / (n_head n_tok)), and 0 unless S >= 2.
// Forced N >= 1: min(N, MAX_SPLIT, that share) even where splits come out empty (testing, A/B
// runs); 0 when no split fits.
inline constexpr uint32_t kAttnSplitKeys = 256;  // auto rule: keys one split walks, at most
uint32_t attention_splits(int forced, uint32_t n_head, uint32_t n_tok, uint32_t len_max,
                          uint32_t parts_cap);

// Errors: as ComputeBackend::span_create.
Result<std::unique_ptr<LayerSpan>> create_vulkan_span(SpanHost host, const SpanDesc& desc);

// One dispatch of a span op: module name ("span_rmsnorm", ...), push constants, grid.
struct SpanDispatch {
  std::string name;
  SpanPush pc{};
  uint32_t gx = 1, gy = 1, gz = 1;
};

// The dispatches in order with a compute barrier between consecutive ones, the whole list reps
// times, over device-local copies of ARENA, PARAMS and KV (uploaded before, arena and kv read
// back after). Returns the device seconds of the dispatches (timestamps; the host's time of the
// submit where the queue has none). For the op tests (each shader against its CPU reference)
// and the attention benchmark. Errors: unknown op, reps < 1, budget, a device error.
Result<double> run_span_ops(SpanHost host, std::span<const SpanDispatch> dispatches, int reps,
                            std::vector<float>& arena, const std::vector<float>& params,
                            std::vector<uint32_t>& kv);
// One dispatch (gx x gy workgroups), as run_span_ops.
Status run_span_op(SpanHost host, const std::string& name, const SpanPush& pc, uint32_t gx,
                   uint32_t gy, std::vector<float>& arena, const std::vector<float>& params,
                   std::vector<uint32_t>& kv);

}  // namespace fish::vk
