// The layer graph of a span forward (vulkan_span_impl.h): per chunk of tokens and per layer,
// rmsnorm -> q/k/v matmuls -> bias -> q/k norm -> RoPE + KV store + attention in one dispatch for
// one decode token at a short context (span_attention_short) or short batches
// (span_attention_decode, + the split-K combine at long contexts), else RoPE + KV
// store (span_rope_kv) -> attention (one pass, or split-K + combine; flash for prefill chunks) ->
// wo -> (post norm) -> residual add + rmsnorm -> gate/up -> act*mul (+ its product's q8_1 copy for
// an idot down) -> down -> (post norm) -> residual add (+ the next layer's rmsnorm; the output head
// after the last layer), a compute barrier after each step that the next reads. Decoding with
// idot and no post norms, wo and down add into x and write each 32-row block's share of the norm
// after them (residual_norm, FISH_VK_NORM_FUSE; q/k/v and gate / up then scale by its 1 / rms),
// and gate / up compute act*mul per 32-row block (gate_up_act, FISH_VK_ACT_FUSE): 5 dependent
// steps a layer instead of 8. With FISH_VK_PREFETCH_MB a decode chunk's steps that are no matvec
// get a dispatch beside them (before their barrier) that reads the next matvecs' weights into L2
// (prefetch.h).
#include <algorithm>
#include <cassert>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "engine/vulkan/vulkan_span.h"
#include "engine/vulkan/vulkan_span_impl.h"

namespace fish::vk {
namespace {

uint32_t groups(uint64_t v) {
  return uint32_t((v + FISH_SPAN_WG - 1) / FISH_SPAN_WG);
}

}  // namespace

void VulkanSpan::barrier() {
  if (pf_on_ && !matvec_step_) prefetch();
  matvec_step_ = false;
  cmds_.barrier(Sync::compute, Sync::compute);
}

Status VulkanSpan::build_prefetch() {
  if (ctx_.options().prefetch_mb == 0) return Status::success();
  FISH_ASSIGN_OR_RETURN(ops_.prefetch, ctx_.pipeline("prefetch"));
  auto add = [&](MatmulGroup& g) {
    for (MatmulStep& st : g.steps) {
      st.stream = uint32_t(pf_vecs_.size());
      pf_vecs_.push_back(uint64_t(st.part->n_rows) * st.w->row_bytes / 16);
      pf_sets_.push_back(st.set);  // W: the part; Y: ARENA from 0 (the sink at off_sink_)
    }
  };
  for (LayerState& L : layers_)
    for (MatmulGroup* g : {&L.qkv, &L.wo, &L.gate_up, &L.down}) add(*g);
  if (has_head_) add(head_);
  return Status::success();
}

bool VulkanSpan::copies(const MatmulGroup& group, uint32_t n_tok) {
  const bool resident = ctx_.options().prefill_f16_resident;
  bool any = false;
  for (const MatmulStep& st : group.steps)
    if (n_tok > FISH_MATVEC_WIDE_TOK && on_f16_copy(st, n_tok)) {
      if (resident && std::exchange(wh_written_[st.copy_id], uint8_t(1))) continue;
      const MatmulPush pc = dequant_push(*st.w, *st.part);
      cmds_.bind(st.deq, st.deq_set);
      cmds_.push(st.deq, &pc, sizeof pc);
      cmds_.dispatch(dequant_groups(*st.w, *st.part, ctx_.copy_groups_max()), 1);
      any = true;
    }
  return any;
}

bool VulkanSpan::on_f16_copy(const MatmulStep& st, uint32_t n_tok) const {
  return st.deq.pipe != VK_NULL_HANDLE &&
         prefill_f16(ctx_.options(), ctx_.features(), *st.w, n_tok, ctx_.max_binding_bytes());
}

Status VulkanSpan::build_prefill_f16() {
  const VulkanOptions& o = ctx_.options();
  // The fewest tokens it applies to; none where no chunk is that long.
  const uint32_t n_min = prefill_f16_min_tok(o, ctx_.features());
  if (n_min == 0 || int64_t(n_min) > chunk_) return Status::success();
  auto wants = [&](const MatmulStep& st) {
    return prefill_f16(o, ctx_.features(), *st.w, n_min, ctx_.max_binding_bytes());
  };
  std::vector<MatmulGroup*> groups;  // the layers' in forward order (the head runs one token)
  for (LayerState& L : layers_)
    for (MatmulGroup* g : {&L.qkv, &L.wo, &L.gate_up, &L.down}) groups.push_back(g);
  // FISH_VK_PREFILL_F16_AHEAD: group i's copies in region i % 2, written beside group i - 1's
  // matmuls; else one region. A region's size: its groups' largest sum of copies.
  // FISH_VK_PREFILL_F16_RESIDENT: one region holding every copy, each written once.
  const bool ahead = o.prefill_f16_ahead != 0, resident = o.prefill_f16_resident;
  uint64_t need[2] = {0, 0};
  uint32_t n_copies = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    uint64_t off = resident ? need[0] : 0;
    for (MatmulStep& st : groups[i]->steps)
      if (wants(st)) {
        st.wh_off = off;
        st.copy_id = n_copies++;
        off += f16_copy_bytes(*st.w, *st.part);
      }
    uint64_t& n = need[ahead && !resident ? i % 2 : 0];
    n = std::max(n, off);
    if (ahead && i + 1 < groups.size()) groups[i]->next = groups[i + 1];
  }
  for (size_t i = 1; ahead && !resident && i < groups.size(); i += 2)
    for (MatmulStep& st : groups[i]->steps) st.wh_off += need[0];
  wh_written_.assign(n_copies, 0);
  if (need[0] + need[1] == 0) return Status::success();
  auto skip = [&](std::string why) {  // auto: the prefill runs without copies, and says why
    wh_skipped_ = std::move(why);
    for (MatmulGroup* g : groups) g->next = nullptr;
    return Status::success();
  };
  if (!prefill_f16_may_allocate(o, budget_)) return skip("auto: the run has a VRAM ceiling");
  // Auto also leaves room for the KV's growth to n_ctx (a growth holds the old and the new
  // cache at once), which the placement counted on and the copies are not part of.
  const uint64_t kv_grow = kv_cap_ < d_.n_ctx ? uint64_t(layers_.size()) * 2 * uint64_t(d_.n_ctx) *
                                                    uint64_t(p_.kv_dim() / 2) * 4
                                              : 0;
  if (o.prefill_f16 < 0 && ctx_.allocatable(budget_) < need[0] + need[1] + kv_grow)
    return skip(
        fmt::format("auto: {:.0f} MiB of copies and the KV's growth to {} positions "
                    "exceed the {:.0f} MiB allocatable",
                    double(need[0] + need[1]) / double(1 << 20), d_.n_ctx,
                    double(ctx_.allocatable(budget_)) / double(1 << 20)));
  Result<Buffer> b = ctx_.alloc(need[0] + need[1], VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                Memory::device, true, "span f16 weight copies", budget_);
  if (!b.ok() && o.prefill_f16 > 0) return b.take_error();
  if (!b.ok()) return skip(b.error().message);
  wh_ = std::move(b).value();
  const std::span<const CoopmatTile> tiles = ctx_.coopmat_tiles();
  // Every tile the rule may pick for type t (v: a pipeline per tile). A coopmat2 tile the driver
  // rejects turns unavailable for every type, so the rule then picks others: after a rejection
  // every step's tiles (its own type's and f16's) are completed again, as build_matmul does.
  bool rejected = false;
  auto fill = [&](std::vector<Pipeline>& v, GgmlType t) -> Status {
    v.resize(tiles.size());
    for (size_t i = 0; i < tiles.size(); ++i) {
      if (v[i].pipe != VK_NULL_HANDLE ||
          !coopmat_tile_reachable(tiles, tiles[i], o.coopmat_tile, t))
        continue;
      Result<Pipeline> r = ctx_.coopmat_pipeline(t, tiles[i]);
      if (!r.ok() && tiles[i].cm2) {
        rejected = true;
        continue;
      }
      FISH_ASSIGN_OR_RETURN(v[i], std::move(r));
    }
    return Status::success();
  };
  for (MatmulGroup* g : groups)
    for (MatmulStep& st : g->steps) {
      if (!wants(st)) continue;
      const BufferRange copy{wh_.buf, st.wh_off, f16_copy_bytes(*st.w, *st.part)};
      FISH_ASSIGN_OR_RETURN(st.deq,
                            ctx_.pipeline(fmt::format("dequant_f16_{}", type_name(st.w->type))));
      const BufferRange rd[3] = {
          {st.part->buf.buf, 0, VK_WHOLE_SIZE}, {arena_.buf, 0, VK_WHOLE_SIZE}, copy};  // X unread
      FISH_ASSIGN_OR_RETURN(st.deq_set, pool_.allocate(st.deq, rd));
      FISH_ASSIGN_OR_RETURN(st.tiled16,
                            ctx_.pipeline(matmul_module(GgmlType::f16, FISH_MATVEC_WIDE_TOK + 1,
                                                        MatvecKernel::fast)));
      FISH_TRY(fill(st.cm16, GgmlType::f16));
      const BufferRange r[3] = {copy,
                                {arena_.buf, uint64_t(st.x_region) * 4, VK_WHOLE_SIZE},
                                {arena_.buf, 0, VK_WHOLE_SIZE}};
      FISH_ASSIGN_OR_RETURN(st.set16, pool_.allocate(st.tiled16, r));
      if (ctx_.features().coopmat2) {
        const BufferRange rh[3] = {copy,
                                   {arena_.buf, uint64_t(off_h_) * 4, VK_WHOLE_SIZE},
                                   {arena_.buf, 0, VK_WHOLE_SIZE}};
        FISH_ASSIGN_OR_RETURN(st.half_set16, pool_.allocate(st.tiled16, rh));
      }
    }
  for (int pass = 0; rejected && pass < 2; ++pass) {
    rejected = false;
    for (MatmulGroup* g : groups)
      for (MatmulStep& st : g->steps) {
        FISH_TRY(fill(st.cm, st.w->type));
        if (st.deq.pipe != VK_NULL_HANDLE) FISH_TRY(fill(st.cm16, GgmlType::f16));
      }
  }
  return Status::success();
}

