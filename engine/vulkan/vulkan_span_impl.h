// VulkanSpan, the Vulkan LayerSpan (vulkan_span.h), shared by its source files: vulkan_span.cpp
// (creation, KV growth, forward), vulkan_span_record.cpp (the layer graph recorded into the
// forward's command buffer), vulkan_span_profile.cpp (FISH_GPU_PROFILE's timestamps and line) and
// vulkan_span_decode.cpp (the pipelined greedy decode).
#pragma once

#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/layer_span.h"
#include "engine/vulkan/device_weight.h"
#include "engine/vulkan/flash_cm.h"
#include "engine/vulkan/prefetch.h"
#include "engine/vulkan/vk_context.h"
#include "fish_vk_layout.h"
#include "fish_vk_span.h"

namespace fish::vk {

// Profile stages (FISH_GPU_PROFILE=2).
// kAttnDecode: span_attention_decode, the short-batch attention with RoPE and the KV store fused
// in (and its split-K combine), or span_attention_short (one decode token at a short context);
// kRopeKv: span_rope_kv ahead of the other attention kernels.
// kQuant: quant_q8_1, the integer-dot matvecs' activation rounding (FISH_VK_MATVEC idot).
// kArgmax: the output head's span_argmax (its norm and matvec count as rmsnorm and matvec).
enum Stage {
  kMatvec,
  kRmsnorm,
  kAttention,
  kAttnDecode,
  kActMul,
  kAdd,
  kRopeKv,
  kQuant,
  kArgmax,
  kNumStages
};
inline constexpr const char* kStageNames[kNumStages] = {
    "matvec",        "rmsnorm", "attention", "attention+RoPE+KV", "act*mul", "add",
    "RoPE+KV store", "q8_1",    "argmax"};

// One matmul of a layer: a weight part bound as W, its input region as X, ARENA as Y.
// What a span matmul's decode kernel may fuse (build_matmul): nothing (the head); q/k/v (the
// norm's scale); wo (the residual add and the next norm); gate / up (the norm's scale, act*mul);
// down (as wo). wo and down read their q8_1 input from off_q8b_, the rest from off_q8_, so a
// block epilogue never writes what its own dispatch still reads.
enum class MatmulRole { plain, qkv, residual, gate_up, down };

struct MatmulStep {
  const DeviceWeight* w = nullptr;
  const DeviceWeight::Part* part = nullptr;
  Pipeline vec, wide, tiled;  // the decode kernel (FISH_VK_MATVEC's rule), matvec8_, matmul_
  // With FISH_VK_IDOT_EXACT, vec specialised to n tokens at [n - 1] (matvec_exact_spec; bound
  // with vec_set, the same layout); else empty, and vec serves every count.
  Pipeline vec_exact[FISH_MATVEC_MAX_TOK];
  uint32_t exact_rows[FISH_MATVEC_MAX_TOK] = {};  // their rows a workgroup (matvec_rows)
  std::vector<Pipeline> cm;  // matmul_cm_<type> per tile of VkContext::coopmat_tiles()
  VkDescriptorSet set = VK_NULL_HANDLE;
  VkDescriptorSet vec_set = VK_NULL_HANDLE;  // the decode kernel's: X the q8_1 region for idot
  // The fused variants of an idot decode kernel in one part (matvec_idot.comp.glsl; null where
  // the role or the knobs rule them out): res (wo / down: y += W x into the residual rows, then
  // each 32-row block's share of the next rmsnorm; res_set adds PARAMS), scaled (q/k/v, gate / up
  // behind res: times the norm's 1 / rms), act and act_scaled (gate / up: silu(gate) * up per
  // 32-row block, behind the separate norm or res). All but res bind vec_set.
  Pipeline res, scaled, act, act_scaled;
  // With FISH_VK_IDOT_EXACT_FUSED, act specialised to n tokens at [n - 1]; else empty.
  Pipeline act_exact[FISH_MATVEC_MAX_TOK];
  VkDescriptorSet res_set = VK_NULL_HANDLE;
  // FISH_VK_NORM_FUSE=2's, for one-token decode forwards: acc (wo / down: y += W x into the
  // residual rows; vec_set), pn (q/k/v, gate / up: the rmsnorm of the residual row in every
  // workgroup's prologue) and act_pn (gate / up, with silu(gate) * up per 32-row block). pn_set
  // binds X to ARENA from its start (the residual rows) and PARAMS fourth; pn_rows: the rows of
  // a pn workgroup (matmul_grid's vec_rows).
  Pipeline acc, pn, act_pn;
  VkDescriptorSet pn_set = VK_NULL_HANDLE;
  uint32_t pn_rows = 0;
  // A coopmat2 tile's (matmul_cm2_<type>): X the group's f16 copy at off_h_ (null: no cm2 tile).
  VkDescriptorSet half_set = VK_NULL_HANDLE;
  uint32_t x_stride = 0, y_stride = 0, y_offset = 0;  // floats (Y: from ARENA's start)
  uint32_t vec_rows = FISH_MATVEC_ROWS;               // the decode kernel's rows a workgroup
  uint32_t act_rows = FISH_MATVEC_ROWS;  // act / act_exact / act_scaled's (FISH_VK_IDOT_ROWS_ACT)
  uint32_t stream = 0;    // its part's range in the span's prefetch stream (build_prefetch)
  uint32_t x_region = 0;  // ARENA floats: its f32 input rows (set's X)
  // FISH_VK_PREFILL_F16 (build_prefill_f16; null where it never applies): dequant_f16_<type>
  // writing the part's f16 copy into wh_ at wh_off (deq_set), and the f16 kernels over it:
  // matmul_f16 / matmul_cm_f16 (set16: X the f32 input) per tile, matmul_cm2_f16 (half_set16:
  // X the group's f16 copy at off_h_).
  Pipeline deq, tiled16;
  std::vector<Pipeline> cm16;
  VkDescriptorSet deq_set = VK_NULL_HANDLE, set16 = VK_NULL_HANDLE, half_set16 = VK_NULL_HANDLE;
  uint64_t wh_off = 0;
  // FISH_VK_PREFILL_F16_RESIDENT: its index in wh_written_ (build_prefill_f16).
  uint32_t copy_id = 0;
};

// The matmuls of one input (q/k/v, gate/up, wo, down) and, when one of them decodes with
// matvec_idot_, the quant_q8_1 dispatch that writes their input to ARENA's q8_1 region first
// (shared by the group's steps).
struct MatmulGroup {
  std::vector<MatmulStep> steps;
  // The profile's name of the group ("q4_k 4096x4096 + q6_k 1024x4096") and its weights' device
  // bytes (every step's rows): the matvec breakdown of FISH_GPU_PROFILE=2.
  std::string label() const;
  uint64_t bytes() const;
  VkDescriptorSet quant_set = VK_NULL_HANDLE;  // null: no step decodes with idot
  // to_f16's, writing the input's f16 copy at off_h_ for the coopmat2 tiles (null: none here).
  VkDescriptorSet half_set = VK_NULL_HANDLE;
  uint32_t q8_off = 0;  // ARENA floats: the q8_1 input its idot steps read (off_q8_ / off_q8b_)
  uint32_t k = 0, x_stride = 0;  // the input's values per token and row stride
  // FISH_VK_PREFILL_F16_AHEAD: the group after this one in a forward, whose f16 weight copies
  // are recorded beside this group's matmuls (null: none, or the knob off).
  const MatmulGroup* next = nullptr;
};

struct LayerState {
  const LayerWeights* w = nullptr;
  MatmulGroup qkv, wo, gate_up, down;
  uint32_t attn_norm = 0, ffn_norm = 0;            // PARAMS offsets (floats)
  uint32_t q_norm = 0, k_norm = 0;                 // per-head norms, when present
  uint32_t post_attn = 0, post_ffn = 0, bias = 0;  // gemma3 norms, qwen2 bq|bk|bv
  bool has_qk_norm = false, has_post = false, has_bias = false;
  uint32_t rope_table = 0;  // PARAMS offset of this layer's variant's cos/sin table
  uint32_t window = 0;
};

// The span ops' pipelines (fish_vk_span.h layout: ARENA, PARAMS, KV).
struct SpanOps {
  Pipeline rmsnorm, add_rmsnorm, head_rmsnorm, rope_kv, attention, attention_split,
      attention_combine, attention_flash, add, bias, act;
  // span_attention_decode (+ _q8 with the idot norms): short batches' attention with RoPE and the
  // KV store fused (loaded unless FISH_VK_ATTN_DECODE=0, on subgroups of >= 4 lanes).
  Pipeline attention_decode, attention_decode_q8;
  // span_attention_short (+ _q8): one decode token's attention at <= FISH_SPAN_SHORT_KEYS keys,
  // RoPE and the KV store fused, one workgroup a query head (loaded unless FISH_VK_ATTN_SHORT=0,
  // on subgroups of >= 4 lanes and head dimensions that are multiples of 4).
  Pipeline attention_short, attention_short_q8;
  // span_attention_short_wide (+ _q8): the same on FISH_SPAN_SHORT_WIDE_WG threads for ranges past
  // kAttnShortKeys (FISH_VK_ATTN_SHORT=1; loaded with it where the device allows that many).
  Pipeline attention_short_wide, attention_short_wide_q8;
  // span_attention_stream (+ _q8), specialised by head_dim and group: one decode token's attention
  // streamed by teams of 8 lanes a key, RoPE and the KV store fused (FISH_VK_ATTN_STREAM=1 where
  // attention_stream_fits).
  Pipeline attention_stream, attention_stream_q8;
  // span_attention_stream_last (+ _q8): the same, its splits merged by their last workgroup
  // (FISH_VK_ATTN_STREAM=2; arrival counters after the matvec epilogues' at off_ctr_).
  Pipeline attention_stream_last, attention_stream_last_q8;
  Pipeline argmax;  // span_argmax: the output head's greedy token (loaded with the head)
  // prefetch: weights read into L2 beside a latency-bound decode step (FISH_VK_PREFETCH_MB > 0).
  Pipeline prefetch;
  // span_rmsnorm_q8 / span_add_rmsnorm_q8: the norm also writes its row as q8_1 for the idot
  // matvecs of q/k/v and gate/up (loaded when one decodes with idot and subgroups have >= 8 lanes).
  Pipeline rmsnorm_q8, add_rmsnorm_q8;
  // span_swiglu_q8 / span_geglu_q8: act*mul also writes its row as q8_1 for an idot down matvec
  // (loaded with the norms' q8 variants when n_ff is a multiple of 32).
  Pipeline act_q8;
  // span_attention_q8 / span_attention_combine_q8: decode attention also writes its output row as
  // q8_1 for an idot wo matvec (loaded with the norms' q8 variants when head_dim % 32 == 0).
  Pipeline attention_q8, attention_combine_q8;
  // span_attention_flash_cm (or _cm2 where FISH_VK_FLASH_CM=2): prefill chunks' attention on
  // cooperative matrices, specialised for flash_cm (loaded where pick_flash_cm_tile has a tile;
  // else span_attention_flash runs).
  Pipeline attention_flash_cm;
  FlashCmTile flash_cm;
};

class VulkanSpan final : public LayerSpan {
 public:
  VulkanSpan(VkContext& ctx, const SpanDesc& d) : ctx_(ctx), p_(*d.params), d_(d) {}
  ~VulkanSpan() override;

