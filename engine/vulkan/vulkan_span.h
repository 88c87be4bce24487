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
#include <string>
#include <string_view>
#include <vector>

#include "engine/layer_span.h"
#include "engine/vulkan/vulkan_device.h"
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
};

// Errors: as ComputeBackend::span_create.
Result<std::unique_ptr<LayerSpan>> create_vulkan_span(SpanHost host, const SpanDesc& desc);

struct SpanPush;
// One dispatch (gx x gy workgroups) of the span op `name` ("span_rmsnorm", ...) over copies of
// ARENA, PARAMS and KV in host-visible buffers; arena and kv are read back. For the op tests
// (each shader against its CPU reference). Errors: unknown op, budget, a device error.
Status run_span_op(SpanHost host, const std::string& name, const SpanPush& pc, uint32_t gx,
                   uint32_t gy, std::vector<float>& arena, const std::vector<float>& params,
                   std::vector<uint32_t>& kv);

}  // namespace fish::vk