void VulkanSpan::prefetch() {
  const uint64_t budget = (uint64_t(ctx_.options().prefetch_mb) << 20) / 16;
  const std::vector<PrefetchPiece> pieces = plan_prefetch(pf_vecs_, &pf_, budget);
  if (pieces.empty()) return;
  constexpr uint64_t kVecsPerGroup = FISH_COPY_WG * 4;  // FISH_PREFETCH_VECS a thread
  for (const PrefetchPiece& p : pieces) {
    MatmulPush pc{};
    pc.n_in = uint32_t(p.first);  // a part's vectors: < 2^28 (the storage-buffer range)
    pc.n_out = uint32_t(p.count);
    pc.y_offset = off_sink_;
    cmds_.bind(ops_.prefetch, pf_sets_[p.range]);
    cmds_.push(ops_.prefetch, &pc, sizeof pc);
    cmds_.dispatch(uint32_t(std::min<uint64_t>((p.count + kVecsPerGroup - 1) / kVecsPerGroup,
                                               ctx_.limits().maxComputeWorkGroupCount[0])));
    ++pf_dispatches_;
  }
  bind_ops();
}

std::string VulkanSpan::prefetch_note() const {
  if (!ops_.prefetch.pipe) return "";
  return fmt::format("; weight prefetch {} MiB a step ({} dispatches in the last decode forward)",
                     ctx_.options().prefetch_mb, pf_dispatches_);
}

