// VulkanBackend's timing probes (vulkan_backend.h): the copy bandwidths, a matmul group and one
// matmul timed on the device, and the cooperative-matrix peak. They back the benchmarks
// (bench/vulkan_bench.cpp) and fish run's bandwidth reference, not the engine's own paths.
#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/vulkan/copy_bandwidth.h"
#include "engine/vulkan/device_weight.h"
#include "engine/vulkan/vulkan_backend_impl.h"

namespace fish::vk {

Result<double> VulkanBackend::device_copy_bytes_per_s(uint64_t bytes, int reps) {
  std::lock_guard lock(impl_->mu);
  FISH_TRY(impl_->open_locked(this));
  return copy_engine_bytes_per_s(*impl_->ctx, bytes, reps);
}

Result<double> VulkanBackend::shader_copy_bytes_per_s(uint64_t bytes, int reps) {
  std::lock_guard lock(impl_->mu);
  FISH_TRY(impl_->open_locked(this));
  return vk::shader_copy_bytes_per_s(*impl_->ctx, bytes, reps);
}

// Seconds between timestamps 0 and 1 of q (waits for them); `otherwise` when q is null or
// unreadable.
double stamped_s(const VkContext& ctx, VkQueryPool q, double otherwise) {
  uint64_t ts[2] = {0, 0};
  if (q && ctx.vk().vkGetQueryPoolResults(ctx.handle(), q, 0, 2, sizeof ts, ts, 8,
                                          VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) ==
               VK_SUCCESS)
    return double(ts[1] - ts[0]) * ctx.features().timestamp_ns * 1e-9;
  return otherwise;
}

Result<double> VulkanBackend::matmul_group_device_s(std::span<const MatmulOp> ops, const float* x,
                                                    int64_t n_tok) {
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  if (m.state != Impl::State::open)
    return make_error("vulkan: matmul on a backend that is not open ({})", m.status_text());
  FISH_ASSIGN_OR_RETURN(VkQueryPool q, create_timestamps(*m.ctx, 2));
  Status s = m.run(ops, x, n_tok, q);
  const double dev_s = s.ok() ? stamped_s(*m.ctx, q, 0.0) : 0.0;
  if (q) m.ctx->vk().vkDestroyQueryPool(m.ctx->handle(), q, nullptr);
  FISH_TRY(s);
  return dev_s;
}

Result<double> VulkanBackend::time_matmul(std::span<const WeightHandle> ws, int64_t n_tok, int reps,
                                          char kernel) {
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  if (m.state != Impl::State::open)
    return make_error("vulkan: time_matmul on a backend that is not open ({})", m.status_text());
  if (n_tok < 1 || reps < 1 || ws.empty())
    return make_error("vulkan: time_matmul: n_tok {} and reps {} (>= 1 each), {} weights", n_tok,
                      reps, ws.size());
  std::vector<const DeviceWeight*> dw;
  for (WeightHandle wh : ws) {
    auto it = m.weights.find(wh);
    if (it == m.weights.end()) return make_error("vulkan: time_matmul: unknown weight {}", wh);
    const DeviceWeight* d = &it->second;
    if (!dw.empty() && (d->n_in_pad != dw[0]->n_in_pad || d->n_out != dw[0]->n_out))
      return make_error("vulkan: time_matmul: {} is {} x {}, {} is {} x {}", d->name, d->n_out,
                        d->n_in, dw[0]->name, dw[0]->n_out, dw[0]->n_in);
    dw.push_back(d);
  }
  const DeviceWeight* w = dw[0];
  // FISH_VK_PREFILL_F16: each rep also writes the f16 copies (a set a part) into wh_dev, sized
  // here for the largest of dw before recording, so no record_matmuls grows (frees) it while
  // earlier dispatches of this submit still bind it.
  uint64_t wh_bytes = 0;
  for (const DeviceWeight* d : dw) {
    if (!prefill_f16(*m.opt, m.ctx->features(), *d, uint32_t(n_tok), m.ctx->max_binding_bytes()) ||
        !prefill_f16_may_allocate(*m.opt, d->budget_bytes))
      continue;
    uint64_t b = 0;
    for (const DeviceWeight::Part& p : d->parts) b += f16_copy_bytes(*d, p);
    wh_bytes = std::max(wh_bytes, b);
  }
  if (wh_bytes != 0) {
    const Status s =
        m.ensure_scratch(m.wh_dev, wh_bytes + kBufferPad, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                         Memory::device, "matmul weights f16", w->budget_bytes);
    if (!s.ok() && m.opt->prefill_f16 > 0) return s.error();
  }
  // The reps and an untimed first one (which writes x's q8_1 / f16 copy); the copies' sets too.
  const uint64_t per_rep = w->parts.size() * (wh_bytes != 0 ? 2 : 1);
  if (uint64_t(reps + 1) * per_rep + 2 > kMaxSetsPerSubmit)
    return make_error("vulkan: time_matmul: {} reps x {} sets exceed {} a submit", reps + 1,
                      per_rep, kMaxSetsPerSubmit);
  const uint64_t x_bytes = uint64_t(n_tok) * w->n_in_pad * 4 + kBufferPad;
  const uint64_t y_bytes = uint64_t(n_tok) * w->n_out * 4;
  const VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
  FISH_TRY(
      m.ensure_scratch(m.x_dev, x_bytes, usage, Memory::device, "matmul input", w->budget_bytes));
  FISH_TRY(
      m.ensure_scratch(m.y_dev, y_bytes, usage, Memory::device, "matmul output", w->budget_bytes));
  if (m.any_idot(std::span(&w, 1), n_tok))
    FISH_TRY(m.ensure_scratch(m.xq_dev, q8_bytes(w->n_in_pad), VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                              Memory::device, "matmul q8_1 input", w->budget_bytes));
  FISH_ASSIGN_OR_RETURN(VkQueryPool q, create_timestamps(*m.ctx, 2));
  Status s = [&]() -> Status {
    FISH_TRY(m.sets.reset());
    FISH_TRY(m.cmds.begin());
    m.ctx->vk().vkCmdFillBuffer(m.cmds.cmd(), m.x_dev.buf, 0, x_bytes & ~uint64_t(3),
                                0x3F000000u);  // 0.5f
    m.cmds.barrier(Sync::transfer, Sync::compute);
    const uint64_t y0 = 0;
    FISH_TRY(m.record_matmuls(std::span(&w, 1), std::span(&y0, 1), n_tok, kernel));  // untimed
    m.cmds.barrier(Sync::compute, Sync::compute);
    if (q) {
      m.ctx->vk().vkCmdResetQueryPool(m.cmds.cmd(), q, 0, 2);
      m.cmds.timestamp(q, 0);
    }
    for (int r = 0; r < reps; ++r) {
      FISH_TRY(m.record_matmuls(std::span(&dw[size_t(r) % dw.size()], 1), std::span(&y0, 1), n_tok,
                                kernel, false));
      m.cmds.barrier(Sync::compute, Sync::compute);
    }
    if (q) m.cmds.timestamp(q, 1);
    return Status::success();
  }();
  const auto t0 = std::chrono::steady_clock::now();
  if (s.ok()) s = m.cmds.submit_and_wait(Work::compute, "time_matmul");
  const double host_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double dev_s = s.ok() ? stamped_s(*m.ctx, q, host_s) : host_s;
  if (q) m.ctx->vk().vkDestroyQueryPool(m.ctx->handle(), q, nullptr);
  FISH_TRY(s);
  return dev_s / reps;
}

Result<double> VulkanBackend::coopmat_peak_flops(uint32_t groups, uint32_t iters, uint32_t mode,
                                                 uint32_t n_acc) {
  if (mode > 2 || n_acc < 1 || n_acc > 16 || (mode != 1 && n_acc != 4))
    return make_error(
        "vulkan: coopmat peak mode {} with {} accumulators (0..2; 1..16, 4 unless "
        "mode 1)",
        mode, n_acc);
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  FISH_TRY(m.open_locked(this));
  const DeviceFeatures& f = m.ctx->features();
  if (!f.coopmat || m.ctx->coopmat_tiles().empty())
    return make_error("vulkan: no cooperative matrices on {} ({})",
                      m.ctx->device().props.deviceName, f.describe());
  const uint32_t sub = m.ctx->coopmat_tiles().front().subgroup, wg = 4 * sub;
  PipelineSpec spec;
  spec.module = "coopmat_peak";
  spec.bindings = {1};
  spec.constants = {wg, f.coopmat_m, f.coopmat_n, f.coopmat_k, iters, mode, n_acc};
  if (f.subgroup_size_control && f.subgroup_min != f.subgroup_max) spec.subgroup_size = sub;
  FISH_ASSIGN_OR_RETURN(const Pipeline p, m.ctx->pipeline(spec));
  Buffer out;
  FISH_ASSIGN_OR_RETURN(out,
                        m.ctx->alloc(uint64_t(groups) * 4 + 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                     Memory::device, true, "coopmat peak output"));
  FISH_ASSIGN_OR_RETURN(VkQueryPool q, create_timestamps(*m.ctx, 2));
  double dev_s = 0;
  Status s = [&]() -> Status {
    FISH_TRY(m.sets.reset());
    const BufferRange r[1] = {{out.buf, 0, VK_WHOLE_SIZE}};
    FISH_ASSIGN_OR_RETURN(const VkDescriptorSet set, m.sets.allocate(p, r));
    FISH_TRY(m.cmds.begin());
    if (q) {
      m.ctx->vk().vkCmdResetQueryPool(m.cmds.cmd(), q, 0, 2);
      m.cmds.timestamp(q, 0);
    }
    m.cmds.bind(p, set);
    m.cmds.dispatch(groups);
    if (q) m.cmds.timestamp(q, 1);
    const auto t0 = std::chrono::steady_clock::now();
    FISH_TRY(m.cmds.submit_and_wait(Work::compute, "coopmat peak"));
    dev_s = stamped_s(*m.ctx, q,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return Status::success();
  }();
  if (q) m.ctx->vk().vkDestroyQueryPool(m.ctx->handle(), q, nullptr);
  m.ctx->free(out);
  FISH_TRY(s);
  const double flops =
      double(groups) * 4.0 * double(iters) * n_acc * 2.0 * f.coopmat_m * f.coopmat_n * f.coopmat_k;
  return flops / std::max(dev_s, 1e-12);
}

}  // namespace fish::vk
