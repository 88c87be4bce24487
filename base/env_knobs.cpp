// The FISH_* knob table and its parser; see env_knobs.h. Keep the table sorted by name;
// tests/base/env_knobs_test.cpp fails when a source uses a FISH_* name the table lacks, the table
// lists one nobody reads, or docs/measurement.md's generated section is out of step.
#include "base/env_knobs.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "base/fault_injection.h"

namespace fish {
namespace {

// Switch words: the first four turn a thing off. A function, not a global: the table may be
// built during static initialisation (the Vulkan backend registers itself before main).
std::vector<std::string_view> switch_words() {
  return {"0", "off", "false", "no", "1", "on", "true", "yes"};
}
// The switch words and a second on level, 2 (vulkan_options.cpp's env_switch_or_2).
std::vector<std::string_view> switch_or_2_words() {
  std::vector<std::string_view> w = switch_words();
  w.push_back("2");
  return w;
}

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return r;
}

bool parse_int(std::string_view s, int64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

bool has_word(const EnvKnob& k, std::string_view w) {
  return std::find(k.words.begin(), k.words.end(), w) != k.words.end();
}

bool takes_ints(const EnvKnob& k) {
  return k.min <= k.max;
}

std::string allowed_text(const EnvKnob& k) {
  std::string words;
  for (std::string_view w : k.words) words += fmt::format("{}{}", words.empty() ? "" : ", ", w);
  const std::string ints = fmt::format("an integer {} to {}", k.min, k.max);
  if (!takes_ints(k)) return "one of " + words;
  if (k.words.empty()) return ints;
  return words + " or " + ints;
}

}  // namespace

std::span<const EnvKnob> env_knobs() {
  using S = EnvScope;
  using E = KnobEffect;
  const char* vk_options = "engine/vulkan/vulkan_options.cpp";
  // name, scope, effect, words, min, max, read by, doc[, own check]. Sorted by name.
  static const std::vector<EnvKnob> table = {
      {"FISH_AMX", S::all, E::results, switch_words(), 0, -1, "kernels/amx.cpp",
       "0/off/false/no: no AMX tiles (W4A8 and x16 K-quant prefill use their AVX-512 kernels)"},
      {"FISH_CACHE",
       S::harness,
       E::location,
       {},
       0,
       -1,
       "harness/bench_command.cpp",
       "FISH's cache: downloads, models, toolchains (scripts/*.sh), fish bench results, the "
       "llama.cpp peer builds fish run finds as llama_bench cpu / vulkan / cuda (FISH_CACHE/peer; "
       "default ~/.cache/fish)"},
      {"FISH_FAULT",
       S::all,
       E::results,
       {},
       0,
       -1,
       "base/fault_injection.cpp",
       "tests only: KIND@SITE[:N] throws bad_alloc or runtime_error the N-th time model_load or "
       "session_create is reached (base/fault_injection.h)",
       &check_fault_spec},
      {"FISH_GPU",
       S::gpu,
       E::results,
       {"0", "off", "false", "no", "1", "on", "true", "yes", "cpu"},
       0,
       -1,
       vk_options,
       "0/off/false/no: no GPU backend at all; cpu: also allow a CPU Vulkan device (lavapipe)"},
      {"FISH_GPU_DEVICE",
       S::gpu,
       E::results,
       {},
       0,
       65536,
       vk_options,
       "index of the Vulkan device to open (fish gpu lists them)"},
      {"FISH_GPU_LAYERS",
       S::gpu,
       E::results,
       {},
       0,
       1 << 20,
       "engine/gpu_placement.cpp",
       "at most N layers on the GPU (caps the Config field gpu_layers: fish run, bench, generate)"},
      {"FISH_GPU_PIPELINE", S::gpu, E::results, switch_words(), 0, -1, "engine/gpu_placement.cpp",
       "0/off/false/no: greedy decode on a whole-model span runs one synchronous step at a time "
       "(default: token ids stay on the GPU, the embedding row is looked up there and step N+1 is "
       "queued before step N's id is read)"},
      {"FISH_GPU_PROFILE",
       S::gpu,
       E::instrumentation,
       {"0", "1", "2"},
       0,
       -1,
       vk_options,
       "1: a timestamp query at the start and the end of each span forward; fish generate prints "
       "the one-token forwards' GPU time against their submit-to-done time, and the gap between "
       "them (submit, wake-up, the host's work between decode steps); 2: timestamp queries "
       "around each span stage too (the per-stage breakdown; the queries add GPU time)"},
      {"FISH_GPU_REQUANT",
       S::gpu,
       E::results,
       {},
       0,
       3,
       vk_options,
       "re-quantise the device copy at upload, a kernels/requant.h mode (the Config field "
       "gpu_requant overrides it: fish run, bench, generate)"},
      {"FISH_GPU_SPAN", S::gpu, E::results, switch_words(), 0, -1, "engine/gpu_placement.cpp",
       "0/off/false/no: per-matmul offload of the placed layers, no layer span"},
      {"FISH_GPU_VERBOSE", S::gpu, E::instrumentation, switch_words(), 0, -1, vk_options,
       "print the opened device, or why the backend is off, to stderr"},
      {"FISH_HUGEPAGES", S::all, E::results, switch_words(), 0, -1, "base/huge_buffer.cpp",
       "0/off/false/no: the x16 weight copies do not ask for transparent huge pages (madvise "
       "MADV_HUGEPAGE; default: they do)"},
      {"FISH_ISA",
       S::all,
       E::results,
       {"scalar", "avx2", "avx512"},
       0,
       -1,
       "kernels/cpu_features.cpp",
       "cap on the CPU kernels' instruction set (unset: the best the "
       "CPU runs)"},
      {"FISH_KX16_PREFETCH",
       S::all,
       E::results,
       {},
       0,
       65536,
       "kernels/kquant_x16.cpp",
       "bytes ahead that the AVX-512 x16 K-quant / Q5_0 decode kernels prefetch their panels, "
       "every format (default: 1024 for Q4_K, 8192 for the others; 0: none, the hardware "
       "prefetcher alone; docs/cpu-kernels.md)"},
      {"FISH_LLAMA_BENCH",
       S::harness,
       E::location,
       {},
       0,
       -1,
       "harness/peer_llama.cpp",
       "the llama-bench binary of engine llama.cpp cells whose llama_bench field is empty (the "
       "rows record the binary and its build)"},
      {"FISH_LLAMA_BENCH_TIMEOUT_S",
       S::all,
       E::location,
       {},
       1,
       86400,
       "harness/peer_llama.cpp",
       "seconds one llama-bench invocation may take before it is killed and the row is an error "
       "(default 1800)"},
      {"FISH_MODELS_DIR",
       S::harness,
       E::location,
       {},
       0,
       -1,
       "harness/run_command.cpp",
       "where fish run also looks for a model, by file name"},
      {"FISH_RAM_BUDGET_MB",
       S::all,
       E::results,
       {},
       1,
       int64_t(1) << 30,
       "engine/memory_budget.cpp",
       "FISH's ceiling on host memory for a session's KV cache, buffers and the weight copies it "
       "makes (int4; x16 where the repack is deferred to sessions) (default: MemAvailable and "
       "the cgroup / rlimit caps)"},
      {"FISH_SHARD_COUNT",
       S::harness,
       E::location,
       {},
       0,
       -1,
       "harness/run_command.cpp",
       "shard count beside JOB_COMPLETION_INDEX (checked by the shard parser; recorded as the "
       "context's shard)"},
      {"FISH_SYNTHETIC_DIR",
       S::harness,
       E::location,
       {},
       0,
       -1,
       "harness/run_command.cpp",
       "where fish run writes synthetic:... models (default ~/.cache/fish/synthetic)"},
      {"FISH_THREADS",
       S::all,
       E::results,
       {},
       1,
       512,
       "kernels/thread_pool.cpp",
       "threads when a command or config says 0 (default: all hardware threads)"},
      {"FISH_VERIFY_8B",
       S::harness,
       E::location,
       {},
       0,
       -1,
       "bench/vulkan_bench.cpp",
       "fish_vulkan_bench's BM_VulkanVerify: a synthetic llama-8b q4_k_m file (fish make-model) "
       "for its 8B rows; unset or absent: those rows are skipped with the reason"},
      {"FISH_VK_ACT_FUSE",
       S::gpu,
       E::results,
       {"auto", "0", "off", "false", "no", "1", "on", "true", "yes"},
       0,
       -1,
       vk_options,
       "a span's gate and up decode matvecs compute silu(gate) * up and its q8_1 copy in the last "
       "workgroup of each 32-row block (matvec_idot_swiglu_<type>): auto (default) and 1 on, 0 a "
       "separate act*mul dispatch (A/B)"},
      {"FISH_VK_ATTN_DECODE",
       S::gpu,
       E::results,
       {"auto", "0", "off", "false", "no", "1", "on", "true", "yes"},
       0,
       -1,
       vk_options,
       "short batches' span attention with RoPE and the KV store fused in one dispatch "
       "(span_attention_decode): auto (default) from 1024 attended keys on (faster there on the "
       "H100), 1 always, 0 never (RoPE + KV store in one dispatch, then the split-K kernels)"},
      {"FISH_VK_ATTN_SHORT",
       S::gpu,
       E::results,
       {"auto", "0", "off", "false", "no", "1", "on", "true", "yes"},
       0,
       -1,
       vk_options,
       "one decode token runs span_attention_short (RoPE, the KV store and attention in one "
       "dispatch, one workgroup a query head) unless FISH_VK_ATTN_DECODE=1: auto (default) up to "
       "256 attended keys, 1 up to 1024, 0 never (the split-K or fused kernels; A/B)"},
      {"FISH_VK_ATTN_SHORT_PREV", S::gpu, E::results, switch_words(), 0, -1, vk_options,
       "1/on/true/yes: the one-token short attention kernel loads its output pass's first batch "
       "of V before scoring the keys (span_attention_short_prev), one dependent round trip fewer "
       "a layer at short contexts; the same results; 0 (default) after the softmax (H100 tg128: "
       "=1 1B 0.992x, 8B 0.996x)"},
      {"FISH_VK_ATTN_SPLIT",
       S::gpu,
       E::results,
       {"auto"},
       0,
       64,
       vk_options,
       "KV splits of the span attention: auto (the grid-filling rule), 0 one pass, N splits"},
      {"FISH_VK_ATTN_STREAM",
       S::gpu,
       E::results,
       {"auto", "0", "off", "false", "no", "1", "on", "true", "yes", "2"},
       0,
       -1,
       vk_options,
       "one decode token's span attention streamed by teams of 8 lanes a key "
       "(span_attention_stream: RoPE, the KV store and attention in one dispatch, + the split-K "
       "combine) in place of the split-K and fused kernels: auto (default) past the 256 keys "
       "span_attention_short takes (faster there on the H100), 1 every decode token, 2 every "
       "decode "
       "token with the splits merged by their last workgroup (no combine dispatch; slower on the "
       "H100), 0 never"},
      {"FISH_VK_ATTN_STREAM_PIPE", S::gpu, E::results, switch_words(), 0, -1, vk_options,
       "1: span_attention_stream issues the next pass's K and V loads before this pass's math "
       "(registers for two passes; A/B: no gain on an H100, the 1B 4% slower after 512 "
       "positions); 0 (default): load, then use, pass by pass"},
      {"FISH_VK_COOPMAT",
       S::gpu,
       E::results,
       {"auto", "0", "off", "false", "no", "1", "on", "true", "yes"},
       0,
       -1,
       vk_options,
       "prefill matmuls on cooperative matrices: auto (where the device has them), 0 never, 1 "
       "required"},
      {"FISH_VK_COOPMAT2",
       S::gpu,
       E::results,
       {"auto", "0", "off", "false", "no", "1", "on", "true", "yes"},
       0,
       -1,
       vk_options,
       "VK_NV_cooperative_matrix2 for the workgroup-scope tiles n, nm, o: auto (enabled where the "
       "device has it; the tiles are then the rule's from 64 tokens on), 0 never enabled (the KHR "
       "tiles' rule), 1 required"},
      {"FISH_VK_COOPMAT2_ACC",
       S::gpu,
       E::results,
       {"f32", "fold", "f16"},
       0,
       -1,
       vk_options,
       "the coopmat2 tiles' accumulation: f32 (default); fold: f16 sums of each 256-value K "
       "iteration added into the f32 accumulator; f16: f16 throughout (llama.cpp's coopmat2 "
       "default): the A/B of accumulator width, at f16's precision (~2^-11 a step, inf past "
       "65504)"},
      {"FISH_VK_COOPMAT2_SCALES", S::gpu, E::results, switch_or_2_words(), 0, -1, vk_options,
       "1 (default): the coopmat2 tiles' interior tiles of q4_k / q5_k / fq3 weights take each "
       "super-block's sub-block scales from shared memory, computed once a tile, instead of "
       "decoding them with every value (H200 pp512: 1B +12%, 8B +7%); 2: q6_k's too (H100 pp512 "
       "1.04x 1B, 1.01x 8B; off); 0: every type decodes them with every value (A/B)"},
      {"FISH_VK_COOPMAT2_WIDE",
       S::gpu,
       E::results,
       {"auto", "0", "off", "false", "no", "1", "on", "true", "yes"},
       0,
       -1,
       vk_options,
       "1: the coopmat2 rule tries p (64 rows x 256 tokens) and q (32 x 256) after o and before "
       "n and nm (the 8B's 4096-row matrices at 512 tokens take p, the 1B's 2048-row ones q), "
       "so each decoded weight serves 256 tokens; auto (default) and 0: o, n, nm only "
       "(unmeasured)"},
      {"FISH_VK_COOPMAT_TILE",
       S::gpu,
       E::results,
       {"auto", "b", "h", "w", "c", "bn", "g", "l", "m", "s",  "lp", "mp", "r", "u",
        "v",    "x", "y", "z", "d", "e",  "f", "k", "n", "nm", "o",  "p",  "q"},
       0,
       -1,
       vk_options,
       "cooperative-matrix tile of every prefill matmul: auto (the grid-filling rule); b, h, w, c "
       "double-buffered (bn: b without the L1 touch, g: b on 8 subgroups); l, m, s "
       "single-buffered; lp, mp: l, m with register prefetch; r, u, v: b, c, s with local "
       "accumulators and register prefetch; x, y, z: r, u, v with 16-value weight loaders (16-byte "
       "loads; 5-word loads for q6_k, q8_0, q4_0); d, e, f, k: r, x, y and l's shape with named "
       "accumulators (the A/B of accumulator arrays); n, nm, o, p, q: workgroup-scope coopmat2 "
       "tiles (128 x 128, 64 x 64, 128 x 256, 64 x 256, 32 x 256; FISH_VK_COOPMAT2)"},
      {"FISH_VK_FAULT",
       S::gpu,
       E::results,
       {},
       0,
       -1,
       vk_options,
       "tests only: lost:N or timeout:N, the N-th compute submit fails (a device-fault drill)",
       &check_device_fault_spec},
      {"FISH_VK_FENCE_SPIN_US",
       S::gpu,
       E::results,
       {},
       0,
       10000,
       vk_options,
       "microseconds every submit polls its fence before the blocking wait: 0 (default) blocks "
       "at once (A/B: a decode step's wait may end sooner polled)"},
      {"FISH_VK_FLASH_CM", S::gpu, E::results, switch_or_2_words(), 0, -1, vk_options,
       "prefill chunks' span attention on cooperative matrices where the device has them and the "
       "head dimension fits: 2 (default) span_attention_flash_cm2, one workgroup barrier a key "
       "tile (variant 1 where no variant-2 tile fits); 1: span_attention_flash_cm (A/B); 0: the "
       "f32 span_attention_flash"},
      {"FISH_VK_HEAD", S::gpu, E::results, switch_words(), 0, -1, vk_options,
       "1 (default): a layer span that holds the last layer runs the final norm, the output matrix "
       "and greedy decoding's argmax; 0: x comes back and the head runs outside (A/B)"},
      {"FISH_VK_IDOT_AHEAD",
       S::gpu,
       E::results,
       {"1", "2", "4", "8"},
       0,
       -1,
       vk_options,
       "chunks of its rows a thread of the integer-dot decode matvec loads before it uses any "
       "(default 1; tuning)"},
      {"FISH_VK_IDOT_EXACT", S::gpu, E::results, switch_words(), 0, -1, vk_options,
       "1/on/true/yes (default): the integer-dot decode matvec runs a pipeline compiled for the "
       "exact token count (1..4) of each dispatch (specialisation constant EXACT) instead of one "
       "for any count; the same results (H100 tg128: 1B 1.028x, 8B 1.021x); 0: one pipeline for "
       "any count (A/B)"},
      {"FISH_VK_IDOT_EXACT_FUSED", S::gpu, E::results, switch_words(), 0, -1, vk_options,
       "1/on/true/yes (default; with FISH_VK_IDOT_EXACT): a span's gate / up matvec with the "
       "act*mul epilogue (matvec_idot_swiglu, FISH_VK_ACT_FUSE) also runs a pipeline compiled "
       "for each token count (1..4); the same results (H100 tg128: 1B 1.016x, 8B 1.017x); 0: "
       "one pipeline for any count (A/B)"},
      {"FISH_VK_IDOT_FOLD", S::gpu, E::results, switch_words(), 0, -1, vk_options,
       "1/on/true/yes: the q4_k / q5_k / q6_k integer-dot decode matvecs fold each sub-block's "
       "scale into one factor a row and chunk, which a verify's tokens share, and add each "
       "sub-block's term with one fma a token (specialisation constant FOLD): fewer f32 "
       "operations a token, other roundings; 0 (default) each chunk's sum first (A/B; "
       "unmeasured)"},
      {"FISH_VK_IDOT_GROUPS",
       S::gpu,
       E::results,
       {"auto", "1", "2", "4"},
       0,
       -1,
       vk_options,
       "row groups a workgroup of the integer-dot decode matvec, each of FISH_VK_IDOT_WG's "
       "threads and its own FISH_VK_IDOT_ROWS rows (auto, the default: 1)"},
      {"FISH_VK_IDOT_ROWS",
       S::gpu,
       E::results,
       {"1", "2", "4", "8", "16"},
       0,
       -1,
       vk_options,
       "rows per workgroup of the integer-dot decode matvec (default 2; tuning)"},
      {"FISH_VK_IDOT_ROWS_ACT",
       S::gpu,
       E::results,
       {"auto", "1", "2", "4", "8", "16"},
       0,
       -1,
       vk_options,
       "rows per workgroup of a span's gate / up matvecs with the act*mul epilogue "
       "(matvec_idot_swiglu, FISH_VK_ACT_FUSE), so each 32-row block counts fewer arrivals; the "
       "same results; auto (default) FISH_VK_IDOT_ROWS's (H100 tg128 at 4: 1B 0.981x, 8B "
       "0.993x)"},
      {"FISH_VK_IDOT_ROWS_MULTI",
       S::gpu,
       E::results,
       {"auto", "1", "2", "4", "8", "16"},
       0,
       -1,
       vk_options,
       "with FISH_VK_IDOT_EXACT: rows per workgroup of the integer-dot pipelines of exactly 2..4 "
       "tokens (a speculative verify), so each token's activation loads serve more rows; the "
       "same results; auto (default) FISH_VK_IDOT_ROWS's (unmeasured)"},
      {"FISH_VK_IDOT_WG",
       S::gpu,
       E::results,
       {"auto", "32", "64", "128", "256"},
       0,
       -1,
       vk_options,
       "threads per workgroup of the integer-dot decode matvec (default auto: 32 below 8192-value "
       "rows, 64 from there, more past 16 chunks a thread; tuning)"},
      {"FISH_VK_MATVEC",
       S::gpu,
       E::results,
       {"auto", "idot", "fast", "generic", "0", "1"},
       0,
       -1,
       vk_options,
       "decode matvec: auto (0) integer dot where accelerated, idot, fast (f32), generic (1)"},
      {"FISH_VK_NORM_FUSE",
       S::gpu,
       E::results,
       {"auto", "0", "off", "false", "no", "1", "on", "true", "yes", "2"},
       0,
       -1,
       vk_options,
       "1: a span's wo and down decode matvecs add into the residual and write each 32-row "
       "block's share of the next rmsnorm (matvec_idot_res_<type>; q/k/v and gate / up scale by "
       "its 1 / rms; slower on the H100: 8B 281.8 vs 300.0 tok/s); 2: wo and down add into the "
       "residual (matvec_idot_acc_<type>) and q/k/v and gate / up run the norm in their prologue "
       "(matvec_idot_pn_<type>, bitwise the separate norm's values; on an H100 1B 982 vs 967, "
       "8B 298 vs 311 tok/s); auto (default) and 0: a separate norm dispatch"},
      {"FISH_VK_PN_FFN",
       S::gpu,
       E::results,
       {"auto", "0", "off", "false", "no", "1", "on", "true", "yes"},
       0,
       -1,
       vk_options,
       "with FISH_VK_NORM_FUSE=2: 0 keeps the ffn norm's dispatch (only q/k/v normalise in their "
       "prologue; gate / up stream at their own rate: on an H100 the 8B's pn gate/up ran 1.30 "
       "against 1.8-2.1 TB/s); auto (default) and 1: gate / up's prologue too; results are the "
       "same (unmeasured)"},
      {"FISH_VK_PN_GRID",
       S::gpu,
       E::results,
       {},
       0,
       64,
       vk_options,
       "with FISH_VK_NORM_FUSE=2: at most this many prologue-norm workgroups an SM (one when the "
       "device does not say its SM count), each running several row blocks after one norm; 0 "
       "(default) one workgroup a row block; results are the same at every setting (unmeasured)"},
      {"FISH_VK_PREFETCH_MB",
       S::gpu,
       E::results,
       {},
       0,
       256,
       vk_options,
       "MiB of the coming decode matvecs' weights a span reads into the L2 cache beside each "
       "latency-bound decode step (attention, norms, q8_1 rounding): 0 (default) none (A/B: "
       "slower on an H200, 8B 285.4 vs 226.5 tok/s with 8)"},
      {"FISH_VK_PREFILL_F16",
       S::gpu,
       E::results,
       {"auto"},
       0,
       65536,
       vk_options,
       "prefill matmuls of quantised weights over at least this many tokens (and more than 8) "
       "first write the weights as f16 rows and run the f16 kernel of the same family (coopmat2, "
       "KHR tile or tiled f32), which decodes nothing in its K loop; spans and per-matmul "
       "calls: auto (default) from 512 tokens on devices with coopmat2 tiles (H100 pp512: 1B "
       "1.25x, 8B 1.16x), none where the run has a VRAM ceiling or the device refuses the copy "
       "buffer; 0 never"},
      {"FISH_VK_PREFILL_F16_AHEAD", S::gpu, E::results, switch_or_2_words(), 0, -1, vk_options,
       "1/on/true/yes (default): a span records each matmul group's f16 weight copies "
       "(FISH_VK_PREFILL_F16) beside the previous group's matmuls, after their dispatches, with "
       "no barrier between (two copy regions), instead of before its own matmuls behind a "
       "barrier; the same results (H100 pp512: 8B 1.03-1.04x, 1B 1.03-1.08x); 2: beside them, "
       "before their dispatches (the copy's workgroups launched first; H100 pp512 0.97x of 1); "
       "0: before its own matmuls (A/B)"},
      {"FISH_VK_PREFILL_F16_COPY_WG",
       S::gpu,
       E::results,
       {"auto"},
       1,
       65535,
       vk_options,
       "at most this many workgroups a f16 weight copy dispatch (FISH_VK_PREFILL_F16), each "
       "then striding over more rows, so the copy holds few SMs beside the matmuls it overlaps "
       "(FISH_VK_PREFILL_F16_AHEAD); auto (default): one workgroup a 2,048 values up to the "
       "device's limit; the same results (unmeasured)"},
      {"FISH_VK_PREFILL_F16_RESIDENT", S::gpu, E::results, switch_words(), 0, -1, vk_options,
       "1/on/true/yes: a span keeps every weight's f16 copy (FISH_VK_PREFILL_F16) in a place of "
       "its own, written by the first prefill forward that runs on it, so later prefills run no "
       "copies: the copies' whole size in device memory (~3.5x a Q4_K_M's weights) for the "
       "copy traffic; the same results; 0 (default) every prefill writes them into one or two "
       "groups' regions"},
      {"FISH_VK_QUEUE",
       S::gpu,
       E::results,
       {"universal", "compute"},
       0,
       -1,
       vk_options,
       "queue family: compute-only (default) or graphics+compute"},
      {"FISH_VK_RECORD_AHEAD", S::gpu, E::results, switch_words(), 0, -1, vk_options,
       "1 (default): a layer span records its likely next forward (one token on) while the GPU "
       "runs the current one; 0: every forward is recorded after the previous one ends (A/B)"},
      {"FISH_VK_VALIDATE", S::gpu, E::instrumentation, switch_words(), 0, -1, vk_options,
       "1: add VK_LAYER_KHRONOS_validation when installed"},
      {"FISH_VK_VERIFY_SPLIT", S::gpu, E::results, switch_words(), 0, -1, vk_options,
       "1/on/true/yes: span forwards and per-matmul calls of 5..8 tokens (a speculative verify) "
       "run as balanced chunks of at most 4 tokens (8: 4 + 4, 5: 3 + 2), a span's head likewise, "
       "on the decode kernels (integer-dot where the type has one) instead of the f32 matvec8 "
       "kernels, reading the weights twice (H100, 5..8 tokens: 8B 2.6-3.3 decode steps against "
       "4.4-6.7); 0 (default) one chunk, so a GPU session drafts at most 3 tokens a verify"},
      {"FISH_VRAM_BUDGET_MB",
       S::gpu,
       E::results,
       {},
       1,
       int64_t(1) << 30,
       vk_options,
       "FISH's ceiling on device memory in MiB (default 85% of free at open; caps the Config field "
       "vram_budget_mb: fish run, bench, generate)"},
  };
  return table;
}

const EnvKnob* find_env_knob(std::string_view name) {
  for (const EnvKnob& k : env_knobs())
    if (k.name == name) return &k;
  return nullptr;
}

std::optional<std::string> env_value(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

Status check_env_value(const EnvKnob& k, std::string_view value) {
  if (k.check != nullptr) return k.check(value);
  if (k.free_text()) return Status::success();
  if (has_word(k, lower(value))) return Status::success();
  int64_t x = 0;
  if (takes_ints(k) && parse_int(value, x) && x >= k.min && x <= k.max) return Status::success();
  return make_error("{}='{}': expected {}", k.name, value, allowed_text(k));
}

Result<std::optional<std::string>> env_word(std::string_view name) {
  const EnvKnob* k = find_env_knob(name);
  assert(k != nullptr);
  const std::optional<std::string> v = env_value(name);
  if (!v) return std::optional<std::string>();
  FISH_TRY(check_env_value(*k, *v));
  return std::optional<std::string>(has_word(*k, lower(*v)) ? lower(*v) : *v);
}

Result<std::optional<int64_t>> env_int(std::string_view name) {
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> w, env_word(name));
  int64_t x = 0;
  if (!w || !parse_int(*w, x) || has_word(*find_env_knob(name), *w))
    return std::optional<int64_t>();
  return std::optional<int64_t>(x);
}

bool is_off_word(std::string_view value) {
  const std::string s = lower(value);
  return s == "0" || s == "off" || s == "false" || s == "no";
}

Result<bool> env_switch(std::string_view name, bool fallback) {
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> w, env_word(name));
  if (!w) return fallback;
  return !is_off_word(*w);
}