std::string VulkanSpan::chunks_note() const {
  std::string s;
  if (ctx_.options().verify_split)
    s = fmt::format("; verify forwards of {}..{} tokens in chunks of <= {}",
                    FISH_MATVEC_MAX_TOK + 1, FISH_MATVEC_WIDE_TOK, FISH_MATVEC_MAX_TOK);
  if (!wh_skipped_.empty()) return s + "; no f16 weight copies (" + wh_skipped_ + ")";
  if (wh_.bytes == 0) return s;
  const uint32_t wg = ctx_.options().prefill_f16_copy_wg;
  return s + fmt::format("; prefill matmuls on f16 weight copies from {} tokens ({:.1f} MiB{}{}{})",
                         prefill_f16_min_tok(ctx_.options(), ctx_.features()),
                         double(wh_.bytes) / double(1 << 20),
                         ctx_.options().prefill_f16_ahead == 2
                             ? ", each beside the previous group's matmuls, ahead of them"
                         : ctx_.options().prefill_f16_ahead == 1
                             ? ", each beside the previous group's matmuls"
                             : "",
                         wg > 0 ? fmt::format(", at most {} workgroups a copy", wg) : "",
                         ctx_.options().prefill_f16_resident
                             ? ", resident: each written by the first prefill that needs it"
                             : "");
}

void VulkanSpan::matvec_recorded(const MatmulStep& st) {
  matvec_step_ = true;
  if (pf_on_) prefetch_consumed(&pf_, st.stream);
}

void VulkanSpan::stage_done(Stage s, const MatmulGroup* group, uint32_t n_tok) {
  if (!stage_queries_ || used_queries_ >= n_queries_) return;
  cmds_.timestamp(queries_, used_queries_++);
  step_of_.push_back({s, group, group != nullptr && n_tok <= FISH_MATVEC_MAX_TOK});
}

std::string MatmulGroup::label() const {
  std::string s;
  const DeviceWeight* last = nullptr;
  for (const MatmulStep& st : steps) {
    if (st.w == last) continue;  // the next part of the same weight
    last = st.w;
    s += fmt::format("{}{} {}x{}", s.empty() ? "" : " + ", type_name(st.w->type), st.w->n_out,
                     st.w->n_in);
  }
  return s;
}

uint64_t MatmulGroup::bytes() const {
  uint64_t b = 0;
  for (const MatmulStep& st : steps) b += uint64_t(st.part->n_rows) * st.w->row_bytes;
  return b;
}

void VulkanSpan::bind_ops() {
  cmds_.bind(ops_.rmsnorm, ops_set_);
}

void VulkanSpan::op(const Pipeline& p, const SpanPush& pc, uint32_t gx, uint32_t gy, uint32_t gz) {
  cmds_.bind(p);
  cmds_.push(p, &pc, sizeof pc);
  cmds_.dispatch(gx, gy, gz);
}

bool VulkanSpan::fuse_q8(const MatmulGroup& g, uint32_t n, SpanPush* pc) const {
  if (!g.quant_set || !ops_.rmsnorm_q8.pipe || n > FISH_MATVEC_MAX_TOK) return false;
  pc->q8_off = g.q8_off;
  return true;
}

void VulkanSpan::quantize(const MatmulGroup& group, uint32_t n_tok) {
  const MatmulPush pc = quant_push(group.k, n_tok, group.x_stride);
  cmds_.bind(quant_, group.quant_set);
  cmds_.push(quant_, &pc, sizeof pc);
  cmds_.dispatch(quant_groups(group.k, n_tok), 1);
  barrier();
  stage_done(kQuant);
}

int64_t VulkanSpan::forward_chunk(int64_t n) const {
  const int64_t run = verify_run(ctx_.options(), n);
  return run < n ? run : chunk_;
}

void VulkanSpan::matmuls(const MatmulGroup& group, uint32_t n_tok, bool quantized, bool scaled,
                         uint32_t y_row0) {
  const bool vec = n_tok <= FISH_MATVEC_MAX_TOK;
  // The group's input as q8_1 for its idot steps.
  if (vec && group.quant_set && !quantized) quantize(group, n_tok);
  // 5..8 tokens (a speculative verify): matvec8_<type>, weights read once, no tile.
  const bool wide = !vec && n_tok <= FISH_MATVEC_WIDE_TOK;
  // FISH_VK_PREFILL_F16: the step reads its f16 copy with the f16 kernel of f16's tile.
  auto f16 = [&](const MatmulStep& st) { return !vec && !wide && on_f16_copy(st, n_tok); };
  auto tile = [&](const MatmulStep& st) {
    return vec || wide
               ? nullptr
               : ctx_.coopmat_tile(f16(st) ? GgmlType::f16 : st.w->type, st.w->n_out, n_tok);
  };
  const uint32_t max_x = ctx_.limits().maxComputeWorkGroupCount[0];
  // The steps' f16 weight copies (unless recorded beside the previous group's matmuls), then
  // the group's input as f16 rows (K apart) for its coopmat2 steps, once (prefill chunks only),
  // all before one barrier.
  const bool copied = copied_ahead_ == &group;
  copied_ahead_ = nullptr;
  bool inputs = !copied && copies(group, n_tok);
  if (!vec && !wide && group.half_set &&
      std::any_of(group.steps.begin(), group.steps.end(), [&](const auto& st) {
        const CoopmatTile* cm = tile(st);
        return cm && cm->cm2;
      })) {
    const MatmulPush pc = half_push(group.k, n_tok, group.x_stride, group.k);
    cmds_.bind(half_, group.half_set);
    cmds_.push(half_, &pc, sizeof pc);
    cmds_.dispatch(half_groups(group.k, n_tok, max_x), 1);
    inputs = true;
  }
  if (inputs) barrier();
  // FISH_VK_PREFILL_F16_AHEAD: the next group's copies beside these matmuls, in their barrier
  // interval (they write the other region, which group i - 2's matmuls read before a barrier
  // this interval follows): at 1 after their dispatches, at 2 ahead of them.
  auto copy_next = [&] {
    if (group.next && !vec && !wide && copies(*group.next, n_tok)) copied_ahead_ = group.next;
  };
  const bool ahead_first = ctx_.options().prefill_f16_ahead == 2;
  if (ahead_first) copy_next();
  for (const MatmulStep& st : group.steps) {
    const CoopmatTile* cm = tile(st);
    const bool half = cm && cm->cm2;
    const uint32_t xs = half ? group.k : st.x_stride;
    const uint32_t yo = st.y_offset + y_row0 * st.y_stride;
    if (f16(st)) {
      const Pipeline& p = cm ? st.cm16[size_t(cm - ctx_.coopmat_tiles().data())] : st.tiled16;
      assert(p.pipe != VK_NULL_HANDLE);
      const MatmulGrid g = f16_copy_grid(*st.w, *st.part, n_tok, xs, st.y_stride, yo, max_x, cm);
      cmds_.bind(p, half ? st.half_set16 : st.set16);
      cmds_.push(p, &g.pc, sizeof g.pc);
      cmds_.dispatch(g.gx, g.gy);
      matvec_recorded(st);
      continue;
    }
    // The exact-count pipeline where there is one (FISH_VK_IDOT_EXACT), with its own rows.
    const Pipeline& exact = vec ? st.vec_exact[n_tok - 1] : st.vec;
    const bool on_exact = vec && !scaled && exact.pipe != VK_NULL_HANDLE;
    const MatmulGrid g = matmul_grid(*st.w, *st.part, n_tok, xs, st.y_stride, yo, max_x, cm,
                                     on_exact ? st.exact_rows[n_tok - 1] : st.vec_rows);
    // residual_norm's input (its q8_1 copy written, scalable checked): matvec_idot_scaled_.
    assert(!scaled || quantized);
    if (vec && scaled) {
      MatvecFusedPush pc{g.pc};
      pc.ss_off = off_ss_;
      pc.eps = p_.norm_eps;
      cmds_.bind(st.scaled, st.vec_set);
      cmds_.push(st.scaled, &pc, sizeof pc);
      cmds_.dispatch(g.gx, g.gy);
      matvec_recorded(st);
      continue;
    }
    const Pipeline& p = vec    ? (on_exact ? exact : st.vec)
                        : wide ? st.wide
                        : cm   ? st.cm[size_t(cm - ctx_.coopmat_tiles().data())]
                               : st.tiled;
    cmds_.bind(p, vec ? st.vec_set : half ? st.half_set : st.set);
    cmds_.push(p, &g.pc, sizeof g.pc);
    cmds_.dispatch(g.gx, g.gy);
    matvec_recorded(st);
  }
  if (!ahead_first) copy_next();
}