  // Validates, allocates and uploads (the caller holds the device mutex).
  Status init(const std::map<WeightHandle, DeviceWeight>& weights);
  // Frees everything (the caller holds the device mutex); the destructor then does nothing.
  void release();

  Status forward(float* x, int64_t n_tok, int64_t pos0) override {
    return run(x, n_tok, pos0, x, nullptr, nullptr);
  }
  Status forward_head(const float* x, int64_t n_tok, int64_t pos0, float* logits,
                      int32_t* token) override;
  Status forward_head_rows(const float* x, int64_t n_tok, int64_t pos0, int32_t* tokens) override;
  Result<int64_t> decode_greedy(int32_t token, int64_t pos0, int64_t n,
                                const std::function<bool(int32_t)>& on_token) override;
  bool can_decode_greedy() const override { return chain_.ready; }
  bool has_head() const override { return has_head_; }
  int64_t head_rows() const override { return has_head_ ? kHeadRows : 0; }
  void kv_truncate(int64_t n) override {
    std::lock_guard lock(ctx_.mutex());
    kv_len_ = std::min(kv_len_, std::max<int64_t>(0, n));
  }
  Status kv_reserve(int64_t n) override {
    std::lock_guard lock(ctx_.mutex());
    return reserve_locked(n);
  }
  int64_t kv_length() const override { return kv_len_; }
  int64_t kv_capacity() const override { return kv_cap_; }
  int64_t n_layers() const override { return int64_t(layers_.size()); }
  int64_t first_layer() const override { return d_.first_layer; }
  int64_t max_tok() const override { return d_.max_tok; }
  int64_t chunk() const { return chunk_; }  // tokens per chunk of a forward
  int64_t n_ctx() const override { return d_.n_ctx; }
  uint64_t kv_bytes() const override { return kv_.alloc_bytes; }
  uint64_t bytes() const override {
    return kv_.alloc_bytes + arena_.alloc_bytes + params_.alloc_bytes + x_host_.alloc_bytes +
           head_host_.alloc_bytes + chain_.host.alloc_bytes;
  }
  std::string profile() const override;
  void reset_profile() override;
  std::string kernels() const override;

