// Copy-engine and shader copy bandwidth (copy_bandwidth.h).
#include "engine/vulkan/copy_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "fish_vk_layout.h"

namespace fish::vk {
namespace {

// Host seconds of `reps` copies (record(i) records copy i, each after the previous one) beyond
// those of one copy: the difference removes submit and wait latency.
template <typename Record>
Result<double> time_copies(Commands& cmds, int reps, Work work, const char* what, Record record) {
  double t[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    FISH_TRY(cmds.begin());
    const int n = k == 0 ? 1 : reps + 1;
    for (int i = 0; i < n; ++i) record(i);
    const auto t0 = std::chrono::steady_clock::now();
    FISH_TRY(cmds.submit_and_wait(work, what));
    t[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return std::max(t[1] - t[0], 1e-9);
}

// Two device-local buffers (and optionally a host one), freed together.
struct Buffers {
  VkContext& ctx;
  Buffer b[3];
  ~Buffers() {
    for (Buffer& x : b) ctx.free(x);
  }
};

}  // namespace

Result<double> copy_engine_bytes_per_s(VkContext& ctx, uint64_t bytes, int reps) {
  const VkBufferUsageFlags usage =
      VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  Buffers bufs{ctx, {}};
  FISH_ASSIGN_OR_RETURN(bufs.b[0],
                        ctx.alloc(bytes, usage, Memory::device, true, "copy bandwidth source"));
  FISH_ASSIGN_OR_RETURN(
      bufs.b[1], ctx.alloc(bytes, usage, Memory::device, true, "copy bandwidth destination"));
  FISH_ASSIGN_OR_RETURN(Commands cmds, Commands::create(ctx));
  FISH_ASSIGN_OR_RETURN(const double dt,
                        time_copies(cmds, reps, Work::transfer, "copy bandwidth", [&](int i) {
                          // alternate directions, each copy after the previous one
                          cmds.copy(bufs.b[i % 2], 0, bufs.b[1 - i % 2], 0, bytes);
                          cmds.barrier(Sync::transfer, Sync::transfer);
                        }));
  return 2.0 * double(bytes) * double(reps) / dt;
}

Result<double> shader_copy_bytes_per_s(VkContext& ctx, uint64_t bytes, int reps) {
  if (bytes == 0 || bytes % 16 != 0 || bytes > ctx.max_binding_bytes() || reps < 1)
    return make_error(
        "vulkan: shader copy of {} bytes x {}: expected a positive multiple of 16 bytes within "
        "the storage buffer range ({}) and reps >= 1",
        bytes, reps, ctx.max_binding_bytes());
  FISH_ASSIGN_OR_RETURN(const Pipeline pipe, ctx.pipeline("copy_u4"));
  const VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  Buffers bufs{ctx, {}};
  FISH_ASSIGN_OR_RETURN(bufs.b[0],
                        ctx.alloc(bytes, usage, Memory::device, true, "shader copy source"));
  FISH_ASSIGN_OR_RETURN(bufs.b[1],
                        ctx.alloc(bytes, usage, Memory::device, true, "shader copy destination"));
  FISH_ASSIGN_OR_RETURN(bufs.b[2],
                        ctx.alloc(bytes, usage, Memory::host, false, "shader copy staging"));
  // A pattern no stuck, skipped or shifted vector reproduces: a hash of the word index.
  const uint64_t n_words = bytes / 4;
  auto pattern = [](uint64_t i) { return uint32_t(i * 2654435761u) ^ 0x5bd1e995u; };
  auto* host = static_cast<uint32_t*>(bufs.b[2].mapped);
  for (uint64_t i = 0; i < n_words; ++i) host[i] = pattern(i);

  FISH_ASSIGN_OR_RETURN(Commands cmds, Commands::create(ctx));
  FISH_TRY(cmds.begin());
  cmds.copy(bufs.b[2], 0, bufs.b[0], 0, bytes);
  FISH_TRY(cmds.submit_and_wait(Work::transfer, "shader copy upload"));
  // Set 0: a -> b, set 1: b -> a (X bound to the source too: every binding is valid).
  FISH_ASSIGN_OR_RETURN(DescriptorPool pool, DescriptorPool::create(ctx, 2, 6));
  VkDescriptorSet sets[2];
  for (int s = 0; s < 2; ++s) {
    const BufferRange src{bufs.b[s].buf, 0, bytes}, dst{bufs.b[1 - s].buf, 0, bytes};
    const BufferRange r[3] = {src, src, dst};
    FISH_ASSIGN_OR_RETURN(sets[s], pool.allocate(pipe, r));
  }
  MatmulPush pc{};
  pc.n_in = uint32_t(bytes / 16);
  const uint64_t per_group = uint64_t(FISH_COPY_WG) * 4;  // ~4 vectors per thread
  const uint32_t groups = uint32_t(std::clamp<uint64_t>((pc.n_in + per_group - 1) / per_group, 1,
                                                        ctx.limits().maxComputeWorkGroupCount[0]));
  FISH_ASSIGN_OR_RETURN(
      const double dt, time_copies(cmds, reps, Work::compute, "shader copy bandwidth", [&](int i) {
        if (i == 0) cmds.barrier(Sync::transfer, Sync::compute);
        cmds.bind(pipe, sets[i % 2]);  // alternate directions, each after the previous one
        cmds.push(pipe, &pc, sizeof pc);
        cmds.dispatch(groups);
        cmds.barrier(Sync::compute, Sync::compute);
      }));
  // Both buffers now hold the pattern; b was last written by a shader copy (a -> b first).
  std::memset(host, 0, bytes);
  FISH_TRY(cmds.begin());
  cmds.barrier(Sync::compute, Sync::transfer);
  cmds.copy(bufs.b[1], 0, bufs.b[2], 0, bytes);
  cmds.barrier(Sync::transfer, Sync::host);
  FISH_TRY(cmds.submit_and_wait(Work::transfer, "shader copy readback"));
  for (uint64_t i = 0; i < n_words; ++i)
    if (host[i] != pattern(i))
      return make_error(
          "vulkan: copy_u4: byte {} of {} differs after the copies ({:#x}, expected "
          "{:#x})",
          4 * i, bytes, host[i], pattern(i));
  return 2.0 * double(bytes) * double(reps) / dt;
}

}  // namespace fish::vk