bool VulkanSpan::scalable(const MatmulGroup& g, bool act) {
  return !g.steps.empty() && std::all_of(g.steps.begin(), g.steps.end(), [&](const MatmulStep& st) {
    return (act ? st.act_scaled : st.scaled).pipe != VK_NULL_HANDLE;
  });
}

bool VulkanSpan::residual_norm(const MatmulGroup& g, uint32_t n, bool quantized, uint32_t x_off,
                               uint32_t w, const MatmulGroup& next) {
  if (n > FISH_MATVEC_MAX_TOK || g.steps.size() != 1 || !g.steps[0].res.pipe || !next.quant_set ||
      !scalable(next, false))
    return false;
  const MatmulStep& st = g.steps[0];
  if (!quantized) quantize(g, n);
  const MatmulGrid gr =
      matmul_grid(*st.w, *st.part, n, st.x_stride, uint32_t(p_.n_embd), x_off + st.part->row0,
                  ctx_.limits().maxComputeWorkGroupCount[0], nullptr, st.vec_rows);
  MatvecFusedPush pc{gr.pc};
  pc.q8_off = next.q8_off;
  pc.ctr = off_ctr_;  // n_embd / 32 block counters
  pc.arrivals = FISH_Q8_BLOCK / st.vec_rows;
  pc.w_off = w;
  pc.ss_off = off_ss_;
  cmds_.bind(st.res, st.res_set);
  cmds_.push(st.res, &pc, sizeof pc);
  cmds_.dispatch(gr.gx, gr.gy);
  matvec_recorded(st);
  barrier();
  stage_done(kMatvec, &g, n);
  return true;
}

bool VulkanSpan::gate_up_act(const MatmulGroup& g, uint32_t n, bool quantized, bool scaled,
                             const MatmulGroup& down) {
  if (n > FISH_MATVEC_MAX_TOK || g.steps.size() != 2 || (scaled && !scalable(g, true)) ||
      g.steps[0].act_rows != g.steps[1].act_rows || !down.quant_set)
    return false;
  for (const MatmulStep& st : g.steps)
    if (!st.act.pipe) return false;
  if (!quantized) quantize(g, n);
  MatvecFusedPush pc;
  pc.q8_off = down.q8_off;
  pc.ctr = off_ctr_ + uint32_t(p_.n_embd) / FISH_Q8_BLOCK;  // n_ff / 32 block counters
  // Each 32-row block is written by 32 / act_rows workgroups of each of the two dispatches.
  pc.arrivals = 2 * (FISH_Q8_BLOCK / g.steps[0].act_rows);
  pc.ss_off = off_ss_;
  pc.gate_off = off_gu_;
  pc.eps = p_.norm_eps;
  fused_steps(g, pc, n, [&](const MatmulStep& st) {
    const Pipeline& exact = st.act_exact[n - 1];  // FISH_VK_IDOT_EXACT_FUSED
    return FusedPick{scaled                         ? &st.act_scaled
                     : exact.pipe != VK_NULL_HANDLE ? &exact
                                                    : &st.act,
                     st.vec_set, st.act_rows};
  });
  return true;
}