 private:
  // Rows the head takes at once (forward_head_rows): a speculative verify's, the matvec kernels'.
  static constexpr int64_t kHeadRows = FISH_MATVEC_WIDE_TOK;
  // The forward of forward(), forward_head() and forward_head_rows(): x in; then x back into
  // x_out (head off) or, with the head (token not null), the id (head_rows: of the last
  // head_rows rows, one id each) and, when logits is not null, the last row's logits back.
  Status run(const float* x, int64_t n_tok, int64_t pos0, float* x_out, float* logits,
             int32_t* token, int64_t head_rows = 1);
  // The checks and KV bookkeeping that open a forward (or a pipelined decode) of positions
  // [pos0, pos0 + n): the device not lost, no gap, within n_ctx; positions >= pos0 dropped, the KV
  // grown to hold pos0 + n. The caller holds the device mutex.
  Status start_positions(int64_t pos0, int64_t n);
  // What a forward's command buffer depends on besides the span's buffers: its tokens and first
  // position, whether the head runs (and on how many rows) and whether the logits come back; for
  // a step of the pipelined decode (chain >= 0) its id slot in chain_.host and whether its token
  // comes from the host (the first step) or from the previous step's argmax.
  struct Forward {
    int64_t n_tok = 0, pos0 = 0;
    bool head = false, logits = false;
    int64_t head_rows = 0;
    int chain = -1;
    bool chain_first = false;
    bool operator==(const Forward&) const = default;
  };
  // Records forward f into cmds_ (the x copy in, every chunk's layers, the head, the copies out).
  Status record_forward(const Forward& f);
  // Exchanges the current command buffer (and its profile steps) with ahead_'s.
  void swap_ahead();
  // ---- creation (vulkan_span.cpp) ----
  Status check_shapes() const;
  void layout_arena();
  std::vector<float> build_params();
  Status upload_params(const std::vector<float>& prm);
  Status build_matmul(const std::map<WeightHandle, DeviceWeight>& weights, WeightHandle wh,
                      int64_t expect_out, int64_t expect_in, uint32_t x_region, uint32_t x_stride,
                      uint32_t y_off, uint32_t y_stride, MatmulGroup* out,
                      MatmulRole role = MatmulRole::plain);
  Status build_layer_matmuls(const std::map<WeightHandle, DeviceWeight>& weights);
  // Whether the desc names a head this span takes (FISH_VK_HEAD, the last layer).
  bool wants_head() const;
  Status load_ops();
  Status reserve_locked(int64_t n);
  // The forward's timestamps into the profile; n_tok and the host's submit-to-done ms of it.
  void read_profile(int64_t n_tok, double wait_ms);

