// VulkanSpan (vulkan_span_impl.h): creation validates the model against what the span ops take,
// allocates ARENA / PARAMS / KV / x staging, uploads the parameters and the RoPE table once and
// builds every descriptor set; forward() records one command buffer (vulkan_span_record.cpp):
// x in, per chunk of <= chunk() tokens (FISH_SPAN_CHUNK, FISH_SPAN_CHUNK_CM) per layer the whole
// layer graph with compute->compute barriers between dependent steps, x out; one submit, one fence.
#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>

#include "engine/vulkan/vulkan_span.h"
#include "engine/vulkan/vulkan_span_impl.h"

namespace fish::vk {
namespace {

constexpr VkBufferUsageFlags kDeviceUsage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_SRC_BIT;

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

VulkanSpan::~VulkanSpan() {
  if (released_) return;
  std::lock_guard lock(ctx_.mutex());
  release();
}

void VulkanSpan::release() {
  if (released_) return;
  released_ = true;
  if (registered_) ctx_.remove_span(this);
  if (!ctx_.lost()) ctx_.vk().vkDeviceWaitIdle(ctx_.handle());
  if (queries_) ctx_.vk().vkDestroyQueryPool(ctx_.handle(), queries_, nullptr);
  cmds_ = Commands{};
  ahead_ = Ahead{};
  chain_.cmds = {};
  pool_ = DescriptorPool{};
  for (Buffer* b : {&arena_, &params_, &kv_, &x_host_, &head_host_, &chain_.host, &wh_})
    ctx_.free(*b);
}

Status VulkanSpan::check_shapes() const {
  const int64_t E = p_.n_embd, Q = p_.q_dim(), F = p_.n_ff, hd = p_.head_dim;
  // What the span ops take; anything else declines the span (stage 1 then runs).
  if (d_.layers.empty()) return make_error("span: no layers");
  if (hd > FISH_SPAN_MAX_HEAD || hd % 2 != 0 || p_.n_rot % 2 != 0 || p_.n_rot > hd)
    return make_error("span: head_dim {} / n_rot {}: the span takes even sizes, head_dim <= {}", hd,
                      p_.n_rot, FISH_SPAN_MAX_HEAD);
  if (E % FISH_K_ALIGN || Q % FISH_K_ALIGN || F % FISH_K_ALIGN)
    return make_error("span: n_embd {}, q_dim {}, n_ff {} must be multiples of {}", E, Q, F,
                      FISH_K_ALIGN);
  if (p_.n_head % p_.n_head_kv != 0)
    return make_error("span: n_head {} is not a multiple of n_head_kv {}", p_.n_head, p_.n_head_kv);
  if (d_.max_tok < 1 || d_.n_ctx < 1 || d_.max_tok > (1 << 16))
    return make_error("span: max_tok {} / n_ctx {} out of range", d_.max_tok, d_.n_ctx);
  if (d_.inv_freq[0].size() != size_t(p_.n_rot / 2) ||
      (p_.sliding_window > 0 && d_.inv_freq[1].size() != size_t(p_.n_rot / 2)))
    return make_error("span: RoPE tables hold {} / {} frequencies, expected {}",
                      d_.inv_freq[0].size(), d_.inv_freq[1].size(), p_.n_rot / 2);
  return Status::success();
}

void VulkanSpan::layout_arena() {
  // Chunks of FISH_SPAN_CHUNK_CM tokens where prefill matmuls run on cooperative matrices (their
  // tiles want many tokens), FISH_SPAN_CHUNK on the f32 tiled kernel; never more than max_tok.
  chunk_ = std::min<int64_t>(d_.max_tok,
                             ctx_.coopmat_tiles().empty() ? FISH_SPAN_CHUNK : FISH_SPAN_CHUNK_CM);
  const int64_t kChunk = chunk_;
  const int64_t E = p_.n_embd, Q = p_.q_dim(), KV = p_.kv_dim(), F = p_.n_ff, hd = p_.head_dim;
  const uint64_t align_f = ctx_.binding_align() / 4;
  uint64_t cur = 0;
  auto region = [&](uint64_t floats) {
    const uint32_t o = uint32_t(cur);
    cur = align_up(cur + floats, align_f);
    return o;
  };
  qkv_stride_ = uint32_t(Q + 2 * KV);
  off_x_ = region(uint64_t(d_.max_tok * E));
  off_xn_ = region(uint64_t(kChunk * E));
  off_qkv_ = region(uint64_t(kChunk) * qkv_stride_);
  off_att_ = region(uint64_t(kChunk * Q));
  off_tmp_ = region(uint64_t(kChunk * E));
  off_gu_ = region(uint64_t(kChunk * 2 * F));
  off_q8_ = region(q8_bytes(uint32_t(std::max({E, Q, F}))) / 4);
  off_q8b_ = region(q8_bytes(uint32_t(std::max(Q, F))) / 4);
  if (ctx_.features().coopmat2) off_h_ = region((uint64_t(kChunk) * std::max({E, Q, F}) + 1) / 2);
  off_ss_ = region(uint64_t(FISH_Q8_MAX_TOK) * uint64_t(E / FISH_Q8_BLOCK));
  // The fused epilogues' counters: one per 32-row block of wo/down and of gate/up, then one per KV
  // head for span_attention_stream_last, then one per forward row for span_argmax's pass 3.
  n_ctr_ = uint32_t((E + F) / FISH_Q8_BLOCK + p_.n_head_kv + d_.max_tok);
  off_ctr_ = region(n_ctr_);
  parts_cap_ = uint32_t(p_.n_head) * FISH_SPAN_ATTN_SPLIT_TOK * FISH_SPAN_ATTN_MAX_SPLIT;
  off_parts_ = region(uint64_t(parts_cap_) * uint64_t(hd + 2));
  off_sink_ = region(FISH_COPY_WG);
  if (has_head_) {
    off_logits_ = region(uint64_t(p_.n_vocab) * kHeadRows);
    off_tok_ = region(kHeadRows);
  }
  arena_bytes_ = cur * 4 + 16;
}

// PARAMS: per layer its norm weights and biases (16-byte aligned: rmsnorm's vec4 path reads w),
// then one cos/sin table per RoPE variant for positions [0, n_ctx). Fills layers_' offsets.
std::vector<float> VulkanSpan::build_params() {
  std::vector<float> prm;
  auto put = [&](const std::vector<float>& v) {
    prm.resize(align_up(prm.size(), 4));
    const uint32_t o = uint32_t(prm.size());
    prm.insert(prm.end(), v.begin(), v.end());
    return o;
  };
  layers_.resize(d_.layers.size());
  for (size_t i = 0; i < d_.layers.size(); ++i) {
    const LayerWeights& L = *d_.layers[i].w;
    LayerState& s = layers_[i];
    s.w = &L;
    s.attn_norm = put(L.attn_norm);
    s.ffn_norm = put(L.ffn_norm);
    s.has_qk_norm = !L.q_norm.empty();
    if (s.has_qk_norm) {
      s.q_norm = put(L.q_norm);
      s.k_norm = put(L.k_norm);
    }
    s.has_post = !L.post_attn_norm.empty();
    if (s.has_post) {
      s.post_attn = put(L.post_attn_norm);
      s.post_ffn = put(L.post_ffn_norm);
    }
    s.has_bias = !L.bq.empty();
    if (s.has_bias) {
      s.bias = put(L.bq);
      put(L.bk);
      put(L.bv);
    }
    s.window = L.swa ? uint32_t(p_.sliding_window) : 0;
  }
  if (has_head_) out_norm_ = put(*d_.output_norm);
  const int n_var = p_.sliding_window > 0 ? 2 : 1;
  uint32_t table[2] = {0, 0};
  for (int v = 0; v < n_var; ++v) {
    table[v] = uint32_t(prm.size());
    for (int64_t pos = 0; pos < d_.n_ctx; ++pos)
      for (double f : d_.inv_freq[v]) {
        const double a = double(pos) * f;  // as Session::forward_batch
        prm.push_back(float(std::cos(a)));
        prm.push_back(float(std::sin(a)));
      }
  }
  for (size_t i = 0; i < layers_.size(); ++i)
    layers_[i].rope_table = table[d_.layers[i].w->swa ? 1 : 0];
  return prm;
}

Status VulkanSpan::upload_params(const std::vector<float>& prm) {
  FISH_ASSIGN_OR_RETURN(Buffer st, ctx_.alloc(prm.size() * 4, VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                                              Memory::host, true, "span params staging", budget_));
  std::memcpy(st.mapped, prm.data(), prm.size() * 4);
  Status s = [&]() -> Status {
    FISH_TRY(cmds_.begin());
    cmds_.copy(st, 0, params_, 0, prm.size() * 4);
    // matvec_idot_res_'s and matvec_idot_swiglu_'s counters start at 0
    cmds_.fill(arena_, uint64_t(off_ctr_) * 4, uint64_t(n_ctr_) * 4, 0);
    return cmds_.submit_and_wait(Work::transfer, "span params upload");
  }();
  ctx_.free(st);
  return s;
}

Status VulkanSpan::build_matmul(const std::map<WeightHandle, DeviceWeight>& weights,
                                WeightHandle wh, int64_t expect_out, int64_t expect_in,
                                uint32_t x_region, uint32_t x_stride, uint32_t y_off,
                                uint32_t y_stride, MatmulGroup* out, MatmulRole role) {
  auto it = weights.find(wh);
  if (wh == 0 || it == weights.end())
    return make_error("span: a layer matrix is not resident on the device");
  const DeviceWeight& w = it->second;
  if (w.n_out != expect_out || w.n_in != expect_in || w.n_in_pad != w.n_in)
    return make_error("span: {}: {} x {} (padded to {}), expected {} x {}", w.name, w.n_out, w.n_in,
                      w.n_in_pad, expect_out, expect_in);
  MatmulStep st;
  st.w = &w;
  const bool res = role == MatmulRole::residual || role == MatmulRole::down;
  const uint32_t q8 = res ? off_q8b_ : off_q8_;  // its q8_1 input
  // FISH_VK_MATVEC (the decode kernel; A/B runs) applies to spans too.
  const MatvecKernel mk = matvec_kernel(w.type, ctx_.options().matvec, ctx_.features());
  FISH_ASSIGN_OR_RETURN(st.vec, ctx_.pipeline(matmul_spec(w.type, 1, mk, ctx_.options(), w.n_in)));
  st.vec_rows = matvec_rows(mk, ctx_.options(), w.n_in);
  for (int n = 1; ctx_.options().idot_exact && mk == MatvecKernel::idot && n <= FISH_MATVEC_MAX_TOK;
       ++n) {
    const PipelineSpec spec = matvec_exact_spec(w.type, n, mk, ctx_.options(), w.n_in);
    FISH_ASSIGN_OR_RETURN(st.vec_exact[n - 1], ctx_.pipeline(spec));
    st.exact_rows[n - 1] = matvec_rows(mk, ctx_.options(), w.n_in, n);
  }
  FISH_ASSIGN_OR_RETURN(st.wide, ctx_.pipeline(matmul_module(w.type, FISH_MATVEC_WIDE_TOK, mk)));
  FISH_ASSIGN_OR_RETURN(st.tiled,
                        ctx_.pipeline(matmul_module(w.type, FISH_MATVEC_WIDE_TOK + 1, mk)));
  // Pipelines left empty for tiles the rule never picks (A/B variants unless forced). A forced
  // coopmat2 tile the driver rejects turns unavailable (VkContext::coopmat_pipeline): a second
  // pass then builds the rule's tiles that take its place.
  st.cm.assign(ctx_.coopmat_tiles().size(), Pipeline{});
  for (int pass = 0; pass < 2; ++pass) {
    bool rejected = false;
    for (size_t i = 0; i < ctx_.coopmat_tiles().size(); ++i) {
      const CoopmatTile& t = ctx_.coopmat_tiles()[i];
      if (st.cm[i].pipe != VK_NULL_HANDLE ||
          !coopmat_tile_reachable(ctx_.coopmat_tiles(), t, ctx_.options().coopmat_tile, w.type))
        continue;
      Result<Pipeline> r = ctx_.coopmat_pipeline(w.type, t);
      if (!r.ok() && t.cm2) {
        rejected = true;
        continue;
      }
      FISH_ASSIGN_OR_RETURN(st.cm[i], std::move(r));
    }
    if (!rejected) break;
  }
  st.x_region = x_region;
  st.x_stride = x_stride;
  st.y_stride = y_stride;
  for (const DeviceWeight::Part& part : w.parts) {
    st.part = &part;
    st.y_offset = y_off + part.row0;
    const BufferRange r[3] = {{part.buf.buf, 0, VK_WHOLE_SIZE},
                              {arena_.buf, uint64_t(x_region) * 4, VK_WHOLE_SIZE},
                              {arena_.buf, 0, VK_WHOLE_SIZE}};
    FISH_ASSIGN_OR_RETURN(st.set, pool_.allocate(st.vec, r));
    st.vec_set = st.set;
    if (ctx_.features().coopmat2) {
      const BufferRange rh[3] = {r[0], {arena_.buf, uint64_t(off_h_) * 4, VK_WHOLE_SIZE}, r[2]};
      FISH_ASSIGN_OR_RETURN(st.half_set, pool_.allocate(st.vec, rh));
    }
    if (mk == MatvecKernel::idot) {
      const BufferRange rq[3] = {r[0], {arena_.buf, uint64_t(q8) * 4, VK_WHOLE_SIZE}, r[2]};
      FISH_ASSIGN_OR_RETURN(st.vec_set, pool_.allocate(st.vec, rq));
      // The fused variants: all rows in one dispatch, whole 32-row blocks, E a multiple of 32.
      const VulkanOptions& o = ctx_.options();
      // A block epilogue's lanes: 8 a token (q8_1_store.glsl), so >= 8 x FISH_MATVEC_MAX_TOK.
      const uint32_t threads =
          idot_groups(w.n_in, o.idot_groups) * idot_workgroup(w.n_in, o.idot_wg);
      const bool one = w.parts.size() == 1 && w.n_out % FISH_Q8_BLOCK == 0 &&
                       p_.n_embd % FISH_Q8_BLOCK == 0 && FISH_Q8_BLOCK % st.vec_rows == 0 &&
                       threads >= 8 * FISH_MATVEC_MAX_TOK;
      // The norm's block epilogue only when asked for (FISH_VK_NORM_FUSE=1): unmeasured on a GPU.
      const bool norm = one && o.norm_fuse == 1;
      // FISH_VK_IDOT_ROWS_ACT: the act variants' rows, whole blocks of them too.
      st.act_rows = act_rows(o) * idot_groups(w.n_in, o.idot_groups);
      const bool act = one && o.act_fuse != 0 && role == MatmulRole::gate_up &&
                       FISH_Q8_BLOCK % st.act_rows == 0 && p_.arch != Arch::gemma3;  // swiglu only
      auto variant = [&](const char* v) {
        return ctx_.pipeline(matmul_res_spec(w.type, o, w.n_in, v));
      };
      if (norm && res) {
        FISH_ASSIGN_OR_RETURN(st.res, variant("matvec_idot_res"));
        const BufferRange rr[4] = {rq[0], rq[1], rq[2], {params_.buf, 0, VK_WHOLE_SIZE}};
        FISH_ASSIGN_OR_RETURN(st.res_set, pool_.allocate(st.res, rr));
      }
      if (norm && (role == MatmulRole::qkv || role == MatmulRole::gate_up)) {
        FISH_ASSIGN_OR_RETURN(st.scaled, variant("matvec_idot_scaled"));
      }
      if (act) {
        FISH_ASSIGN_OR_RETURN(st.act, variant("matvec_idot_swiglu"));
        for (int n = 1; o.idot_exact && o.idot_exact_fused && n <= FISH_MATVEC_MAX_TOK; ++n) {
          const PipelineSpec spec = matmul_res_spec(w.type, o, w.n_in, "matvec_idot_swiglu", n);
          FISH_ASSIGN_OR_RETURN(st.act_exact[n - 1], ctx_.pipeline(spec));
        }
      }
      if (act && norm) {
        FISH_ASSIGN_OR_RETURN(st.act_scaled, variant("matvec_idot_swiglu_scaled"));
      }
      // FISH_VK_NORM_FUSE=2: wo / down add into the residual; q/k/v and gate / up read it and
      // normalise it in FISH_PN_WG-thread workgroups of row groups of the rule's threads, each
      // a whole number of subgroups (pn_reduce_store), as bitwise as the separate norm.
      const DeviceFeatures& f = ctx_.features();
      const uint32_t gt = idot_workgroup(w.n_in, o.idot_wg);
      const bool pro = o.norm_fuse == 2 && w.parts.size() == 1 && w.n_out % FISH_Q8_BLOCK == 0;
      if (pro && res) {
        FISH_ASSIGN_OR_RETURN(st.acc, variant("matvec_idot_acc"));
      }
      const uint32_t sg_max = std::max(f.subgroup_size, f.subgroup_max);
      if (pro && (role == MatmulRole::qkv || role == MatmulRole::gate_up) && w.n_in == p_.n_embd &&
          w.n_in <= FISH_PN_MAX_K && gt <= FISH_PN_WG && FISH_PN_WG % gt == 0 && sg_max <= gt &&
          gt % sg_max == 0 && FISH_PN_WG <= ctx_.limits().maxComputeWorkGroupInvocations &&
          FISH_PN_WG <= ctx_.limits().maxComputeWorkGroupSize[0]) {
        st.pn_rows = pn_rows(o, w.n_in);
        FISH_ASSIGN_OR_RETURN(st.pn, variant("matvec_idot_pn"));
        const BufferRange rp[4] = {
            r[0], {arena_.buf, 0, VK_WHOLE_SIZE}, r[2], {params_.buf, 0, VK_WHOLE_SIZE}};
        FISH_ASSIGN_OR_RETURN(st.pn_set, pool_.allocate(st.pn, rp));
        // The act epilogue's block: a workgroup's rows within one 32-row block.
        if (act && FISH_Q8_BLOCK % st.pn_rows == 0) {
          FISH_ASSIGN_OR_RETURN(st.act_pn, variant("matvec_idot_swiglu_pn"));
        }
      }
    }
    out->steps.push_back(st);
  }
  out->k = uint32_t(expect_in);
  out->x_stride = x_stride;
  out->q8_off = q8;
  // The group's input copies, written once before its steps: q8_1 for the idot decode kernels,
  // f16 rows for the coopmat2 tiles. A typeless module reads the input (X) and writes `to` (Y).
  auto input_copy = [&](Pipeline& p, const char* module, uint32_t to) -> Result<VkDescriptorSet> {
    if (!p.pipe) {
      FISH_ASSIGN_OR_RETURN(p, ctx_.pipeline(module));
    }
    const BufferRange r[3] = {{arena_.buf, 0, VK_WHOLE_SIZE},  // W: not read
                              {arena_.buf, uint64_t(x_region) * 4, VK_WHOLE_SIZE},
                              {arena_.buf, uint64_t(to) * 4, VK_WHOLE_SIZE}};
    return pool_.allocate(p, r);
  };
  if (mk == MatvecKernel::idot && !out->quant_set) {
    FISH_ASSIGN_OR_RETURN(out->quant_set, input_copy(quant_, "quant_q8_1", q8));
  }
  if (ctx_.features().coopmat2 && !out->half_set) {
    FISH_ASSIGN_OR_RETURN(out->half_set, input_copy(half_, "to_f16", off_h_));
  }
  return Status::success();
}

Status VulkanSpan::build_layer_matmuls(const std::map<WeightHandle, DeviceWeight>& weights) {
  const int64_t E = p_.n_embd, Q = p_.q_dim(), KV = p_.kv_dim(), F = p_.n_ff;
  uint32_t n_sets = 1;  // + the ops set
  for (const SpanDesc::Layer& l : d_.layers)
    for (WeightHandle w : {l.wq, l.wk, l.wv, l.wo, l.gate, l.up, l.down}) {
      auto it = weights.find(w);
      if (w == 0 || it == weights.end())
        return make_error("span: a layer matrix is not resident on the device");
      // + the q8_1 input's, the f16 input's (+ FISH_VK_PREFILL_F16's three)
      n_sets += (ctx_.options().prefill_f16 != 0 ? 6 : 3) * uint32_t(it->second.parts.size());
    }
  n_sets += 2 * uint32_t(d_.layers.size());  // wo's and down's residual variant (4 bindings)
  n_sets += 5 * uint32_t(d_.layers.size());  // q/k/v's and gate / up's pn variant (4 bindings)
  n_sets += 8 * uint32_t(d_.layers.size());  // quant_q8_1 and to_f16 per matmul group
  n_sets += 1;                               // the pipelined decode's embedding lookup
  if (has_head_) {
    auto it = weights.find(d_.output);
    if (it == weights.end()) return make_error("span: the output matrix is not resident");
    n_sets += 3 * uint32_t(it->second.parts.size()) + 2;
  }
  FISH_ASSIGN_OR_RETURN(pool_, DescriptorPool::create(ctx_, n_sets, 4 * n_sets));
  for (size_t i = 0; i < d_.layers.size(); ++i) {
    const SpanDesc::Layer& l = d_.layers[i];
    LayerState& s = layers_[i];
    const uint32_t qs = qkv_stride_, e = uint32_t(E), f2 = uint32_t(2 * F);
    FISH_TRY(build_matmul(weights, l.wq, Q, E, off_xn_, e, off_qkv_, qs, &s.qkv, MatmulRole::qkv));
    FISH_TRY(build_matmul(weights, l.wk, KV, E, off_xn_, e, off_qkv_ + uint32_t(Q), qs, &s.qkv,
                          MatmulRole::qkv));
    FISH_TRY(build_matmul(weights, l.wv, KV, E, off_xn_, e, off_qkv_ + uint32_t(Q + KV), qs, &s.qkv,
                          MatmulRole::qkv));
    FISH_TRY(build_matmul(weights, l.wo, E, Q, off_att_, uint32_t(Q), off_tmp_, e, &s.wo,
                          MatmulRole::residual));
    FISH_TRY(build_matmul(weights, l.gate, F, E, off_xn_, e, off_gu_, f2, &s.gate_up,
                          MatmulRole::gate_up));
    FISH_TRY(build_matmul(weights, l.up, F, E, off_xn_, e, off_gu_ + uint32_t(F), f2, &s.gate_up,
                          MatmulRole::gate_up));
    FISH_TRY(
        build_matmul(weights, l.down, E, F, off_gu_, f2, off_tmp_, e, &s.down, MatmulRole::down));
  }
  if (has_head_) {  // logits of one row (the last token's) from xn row 0
    const uint32_t V = uint32_t(p_.n_vocab);
    FISH_TRY(build_matmul(weights, d_.output, V, E, off_xn_, uint32_t(E), off_logits_, V, &head_));
  }
  pro_norm_ok_ = pro_norm_layers();
  return Status::success();
}

Status VulkanSpan::load_ops() {
  static_assert(FISH_SPAN_ARENA == 0 && FISH_SPAN_PARAMS == 1 && FISH_SPAN_KV == 2);
  // matvec_idot's PRONORM prologue is span_rmsnorm_q8 with its thread mapping (the same sums).
  static_assert(FISH_PN_WG == FISH_SPAN_NORM_WG && FISH_PN_CACHE == FISH_SPAN_NORM_CACHE);
  struct Entry {
    Pipeline* p;
    const char* module;
  };
  const Entry table[] = {
      {&ops_.rmsnorm, "span_rmsnorm"},
      {&ops_.add_rmsnorm, "span_add_rmsnorm"},
      {&ops_.head_rmsnorm, "span_head_rmsnorm"},
      {&ops_.rope_kv, "span_rope_kv"},
      {&ops_.attention, "span_attention"},
      {&ops_.attention_split, "span_attention_split"},
      {&ops_.attention_combine, "span_attention_combine"},
      {&ops_.attention_flash, "span_attention_flash"},
      {&ops_.add, "span_add"},
      {&ops_.bias, "span_bias"},
      {&ops_.act, p_.arch == Arch::gemma3 ? "span_geglu" : "span_swiglu"},
  };
  for (const Entry& e : table) {
    FISH_ASSIGN_OR_RETURN(*e.p, ctx_.pipeline(e.module));
  }
  if (has_head_) {
    FISH_ASSIGN_OR_RETURN(ops_.argmax, ctx_.pipeline("span_argmax"));
  }
  if (const std::optional<FlashCmTile> t =
          pick_flash_cm_tile(ctx_, uint32_t(p_.head_dim), ctx_.options().flash_cm)) {
    FISH_ASSIGN_OR_RETURN(ops_.attention_flash_cm, ctx_.pipeline(flash_cm_spec(ctx_, *t)));
    ops_.flash_cm = *t;
  }
  // Its row reductions keep one slot per subgroup of >= 4 lanes.
  if (ctx_.options().attn_decode != 0 && ctx_.features().subgroup_min >= 4) {
    FISH_ASSIGN_OR_RETURN(ops_.attention_decode, ctx_.pipeline("span_attention_decode"));
  }
  if (ctx_.options().attn_short != 0 && ctx_.features().subgroup_min >= 4 && p_.head_dim % 4 == 0) {
    FISH_ASSIGN_OR_RETURN(ops_.attention_short, ctx_.pipeline(short_module("")));
    if (ctx_.limits().maxComputeWorkGroupInvocations >= FISH_SPAN_SHORT_WIDE_WG &&
        ctx_.limits().maxComputeWorkGroupSize[0] >= FISH_SPAN_SHORT_WIDE_WG) {
      FISH_ASSIGN_OR_RETURN(ops_.attention_short_wide, ctx_.pipeline("span_attention_short_wide"));
    }
  }
  if (ctx_.options().attn_stream != 0 &&
      attention_stream_fits(uint32_t(p_.head_dim), uint32_t(p_.n_head / p_.n_head_kv),
                            ctx_.features().subgroup_min, ctx_.features().subgroup_max)) {
    FISH_ASSIGN_OR_RETURN(ops_.attention_stream,
                          ctx_.pipeline(stream_spec("span_attention_stream")));
    if (ctx_.options().attn_stream == 2) {
      FISH_ASSIGN_OR_RETURN(ops_.attention_stream_last,
                            ctx_.pipeline(stream_spec("span_attention_stream_last")));
    }
  }
  return Status::success();
}

std::string VulkanSpan::short_module(const char* suffix) const {
  return fmt::format("span_attention_short{}{}", ctx_.options().attn_short_prev ? "_prev" : "",
                     suffix);
}

PipelineSpec VulkanSpan::stream_spec(const char* module) const {
  PipelineSpec spec;
  spec.module = module;
  spec.constants = {uint32_t(p_.head_dim), uint32_t(p_.n_head / p_.n_head_kv),  // HD, ROWS,
                    ctx_.options().stream_pipe ? 1u : 0u};                      // PIPE
  return spec;
}

bool VulkanSpan::wants_head() const {
  return ctx_.options().head && d_.output != 0 && d_.output_norm != nullptr &&
         d_.first_layer + int64_t(d_.layers.size()) == p_.n_layer;
}

Status VulkanSpan::init(const std::map<WeightHandle, DeviceWeight>& weights) {
  FISH_TRY(check_shapes());
  std::vector<const DeviceWeight*> mine;
  for (const SpanDesc::Layer& l : d_.layers)
    for (WeightHandle h : {l.wq, l.wk, l.wv, l.wo, l.gate, l.up, l.down, d_.output, d_.embed})
      if (auto it = weights.find(h); it != weights.end()) mine.push_back(&it->second);
  budget_ = tightest_budget(mine);
  const int64_t E = p_.n_embd, KV = p_.kv_dim(), hd = p_.head_dim;
  for (size_t i = 0; i < d_.layers.size(); ++i) {
    const LayerWeights& L = *d_.layers[i].w;
    const int64_t il = d_.first_layer + int64_t(i);
    if (int64_t(L.attn_norm.size()) != E || int64_t(L.ffn_norm.size()) != E)
      return make_error("span: layer {}: norm sizes", il);
    if (!L.q_norm.empty() && (int64_t(L.q_norm.size()) != hd || int64_t(L.k_norm.size()) != hd))
      return make_error("span: layer {}: q/k norm of {} / {} values, expected {}", il,
                        L.q_norm.size(), L.k_norm.size(), hd);
    if (!L.post_attn_norm.empty() &&
        (int64_t(L.post_attn_norm.size()) != E || int64_t(L.post_ffn_norm.size()) != E))
      return make_error("span: layer {}: post norm sizes", il);
    if (!L.bq.empty() && (int64_t(L.bq.size()) != p_.q_dim() || int64_t(L.bk.size()) != KV ||
                          int64_t(L.bv.size()) != KV))
      return make_error("span: layer {}: bias sizes", il);
  }
  has_head_ = wants_head();
  if (has_head_ && int64_t(d_.output_norm->size()) != E)
    return make_error("span: output norm of {} values, expected n_embd {}", d_.output_norm->size(),
                      E);
  layout_arena();
  const std::vector<float> prm = build_params();
  const uint64_t range = ctx_.max_binding_bytes();
  if (arena_bytes_ > range || prm.size() * 4 > range)
    return make_error("span: arena {} / params {} bytes exceed the storage buffer range {}",
                      arena_bytes_, prm.size() * 4, range);
  if (uint64_t(d_.layers.size()) * uint64_t(d_.n_ctx) * uint64_t(KV) * 4 > range)
    return make_error("span: a KV of {} layers x {} positions exceeds the storage buffer range",
                      d_.layers.size(), d_.n_ctx);

  FISH_ASSIGN_OR_RETURN(
      arena_, ctx_.alloc(arena_bytes_, kDeviceUsage, Memory::device, true, "span arena", budget_));
  FISH_ASSIGN_OR_RETURN(params_, ctx_.alloc(prm.size() * 4 + 16, kDeviceUsage, Memory::device, true,
                                            "span params", budget_));
  FISH_ASSIGN_OR_RETURN(
      x_host_, ctx_.alloc(uint64_t(d_.max_tok * E) * 4,
                          VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                          Memory::host, true, "span x staging", budget_));
  if (has_head_) {
    FISH_ASSIGN_OR_RETURN(head_host_, ctx_.alloc(uint64_t(p_.n_vocab + kHeadRows) * 4,
                                                 VK_BUFFER_USAGE_TRANSFER_DST_BIT, Memory::host,
                                                 true, "span head staging", budget_));
  }
  FISH_ASSIGN_OR_RETURN(cmds_, Commands::create(ctx_));
  if (ctx_.options().record_ahead) {
    FISH_ASSIGN_OR_RETURN(ahead_.cmds, Commands::create(ctx_));
  }
  FISH_TRY(upload_params(prm));
  FISH_TRY(load_ops());
  FISH_TRY(build_layer_matmuls(weights));
  FISH_TRY(build_prefetch());
  // The norms' fused q8_1 copy: when a q/k/v or gate/up matmul decodes with idot (quant_ loaded).
  if (quant_.pipe && p_.n_embd % FISH_Q8_BLOCK == 0) {  // subgroups >= 8 lanes: matvec_kernel
    FISH_ASSIGN_OR_RETURN(ops_.rmsnorm_q8, ctx_.pipeline("span_rmsnorm_q8"));
    FISH_ASSIGN_OR_RETURN(ops_.add_rmsnorm_q8, ctx_.pipeline("span_add_rmsnorm_q8"));
    if (p_.head_dim % FISH_Q8_BLOCK == 0) {
      FISH_ASSIGN_OR_RETURN(ops_.attention_q8, ctx_.pipeline("span_attention_q8"));
      FISH_ASSIGN_OR_RETURN(ops_.attention_combine_q8, ctx_.pipeline("span_attention_combine_q8"));
      if (ops_.attention_decode.pipe) {
        FISH_ASSIGN_OR_RETURN(ops_.attention_decode_q8, ctx_.pipeline("span_attention_decode_q8"));
      }
      if (ops_.attention_short.pipe) {
        FISH_ASSIGN_OR_RETURN(ops_.attention_short_q8, ctx_.pipeline(short_module("_q8")));
      }
      if (ops_.attention_short_wide.pipe) {
        FISH_ASSIGN_OR_RETURN(ops_.attention_short_wide_q8,
                              ctx_.pipeline("span_attention_short_wide_q8"));
      }
      if (ops_.attention_stream.pipe) {
        FISH_ASSIGN_OR_RETURN(ops_.attention_stream_q8,
                              ctx_.pipeline(stream_spec("span_attention_stream_q8")));
      }
      if (ops_.attention_stream_last.pipe) {
        FISH_ASSIGN_OR_RETURN(ops_.attention_stream_last_q8,
                              ctx_.pipeline(stream_spec("span_attention_stream_last_q8")));
      }
    }
    if (p_.n_ff % FISH_Q8_BLOCK == 0) {
      FISH_ASSIGN_OR_RETURN(
          ops_.act_q8, ctx_.pipeline(p_.arch == Arch::gemma3 ? "span_geglu_q8" : "span_swiglu_q8"));
    }
  }
  FISH_ASSIGN_OR_RETURN(
      ops_set_, pool_.allocate(ops_.rmsnorm, std::vector<BufferRange>{
                                                 {arena_.buf}, {params_.buf}, {arena_.buf}}));
  if (ctx_.options().profile) {
    // Level 1: the forward's start and end. Level 2: <= 18 stages a layer, the head's 3 (+ its
    // quant_q8_1); FISH_VK_VERIFY_SPLIT runs a verify as 2 chunks and 2 head passes.
    const int64_t n_chunks = std::max<int64_t>((d_.max_tok + chunk_ - 1) / chunk_, 2);
    stage_queries_ = ctx_.options().profile >= 2;
    n_queries_ = stage_queries_ ? uint32_t(n_chunks * int64_t(layers_.size()) * 24 + 2 + 8) : 2;
    FISH_ASSIGN_OR_RETURN(queries_, create_timestamps(ctx_, n_queries_));
  }
  FISH_TRY(init_chain(weights));
  FISH_TRY(reserve_locked(d_.kv_reserve > 0 ? std::min(d_.kv_reserve, d_.n_ctx) : d_.n_ctx));
  FISH_TRY(build_prefill_f16());  // after the KV: auto leaves room for its growth
  ctx_.add_span(this);
  registered_ = true;
  return Status::success();
}

Status VulkanSpan::reserve_locked(int64_t n) {
  ahead_.valid = false;  // a forward recorded ahead binds the old KV, at the old offsets
  if (n > d_.n_ctx) return make_error("span: kv_reserve({}) beyond n_ctx {}", n, d_.n_ctx);
  if (n <= kv_cap_) return Status::success();
  // K then V per layer, cap positions of kv_dim / 2 words each; a larger cache copies the valid
  // positions of every layer over in one submit.
  const uint64_t words_pos = uint64_t(p_.kv_dim() / 2);
  const uint64_t n_layer = layers_.size();
  FISH_ASSIGN_OR_RETURN(Buffer nk, ctx_.alloc(n_layer * 2 * uint64_t(n) * words_pos * 4 + 16,
                                              kDeviceUsage, Memory::device, true,
                                              fmt::format("span KV ({} positions)", n), budget_));
  if (kv_.buf && kv_len_ > 0) {
    std::vector<VkBufferCopy> copies;
    for (uint64_t l = 0; l < 2 * n_layer; ++l)  // K and V of each layer
      copies.push_back({l * uint64_t(kv_cap_) * words_pos * 4, l * uint64_t(n) * words_pos * 4,
                        uint64_t(kv_len_) * words_pos * 4});
    Status s = [&]() -> Status {
      FISH_TRY(cmds_.begin());
      cmds_.copy(kv_, nk, copies);
      return cmds_.submit_and_wait(Work::transfer, "span KV grow");
    }();
    if (!s.ok()) {
      ctx_.free(nk);
      return s;
    }
  }
  ctx_.free(kv_);
  kv_ = nk;
  kv_cap_ = n;
  const BufferRange r[3] = {{arena_.buf}, {params_.buf}, {kv_.buf}};
  pool_.write(ops_set_, r);
  return Status::success();
}

Status VulkanSpan::forward_head(const float* x, int64_t n_tok, int64_t pos0, float* logits,
                                int32_t* token) {
  if (!has_head_) return make_error("span: no output head (FISH_VK_HEAD=0, or no output matrix)");
  if (token == nullptr) return make_error("span: forward_head needs somewhere to put the token");
  return run(x, n_tok, pos0, nullptr, logits, token);
}

Status VulkanSpan::forward_head_rows(const float* x, int64_t n_tok, int64_t pos0, int32_t* tokens) {
  if (!has_head_) return make_error("span: no output head (FISH_VK_HEAD=0, or no output matrix)");
  if (n_tok < 1 || n_tok > kHeadRows)
    return make_error("span: the head takes 1..{} rows at once, not {}", kHeadRows, n_tok);
  return run(x, n_tok, pos0, nullptr, nullptr, tokens, n_tok);
}

Status VulkanSpan::start_positions(int64_t pos0, int64_t n) {
  if (ctx_.lost())
    return make_error("span: the device is lost ({}); the engine runs on the CPU",
                      ctx_.lost_reason());
  if (pos0 < 0 || pos0 > kv_len_)
    return make_error("span: forward at position {} but the device KV holds {} (a gap)", pos0,
                      kv_len_);
  if (pos0 + n > d_.n_ctx)
    return make_error("span: positions {}..{} exceed n_ctx {}", pos0, pos0 + n - 1, d_.n_ctx);
  kv_len_ = pos0;  // positions >= pos0 are rewritten
  if (pos0 + n > kv_cap_)
    FISH_TRY(reserve_locked(std::min(d_.n_ctx, std::max(pos0 + n, 2 * kv_cap_))));
  return Status::success();
}

Status VulkanSpan::run(const float* x, int64_t n_tok, int64_t pos0, float* x_out, float* logits,
                       int32_t* token, int64_t head_rows) {
  std::lock_guard lock(ctx_.mutex());
  if (n_tok < 1 || n_tok > d_.max_tok)
    return make_error("span: forward of {} tokens, the span takes 1..{}", n_tok, d_.max_tok);
  FISH_TRY(start_positions(pos0, n_tok));
  const uint64_t x_bytes = uint64_t(n_tok * p_.n_embd) * 4;
  std::memcpy(x_host_.mapped, x, x_bytes);

  const Forward f{n_tok, pos0, token != nullptr, logits != nullptr, token ? head_rows : 0};
  const auto t_record = std::chrono::steady_clock::now();
  if (ahead_.valid && ahead_.f == f) {  // recorded during the previous forward
    swap_ahead();
    ++ahead_hits_;
  } else {
    FISH_TRY(record_forward(f));
  }
  ahead_.valid = false;
  // The likely next forward (one more token after this one, the same outputs), recorded while
  // the GPU runs this one: decode then pays no recording time between its steps.
  const Forward next{1, pos0 + n_tok, f.head, f.logits, f.head ? 1 : 0};
  const bool prepare = ctx_.options().record_ahead && next.pos0 + 1 <= kv_cap_;
  auto record_next = [&] {
    swap_ahead();
    ahead_.valid = record_forward(next).ok();
    ahead_.f = next;
    swap_ahead();
  };
  // On an error (the context is then lost) x is untouched and kv_len_ stays at pos0: nothing at
  // or past it is trusted.
  const auto t_submit = std::chrono::steady_clock::now();
  FISH_TRY(cmds_.submit_and_wait(Work::compute, "span forward",
                                 prepare ? std::function<void()>(record_next) : nullptr));
  const double wait_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_submit)
          .count();
  if (queries_) {
    host_record_ms_ += std::chrono::duration<double, std::milli>(t_submit - t_record).count();
    host_wait_ms_ += wait_ms;
  }
  const uint64_t V = uint64_t(p_.n_vocab);
  if (token != nullptr) {
    const auto* h = static_cast<const uint8_t*>(head_host_.mapped);
    std::memcpy(token, h + V * 4, size_t(head_rows) * 4);  // u32 ids < n_vocab as int32
    if (logits != nullptr) std::memcpy(logits, h, V * 4);
  } else {
    std::memcpy(x_out, x_host_.mapped, x_bytes);
  }
  kv_len_ = pos0 + n_tok;
  read_profile(n_tok, wait_ms);
  return Status::success();
}

Status VulkanSpan::record_forward(const Forward& f) {
  const uint64_t x_bytes = uint64_t(f.n_tok * p_.n_embd) * 4;
  FISH_TRY(cmds_.begin());
  used_queries_ = 0;
  step_of_.clear();
  if (queries_) ctx_.vk().vkCmdResetQueryPool(cmds_.cmd(), queries_, 0, n_queries_);
  if (f.chain >= 0) {
    record_embed(f);
  } else {
    cmds_.copy(x_host_, 0, arena_, uint64_t(off_x_) * 4, x_bytes);
    cmds_.barrier(Sync::transfer, Sync::compute);
  }
  if (queries_) {  // the reference timestamp; not a stage
    cmds_.timestamp(queries_, 0);
    used_queries_ = 1;
  }
  // Chunks in order: a chunk's attention reads the KV the earlier chunks wrote (causal).
  for (int64_t t0 = 0, c = forward_chunk(f.n_tok); t0 < f.n_tok; t0 += c)
    record_chunk(t0, std::min(c, f.n_tok - t0), f.pos0 + t0);
  const uint64_t V = uint64_t(p_.n_vocab);
  if (f.head) record_head(f.n_tok - f.head_rows, f.head_rows);
  if (queries_ && !stage_queries_) {  // level 1: the forward's end (its stages untimed)
    cmds_.timestamp(queries_, 1);
    used_queries_ = 2;
  }
  cmds_.barrier(Sync::compute, Sync::transfer);
  if (f.chain >= 0) {  // a pipelined step's id, into its buffer's slot
    cmds_.copy(arena_, uint64_t(off_tok_) * 4, chain_.host, uint64_t(f.chain) * 4, 4);
  } else if (f.head) {  // the ids, and the logits when asked; x stays on the device
    cmds_.copy(arena_, uint64_t(off_tok_) * 4, head_host_, V * 4, uint64_t(f.head_rows) * 4);
    if (f.logits) cmds_.copy(arena_, uint64_t(off_logits_) * 4, head_host_, 0, V * 4);
  } else {
    cmds_.copy(arena_, uint64_t(off_x_) * 4, x_host_, 0, x_bytes);
  }
  cmds_.barrier(Sync::transfer, Sync::host);
  return Status::success();
}

void VulkanSpan::swap_ahead() {
  std::swap(cmds_, ahead_.cmds);
  std::swap(step_of_, ahead_.steps);
  std::swap(used_queries_, ahead_.used_queries);
}

std::string VulkanSpan::kernels() const {
  const std::string prefill =
      ops_.attention_flash_cm.pipe
          ? fmt::format("{} {} x {}", ops_.flash_cm.variant == 2 ? "flash_cm2" : "flash_cm",
                        ops_.flash_cm.queries(), ops_.flash_cm.keys)
          : "flash f32";
  const int dec = ctx_.options().attn_decode;
  const std::string decode = !ops_.attention_decode.pipe ? "split-K"
                             : dec == 1
                                 ? "fused"
                                 : fmt::format("split-K (fused from {} keys)", kAttnDecodeMinKeys);
  std::string shortk;
  if (ops_.attention_short.pipe && dec != 1)
    shortk = ctx_.options().attn_short == 1
                 ? fmt::format("short (one token, <= {} keys{}) then ", FISH_SPAN_SHORT_KEYS,
                               ops_.attention_short_wide.pipe
                                   ? fmt::format("; wide past {}", kAttnShortKeys)
                                   : "")
                 : fmt::format("short (one token, <= {} keys) then ", kAttnShortKeys);
  const std::string rec = fmt::format(
      "{}{}{}{}{}", ctx_.options().record_ahead ? "recorded ahead" : "recorded each forward",
      prefetch_note(), chain_note(), norms_note(), chunks_note());
  if (ops_.attention_stream.pipe && !(ctx_.options().attn_stream < 0 && dec == 1))  // decode
    return fmt::format(
        "attention: prefill {}, decode {}stream ({}), verify {}; {}", prefill,
        ctx_.options().attn_stream < 0 ? shortk : "",
        ops_.attention_stream_last.pipe ? "splits merged by the last workgroup" : "+ combine",
        decode, rec);
  return fmt::format("attention: prefill {}, decode {}{}; {}", prefill, shortk, decode, rec);
}

Result<std::unique_ptr<LayerSpan>> create_vulkan_span(
    VkContext& ctx, const SpanDesc& desc, const std::map<WeightHandle, DeviceWeight>& weights) {
  if (ctx.lost()) return make_error("span: the device is lost ({})", ctx.lost_reason());
  auto span = std::make_unique<VulkanSpan>(ctx, desc);
  if (Status s = span->init(weights); !s.ok()) {
    span->release();  // the caller holds the device mutex
    return s.take_error();
  }
  return std::unique_ptr<LayerSpan>(std::move(span));
}

}  // namespace fish::vk