void VulkanSpan::fused_steps(const MatmulGroup& g, MatvecFusedPush pc, uint32_t n,
                             const std::function<FusedPick(const MatmulStep&)>& pick) {
  for (const MatmulStep& st : g.steps) {
    const FusedPick k = pick(st);
    MatmulGrid gr = matmul_grid(*st.w, *st.part, n, st.x_stride, st.y_stride, st.y_offset,
                                ctx_.limits().maxComputeWorkGroupCount[0], nullptr, k.rows);
    if (k.max_groups && gr.gx * gr.gy > k.max_groups) {  // the kernel loops over row blocks
      gr.gx = std::min(k.max_groups, ctx_.limits().maxComputeWorkGroupCount[0]);
      gr.gy = 1;
    }
    pc.mm = gr.pc;
    cmds_.bind(*k.p, k.set);
    cmds_.push(*k.p, &pc, sizeof pc);
    cmds_.dispatch(gr.gx, gr.gy);
    matvec_recorded(st);
  }
  barrier();
  stage_done(kMatvec, &g, n);
}

bool VulkanSpan::pro_norm_layers() const {
  if (ctx_.options().norm_fuse != 2 || layers_.empty() || p_.n_embd % 32 != 0 || off_x_ % 4 != 0)
    return false;
  auto all = [](const MatmulGroup& g, auto&& has) {
    return !g.steps.empty() && std::all_of(g.steps.begin(), g.steps.end(), has);
  };
  for (const LayerState& L : layers_) {
    // gemma3's post-norms sit between the residual add and the matmul: not this form.
    if (L.has_post || L.attn_norm % 4 != 0 || L.ffn_norm % 4 != 0) return false;
    if (!all(L.qkv, [](const MatmulStep& st) { return st.pn.pipe != VK_NULL_HANDLE; }) ||
        !all(L.gate_up, [](const MatmulStep& st) { return st.pn.pipe != VK_NULL_HANDLE; }) ||
        L.wo.steps.size() != 1 || L.down.steps.size() != 1 || !L.wo.steps[0].acc.pipe ||
        !L.down.steps[0].acc.pipe)
      return false;
  }
  return true;
}

std::string VulkanSpan::norms_note() const {
  const VulkanOptions& o = ctx_.options();
  if (o.norm_fuse != 2) return "";
  if (!pro_norm_ok_)
    return "; decode norms as dispatches (FISH_VK_NORM_FUSE=2 does not apply to these layers)";
  return fmt::format("; decode norms in the {} prologues (FISH_VK_NORM_FUSE=2{}{})",
                     o.pn_ffn == 0 ? "q/k/v" : "q/k/v and gate/up",
                     o.pn_ffn == 0 ? ", the ffn's a dispatch: FISH_VK_PN_FFN=0" : "",
                     o.pn_grid ? fmt::format(", at most {} workgroup{} an SM", o.pn_grid,
                                             o.pn_grid == 1 ? "" : "s")
                               : "");
}

void VulkanSpan::pro_norm_matmuls(const MatmulGroup& g, uint32_t w, uint32_t x_off, bool act,
                                  const MatmulGroup* down) {
  MatvecFusedPush pc;
  pc.w_off = w;
  pc.x_off = x_off;
  pc.eps = p_.norm_eps;
  if (act) {  // as gate_up_act, with the pn workgroups' rows
    pc.q8_off = down->q8_off;
    pc.ctr = off_ctr_ + uint32_t(p_.n_embd) / FISH_Q8_BLOCK;
    pc.arrivals = 2 * (FISH_Q8_BLOCK / g.steps[0].pn_rows);
    pc.gate_off = off_gu_;
  }
  // FISH_VK_PN_GRID: fewer workgroups, each paying the norm once for several row blocks.
  const uint32_t sms = std::max<uint32_t>(1, ctx_.features().sm_count);
  const uint32_t cap = ctx_.options().pn_grid * sms;
  fused_steps(g, pc, 1, [&](const MatmulStep& st) {
    return FusedPick{act ? &st.act_pn : &st.pn, st.pn_set, st.pn_rows, cap};
  });
}

void VulkanSpan::acc_matmuls(const MatmulGroup& g, bool quantized, uint32_t x_off) {
  if (!quantized) quantize(g, 1);
  const MatmulStep& st = g.steps[0];
  const MatmulGrid gr =
      matmul_grid(*st.w, *st.part, 1, st.x_stride, uint32_t(p_.n_embd), x_off + st.part->row0,
                  ctx_.limits().maxComputeWorkGroupCount[0], nullptr, st.vec_rows);
  cmds_.bind(st.acc, st.vec_set);
  cmds_.push(st.acc, &gr.pc, sizeof gr.pc);
  cmds_.dispatch(gr.gx, gr.gy);
  matvec_recorded(st);
  barrier();
  stage_done(kMatvec, &g, 1);
}

// Whole-row norm of rows of n: A at a_off (stride a_stride) -> C, weight at params[w].
SpanPush VulkanSpan::norm_push(uint32_t n, uint32_t a_off, uint32_t a_stride, uint32_t c_off,
                               uint32_t c_stride, uint32_t w) const {
  SpanPush pc{};
  pc.n = uint32_t(p_.n_embd);
  pc.rows = n;
  pc.rows_per_tok = 1;
  pc.split = 1;
  pc.a_off = a_off;
  pc.a_stride = a_stride;
  pc.c_off = c_off;
  pc.c_stride = c_stride;
  pc.w_off0 = pc.w_off1 = w;
  pc.eps = p_.norm_eps;
  return pc;
}