  // ---- pipelined greedy decode (vulkan_span_decode.cpp) ----
  // Sets chain_ up where decode_greedy can run (the desc's embedding, the head, a get_rows kernel
  // for its type, no profiling); chain_.why says why not. Errors: Vulkan, the budget.
  Status init_chain(const std::map<WeightHandle, DeviceWeight>& weights);
  // A pipelined step's start: its token's embedding row into x row 0 (span_get_rows_<type>) from
  // the id at off_tok_ (the previous step's argmax, or the host's token copied there first).
  void record_embed(const Forward& f);
  // kernels()'s clause on the pipelined decode.
  std::string chain_note() const;

  // ---- recording (vulkan_span_record.cpp) ----
  void record_chunk(int64_t t0, int64_t nc, int64_t pos);
  // The output head over x's rows [row, row + n): final norm (+ q8_1 copy), output matvec
  // (logits row i at off_logits_ + i * n_vocab), argmax of each row (id i at off_tok_ + i).
  void record_head(int64_t row, int64_t n = 1);
  // The chunk size of a forward of n tokens: chunk_, or FISH_VK_VERIFY_SPLIT's run of a verify
  // (device_weight.h verify_run, as the per-matmul path splits).
  int64_t forward_chunk(int64_t n) const;
  void record_attention(const LayerState& L, uint32_t n, int64_t pos);
  // Whether a chunk of n tokens attending len_max keys runs span_attention_decode (its group x
  // tokens rows fit; FISH_VK_ATTN_DECODE=1, or auto and len_max >= kAttnDecodeMinKeys).
  bool decode_attention(uint32_t n, uint32_t len_max) const;
  // Whether it runs span_attention_short (attention_short_applies, vulkan_span.h).
  bool short_attention(uint32_t n, uint32_t len_max) const;
  // A KV-head-grid attention kernel (span_attention_decode, span_attention_stream[_last]) for n
  // tokens: one dispatch of n_kv x pc.split workgroups (`kernel_q8` when wo_q8_ and the kernel
  // writes the output: pc.split 1, or `merges`, a kernel that merges its splits itself), else
  // `kernel` then span_attention_combine[_q8] over its split partials; a barrier after.
  // A span_attention_stream* module specialised for this span's heads (head_dim, group).
  PipelineSpec stream_spec(const char* module) const;
  // span_attention_short's module + suffix ("", "_q8"): the _prev variant under
  // FISH_VK_ATTN_SHORT_PREV.
  std::string short_module(const char* suffix) const;
  void record_kv_head_attention(const Pipeline& kernel, const Pipeline& kernel_q8,
                                const SpanPush& pc, uint32_t n, bool merges = false);
  void record_ffn(const LayerState& L, uint32_t n, uint32_t x_off);
  void op(const Pipeline& p, const SpanPush& pc, uint32_t gx, uint32_t gy, uint32_t gz = 1);
  void bind_ops();
  // quantized: the group's q8_1 input was written by the norm before it (no quant_q8_1 here).
  // scaled: the input is residual_norm's (matvec_idot_scaled_<type>).
  // y_row0: the outputs go to token rows y_row0.. of the steps' outputs (the head's split rows).
  void matmuls(const MatmulGroup& g, uint32_t n_tok, bool quantized = false, bool scaled = false,
               uint32_t y_row0 = 0);
  // The residual matmul g (wo / down) over n tokens whose output is added to x (rows at x_off),
  // with each 32-row block's share of the rmsnorm (PARAMS weight w) for `next` (then run with
  // scaled = true) in its epilogue: one dispatch (matvec_idot_res_<type>) where
  // FISH_VK_NORM_FUSE and the kernels allow; false (and nothing recorded) where they do not.
  bool residual_norm(const MatmulGroup& g, uint32_t n, bool quantized, uint32_t x_off, uint32_t w,
                     const MatmulGroup& next);
  // Whether group g decodes every step with the scaled variant (and, with act, act_scaled).
  static bool scalable(const MatmulGroup& g, bool act);
  // gate / up (group g) over n tokens and silu(gate) * up with its q8_1 copy for `down` in one
  // dispatch each and no act*mul step (matvec_idot_swiglu_<type>) where FISH_VK_ACT_FUSE and
  // the kernels allow; false (and nothing recorded) where they do not.
  bool gate_up_act(const MatmulGroup& g, uint32_t n, bool quantized, bool scaled,
                   const MatmulGroup& down);
  // FISH_VK_NORM_FUSE=2: whether every layer has the kernels for it (pro_norm_ok_, set when the
  // matmuls are built), and the recording of its steps for one token with the residual row at
  // x_off: the pn consumers of group g, whose norm weight is PARAMS w (act: gate / up with
  // silu(gate) * up and its q8_1 copy for `down`; false: gate / up without, the act*mul op after
  // them is the caller's), and the acc producers (wo / down, added into the residual row).
  bool pro_norm_layers() const;
  // The kernels line's note on the decode norms (FISH_VK_NORM_FUSE=2, FISH_VK_PN_GRID).
  std::string norms_note() const;
  // The fused variants' steps of group g over n tokens: each step's pipeline, set and rows a
  // workgroup from `pick`, pc with the step's grid; then the barrier closing the step.
  struct FusedPick {
    const Pipeline* p;
    VkDescriptorSet set;
    uint32_t rows;
    uint32_t max_groups = 0;  // a grid of at most this many workgroups (0: one a row block)
  };
  void fused_steps(const MatmulGroup& g, MatvecFusedPush pc, uint32_t n,
                   const std::function<FusedPick(const MatmulStep&)>& pick);
  void pro_norm_matmuls(const MatmulGroup& g, uint32_t w, uint32_t x_off, bool act,
                        const MatmulGroup* down);
  void acc_matmuls(const MatmulGroup& g, bool quantized, uint32_t x_off);
  // The quant_q8_1 dispatch writing group g's input (n tokens) as q8_1.
  void quantize(const MatmulGroup& g, uint32_t n_tok);
  // Whether the norm writing group g's input (n tokens) writes its q8_1 copy too; if so sets pc.
  bool fuse_q8(const MatmulGroup& g, uint32_t n, SpanPush* pc) const;
  // The compute barrier closing a step; in a decode forward with FISH_VK_PREFETCH_MB, a step
  // that is no matvec first gets its prefetch dispatch beside it (prefetch.h).
  void barrier();
  // The stream of decode weight parts in reading order (pf_vecs_, pf_sets_, MatmulStep::stream)
  // and the prefetch pipeline, where FISH_VK_PREFETCH_MB asks for them.
  Status build_prefetch();
  // The f16 weight copies of FISH_VK_PREFILL_F16 (device_weight.h prefill_f16): wh_, sized for
  // the group whose qualifying parts need the most (a group's copies are all written before its
  // first matmul; two such regions under FISH_VK_PREFILL_F16_AHEAD, every part its own place
  // under FISH_VK_PREFILL_F16_RESIDENT), and each such step's pipelines and sets.
  Status build_prefill_f16();
  // Whether step st's matmul over n_tok tokens runs on its f16 copy.
  bool on_f16_copy(const MatmulStep& st, uint32_t n_tok) const;
  // Records the dequant_f16_ dispatches of group's steps that run on copies at n_tok tokens (no
  // barrier; under FISH_VK_PREFILL_F16_RESIDENT only those not recorded before); whether there
  // were any.
  bool copies(const MatmulGroup& group, uint32_t n_tok);
  // Prefetch dispatches over the next FISH_VK_PREFETCH_MB MiB of the stream from pf_; ops' set
  // bound again after them.
  void prefetch();
  // A matvec over step st is recorded (matvec_step_; the prefetch cursor moves past its part).
  void matvec_recorded(const MatmulStep& st);
  // kernels()'s prefetch clause: "" without it, else the MiB a step and the dispatches the last
  // recorded decode forward holds.
  std::string prefetch_note() const;
  // kernels()'s clauses on how chunks run: FISH_VK_VERIFY_SPLIT's, and FISH_VK_PREFILL_F16's
  // (none without copies, else from how many tokens and their buffer's size).
  std::string chunks_note() const;
  // A timestamp closing stage s; `group`: the matmul group that step ran over n_tok tokens (the
  // profile's breakdown by group).
  void stage_done(Stage s, const MatmulGroup* group = nullptr, uint32_t n_tok = 0);
  SpanPush norm_push(uint32_t n, uint32_t a_off, uint32_t a_stride, uint32_t c_off,
                     uint32_t c_stride, uint32_t w) const;

