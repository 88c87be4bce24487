// VulkanSpan's pipelined greedy decode (vulkan_span_impl.h, layer_span.h decode_greedy).
//
// A plain decode step is submit, wait for the fence, read the id, embed it on the host, copy x
// in, submit again: the GPU idles from the end of one step to the start of the next (the fence's
// wake-up, the id's read, the submit's latency). Here a step's token never leaves the device: the
// step begins by looking its embedding row up (span_get_rows_<type>, get_rows.comp.glsl) from
// the id the previous step's argmax left at off_tok_, and the host queues step k + 1 before it
// waits for step k, recording step k + 2 meanwhile. Each step also copies its id into its own
// host slot, so the host reads step k's id while k + 1 runs. Stopping (on_token false) drops the
// step already queued: it runs, and its KV position is not counted.
#include <algorithm>
#include <cstring>

#include "engine/vulkan/vulkan_shaders.h"
#include "engine/vulkan/vulkan_span.h"
#include "engine/vulkan/vulkan_span_impl.h"
#include "quant/types.h"

namespace fish::vk {

Status VulkanSpan::init_chain(const std::map<WeightHandle, DeviceWeight>& weights) {
  chain_.ready = false;
  if (d_.embed == 0) {
    chain_.why = "no embedding on the device";
    return Status::success();
  }
  auto it = weights.find(d_.embed);
  if (it == weights.end()) return make_error("span: the embedding matrix is not resident");
  const DeviceWeight& w = it->second;
  if (!has_head_ || d_.first_layer != 0) {
    chain_.why = "the span does not run the whole model and its head";
    return Status::success();
  }
  if (queries_) {  // one query pool, one forward at a time
    chain_.why = "FISH_GPU_PROFILE times one forward at a time";
    return Status::success();
  }
  if (w.type != w.from) {  // a re-quantised tied output: its rows are not the CPU's embedding
    chain_.why = fmt::format("the embedding is re-quantised on the device ({} -> {})",
                             type_name(w.from), type_name(w.type));
    return Status::success();
  }
  if (w.n_out != p_.n_vocab || w.n_in != p_.n_embd)
    return make_error("span: embedding {} x {}, expected n_vocab {} x n_embd {}", w.n_out, w.n_in,
                      p_.n_vocab, p_.n_embd);
  if (w.parts.size() != 1) {  // get_rows binds one buffer
    chain_.why = fmt::format("the embedding spans {} buffers", w.parts.size());
    return Status::success();
  }
  const std::string module = fmt::format("span_get_rows_{}", type_name(w.type));
  if (embedded_shader(module).empty()) {
    chain_.why = fmt::format("no {} kernel", module);
    return Status::success();
  }
  FISH_ASSIGN_OR_RETURN(chain_.get_rows, ctx_.pipeline(module));
  const BufferRange r[3] = {{arena_.buf}, {w.parts[0].buf.buf}, {arena_.buf}};
  FISH_ASSIGN_OR_RETURN(chain_.set, pool_.allocate(chain_.get_rows, r));
  FISH_ASSIGN_OR_RETURN(
      chain_.host, ctx_.alloc(uint64_t(kChainBuffers + 1) * 4,
                              VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                              Memory::host, true, "span decode ids", budget_));
  for (Commands& c : chain_.cmds) {
    FISH_ASSIGN_OR_RETURN(c, Commands::create(ctx_));
  }
  chain_.row_bytes = w.row_bytes;
  chain_.type = type_name(w.type);
  chain_.why.clear();
  chain_.ready = true;
  return Status::success();
}

void VulkanSpan::record_embed(const Forward& f) {
  if (f.chain_first) {  // the host's token into the id word
    cmds_.copy(chain_.host, uint64_t(kChainBuffers) * 4, arena_, uint64_t(off_tok_) * 4, 4);
  }
  // The previous step's argmax wrote the id (compute) and its copy out read it (transfer):
  // earlier submits on this queue are in these barriers' first scope.
  cmds_.barrier(Sync::transfer, Sync::compute);
  cmds_.barrier(Sync::compute, Sync::compute);
  SpanPush pc{};
  pc.n = uint32_t(p_.n_embd);
  pc.rows = uint32_t(p_.n_vocab);
  pc.a_off = off_tok_;
  pc.a_stride = chain_.row_bytes;
  pc.c_off = off_x_;
  pc.scale = p_.embd_scale;
  cmds_.bind(chain_.get_rows, chain_.set);
  cmds_.push(chain_.get_rows, &pc, sizeof pc);
  cmds_.dispatch((pc.n + FISH_SPAN_WG - 1) / FISH_SPAN_WG);
  cmds_.barrier(Sync::compute, Sync::compute);
}

std::string VulkanSpan::chain_note() const {
  if (d_.embed == 0) return "";
  if (!chain_.ready) return "; no pipelined greedy decode: " + chain_.why;
  return fmt::format("; pipelined greedy decode (span_get_rows_{})", chain_.type);
}

Result<int64_t> VulkanSpan::decode_greedy(int32_t token, int64_t pos0, int64_t n,
                                          const std::function<bool(int32_t)>& on_token) {
  std::lock_guard lock(ctx_.mutex());
  if (!chain_.ready) return make_error("span: no pipelined greedy decode ({})", chain_.why);
  if (n < 1) return int64_t(0);
  if (token < 0 || token >= p_.n_vocab)
    return make_error("span: token {} is outside the vocabulary [0, {})", token, p_.n_vocab);
  // Every step's bindings are recorded against this KV: it grows once, up front.
  FISH_TRY(start_positions(pos0, n));
  auto* ids = static_cast<int32_t*>(chain_.host.mapped);
  ids[kChainBuffers] = token;
  auto buffer = [&](int64_t k) -> Commands& { return chain_.cmds[size_t(k % kChainBuffers)]; };
  auto record = [&](int64_t k) -> Status {
    const Forward f{1, pos0 + k, true, false, 1, int(k % kChainBuffers), k == 0};
    std::swap(cmds_, buffer(k));
    Status s = record_forward(f);
    std::swap(cmds_, buffer(k));
    return s;
  };
  constexpr std::string_view kWhat = "span pipelined decode";
  // Waits for what is still queued (after a stop or an error): no buffer is re-recorded or freed
  // while the GPU runs it. The first error wins.
  auto drain = [&](Status first) -> Status {
    for (Commands& c : chain_.cmds) {
      Status s = c.wait(kWhat);
      if (first.ok() && !s.ok()) first = std::move(s);
    }
    return first;
  };
  int64_t given = 0;
  Status s = [&]() -> Status {
    for (int64_t k = 0; k < std::min<int64_t>(n, 2); ++k) {
      FISH_TRY(record(k));
      FISH_TRY(buffer(k).submit(Work::compute, kWhat));
    }
    for (int64_t k = 0; k < n; ++k) {
      const bool more = k + 2 < n;
      if (more) FISH_TRY(record(k + 2));  // while steps k and k + 1 run
      FISH_TRY(buffer(k).wait(kWhat));
      const int32_t id = ids[k % kChainBuffers];
      kv_len_ = pos0 + k + 1;
      ++given;
      if (!on_token(id)) return Status::success();
      if (more) FISH_TRY(buffer(k + 2).submit(Work::compute, kWhat));
    }
    return Status::success();
  }();
  FISH_TRY(drain(std::move(s)));
  return given;
}

}  // namespace fish::vk