// q/k/v (the layer's xn is ready) through attention into att.
void VulkanSpan::record_attention(const LayerState& L, uint32_t n, int64_t pos) {
  const uint32_t Q = uint32_t(p_.q_dim()), KV = uint32_t(p_.kv_dim()), hd = uint32_t(p_.head_dim);
  const uint32_t heads = uint32_t(p_.n_head + p_.n_head_kv);  // rows of the q/k norm
  if (pn_) {  // FISH_VK_NORM_FUSE=2: the attention norm in q/k/v's prologue
    pro_norm_matmuls(L.qkv, L.attn_norm, pn_x_, false, nullptr);
  } else {
    matmuls(L.qkv, n, next_qkv_q8_, next_qkv_scaled_);
    barrier();
    stage_done(kMatvec, &L.qkv, n);
  }
  bind_ops();
  if (L.has_bias) {
    SpanPush pc{};
    pc.n = qkv_stride_;
    pc.rows = n;
    pc.a_off = off_qkv_;
    pc.a_stride = qkv_stride_;
    pc.w_off0 = L.bias;
    op(ops_.bias, pc, groups(qkv_stride_), n);
    barrier();
    stage_done(kAdd);
  }
  if (L.has_qk_norm) {
    SpanPush pc{};
    pc.n = hd;
    pc.rows = n;
    pc.rows_per_tok = heads;
    pc.split = uint32_t(p_.n_head);
    pc.a_off = pc.c_off = off_qkv_;
    pc.a_stride = pc.c_stride = qkv_stride_;
    pc.w_off0 = L.q_norm;
    pc.w_off1 = L.k_norm;
    pc.eps = p_.norm_eps;
    op(ops_.head_rmsnorm, pc, n * heads, 1);
    barrier();
    stage_done(kRmsnorm);
  }
  const uint32_t layer = uint32_t(&L - layers_.data());
  const uint32_t kv_words = uint32_t(kv_cap_) * (KV / 2);
  SpanPush pc{};
  pc.n = hd;
  pc.rows = n;
  pc.a_off = off_qkv_;
  pc.a_stride = qkv_stride_;
  pc.w_off0 = L.rope_table;
  pc.pos0 = uint32_t(pos);
  pc.n_rot = uint32_t(p_.n_rot);
  pc.flags = p_.rope_style == RopeStyle::neox ? 1u : 0u;
  pc.kv_k = 2 * layer * kv_words;
  pc.kv_v = pc.kv_k + kv_words;
  pc.kv_stride = KV / 2;
  pc.c_off = off_att_;
  pc.c_stride = Q;
  pc.window = L.window;
  pc.scale = p_.attn_scale;
  pc.b_off = off_parts_;
  const uint32_t last = uint32_t(pos) + n;  // positions of the last token's range, causal
  const uint32_t len_max = L.window > 0 ? std::min(L.window, last) : last;
  if (ops_.attention_stream.pipe &&
      attention_stream_applies(ctx_.options().attn_stream, ctx_.options().attn_decode, n,
                               short_attention(n, len_max))) {  // one decode token, streamed
    pc.group = uint32_t(p_.n_head / p_.n_head_kv);
    pc.split = attention_stream_splits(ctx_.options().attn_split, uint32_t(p_.n_head),
                                       uint32_t(p_.n_head_kv), len_max, parts_cap_);
    wo_q8_ = ops_.attention_stream_q8.pipe && fuse_q8(L.wo, n, &pc);
    if (pc.split > 1 && ops_.attention_stream_last.pipe) {  // one dispatch: the last one merges
      pc.w_off1 = off_ctr_ + uint32_t(p_.n_embd + p_.n_ff) / FISH_Q8_BLOCK;
      record_kv_head_attention(ops_.attention_stream_last, ops_.attention_stream_last_q8, pc, n,
                               true);
    } else {
      record_kv_head_attention(ops_.attention_stream, ops_.attention_stream_q8, pc, n);
    }
    return;
  }
  if (short_attention(n, len_max)) {  // one token, a short context: one workgroup a query head
    pc.group = uint32_t(p_.n_head / p_.n_head_kv);
    // Past kAttnShortKeys (FISH_VK_ATTN_SHORT=1) the wide variant where the device has it.
    const bool wide = len_max > kAttnShortKeys && ops_.attention_short_wide.pipe;
    const Pipeline& q8 = wide ? ops_.attention_short_wide_q8 : ops_.attention_short_q8;
    wo_q8_ = q8.pipe && fuse_q8(L.wo, n, &pc);
    op(wo_q8_ ? q8
       : wide ? ops_.attention_short_wide
              : ops_.attention_short,
       pc, uint32_t(p_.n_head), 1);
    barrier();
    stage_done(kAttnDecode);
    return;
  }
  if (decode_attention(n,
                       len_max)) {  // RoPE, KV store and attention in one dispatch (+ the combine)
    pc.group = uint32_t(p_.n_head / p_.n_head_kv);
    pc.split = attention_decode_splits(ctx_.options().attn_split, uint32_t(p_.n_head), n, len_max,
                                       parts_cap_);
    // With an idot wo matvec the output's q8_1 copy comes from the attention epilogue.
    wo_q8_ = ops_.attention_decode_q8.pipe && fuse_q8(L.wo, n, &pc);
    record_kv_head_attention(ops_.attention_decode, ops_.attention_decode_q8, pc, n);
    return;
  }
  {  // q rotated in place, k rotated into the f16 KV with v
    SpanPush rk = pc;
    rk.rows_per_tok = uint32_t(p_.n_head);
    rk.b_off = off_qkv_ + Q;
    op(ops_.rope_kv, rk, groups(uint64_t(p_.n_head) * (p_.n_rot / 2) + KV / 2), n);
    barrier();
    stage_done(kRopeKv);
  }
  pc.n_rot = uint32_t(p_.n_head / p_.n_head_kv);  // group size
  pc.w_off0 = 0;
  pc.flags = 0;
  // Short query batches the decode kernel does not take fill the grid with KV splits (split-K),
  // then merge the partials; prefill chunks keep the one-pass kernel.
  pc.split =
      attention_splits(ctx_.options().attn_split, uint32_t(p_.n_head), n, len_max, parts_cap_);
  // With an idot wo matvec the output's q8_1 copy comes from the attention epilogue.
  wo_q8_ = ops_.attention_q8.pipe && fuse_q8(L.wo, n, &pc);
  if (pc.split > 0) {
    op(ops_.attention_split, pc, uint32_t(p_.n_head), n, pc.split);
    barrier();
    op(wo_q8_ ? ops_.attention_combine_q8 : ops_.attention_combine, pc, uint32_t(p_.n_head), n);
  } else if (wo_q8_) {  // n <= FISH_Q8_MAX_TOK < FISH_SPAN_FLASH_MIN_TOK
    op(ops_.attention_q8, pc, uint32_t(p_.n_head), n);
  } else if (n >= FISH_SPAN_FLASH_MIN_TOK && ops_.attention_flash_cm.pipe) {  // on coopmat
    const uint32_t q = ops_.flash_cm.queries();
    op(ops_.attention_flash_cm, pc, uint32_t(p_.n_head), (n + q - 1) / q);
  } else if (n >= FISH_SPAN_FLASH_MIN_TOK) {  // prefill: query tiles share each K/V tile
    op(ops_.attention_flash, pc, uint32_t(p_.n_head),
       (n + FISH_SPAN_FLASH_TOK - 1) / FISH_SPAN_FLASH_TOK);
  } else {
    op(ops_.attention, pc, uint32_t(p_.n_head), n);
  }
  barrier();
  stage_done(kAttention);
}

