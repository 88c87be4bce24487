// The Vulkan backend's knobs, read from the environment (names from the seed):
//   FISH_GPU=0|off|false|no   no GPU backend at all (not even registered); =cpu also allows
//                             CPU implementations (lavapipe), which are skipped otherwise
//   FISH_GPU_DEVICE=<index>   use this physical device (vkEnumeratePhysicalDevices order; a
//                             CPU implementation still needs FISH_GPU=cpu)
//   FISH_VK_QUEUE=universal   use the graphics+compute queue family (default: compute-only)
//   FISH_VK_VALIDATE=1        add VK_LAYER_KHRONOS_validation when installed
//   FISH_GPU_VERBOSE=1        print why the backend is off / which device it opened to stderr
//   FISH_VRAM_BUDGET_MB=<n>   FISH's own ceiling on device memory (default 85% of free at open)
//   FISH_VK_MATVEC=auto|idot|fast|generic|0|1  the decode matvec (n_tok <= FISH_MATVEC_MAX_TOK):
//                             auto (default; 0 too) matvec_idot_<type> (integer dot products on
//                             q8_1 activations) where the device's packed 4x8-bit dot is
//                             accelerated and the type has one, else matvec_<type>; idot the
//                             integer-dot kernels wherever the type has one (opening fails on a
//                             device without VK_KHR_shader_integer_dot_product); fast the f32
//                             matvec_<type>; generic (1 too) the reference matvec1_<type>
//   FISH_VK_IDOT_ROWS=1|2|4|8|16  rows per workgroup of matvec_idot_<type> (its specialisation
//                             constant; default 2, the H200 sweep's best): a tuning knob
//   FISH_VK_IDOT_WG=auto|32|64|128|256  threads per workgroup of matvec_idot_<type> (its
//                             workgroup size, a specialisation constant): auto (default) the
//                             rule of idot_workgroup (device_weight.h) from the row length
//   FISH_VK_IDOT_AHEAD=1|2|4|8  chunks of its rows a thread of matvec_idot_<type> loads before it
//                             uses any (specialisation constant; default 1): a tuning knob
//   FISH_VK_IDOT_GROUPS=auto|1|2|4  row groups a workgroup of matvec_idot_<type>, each of
//                             FISH_VK_IDOT_WG's (or the rule's) threads and its own
//                             FISH_VK_IDOT_ROWS rows (specialisation constant): auto (default)
//                             idot_groups' rule (device_weight.h: 1)
//   FISH_VK_IDOT_EXACT=1|0    1 (default): matvec_idot_<type> pipelines specialised to each
//                             dispatch's token count (1..FISH_MATVEC_MAX_TOK; specialisation
//                             constant EXACT): no branch on the count in the token loops; same
//                             results (H100 tg128: 1B 1.028x, 8B 1.021x); 0 one for any count
//   FISH_VK_IDOT_ROWS_ACT=auto|1|2|4|8|16  rows per workgroup of a span's gate / up matvecs
//                             with the act*mul epilogue (matvec_idot_swiglu_<type>, any token
//                             count and exact), so each 32-row block has fewer arrivals to count
//                             and each workgroup more rows to stream before its atomicAdd; auto
//                             (default) those of FISH_VK_IDOT_ROWS. Bitwise the same results
//   FISH_VK_IDOT_ROWS_MULTI=auto|1|2|4|8|16  with FISH_VK_IDOT_EXACT: rows per workgroup of the
//                             pipelines of exactly 2..4 tokens (a speculative verify), so each
//                             token's activation loads serve more rows; auto (default) those of
//                             FISH_VK_IDOT_ROWS. The same sums in the same order: bitwise results
//   FISH_VK_IDOT_EXACT_FUSED=1|0  1 (default; with FISH_VK_IDOT_EXACT): a span's gate / up
//                             act*mul variant (matvec_idot_swiglu_<type>, the default path's
//                             largest matvecs) gets those per-count pipelines too; the same
//                             results; 0 one swiglu pipeline for any count (A/B)
//   FISH_VK_IDOT_FOLD=0|1     1: the q4_k / q5_k / q6_k integer-dot decode matvecs fold each
//                             sub-block's scale into one factor a row and chunk, shared by a
//                             verify's tokens, and add each sub-block's term with one fma a
//                             token (specialisation constant FOLD); other roundings; 0 (default)
//                             each chunk's sum first (A/B)
//   FISH_VK_HEAD=1|0          a span holding the model's last layer also runs the output head
//                             (final rmsnorm, output matrix; argmax when the caller decodes
//                             greedily), 1 (default); 0 returns x and the head runs outside (A/B)
//   FISH_VK_ATTN_SPLIT=auto|0|N  span attention in KV splits (split-K): auto (default)
//                             attention_splits' rule for short query batches (vulkan_span.h); 0
//                             always the one-pass kernel; N (1..FISH_SPAN_ATTN_MAX_SPLIT) N splits
//                             for every batch, prefill chunks included, where the scratch allows
//   FISH_VK_ATTN_DECODE=auto|0|1  short batches' (decode, verify) span attention with RoPE and
//                             the KV store fused in one dispatch (span_attention_decode, one
//                             workgroup a KV head and split: GQA groups share each K/V load): auto
//                             (default) where the batch attends kAttnDecodeMinKeys keys or more
//                             (vulkan_span.h; faster there on the H100, slower below: docs/gpu.md),
//                             1 always, 0 never (span_rope_kv + the attention kernels above)
//   FISH_VK_ATTN_SHORT=auto|0|1  one decode token runs span_attention_short (RoPE, KV store and
//                             attention in one dispatch, one workgroup a query head) unless
//                             FISH_VK_ATTN_DECODE=1: auto (default) up to kAttnShortKeys (256)
//                             attended keys, 1 up to the kernel's FISH_SPAN_SHORT_KEYS (1024), 0
//                             never (the kernels above; A/B)
//   FISH_VK_ATTN_STREAM=auto|0|1|2  one decode token's span attention streamed by teams of 8
//                             lanes a key (span_attention_stream + span_attention_combine, RoPE and
//                             the KV store fused), where attention_stream_fits: auto (default)
//                             past the keys span_attention_short takes and unless
//                             FISH_VK_ATTN_DECODE=1 (attention_stream_applies, vulkan_span.h), 1
//                             every decode token, 2 every decode token with the splits merged by
//                             their last workgroup (span_attention_stream_last), 0 never
//   FISH_VK_ACT_FUSE=auto|0|1  a span's gate and up decode matvecs (idot, one part each, swiglu
//                             models) compute silu(gate) * up and its q8_1 copy in the last
//                             workgroup of each 32-row block (matvec_idot_swiglu_<type>): no
//                             act*mul dispatch or barrier; auto (default) and 1 on, 0 the
//                             separate span_swiglu_q8 (A/B)
//   FISH_VK_NORM_FUSE=auto|0|1|2  1: a span's wo and down decode matvecs (idot, one part) add
//                             into the residual and write each 32-row block's share of the next
//                             rmsnorm (matvec_idot_res_<type>), q/k/v and gate / up scale by its
//                             1 / rms (matvec_idot_scaled_<type>): no norm dispatch or barrier of
//                             its own (the block form measured slower on an H100: docs/gpu.md);
//                             2: one-token decode forwards add wo and down into the residual
//                             (matvec_idot_acc_<type>) and every workgroup of q/k/v and gate / up
//                             computes the norm in its prologue (matvec_idot_pn_<type>,
//                             matvec_idot_swiglu_pn_<type>; bitwise the separate norm's values);
//                             auto (default) and 0 the separate span_add_rmsnorm_q8
//   FISH_VK_FENCE_SPIN_US=0..10000  every submit polls its fence (vkGetFenceStatus) up to this
//                             many microseconds before the blocking vkWaitForFences: 0 (default)
//                             blocks at once; a decode step's few-ms wait may end sooner polled
//                             (llama.cpp's Vulkan backend spins its last fence; A/B, unmeasured)
//   FISH_VK_PREFETCH_MB=0..256  a decode forward of a span reads this many MiB of its coming
//                             matvecs' weights into L2 beside each latency-bound step (attention,
//                             norms, q8_1 rounding; prefetch.h): 0 (default) none (A/B: slower
//                             on an H200 at 8..64 MiB, docs/gpu.md)
//   FISH_VK_RECORD_AHEAD=1|0  a span records its likely next forward (one token on, the same
//                             outputs) between this forward's submit and its fence, so decode
//                             steps pay no recording time: 1 (default); 0 records each forward
//                             after the previous one ends (A/B)
//   FISH_GPU_REQUANT=0|1|2|3  the device gets a smaller copy of the weights (kernels/requant.h
//                             modes: 1 all -> fq3, 2 q6_k -> q4_k, 3 q4_k -> fq3 + q6_k -> q4_k)
//   FISH_VK_COOPMAT=auto|0|1  prefill matmuls (>= kCoopmatMinTok tokens) on cooperative matrices
//                             (coopmat.h): auto (default) where the device has them, 0 never (the
//                             f32 tiled kernel; the extension is not even enabled), 1 required
//                             (opening fails on a device without them)
//   FISH_VK_COOPMAT2=auto|0|1 VK_NV_cooperative_matrix2 for the workgroup-scope tiles n, nm, o
//                             (coopmat.h, matmul_cm2.comp.glsl): auto (default) enabled where the
//                             device has it (the tiles are then the rule's from 64 tokens on), 0
//                             never enabled (the KHR tiles' rule), 1 required (opening fails on a
//                             device without)
//   FISH_VK_COOPMAT2_ACC=f32|fold|f16  those tiles' accumulation: f32 (default); fold, f16 sums
//                             of each 256-value unrolled iteration added into the f32 one; f16,
//                             f16 throughout (llama.cpp's coopmat2 default, f16acc): the A/B of
//                             accumulator width against the peer's rate, at its precision
//   FISH_VK_COOPMAT2_SCALES=1|2|0  1 (default): those tiles' interior tiles of q4_k, q5_k and
//                             fq3 weights stage each super-block's sub-block scales (d sc, dmin m)
//                             in shared memory once a tile instead of decoding them with every
//                             value (as llama.cpp's fetch_scales / store_scales; H200 pp512: 1B
//                             +12%, 8B +7%); 2 q6_k's too (d sc; not yet run on a GPU); 0 none
//                             (A/B)
//   FISH_VK_PREFILL_F16=auto|0..65536  prefill matmuls of quantised weights over at least this
//                             many tokens (and more than FISH_MATVEC_WIDE_TOK) first write the
//                             weights as f16 rows (dequant_f16_<type>) and multiply those with
//                             the f16 kernel of the same family (coopmat2, KHR tile or tiled),
//                             which decodes nothing in its K loop: auto (default) from
//                             kPrefillF16AutoTok tokens on devices with coopmat2 tiles, none
//                             where the run has a VRAM ceiling or the device refuses the copy
//                             buffer; 0 never
//   FISH_VK_ATTN_SHORT_PREV=0|1  1: span_attention_short loads its output pass's first batch of
//                             V before the scoring pass (span_attention_short_prev[_q8]): one
//                             dependent round trip fewer a layer at short contexts; the same
//                             results; 0 (default) after the softmax
//   FISH_VK_VERIFY_SPLIT=0|1  1: span forwards and per-matmul calls of FISH_MATVEC_MAX_TOK + 1 ..
//                             FISH_MATVEC_WIDE_TOK tokens (a speculative verify) run as balanced
//                             chunks of at most FISH_MATVEC_MAX_TOK tokens (8: 4 + 4, 5: 3 + 2),
//                             a span's head likewise, on the decode kernels (integer-dot where
//                             the type has one) instead of matvec8_<type> (f32): the weights
//                             read twice; 0 (default) one chunk
//   FISH_VK_PREFILL_F16_AHEAD=1|2|0  1 (default): a span records each group's f16 copies beside
//                             the previous group's matmuls, after their dispatches (no barrier
//                             between: two copy regions, the copy's memory traffic under the
//                             tensor cores' work); 2 the same, before their dispatches (the
//                             copy's workgroups launched first, beside the matmul's from its
//                             first wave); the same results; 0 before its own matmuls behind a
//                             barrier (A/B)
//   FISH_VK_PREFILL_F16_RESIDENT=0|1  1: a span keeps every part's f16 copy in a place of its
//                             own (the copies' sum of device memory instead of one or two
//                             groups'), written by the first prefill forward that runs on it;
//                             later prefills run no copies. The same values into the same
//                             kernels: bitwise results. 0 (default) each prefill writes them
//   FISH_VK_PREFILL_F16_COPY_WG=auto|N  at most N workgroups a f16 copy dispatch (spans and
//                             per-matmul calls), each then striding over more of the rows, so
//                             the copy holds few of the SMs beside the matmuls it overlaps;
//                             auto (default) one workgroup a 2,048 values up to the device's
//                             limit. The same values into the same places: bitwise results
//   FISH_VK_FLASH_CM=2|1|0    prefill chunks' span attention on cooperative matrices
//                             (flash_cm.h) where the device has them (and FISH_VK_COOPMAT is not
//                             0) and the head dimension fits: 2 (default)
//                             span_attention_flash_cm2, one barrier a key tile (3.0x / 1.4x
//                             variant 1 at the 8B's pp512 / pp2048 on an H100), variant 1 where
//                             no variant-2 tile fits; 1 span_attention_flash_cm (A/B); 0 the f32
//                             span_attention_flash
//   FISH_VK_COOPMAT_TILE=auto|<tile>  the cooperative-matrix tile for every matmul (default:
//                             the grid-filling rule of coopmat.h; lp, mp: l, m with prefetch;
//                             n, nm, o: the coopmat2 tiles)
//   FISH_GPU_PROFILE=0|1|2    layer spans time each forward (1: its start and end; 2: every stage
//                             too) with timestamp queries (profile())
//   FISH_VK_FAULT=lost:N|timeout:N  fault injection for tests and drills: the N-th compute submit
//                             (matmul, span forward, span ops; N >= 1, counted from the device's
//                             open) fails as a lost device (the work is not submitted) or as a
//                             fence that never signals (VK_TIMEOUT after the work ran); either
//                             way the device is treated as lost from then on (vk_context.h)
// Every knob is parsed through the one table (base/env_knobs.h): a value outside its row is an
// error naming the variable and its allowed values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/fault_injection.h"
#include "base/result.h"

