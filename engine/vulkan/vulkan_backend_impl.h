// VulkanBackend's state (vulkan_backend.h), shared by vulkan_backend.cpp (open, upload, matmul
// dispatch, spans) and vulkan_backend_probes.cpp (the timing probes the benchmarks call).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/vulkan/device_weight.h"
#include "engine/vulkan/vk_context.h"
#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_device.h"
#include "fish_vk_layout.h"
#include "kernels/thread_pool.h"

namespace fish::vk {

inline constexpr uint64_t kMiB = uint64_t(1) << 20;
inline constexpr uint64_t kBufferPad = 16;  // funnel reads touch the word after a row's end
inline constexpr uint64_t kStagingBytes = 64 * kMiB;  // upload chunk (host-visible, transient)
inline constexpr uint32_t kMaxSetsPerSubmit = 256;    // descriptor sets per matmul_group submit

struct VulkanBackend::Impl {
  Result<VulkanOptions> opt;
  mutable std::mutex mu;  // the device mutex (VkContext::mutex)
  enum class State { unopened, open, failed } state = State::unopened;
  std::string error;  // why it failed (open, or the device was lost)
  std::vector<DeviceEntry> devices;
  std::unique_ptr<VkContext> ctx;

  std::map<WeightHandle, DeviceWeight> weights;
  std::unique_ptr<ThreadPool> requant_pool;  // first re-quantising upload creates it
  int requant_mode(const UploadOptions& u) const {
    return u.requant ? *u.requant : opt.ok() ? opt->requant : 0;
  }
  GgmlType device_type(const MatrixView& w, const UploadOptions& u) const;
  WeightHandle next_handle = 1;
  // Matmul scratch: x and y staged in host-visible memory and copied to/from device-local
  // buffers inside the submit, so kernels never read or write across the bus (every workgroup
  // reads all of x).
  Buffer x_host, x_dev, y_host, y_dev;
  Buffer xq_dev;        // x as q8_1 (quant_q8_1) for the matvec_idot_ kernels
  Buffer xh_dev;        // x as f16 rows (to_f16) for the matmul_cm2_ kernels
  Buffer wh_dev;        // weights as f16 rows (dequant_f16_, FISH_VK_PREFILL_F16)
  Commands cmds;        // matmul and upload submits
  DescriptorPool sets;  // matmul_group's sets, reset per submit
  void free_scratch() {
    for (Buffer* b : {&x_host, &x_dev, &y_host, &y_dev, &xq_dev, &xh_dev, &wh_dev}) ctx->free(*b);
  }
  MatvecKernel decode_kernel(GgmlType t) const {
    return matvec_kernel(t, opt->matvec, ctx->features());
  }
  bool any_idot(std::span<const DeviceWeight* const> ws, int64_t n_tok) const {
    if (n_tok > FISH_MATVEC_MAX_TOK) return false;
    return std::any_of(ws.begin(), ws.end(), [&](const DeviceWeight* w) {
      return decode_kernel(w->type) == MatvecKernel::idot;
    });
  }

  explicit Impl(Result<VulkanOptions> o) : opt(std::move(o)) {}

  Status open_locked(VulkanBackend* self);
  void destroy_all();
  // Grows scratch buffer b to `bytes` under the run ceiling of the weights it serves.
  Status ensure_scratch(Buffer& b, uint64_t bytes, VkBufferUsageFlags usage, Memory where,
                        std::string_view what, std::optional<uint64_t> run_ceiling);
  Status upload_part(const MatrixView& w, const DeviceWeight& wt, DeviceWeight::Part& part,
                     Buffer& staging, int n_threads);
  // stamps: a 2-query timestamp pool written around the dispatches (null: none).
  Status run(std::span<const MatmulOp> ops, const float* x, int64_t n_tok,
             VkQueryPool stamps = VK_NULL_HANDLE);
  // kernel: 0 the rule (coopmat where it applies), 't' the f32 tiled kernel, 'l'/'m'/'s' a tile.
  // quantize: write x's q8_1 copy first where a decode step runs the integer-dot kernel, and its
  // f16 copy where a coopmat2 tile runs (false: an earlier record did and x has not changed).
  Status record_matmuls(std::span<const DeviceWeight* const> ws, std::span<const uint64_t> y_off,
                        int64_t n_tok, char kernel = 0, bool quantize = true);
  void fail(VulkanBackend* self, std::string why);
  std::string status_text() const;
};

// Seconds between timestamps 0 and 1 of q (waits for them); `otherwise` when q is null or
// unreadable.
double stamped_s(const VkContext& ctx, VkQueryPool q, double otherwise);

}  // namespace fish::vk