void VulkanSpan::record_kv_head_attention(const Pipeline& kernel, const Pipeline& kernel_q8,
                                          const SpanPush& pc, uint32_t n, bool merges) {
  const uint32_t n_kv = uint32_t(p_.n_head_kv);
  if (pc.split == 1 || merges) {
    op(wo_q8_ ? kernel_q8 : kernel, pc, n_kv, 1, pc.split);
  } else {
    op(kernel, pc, n_kv, 1, pc.split);
    barrier();
    op(wo_q8_ ? ops_.attention_combine_q8 : ops_.attention_combine, pc, uint32_t(p_.n_head), n);
  }
  barrier();
  stage_done(kAttnDecode);
}

bool VulkanSpan::short_attention(uint32_t n, uint32_t len_max) const {
  return ops_.attention_short.pipe &&
         attention_short_applies(ctx_.options().attn_short, ctx_.options().attn_decode, n, len_max);
}

bool VulkanSpan::decode_attention(uint32_t n, uint32_t len_max) const {
  return ops_.attention_decode.pipe && n <= FISH_SPAN_DEC_TOK &&
         n * uint32_t(p_.n_head / p_.n_head_kv) <= FISH_SPAN_DEC_ROWS &&
         attention_decode_fused(ctx_.options().attn_decode, len_max);
}

// wo, the residual add and ffn norm, gate/up, act*mul, down, the closing residual add.
void VulkanSpan::record_ffn(const LayerState& L, uint32_t n, uint32_t x_off) {
  const uint32_t E = uint32_t(p_.n_embd), F = uint32_t(p_.n_ff);
  // x += tmp; xn = rmsnorm(x) * w (and its q8_1 copy when `next`, xn's consumer, decodes with
  // idot); returns whether the copy was written.
  auto add_rmsnorm = [&](uint32_t w, const MatmulGroup& next) {
    SpanPush pc = norm_push(n, x_off, E, off_xn_, E, w);
    pc.b_off = off_tmp_;
    pc.b_stride = E;
    const bool q8 = fuse_q8(next, n, &pc);
    op(q8 ? ops_.add_rmsnorm_q8 : ops_.add_rmsnorm, pc, n, 1);
    barrier();
    stage_done(kRmsnorm);
    return q8;
  };
  auto post_norm = [&](uint32_t w) {  // tmp = rmsnorm(tmp) * w (gemma3)
    op(ops_.rmsnorm, norm_push(n, off_tmp_, E, off_tmp_, E, w), n, 1);
    barrier();
    stage_done(kRmsnorm);
  };
  // act*mul over gate / up's rows (and its q8_1 copy for an idot down): returns whether the copy
  // was written.
  auto act_mul = [&]() {
    bind_ops();
    SpanPush pc{};
    pc.n = F;
    pc.rows = n;
    pc.a_off = off_gu_;
    pc.b_off = off_gu_ + F;
    pc.a_stride = pc.b_stride = 2 * F;
    // With an idot down matvec the product's q8_1 copy comes from this op (no quant_q8_1).
    const bool q8 = ops_.act_q8.pipe && fuse_q8(L.down, n, &pc);
    op(q8 ? ops_.act_q8 : ops_.act, pc, groups(q8 ? F / 4 : F), n);
    barrier();
    stage_done(kActMul);
    return q8;
  };
  // gate / up and act*mul on xn (its q8_1 copy when gu_q8; scaled by the norm's 1 / rms when
  // gu_scaled): one step where the fused variant applies. Returns whether down's q8_1 input was
  // written.
  auto gate_up_then_act = [&](bool gu_q8, bool gu_scaled) {
    if (gate_up_act(L.gate_up, n, gu_q8, gu_scaled, L.down)) return true;
    matmuls(L.gate_up, n, gu_q8, gu_scaled);
    barrier();
    stage_done(kMatvec, &L.gate_up, n);
    return act_mul();
  };
  if (pn_) {  // FISH_VK_NORM_FUSE=2: wo and down add into x, gate / up normalise it themselves
    acc_matmuls(L.wo, wo_q8_, x_off);
    bool down_q8 = false;
    if (ctx_.options().pn_ffn == 0) {  // FISH_VK_PN_FFN=0: the ffn norm's own dispatch on x
      bind_ops();
      SpanPush pc = norm_push(n, x_off, E, off_xn_, E, L.ffn_norm);
      const bool gu_q8 = fuse_q8(L.gate_up, n, &pc);
      op(gu_q8 ? ops_.rmsnorm_q8 : ops_.rmsnorm, pc, n, 1);
      barrier();
      stage_done(kRmsnorm);
      down_q8 = gate_up_then_act(gu_q8, false);
    } else {
      const bool act =
          L.gate_up.steps.size() == 2 && L.down.quant_set &&
          std::all_of(L.gate_up.steps.begin(), L.gate_up.steps.end(),
                      [](const MatmulStep& st) { return st.act_pn.pipe != VK_NULL_HANDLE; });
      pro_norm_matmuls(L.gate_up, L.ffn_norm, x_off, act, &L.down);
      down_q8 = act || act_mul();
    }
    acc_matmuls(L.down, down_q8, x_off);
    next_qkv_q8_ = next_qkv_scaled_ = false;
    return;
  }
  // wo, x += its output, then the ffn norm: one dispatch where the residual variant applies.
  const bool gu_scaled =
      !L.has_post && residual_norm(L.wo, n, wo_q8_, x_off, L.ffn_norm, L.gate_up);
  bool gu_q8 = gu_scaled;
  if (!gu_scaled) {
    matmuls(L.wo, n, wo_q8_);
    barrier();
    stage_done(kMatvec, &L.wo, n);
    bind_ops();
    if (L.has_post) post_norm(L.post_attn);
    gu_q8 = add_rmsnorm(L.ffn_norm, L.gate_up);
  }
  const bool down_q8 = gate_up_then_act(gu_q8, gu_scaled);
  const LayerState* next = &L != &layers_.back() ? &L + 1 : nullptr;
  // down, x += its output and the next layer's attention norm in one dispatch where it applies.
  if (next && !L.has_post && residual_norm(L.down, n, down_q8, x_off, next->attn_norm, next->qkv)) {
    next_qkv_q8_ = next_qkv_scaled_ = true;
    return;
  }
  next_qkv_scaled_ = false;
  matmuls(L.down, n, down_q8);
  barrier();
  stage_done(kMatvec, &L.down, n);
  bind_ops();
  if (L.has_post) post_norm(L.post_ffn);
  if (next) {  // the next layer's xn comes from this fused add
    next_qkv_q8_ = add_rmsnorm(next->attn_norm, next->qkv);
  } else {  // x += tmp
    SpanPush pc{};
    pc.n = E;
    pc.rows = n;
    pc.a_off = pc.c_off = x_off;
    pc.a_stride = pc.c_stride = E;
    pc.b_off = off_tmp_;
    pc.b_stride = E;
    op(ops_.add, pc, groups(E), n);
    barrier();
    stage_done(kAdd);
  }
}