namespace fish::vk {

// FISH_VK_MATVEC (device_weight.h's matvec_kernel applies it per weight type).
enum class MatvecMode { automatic, idot, fast, generic };
const char* matvec_mode_name(MatvecMode m);  // "auto", "idot", "fast", "generic"

struct VulkanOptions {
  bool enabled = true;                   // FISH_GPU is not 0/off/false/no
  bool allow_cpu = false;                // FISH_GPU=cpu
  std::optional<uint32_t> device;        // FISH_GPU_DEVICE
  bool universal_queue = false;          // FISH_VK_QUEUE=universal
  bool validate = false;                 // FISH_VK_VALIDATE=1
  bool verbose = false;                  // FISH_GPU_VERBOSE=1
  std::optional<uint64_t> budget_bytes;  // FISH_VRAM_BUDGET_MB, in bytes
  // FISH_VK_MATVEC: the decode kernel family
  MatvecMode matvec = MatvecMode::automatic;
  uint32_t idot_rows = 2;  // FISH_VK_IDOT_ROWS (measured: results/runs/h200-decode-wg-586895f)
  uint32_t idot_rows_multi = 0;  // FISH_VK_IDOT_ROWS_MULTI: exact 2..4-token pipelines' (0: same)
  uint32_t idot_rows_act = 0;    // FISH_VK_IDOT_ROWS_ACT: the swiglu variant's (0: same)
  uint32_t idot_wg = 0;          // FISH_VK_IDOT_WG; 0: idot_workgroup's rule (device_weight.h)
  uint32_t idot_ahead = 1;       // FISH_VK_IDOT_AHEAD: chunks a thread loads before using any
  uint32_t idot_groups = 0;      // FISH_VK_IDOT_GROUPS; 0: idot_groups' rule (device_weight.h)
  bool idot_exact = true;        // FISH_VK_IDOT_EXACT: pipelines for the exact token count
  bool idot_exact_fused = true;  // FISH_VK_IDOT_EXACT_FUSED: and for the swiglu variant
  bool idot_fold = false;        // FISH_VK_IDOT_FOLD: the K-quant scales folded per row (FOLD)
  bool head = true;              // FISH_VK_HEAD: the output head in the span
  int attn_split = -1;           // FISH_VK_ATTN_SPLIT: -1 auto, 0 off, N splits
  int attn_decode = -1;          // FISH_VK_ATTN_DECODE: -1 auto (long contexts), 0 off, 1 always
  int attn_short = -1;           // FISH_VK_ATTN_SHORT: -1 auto (<= 256 keys), 0 off, 1 (<= 1024)
  int attn_stream = -1;          // FISH_VK_ATTN_STREAM: -1 auto (past the short kernel), 0 off, 1
                                 // on, 2 on with the splits merged by their last workgroup
  bool stream_pipe = false;      // FISH_VK_ATTN_STREAM_PIPE: the stream kernel's loads a pass ahead
  bool attn_short_prev = false;  // FISH_VK_ATTN_SHORT_PREV: the short kernel's first V batch early
  int norm_fuse = -1;    // FISH_VK_NORM_FUSE: -1 auto (off), 0 off, 1 block epilogues, 2 prologues
  uint32_t pn_grid = 0;  // FISH_VK_PN_GRID: prologue-norm workgroups an SM at most (0: no cap)
  int pn_ffn = -1;       // FISH_VK_PN_FFN: -1 auto (on), 0 the ffn norm a dispatch, 1 on
  int act_fuse = -1;     // FISH_VK_ACT_FUSE: -1 auto (on), 0 off, 1 on
  bool record_ahead = true;      // FISH_VK_RECORD_AHEAD: spans record the next forward meanwhile
  uint32_t fence_spin_us = 0;    // FISH_VK_FENCE_SPIN_US: poll a fence this long before blocking
  uint32_t prefetch_mb = 0;      // FISH_VK_PREFETCH_MB: weights read ahead a latency-bound step
  int coopmat = -1;              // FISH_VK_COOPMAT: -1 auto, 0 off, 1 required
  int coopmat2 = -1;             // FISH_VK_COOPMAT2: -1 auto, 0 off, 1 required
  uint32_t coopmat2_acc = 0;     // FISH_VK_COOPMAT2_ACC: kCoopmat2Acc* (coopmat.h; 0 f32)
  uint32_t coopmat2_scales = 1;  // FISH_VK_COOPMAT2_SCALES: K-quant scales in shared memory
                                 // (coopmat2_stages_scales' level)
  int coopmat2_wide = -1;        // FISH_VK_COOPMAT2_WIDE: -1 auto (off), 0 off, 1 tiles p, q
  int prefill_f16 = -1;          // FISH_VK_PREFILL_F16: f16 weight copies from this many
                                 // prefill tokens on (-1 auto, 0 never; device_weight.h)
  int prefill_f16_ahead = 1;     // FISH_VK_PREFILL_F16_AHEAD: a span's next group's copies
                                 // beside this group's matmuls (1 after them, 2 before, 0 no)
  bool prefill_f16_resident = false;  // FISH_VK_PREFILL_F16_RESIDENT: a span's copies written once
  uint32_t prefill_f16_copy_wg = 0;   // FISH_VK_PREFILL_F16_COPY_WG: workgroups a copy dispatch
                                      // at most (0 auto: one a 2,048 values, the device's cap)
  bool verify_split = false;  // FISH_VK_VERIFY_SPLIT: 5..8-token span forwards as decode chunks
  uint32_t flash_cm = 2;      // FISH_VK_FLASH_CM: 0 f32, 1 span_attention_flash_cm, 2 ..._cm2
  char coopmat_tile = 0;      // FISH_VK_COOPMAT_TILE: a CoopmatTile::name (coopmat.h); 0 the rule
  int requant = 0;            // FISH_GPU_REQUANT: re-quantisation mode at upload
  int profile = 0;            // FISH_GPU_PROFILE: 1 a forward's start and end, 2 every stage too
  DeviceFault fault;          // FISH_VK_FAULT
  // Not from the environment: caps the bytes of one weight part below the device's storage
  // buffer range (0: no cap), so tests exercise weights split into several parts.
  uint64_t max_part_bytes = 0;

  // Errors name the variable and the value, e.g. "FISH_GPU_DEVICE='x': expected an integer 0 to
  // 65536".
  static Result<VulkanOptions> from_env();
};

// Whether FISH_GPU's value turns the GPU off ("0", "off", "false", "no", any case).
bool gpu_disabled_by(const char* fish_gpu_value);

}  // namespace fish::vk
