// run_span_ops (vulkan_span.h): span-op dispatches over device-local copies of their buffers, so
// each shader is tested against its CPU reference in isolation and a sequence (split-K attention
// + combine, over many layers) can be timed on its own.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "engine/vulkan/flash_cm.h"
#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/vulkan_span.h"
#include "fish_vk_span.h"

namespace fish::vk {
namespace {

// ARENA, PARAMS, KV on the device and their host staging copies, freed together.
struct OpBuffers {
  VkContext& ctx;
  Buffer dev[3], host[3];
  VkQueryPool queries = VK_NULL_HANDLE;
  ~OpBuffers() {
    if (queries) ctx.vk().vkDestroyQueryPool(ctx.handle(), queries, nullptr);
    for (Buffer& b : dev) ctx.free(b);
    for (Buffer& b : host) ctx.free(b);
  }
};

}  // namespace

Result<double> run_span_ops(VkContext& ctx, std::span<const SpanDispatch> dispatches, int reps,
                            std::vector<float>& arena, const std::vector<float>& params,
                            std::vector<uint32_t>& kv) {
  if (ctx.lost()) return make_error("span: the device is lost ({})", ctx.lost_reason());
  if (reps < 1 || dispatches.empty())
    return make_error("span: run_span_ops of {} dispatches x {} reps", dispatches.size(), reps);
  std::vector<Pipeline> pipes;
  for (const SpanDispatch& d : dispatches) {
    PipelineSpec spec;
    spec.module = d.name;
    const bool cm1 = d.name == kFlashCmModule, cm2 = d.name == kFlashCm2Module;
    if (cm1 || cm2) {  // specialised for the span's tile of head_dim pc.n
      const std::optional<FlashCmTile> t = pick_flash_cm_tile(ctx, d.pc.n, cm2 ? 2 : 1);
      if (!t)
        return make_error(
            "span: {} has no tile for head_dim {} on this device (cooperative matrices: {}; "
            "FISH_VK_FLASH_CM={})",
            d.name, d.pc.n, ctx.features().coopmat ? ctx.features().coopmat_shapes : "none",
            ctx.options().flash_cm);
      spec = flash_cm_spec(ctx, *t);
    }
    if (d.name.starts_with("span_attention_stream")) {  // specialised for head_dim pc.n, pc.group
      if (!attention_stream_fits(d.pc.n, d.pc.group, ctx.features().subgroup_min,
                                 ctx.features().subgroup_max))
        return make_error("span: {} does not take head_dim {} x group {} on subgroups of {}..{}",
                          d.name, d.pc.n, d.pc.group, ctx.features().subgroup_min,
                          ctx.features().subgroup_max);
      if ((d.pc.kv_k | d.pc.kv_v | d.pc.kv_stride) % 4 != 0)
        return make_error(
            "span: {} needs 16-byte aligned KV words (kv_k {}, kv_v {}, kv_stride {})", d.name,
            d.pc.kv_k, d.pc.kv_v, d.pc.kv_stride);
      spec.constants = {d.pc.n, d.pc.group, ctx.options().stream_pipe ? 1u : 0u};
    }
    FISH_ASSIGN_OR_RETURN(pipes.emplace_back(), ctx.pipeline(spec));
  }
  OpBuffers b{ctx, {}, {}};
  const size_t sizes[3] = {arena.size() * 4, params.size() * 4, kv.size() * 4};
  const void* src[3] = {arena.data(), params.data(), kv.data()};
  for (int i = 0; i < 3; ++i) {
    const uint64_t bytes = std::max<size_t>(sizes[i], 16) + 16;
    FISH_ASSIGN_OR_RETURN(
        b.dev[i], ctx.alloc(bytes,
                            VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                            Memory::device, true, dispatches[0].name));
    FISH_ASSIGN_OR_RETURN(
        b.host[i],
        ctx.alloc(bytes, VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                  Memory::host, true, dispatches[0].name));
    std::memcpy(b.host[i].mapped, src[i], sizes[i]);
  }
  FISH_ASSIGN_OR_RETURN(DescriptorPool pool, DescriptorPool::create(ctx, 1, 3));
  const BufferRange r[3] = {{b.dev[0].buf}, {b.dev[1].buf}, {b.dev[2].buf}};
  FISH_ASSIGN_OR_RETURN(const VkDescriptorSet set, pool.allocate(pipes[0], r));
  FISH_ASSIGN_OR_RETURN(b.queries, create_timestamps(ctx, 2));
  FISH_ASSIGN_OR_RETURN(Commands cmds, Commands::create(ctx));

  FISH_TRY(cmds.begin());
  for (int i = 0; i < 3; ++i) cmds.copy(b.host[i], 0, b.dev[i], 0, std::max<size_t>(sizes[i], 16));
  cmds.barrier(Sync::transfer, Sync::compute);
  if (b.queries) {  // after the uploads have finished
    ctx.vk().vkCmdResetQueryPool(cmds.cmd(), b.queries, 0, 2);
    cmds.timestamp(b.queries, 0);
  }
  cmds.bind(pipes[0], set);
  for (int rep = 0; rep < reps; ++rep)
    for (size_t i = 0; i < dispatches.size(); ++i) {
      const SpanDispatch& d = dispatches[i];
      if (rep > 0 || i > 0) cmds.barrier(Sync::compute, Sync::compute);
      cmds.bind(pipes[i]);
      cmds.push(pipes[i], &d.pc, sizeof d.pc);
      cmds.dispatch(d.gx, d.gy, d.gz);
    }
  if (b.queries) cmds.timestamp(b.queries, 1);
  cmds.barrier(Sync::compute, Sync::transfer);
  for (int i : {0, 2}) cmds.copy(b.dev[i], 0, b.host[i], 0, std::max<size_t>(sizes[i], 16));
  cmds.barrier(Sync::transfer, Sync::host);
  const auto t0 = std::chrono::steady_clock::now();
  // An error here (a lost or hung device) returns before anything is read back.
  FISH_TRY(cmds.submit_and_wait(Work::compute, "span ops"));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (b.queries) {
    uint64_t ts[2] = {0, 0};
    FISH_VK_CHECK(
        ctx.vk().vkGetQueryPoolResults(ctx.handle(), b.queries, 0, 2, sizeof ts, ts, 8,
                                       VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    seconds = double(ts[1] - ts[0]) * ctx.features().timestamp_ns * 1e-9;
  }
  std::memcpy(arena.data(), b.host[0].mapped, sizes[0]);
  std::memcpy(kv.data(), b.host[2].mapped, sizes[2]);
  return seconds;
}

}  // namespace fish::vk