  VkContext& ctx_;
  ModelParams p_;
  SpanDesc d_;
  // The tightest run ceiling of the span's weights (tightest_budget): its arena, params, staging
  // and KV (also when the KV grows) allocate under the budget its weights were placed under.
  std::optional<uint64_t> budget_;
  std::vector<LayerState> layers_;
  Buffer arena_, params_, kv_, x_host_;
  Buffer wh_;  // FISH_VK_PREFILL_F16's f16 weight copies (build_prefill_f16; empty: none)
  std::string wh_skipped_;  // why auto has none: the allocation's error (empty: not skipped)
  // FISH_VK_PREFILL_F16_RESIDENT: whether each copy (MatmulStep::copy_id) has been recorded; a
  // recorded copy is never written again (the span's weights do not change).
  std::vector<uint8_t> wh_written_;
  // recording: the group whose copies were recorded beside the previous group's matmuls
  const MatmulGroup* copied_ahead_ = nullptr;
  // The output head (has_head_): its matvec group over xn row 0 into ARENA's logits region, the
  // final norm's PARAMS offset, the argmax word's ARENA offset, and the host copy of
  // [logits (n_vocab floats), id].
  bool has_head_ = false;
  MatmulGroup head_;
  uint32_t out_norm_ = 0, off_logits_ = 0, off_tok_ = 0;
  Buffer head_host_;
  int64_t kv_cap_ = 0, kv_len_ = 0;
  int64_t chunk_ = FISH_SPAN_CHUNK;  // layout_arena()
  // ARENA regions (floats; each starts on the storage-offset alignment).
  uint32_t off_x_ = 0, off_xn_ = 0, off_qkv_ = 0, off_att_ = 0, off_tmp_ = 0, off_gu_ = 0;
  uint32_t off_q8_ = 0;   // q8_1 activations (FISH_Q8_BYTES of the widest matmul input)
  uint32_t off_q8b_ = 0;  // wo's and down's q8_1 input (FISH_Q8_BYTES of max(q_dim, n_ff))
  // A matmul input's f16 copy for the coopmat2 tiles (chunk x max(n_embd, q_dim, n_ff) f16,
  // rows K apart; 0 and unused where the device has no coopmat2 tile).
  uint32_t off_h_ = 0;
  uint32_t off_ss_ = 0;  // residual_norm's block sums of squares: n_embd / 32 a token
  // Block arrival counters (words, zeroed at creation): n_embd / 32 of matvec_idot_res_, then
  // n_ff / 32 of matvec_idot_swiglu_.
  uint32_t off_ctr_ = 0;
  uint32_t n_ctr_ = 0;
  uint32_t off_sink_ = 0;    // prefetch's stores (FISH_COPY_WG words nothing reads)
  uint32_t off_parts_ = 0;   // split-K attention partials: parts_cap_ x (head_dim + 2)
  uint32_t parts_cap_ = 0;   // n_head x FISH_SPAN_ATTN_SPLIT_TOK x FISH_SPAN_ATTN_MAX_SPLIT
  uint32_t qkv_stride_ = 0;  // q_dim + 2 kv_dim
  uint64_t arena_bytes_ = 0;
  DescriptorPool pool_;
  VkDescriptorSet ops_set_ = VK_NULL_HANDLE;
  SpanOps ops_;
  bool next_qkv_q8_ = false;      // recording: the coming q/k/v input's q8_1 copy is written
  bool next_qkv_scaled_ = false;  // ... by residual_norm (q/k/v then run scaled)
  bool wo_q8_ = false;            // recording: attention wrote the wo input's q8_1 copy
  bool pro_norm_ok_ = false;      // pro_norm_layers(), after build_layer_matmuls
  // recording: this forward runs FISH_VK_NORM_FUSE=2 (one token, pro_norm_ok_), residual row at
  // pn_x_
  bool pn_ = false;
  uint32_t pn_x_ = 0;
  // Decode weight prefetch (prefetch.h): each stream range's 16-byte vectors and its set (W the
  // part); while recording, the cursor, whether this chunk prefetches, whether the step being
  // closed is a matvec.
  std::vector<uint64_t> pf_vecs_;
  std::vector<VkDescriptorSet> pf_sets_;
  PrefetchCursor pf_;
  bool pf_on_ = false, matvec_step_ = false;
  uint32_t pf_dispatches_ = 0;  // in the forward being recorded (since its first chunk)
  Pipeline quant_;              // quant_q8_1 (loaded when a step decodes with idot)
  Pipeline half_;               // to_f16 (loaded where the device has a coopmat2 tile)
  Commands cmds_;
  // Profiling: one timestamp after each step; step_of_[i] is the step that ended at query i+1.
  struct TimedStep {
    Stage stage;
    const MatmulGroup* group;  // a matmul step's group, else null
    bool vec;                  // the group ran the decode kernels (<= FISH_MATVEC_MAX_TOK tokens)
  };
  struct GroupTime {
    double ms = 0;
    int64_t steps = 0;
    double vec_ms = 0;   // of the decode-kernel steps
    uint64_t bytes = 0;  // weight bytes those steps read
  };
  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t n_queries_ = 0, used_queries_ = 0;
  bool stage_queries_ = false;  // FISH_GPU_PROFILE=2: a timestamp after every stage
  double forward_gpu_ms_ = 0;   // the forwards' first-to-last timestamp spans
  struct OneToken {             // the one-token (decode) forwards
    int64_t n = 0;
    double gpu_ms = 0, wait_ms = 0;  // first-to-last timestamp; host submit to done
  };
  OneToken one_tok_;
  std::vector<TimedStep> step_of_;
  std::array<double, kNumStages> stage_ms_{};
  std::array<int64_t, kNumStages> stage_steps_{};  // timed steps per stage
  std::map<std::string, GroupTime> group_ms_;      // by MatmulGroup::label()
  // Host time of the profiled forwards: recording the command buffer (x's copy in, the layers,
  // the head), then submit until the fence (the GPU's time plus the submit and wake-up latency).
  double host_record_ms_ = 0, host_wait_ms_ = 0;
  // The next forward's command buffer, recorded while the GPU runs the current one
  // (FISH_VK_RECORD_AHEAD): used when the next forward is that one (decode: one token at the next
  // position, the same outputs), else re-recorded. A KV growth invalidates it (new bindings).
  struct Ahead {
    Commands cmds;
    Forward f;
    bool valid = false;
    std::vector<TimedStep> steps;  // its profile steps (step_of_ while it is current)
    uint32_t used_queries = 0;
  };
  Ahead ahead_;
  // The pipelined greedy decode (decode_greedy): up to two steps queued, a third recorded
  // meanwhile; each step's id lands in its buffer's slot of `host`, the first step's token is
  // read from slot kChainBuffers.
  static constexpr int kChainBuffers = 3;
  struct Chain {
    bool ready = false;
    std::string why;   // why not ready
    std::string type;  // the embedding's type
    Pipeline get_rows;
    VkDescriptorSet set = VK_NULL_HANDLE;  // ARENA, the embedding's rows, ARENA
    uint32_t row_bytes = 0;
    Buffer host;
    std::array<Commands, kChainBuffers> cmds;
  };
  Chain chain_;
  int64_t ahead_hits_ = 0;  // forwards that ran a command buffer recorded ahead
  int64_t n_profiled_ = 0;
  bool registered_ = false, released_ = false;
};

}  // namespace fish::vk