Status check_env_knobs(bool with_gpu) {
  std::string problems;
  for (const EnvKnob& k : env_knobs()) {
    if (k.scope == EnvScope::harness || (k.scope == EnvScope::gpu && !with_gpu)) continue;
    const std::optional<std::string> v = env_value(k.name);
    if (!v) continue;
    if (Status st = check_env_value(k, *v); !st.ok())
      problems += (problems.empty() ? "" : "\n") + st.error().message;
  }
  if (problems.empty()) return Status::success();
  return Error{problems};
}

bool knob_affects_measurement(std::string_view name) {
  const EnvKnob* k = find_env_knob(name);
  return !k || k->effect != KnobEffect::location;
}

const char* knob_effect_name(KnobEffect e) {
  switch (e) {
    case KnobEffect::results:
      return "results";
    case KnobEffect::instrumentation:
      return "instrumentation";
    case KnobEffect::location:
      return "location";
  }
  return "?";
}

nlohmann::json env_knobs_json(const std::function<const char*(const char*)>& getenv) {
  nlohmann::json j = nlohmann::json::object();
  for (const EnvKnob& k : env_knobs())
    if (const char* v = getenv(std::string(k.name).c_str())) j[std::string(k.name)] = v;
  return j;
}

std::string env_knobs_markdown() {
  std::string out =
      "| variable | allowed | a bad value breaks | effect | read by | meaning |\n"
      "|---|---|---|---|---|---|\n";
  for (const EnvKnob& k : env_knobs()) {
    const std::string allowed = k.check ? "see meaning" : k.free_text() ? "any" : allowed_text(k);
    const char* scope = k.scope == EnvScope::all   ? "every path"
                        : k.scope == EnvScope::gpu ? "the gpu path"
                                                   : "(not checked)";
    std::string doc;  // a '|' would end the cell
    for (char c : k.doc) doc += c == '|' ? std::string("\\|") : std::string(1, c);
    out += fmt::format("| `{}` | {} | {} | {} | `{}` | {} |\n", k.name, allowed, scope,
                       knob_effect_name(k.effect), k.read_by, doc);
  }
  return out;
}

}  // namespace fish