// One chunk of nc tokens (rows t0.. of x) at positions pos.., through every layer.
void VulkanSpan::record_chunk(int64_t t0, int64_t nc, int64_t pos) {
  const uint32_t E = uint32_t(p_.n_embd);
  const uint32_t n = uint32_t(nc);
  const uint32_t x_off = off_x_ + uint32_t(t0) * E;
  // Decode and verify chunks (the matvec kernels) read the weights beside their latency-bound
  // steps (FISH_VK_PREFETCH_MB), from the stream's start.
  pf_ = {};
  pf_on_ = ops_.prefetch.pipe != VK_NULL_HANDLE && n <= FISH_MATVEC_MAX_TOK;
  if (pf_on_ && t0 == 0) pf_dispatches_ = 0;
  // FISH_VK_NORM_FUSE=2 (one token): no norm dispatch before the head's; x is the residual row.
  pn_ = n == 1 && pro_norm_ok_;
  pn_x_ = x_off;
  for (const LayerState& L : layers_) {
    bind_ops();
    if (&L == &layers_.front() && !pn_) {  // later layers get xn from the previous one's fused add
      SpanPush pc = norm_push(n, x_off, E, off_xn_, E, L.attn_norm);
      next_qkv_q8_ = fuse_q8(L.qkv, n, &pc);
      next_qkv_scaled_ = false;
      op(next_qkv_q8_ ? ops_.rmsnorm_q8 : ops_.rmsnorm, pc, n, 1);
      barrier();
      stage_done(kRmsnorm);
    }
    record_attention(L, n, pos);
    record_ffn(L, n, x_off);
  }
}

void VulkanSpan::record_head(int64_t row, int64_t n) {
  const uint32_t E = uint32_t(p_.n_embd), V = uint32_t(p_.n_vocab), rows = uint32_t(n);
  // xn rows 0..k-1 = rmsnorm(x[row + r0..]) * output_norm, with the q8_1 copy when the output
  // matvec is idot (k <= FISH_MATVEC_MAX_TOK), then logits rows r0..r0 + k - 1: all n rows at
  // once, or FISH_VK_VERIFY_SPLIT's chunks of a verify one after another.
  const int64_t c = std::min(forward_chunk(n), n);
  for (int64_t r0 = 0; r0 < n; r0 += c) {
    const uint32_t k = uint32_t(std::min(c, n - r0));
    bind_ops();
    SpanPush pc = norm_push(k, off_x_ + uint32_t(row + r0) * E, E, off_xn_, E, out_norm_);
    const bool q8 = fuse_q8(head_, k, &pc);
    op(q8 ? ops_.rmsnorm_q8 : ops_.rmsnorm, pc, k, 1);
    barrier();
    stage_done(kRmsnorm);
    matmuls(head_, k, q8, false, uint32_t(r0));
    barrier();
    stage_done(kMatvec, &head_, k);
  }
  bind_ops();
  // Each row's greedy id: workgroups of FISH_SPAN_ARGMAX_SLICE logits, then one a row over their
  // pairs (argmax.comp.glsl), or one workgroup a row where a vocabulary is one slice.
  SpanPush am{};
  am.n = V;
  am.a_off = off_logits_;
  am.a_stride = V;
  am.c_off = off_tok_;
  am.b_off = off_parts_;
  am.split = (V + FISH_SPAN_ARGMAX_SLICE - 1) / FISH_SPAN_ARGMAX_SLICE;
  const uint64_t pair_floats = 2ull * am.split * rows;  // in the split-K partials' scratch
  if (am.split >= 2 && pair_floats <= uint64_t(parts_cap_) * uint64_t(p_.head_dim + 2)) {
    // Pass 3: the slices and, in each row's last workgroup, the ranking of their pairs (its
    // arrival counter after the KV heads': one a forward row).
    am.flags = 3;
    am.w_off1 = off_ctr_ + uint32_t(p_.n_embd + p_.n_ff) / FISH_Q8_BLOCK + uint32_t(p_.n_head_kv);
    op(ops_.argmax, am, am.split, rows);
  } else {
    op(ops_.argmax, am, 1, rows);
  }
  stage_done(kArgmax);
}

}  // namespace fish::vk
