// Vulkan kernel throughput (the GPU backend, engine/vulkan) at Llama-3.1-8B shapes (attn 4096 x
// 4096, FFN 14336 x 4096 and 4096 x 14336):
//   BM_VulkanMatvec: decode (n_tok 1, 2) of q4_k/fq3/q6_k/q8_0/q4_0, the f32 matvec_<type>
//     (variant "fast"), the integer-dot matvec_idot_<type> over q8_1 activations (variant "idot",
//     types that have one; the iteration's one quant_q8_1 dispatch included, shared by the copies
//     as a span's q/k/v share theirs: the span profile's q8_1 stage times it alone) and the
//     generic matvec1_<type> (variant "generic", n_tok 1), each on a backend opened with that
//     FISH_VK_MATVEC mode, in the same run; also q4_k 1024 x 4096 (k/v) and q6_k 128256 x 4096 (the
//     8B output head); bytes/s of WEIGHTS read, and pct_shader_copy = that /
//     BM_VulkanShaderCopy's rate (it runs first): weight_GBps over the host's time per
//     iteration (submit, x upload and y readback included), device_GBps over the dispatches'
//     device time (timestamps: quant_q8_1 and the matvecs), device_pct_shader_copy its share.
//   BM_VulkanMatvecVariant: the integer-dot variants (docs/gpu.md: FISH_VK_IDOT_ROWS,
//     FISH_VK_IDOT_AHEAD, FISH_VK_IDOT_GROUPS; label "idot rows R ahead A groups G", the first
//     the default) at n_tok 1 on the 8B's shapes (q4_k, q6_k, q8_0, q4_0, q4_1) and the 1B's
//     (2048 x 2048, 8192 x 2048, 2048 x 8192: q4_k, q6_k, q8_0), and their q6_k output heads
//     (128256 x 4096 / 2048) at 1, 2 and 4 row groups, the same counters.
//   BM_VulkanMatvecChain: one decode matvec 100 times with a barrier after each (a span's
//     dependent steps) over distinct copies beyond the L2, us a step and device GB/s: against
//     MatvecVariant, the dispatch + barrier cost of each 8B / 1B shape; the rule's kernel, then
//     rows x ahead x groups x warps variants (label "... chain of 100 rows R wg W ahead A
//     groups G"), ~240 rows: --benchmark_filter=MatvecChain on the GPU machine.
//   BM_VulkanMatmul: tiled prefill (512 tokens) per type, tokens/s and GFLOP/s.
//   BM_VulkanCoopmatPeak: the cooperative-matrix f16 x f16 -> f32 multiply-add rate with no
//     memory traffic (shaders/coopmat_peak.comp.glsl), TFLOP/s: the reference for
//   BM_VulkanPrefillMatmul: one prefill matmul (512 tokens) per type at 8B shapes (and 1024 x
//     4096, the k/v projections) in device time (timestamps over 10 dispatches in one submit),
//     the f32 tiled kernel vs the cooperative-matrix one (the rule's tile, every tile forced for
//     q4_k and q6_k, s and r .. z for the others; the coopmat2 tiles n, nm, o for q4_k, q6_k,
//     q8_0, f16, a skipped row where the device lacks them; the rule on f16 copies of the weights,
//     FISH_VK_PREFILL_F16, whose auto the other rows keep off), TFLOP/s and pct_peak = that /
//     BM_VulkanCoopmatPeak's rate when it ran first. --benchmark_filter='Coopmat|Prefill' on the
//     GPU machine.
//   BM_VulkanPrefillAttention: a causal prefill of 512 / 2048 tokens of Llama-1B / 8B heads in
//     one dispatch, the one-pass kernel (span_attention) vs span_attention_flash (f32) vs
//     span_attention_flash_cm (cooperative matrices; a skipped row without them) vs its variant
//     span_attention_flash_cm2 (FISH_VK_FLASH_CM=2), device time and TFLOP/s.
//     --benchmark_filter='PrefillAttention/1/' for the 8B rows.
//   BM_VulkanDecodeAttention: the span's decode attention (1 query token) of Llama-3.2-1B /
//     Llama-3.1-8B / SmolLM2 heads at contexts 128..8192, the one-pass kernel vs split-K (the
//     auto rule's splits: span_attention_split + span_attention_combine) vs the fused
//     span_attention_decode (RoPE + KV store + attention) vs span_rope_kv + split-K (the decode
//     path without it) vs span_attention_short (<= 1024 keys), over as many layers' KVs as fill ~96
//     MiB (beyond the H200's L2); device time per layer and KV GB/s.
//   BM_VulkanVerify: a speculative verify (docs/speculative.md) on a whole-model layer span:
//     synthetic Llama-1B (written to the temp directory on first use) and 8B (FISH_VERIFY_8B: a
//     pre-written `fish make-model --shape llama-8b --type q4_k_m` file; skipped when unset or
//     absent) Q4_K_M, n_tok 1..8 forwarded at position 128 with every row's greedy id
//     (Session::forward_greedy_rows, as speculative_decode runs it: the span's head over the
//     rows) then kv_truncate(128); tok_per_s and ratio_to_1 = median
//     verify time / median time of one decode step (forward_greedy of one token at 128, the
//     span's head, submitted and waited for as a verify is) measured in the same benchmark;
//     ratio_to_pipelined = the same over one step of the pipelined greedy decode
//     (Session::decode_greedy, 16 steps from 128: the step tg128 runs, each forward recorded
//     while the previous one runs), the step a verify replaces in plain decoding.
//   BM_VulkanDeviceCopy / BM_VulkanShaderCopy: what vkCmdCopyBuffer (copy engine) and a compute
//     shader (shaders/copy_u4.comp.glsl, uvec4 grid-stride) move, bytes read + written per s;
//     the shader copy is what a kernel can reach, the reference for the matvec GB/s.
// Each matvec iteration is one matmul_group over distinct device copies of the matrix totalling
// >= 256 MiB, so weights stream from device memory rather than L2 (H200: 50 MB) and the one
// submit + fence wait is amortised over many dispatches, as in a layer span; host time per
// iteration includes x upload and y readback (small next to the weights). The matrix is 512
// reference-quantised N(0,1) rows repeated (quantising 58M values per shape would dominate the
// run; the kernels read every copy from its own address). On the GPU machine:
// --benchmark_filter='Copy|Matvec' (~60 s before the variant sweep's 168 rows of ~0.2 s each,
// pipeline compile and upload included). The context line "vulkan" names
// the device (FISH_GPU=cpu runs on lavapipe; numbers there only smoke-test).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "engine/gpu_placement.h"
#include "engine/model.h"
#include "engine/session.h"
#include "engine/synthetic_model.h"
#include "engine/vulkan/device_weight.h"
#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_span.h"
#include "fish_vk_span.h"
#include "quant/f16.h"
#include "quant/types.h"

namespace fish {

// The one backend of the run (opened once; leaked like the registered one).
vk::VulkanBackend* backend();

namespace {

constexpr uint64_t kGroupBytes = uint64_t(512) << 20;
constexpr uint64_t kMatvecGroupBytes = uint64_t(256) << 20;
constexpr int64_t kDistinctRows = 512;

double g_shader_copy_bytes_per_s = 0;  // BM_VulkanShaderCopy's last rate (0: not run)
double g_coopmat_peak_flops = 0;       // BM_VulkanCoopmatPeak's last rate (0: not run)

// The integer-dot matvec's FISH_VK_IDOT_* knobs of one benchmark row (0: the environment's).
struct IdotKnobs {
  uint32_t rows = 0, wg = 0, ahead = 0, groups = 0;
  auto key() const { return std::make_tuple(rows, wg, ahead, groups); }
  // " rows R wg W ahead A groups G", the knobs set (non-zero) only.
  std::string label() const {
    std::string s;
    for (auto [name, v] : {std::pair<const char*, uint32_t>{"rows", rows},
                           {"wg", wg},
                           {"ahead", ahead},
                           {"groups", groups}})
      if (v > 0) s += fmt::format(" {} {}", name, v);
    return s;
  }
};

// The backend decoding with FISH_VK_MATVEC mode `mode` and idot knobs `k`, opened on first use,
// leaked.
vk::VulkanBackend* backend_matvec(vk::MatvecMode mode, IdotKnobs k) {
  static std::map<std::tuple<vk::MatvecMode, std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>>,
                  vk::VulkanBackend*>
      by_mode;
  vk::VulkanBackend*& b = by_mode[{mode, k.key()}];
  if (!b) {
    auto opt = vk::VulkanOptions::from_env();
    if (opt.ok()) opt->matvec = mode;
    if (opt.ok() && k.rows > 0) opt->idot_rows = k.rows;
    if (opt.ok() && k.wg > 0) opt->idot_wg = k.wg;
    if (opt.ok() && k.ahead > 0) opt->idot_ahead = k.ahead;
    if (opt.ok() && k.groups > 0) opt->idot_groups = k.groups;
    b = new vk::VulkanBackend(opt);
    (void)b->open();
  }
  return b;
}

// n_out x n_in of type t: kDistinctRows reference-quantised N(0,1) rows, repeated.
const std::vector<uint8_t>& bench_matrix(GgmlType t, int64_t n_out, int64_t n_in) {
  static std::map<std::tuple<GgmlType, int64_t, int64_t>, std::vector<uint8_t>> cache;
  auto& w = cache[{t, n_out, n_in}];
  if (!w.empty()) return w;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t rb = row_bytes(t, n_in);
  const int64_t distinct = std::min(n_out, kDistinctRows);
  w.resize(rb * size_t(n_out));
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < distinct; ++r) {
    for (float& f : row) f = dist(rng);
    type_info(t).quantize_row(row.data(), w.data() + size_t(r) * rb, n_in);
  }
  for (int64_t r = distinct; r < n_out; ++r)
    std::copy_n(w.data() + size_t(r % distinct) * rb, rb, w.data() + size_t(r) * rb);
  return w;
}

// Device copies of one matrix on one backend, kept while consecutive benchmarks ask that
// backend for the same matrix (the token counts of a shape), released when another matrix is
// asked for or another backend asks: one set is resident at a time, however many knob variants
// (each its own backend) a sweep opens, so no row runs beside the others' >= 256 MiB.
struct Resident {
  std::tuple<GgmlType, int64_t, int64_t> key{};
  std::vector<WeightHandle> handles;
  size_t bytes = 0;  // of one copy
};
const Resident& resident(vk::VulkanBackend* b, GgmlType t, int64_t n_out, int64_t n_in) {
  static std::map<vk::VulkanBackend*, Resident> by_backend;
  for (auto& [other, o] : by_backend)
    if (other != b && !o.handles.empty()) {
      for (WeightHandle h : o.handles) other->release(h);
      o = Resident{};
    }
  Resident& r = by_backend[b];
  if (!r.handles.empty() && r.key == std::make_tuple(t, n_out, n_in)) return r;
  for (WeightHandle h : r.handles) b->release(h);
  r = Resident{{t, n_out, n_in}, {}, 0};
  const std::vector<uint8_t>& w = bench_matrix(t, n_out, n_in);
  r.bytes = w.size();
  const MatrixView view{w.data(), t, n_in, n_out, w.size(), "bench"};
  const int copies = int(std::max<uint64_t>(1, (kMatvecGroupBytes + w.size() - 1) / w.size()));
  for (int i = 0; i < copies; ++i) {
    auto h = b->upload(view);
    if (!h.ok()) break;  // budget: measure what fits
    r.handles.push_back(h.value());
  }
  return r;
}

// resident(), or nullptr after marking the benchmark skipped (no backend / type, upload refused).
const Resident* resident_or_skip(benchmark::State& state, vk::VulkanBackend* b, GgmlType t,
                                 int64_t n_out, int64_t n_in) {
  if (!b->supports(t)) {
    state.SkipWithError(("no Vulkan backend or type: " + b->status()).c_str());
    return nullptr;
  }
  const Resident& r = resident(b, t, n_out, n_in);
  if (r.handles.empty()) {
    state.SkipWithError("upload refused");
    return nullptr;
  }
  return &r;
}

}  // namespace

namespace {
// A backend opened once for the process (leaked on purpose, as the registered one).
vk::VulkanBackend* open_backend(Result<vk::VulkanOptions> o) {
  auto* be = new vk::VulkanBackend(std::move(o));
  (void)be->open();
  return be;
}
// The environment's options with FISH_VK_PREFILL_F16's auto off (an explicit value is kept), so
// a type's prefill rows time its own kernel (variant 36 of BM_VulkanPrefillMatmul times the f16
// copies), and `set` applied (an A/B variant's backend).
template <class Set>
vk::VulkanBackend* open_backend_with(Set set) {
  auto o = vk::VulkanOptions::from_env();
  if (o.ok() && o->prefill_f16 < 0) o->prefill_f16 = 0;
  if (o.ok()) set(*o);
  return open_backend(std::move(o));
}
}  // namespace

vk::VulkanBackend* backend() {
  static vk::VulkanBackend* b = open_backend_with([](vk::VulkanOptions&) {});
  return b;
}

// The same device with FISH_VK_PREFILL_F16=1 (BM_VulkanPrefillMatmul's variant 36: the copy,
// then the f16 kernel of the rule's tile for f16, timed together).
vk::VulkanBackend* copies_backend() {
  static vk::VulkanBackend* b = open_backend_with([](vk::VulkanOptions& o) { o.prefill_f16 = 1; });
  return b;
}

// The same device with FISH_VK_COOPMAT2_SCALES=0 (BM_VulkanPrefillMatmul's variants 30, 31: the
// K-quant scales decoded with every value, the A/B of the default's shared scales).
vk::VulkanBackend* cm2_plain_backend() {
  static vk::VulkanBackend* b =
      open_backend_with([](vk::VulkanOptions& o) { o.coopmat2_scales = 0; });
  return b;
}

// The same device with FISH_VK_COOPMAT2_SCALES=2 (variants 32, 33: q6_k's scales staged too).
vk::VulkanBackend* cm2_scales2_backend() {
  static vk::VulkanBackend* b =
      open_backend_with([](vk::VulkanOptions& o) { o.coopmat2_scales = 2; });
  return b;
}

// The same device with FISH_VK_COOPMAT2_ACC=fold / f16 (BM_VulkanPrefillMatmul's variants 26-29).
vk::VulkanBackend* cm2_acc_backend(uint32_t acc) {
  assert(acc == vk::kCoopmat2AccFold || acc == vk::kCoopmat2AccF16);
  static vk::VulkanBackend* fold = nullptr;
  static vk::VulkanBackend* f16 = nullptr;
  vk::VulkanBackend*& b = acc == vk::kCoopmat2AccFold ? fold : f16;
  if (!b) b = open_backend_with([acc](vk::VulkanOptions& o) { o.coopmat2_acc = acc; });
  return b;
}

// The same device with FISH_VK_ATTN_STREAM_PIPE=1 (BM_VulkanDecodeAttention's variant 8).
vk::VulkanBackend* stream_pipe_backend() {
  static vk::VulkanBackend* b =
      open_backend_with([](vk::VulkanOptions& o) { o.stream_pipe = true; });
  return b;
}

namespace {

// Args: type id, n_out, n_in, n_tok.
void BM_VulkanMatmul(benchmark::State& state) {
  const GgmlType t = GgmlType(state.range(0));
  const int64_t n_out = state.range(1), n_in = state.range(2), n_tok = state.range(3);
  vk::VulkanBackend* b = backend();
  if (!b->supports(t)) {
    state.SkipWithError(("no Vulkan backend or type: " + b->status()).c_str());
    return;
  }
  // One reference-quantised matrix of N(0,1) rows, uploaded as many times as fill the group.
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t rb = row_bytes(t, n_in);
  std::vector<uint8_t> w(rb * size_t(n_out));
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out; ++r) {
    for (float& f : row) f = dist(rng);
    type_info(t).quantize_row(row.data(), w.data() + size_t(r) * rb, n_in);
  }
  // Prefill is compute-bound and returns n_tok x n_out floats per copy: 4 copies keep the y
  // readback (part of the timing, as in stage 1) from dominating.
  const int copies = n_tok > 4 ? 4 : int(std::max<uint64_t>(1, kGroupBytes / w.size()));
  const MatrixView view{w.data(), t, n_in, n_out, w.size(), "bench"};
  std::vector<WeightHandle> hs;
  for (int i = 0; i < copies; ++i) {
    auto h = b->upload(view);
    if (!h.ok()) break;  // budget: measure what fits
    hs.push_back(h.value());
  }
  if (hs.empty()) {
    state.SkipWithError("upload refused");
    return;
  }
  std::vector<float> x(size_t(n_tok * n_in));
  for (float& f : x) f = dist(rng);
  std::vector<std::vector<float>> ys(hs.size(), std::vector<float>(size_t(n_tok * n_out)));
  std::vector<ComputeBackend::MatmulOp> ops;
  for (size_t i = 0; i < hs.size(); ++i) ops.push_back({hs[i], ys[i].data()});
  for (auto _ : state) {
    const Status s = b->matmul_group(ops, x.data(), n_tok);
    if (!s.ok()) {
      state.SkipWithError(s.error().message.c_str());
      break;
    }
  }
  for (WeightHandle h : hs) b->release(h);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(hs.size() * w.size()));
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(hs.size()) * n_tok);
  state.counters["copies"] = double(hs.size());
  state.counters["gflops"] = benchmark::Counter(
      double(state.iterations()) * double(hs.size()) * 2.0 * double(n_out * n_in * n_tok) * 1e-9,
      benchmark::Counter::kIsRate);
  state.SetLabel(std::string(type_name(t)));
}

// Args: type id, n_out, n_in, n_tok, variant (a vk::MatvecMode: fast, idot, generic), then the
// idot knobs: rows a row group, threads a row group, chunks loaded ahead, row groups a workgroup
// (0: the defaults).
void BM_VulkanMatvec(benchmark::State& state) {
  const GgmlType t = GgmlType(state.range(0));
  const int64_t n_out = state.range(1), n_in = state.range(2), n_tok = state.range(3);
  const auto mode = vk::MatvecMode(state.range(4));
  const IdotKnobs k{uint32_t(state.range(5)), uint32_t(state.range(6)), uint32_t(state.range(7)),
                    uint32_t(state.range(8))};
  vk::VulkanBackend* b = backend_matvec(mode, k);
  const Resident* rp = resident_or_skip(state, b, t, n_out, n_in);
  if (!rp) return;
  const Resident& r = *rp;
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(n_tok * n_in));
  for (float& f : x) f = dist(rng);
  std::vector<std::vector<float>> ys(r.handles.size(), std::vector<float>(size_t(n_tok * n_out)));
  std::vector<ComputeBackend::MatmulOp> ops;
  for (size_t i = 0; i < r.handles.size(); ++i) ops.push_back({r.handles[i], ys[i].data()});
  // One untimed call first: the first use of a kernel (or of its specialisation) compiles the
  // pipeline, ~0.3 s on the H200, which a 0.2 s MinTime would otherwise report as the rate.
  if (const Status s = b->matmul_group(ops, x.data(), n_tok); !s.ok()) {
    state.SkipWithError(s.error().message.c_str());
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  double device_s = 0;  // the dispatches alone (timestamps)
  for (auto _ : state) {
    const Result<double> s = b->matmul_group_device_s(ops, x.data(), n_tok);
    if (!s.ok()) {
      state.SkipWithError(s.error().message.c_str());
      break;
    }
    device_s += s.value();
  }
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double bytes = double(state.iterations()) * double(r.handles.size() * r.bytes);
  state.SetBytesProcessed(int64_t(bytes));
  state.counters["copies"] = double(r.handles.size());
  state.counters["weight_GBps"] = bytes / std::max(dt, 1e-9) / 1e9;
  if (device_s > 0) state.counters["device_GBps"] = bytes / device_s / 1e9;
  if (g_shader_copy_bytes_per_s > 0) {
    state.counters["pct_shader_copy"] =
        100.0 * bytes / std::max(dt, 1e-9) / g_shader_copy_bytes_per_s;
    if (device_s > 0)
      state.counters["device_pct_shader_copy"] =
          100.0 * bytes / device_s / g_shader_copy_bytes_per_s;
  }
  const std::string knobs = k.label();
  state.SetLabel(fmt::format("{} {}{}", type_name(t), vk::matvec_mode_name(mode), knobs));
}
// The idot variant sweep (matvec_variants): BM_VulkanMatvec under its own name and MinTime.
void BM_VulkanMatvecVariant(benchmark::State& state) {
  BM_VulkanMatvec(state);
}

// Args: type id, n_out, n_in, then the idot knobs (rows a row group, threads a row group, chunks
// loaded ahead, row groups a workgroup; 0: the rule's). One decode matvec (1 token) run 100 times
// in one submit with a compute barrier after each, as a span's dependent steps run
// (VulkanBackend::time_matmul, device timestamps), cycling over the distinct device copies of
// the matrix (>= 256 MiB in all, so each step streams its weights from device memory as a
// span's next layer does, not from the L2): us a step (median and best of 5 chains) and the
// weights' GB/s, against BM_VulkanMatvecVariant's group of independent copies (no barrier
// between them). The gap is what a dispatch and its barrier cost a step of that shape; the knob
// rows say which kernel shape does best in a dependent chain (what decode runs).
void BM_VulkanMatvecChain(benchmark::State& state) {
  const GgmlType t = GgmlType(state.range(0));
  const int64_t n_out = state.range(1), n_in = state.range(2);
  const IdotKnobs k{uint32_t(state.range(3)), uint32_t(state.range(4)), uint32_t(state.range(5)),
                    uint32_t(state.range(6))};
  constexpr int kReps = 100;
  vk::VulkanBackend* b = backend_matvec(vk::MatvecMode::automatic, k);
  const Resident* rp = resident_or_skip(state, b, t, n_out, n_in);
  if (!rp) return;
  const Resident& r = *rp;
  std::vector<double> steps;
  for (auto _ : state) {
    auto s = b->time_matmul(r.handles, 1, kReps, 0);
    if (!s.ok()) {
      state.SkipWithError(s.error().message.c_str());
      return;
    }
    steps.push_back(s.value());
    state.SetIterationTime(s.value() * kReps);
  }
  std::sort(steps.begin(), steps.end());
  const double med = steps[steps.size() / 2], best = steps.front();
  state.counters["us_per_step"] = med * 1e6;
  state.counters["us_best"] = best * 1e6;
  state.counters["us_worst"] = steps.back() * 1e6;
  state.counters["copies"] = double(r.handles.size());
  state.counters["device_GBps"] = double(r.bytes) / med * 1e-9;
  if (g_shader_copy_bytes_per_s > 0)
    state.counters["device_pct_shader_copy"] =
        100.0 * double(r.bytes) / med / g_shader_copy_bytes_per_s;
  const std::string knobs = k.label();
  state.SetLabel(fmt::format("{} {}x{} chain of {}{}", type_name(t), n_out, n_in, kReps,
                             knobs.empty() ? " (the rule)" : knobs));
}
// Each shape with the rule's kernel first, then the knob variants: rows 1 / 2 / 4 x ahead 1 / 2 /
// 4 x groups 1 / 4 (one warp a row group), and 2 / 4 warps a row group at rows 2.
void chain_variants(benchmark::internal::Benchmark* bm) {
  const int64_t q4 = int64_t(GgmlType::q4_k), q6 = int64_t(GgmlType::q6_k);
  const std::vector<std::array<int64_t, 3>> shapes = {
      {q4, 4096, 4096},  {q4, 1024, 4096}, {q4, 14336, 4096}, {q4, 4096, 14336},
      {q6, 4096, 14336}, {q6, 1024, 4096}, {q4, 2048, 2048},  {q4, 512, 2048},
      {q4, 8192, 2048},  {q4, 2048, 8192}, {q6, 2048, 8192}};
  for (const auto& sh : shapes) {
    bm->Args({sh[0], sh[1], sh[2], 0, 0, 0, 0});
    for (int64_t rows : {1, 2, 4})
      for (int64_t ahead : {1, 2, 4})
        for (int64_t groups : {1, 4}) bm->Args({sh[0], sh[1], sh[2], rows, 32, ahead, groups});
    for (int64_t wg : {64, 128})
      for (int64_t ahead : {1, 4}) bm->Args({sh[0], sh[1], sh[2], 2, wg, ahead, 1});
  }
  bm->Args({q6, 128256, 4096, 0, 0, 0, 0});
  bm->Args({q6, 128256, 4096, 2, 32, 1, 1});
  bm->Args({q6, 128256, 4096, 2, 32, 4, 1});
}
BENCHMARK(BM_VulkanMatvecChain)
    ->Apply(chain_variants)
    ->Iterations(5)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Device-to-device copy of 256 MiB, 5x the H200 L2 (the reference the kernels' GB/s is compared
// with): bytes read + written per second, 20 copies per submit.
void BM_VulkanDeviceCopy(benchmark::State& state) {
  vk::VulkanBackend* b = backend();
  const uint64_t bytes = uint64_t(state.range(0)) << 20;
  double bytes_per_s = 0;
  for (auto _ : state) {
    auto r = b->device_copy_bytes_per_s(bytes, 20);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    bytes_per_s = r.value();
    state.SetIterationTime(2.0 * double(bytes) * 20 / bytes_per_s);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * bytes * 20));
  state.counters["copy_GBps"] = bytes_per_s / 1e9;
}
BENCHMARK(BM_VulkanDeviceCopy)->Arg(256)->UseManualTime()->Unit(benchmark::kMillisecond);

// The same through copy_u4 (a compute shader): 128 MiB (within lavapipe's storage buffer range;
// 2.5x the H200 L2 per buffer) back and forth, 100 dispatches per submit, verified against its
// host pattern after each call (so few iterations).
void BM_VulkanShaderCopy(benchmark::State& state) {
  vk::VulkanBackend* b = backend();
  const uint64_t bytes = uint64_t(state.range(0)) << 20;
  constexpr int kReps = 100;
  double bytes_per_s = 0;
  for (auto _ : state) {
    auto r = b->shader_copy_bytes_per_s(bytes, kReps);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    bytes_per_s = r.value();
    state.SetIterationTime(2.0 * double(bytes) * kReps / bytes_per_s);
  }
  g_shader_copy_bytes_per_s = bytes_per_s;
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * bytes * kReps));
  state.counters["copy_GBps"] = bytes_per_s / 1e9;
}
BENCHMARK(BM_VulkanShaderCopy)
    ->Arg(128)
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The device time of `reps` passes over the span ops `ds` (run_span_ops: a barrier after each
// dispatch) in each iteration of `state`, after one untimed run of 8x the passes (the GPU's
// clocks ramp up under load); the iterations' total and best. nullopt (the row skipped with the
// error) when a run fails.
struct SpanOpsTime {
  double seconds = 0, best = 0;
};
std::optional<SpanOpsTime> time_span_ops(benchmark::State& state, vk::VulkanBackend& b,
                                         std::span<const vk::SpanDispatch> ds, int reps,
                                         std::vector<float>& arena,
                                         const std::vector<float>& params,
                                         std::vector<uint32_t>& kv) {
  if (auto warm = b.run_span_ops(ds, 8 * reps, arena, params, kv); !warm.ok()) {
    state.SkipWithError(warm.error().message.c_str());
    return std::nullopt;
  }
  SpanOpsTime t;
  for (auto _ : state) {
    auto r = b.run_span_ops(ds, reps, arena, params, kv);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return std::nullopt;
    }
    state.SetIterationTime(r.value());
    t.seconds += r.value();
    t.best = t.best == 0 ? r.value() : std::min(t.best, r.value());
  }
  return t;
}

// Args: heads shape (0: Llama-3.2-1B 32:8 x 64, 1: Llama-3.1-8B 32:8 x 128, 2: SmolLM2 9:3 x
// 64), context (keys attended), variant (0: one-pass, 1: split-K with attention_splits' auto
// count, 2: span_attention_decode with RoPE and the KV store fused (attention_decode_splits'
// count, + the combine when > 1), 3: what the span ran for decode without it: span_rope_kv then
// variant 1, 4: span_attention_short, RoPE and the KV store fused, one workgroup a query head (up
// to FISH_SPAN_SHORT_KEYS keys; skipped beyond), 5: its wide variant (1024 threads), 6:
// span_attention_stream, RoPE and the KV store fused, teams of 8 lanes a key
// (attention_stream_splits' count, + the combine when > 1; skipped where attention_stream_fits
// refuses), 7: the same with the splits merged by their last workgroup
// (span_attention_stream_last, one dispatch), 8: variant 6 with its loads a pass ahead
// (FISH_VK_ATTN_STREAM_PIPE=1). One iteration = 20 passes over every layer (run_span_ops,
// device timestamps).
void BM_VulkanDecodeAttention(benchmark::State& state) {
  struct Heads {
    const char* name;
    uint32_t n_head, n_kv, hd;
  };
  constexpr Heads kHeads[] = {
      {"llama-1b", 32, 8, 64}, {"llama-8b", 32, 8, 128}, {"smollm2", 9, 3, 64}};
  const Heads& sh = kHeads[state.range(0)];
  const uint32_t ctx = uint32_t(state.range(1));
  const int variant = int(state.range(2));
  const bool decode = variant == 2, split = variant == 1 || variant == 3,
             shortk = variant == 4 || variant == 5, stream = variant >= 6;
  if (shortk && ctx > FISH_SPAN_SHORT_KEYS) {
    state.SkipWithError("span_attention_short takes at most FISH_SPAN_SHORT_KEYS keys");
    return;
  }
  constexpr int kReps = 20;
  vk::VulkanBackend* b = variant == 8 ? stream_pipe_backend() : backend();
  const uint32_t kv_dim = sh.n_kv * sh.hd, kv_words = ctx * kv_dim / 2;  // K (or V) of a layer
  const uint64_t layer_bytes = uint64_t(kv_words) * 2 * 4;
  const uint32_t n_layer =
      uint32_t(std::clamp<uint64_t>((uint64_t(96) << 20) / layer_bytes, 1, 64));
  const uint32_t parts_cap = sh.n_head * FISH_SPAN_ATTN_SPLIT_TOK * FISH_SPAN_ATTN_MAX_SPLIT;
  const uint32_t splits = decode ? vk::attention_decode_splits(-1, sh.n_head, 1, ctx, parts_cap)
                          : stream
                              ? vk::attention_stream_splits(-1, sh.n_head, sh.n_kv, ctx, parts_cap)
                          : split ? vk::attention_splits(-1, sh.n_head, 1, ctx, parts_cap)
                                  : 0;
  if (split && splits == 0) {
    state.SkipWithError("the auto rule keeps the one-pass kernel at this shape");
    return;
  }
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint32_t> pattern(4099);  // random f16 pairs, tiled over the KV
  for (uint32_t& w : pattern) w = f32_to_f16(dist(rng)) | uint32_t(f32_to_f16(dist(rng))) << 16;
  std::vector<uint32_t> kv(size_t(n_layer) * 2 * kv_words);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = pattern[i % pattern.size()];
  // ARENA: the token's q|k|v row, the output row, the split partials, the arrival counters.
  const uint32_t q_floats = sh.n_head * sh.hd, qkv = q_floats + 2 * kv_dim;
  std::vector<float> arena(qkv + q_floats + size_t(parts_cap) * (sh.hd + 2) + sh.n_kv);
  for (uint32_t i = 0; i < qkv; ++i) arena[i] = dist(rng);
  std::vector<float> params(size_t(ctx) * sh.hd);  // RoPE cos/sin, n_rot = head_dim
  for (size_t i = 0; i < params.size(); i += 2) {
    const double a = double(i / sh.hd) * std::pow(10000.0, -double(i % sh.hd) / double(sh.hd));
    params[i] = float(std::cos(a));
    params[i + 1] = float(std::sin(a));
  }
  std::vector<vk::SpanDispatch> ds;
  for (uint32_t l = 0; l < n_layer; ++l) {
    vk::SpanPush pc{};
    pc.n = sh.hd;
    pc.rows = 1;
    pc.a_stride = qkv;
    pc.c_off = qkv;
    pc.c_stride = q_floats;
    pc.pos0 = ctx - 1;
    pc.n_rot = decode || shortk || stream ? sh.hd : sh.n_head / sh.n_kv;
    pc.group = sh.n_head / sh.n_kv;
    pc.kv_k = 2 * l * kv_words;
    pc.kv_v = pc.kv_k + kv_words;
    pc.kv_stride = kv_dim / 2;
    pc.scale = 1.0f / std::sqrt(float(sh.hd));
    pc.split = splits;
    pc.b_off = qkv + q_floats;
    if (variant == 3) {
      vk::SpanPush rk = pc;
      rk.n_rot = sh.hd;
      rk.rows_per_tok = sh.n_head;
      rk.b_off = q_floats;
      const uint32_t units = sh.n_head * sh.hd / 2 + kv_dim / 2;
      ds.push_back({"span_rope_kv", rk, (units + FISH_SPAN_WG - 1) / FISH_SPAN_WG, 1, 1});
    }
    if (shortk) {
      ds.push_back({variant == 5 ? "span_attention_short_wide" : "span_attention_short", pc,
                    sh.n_head, 1, 1});
    } else if (stream && variant == 7 && splits > 1) {
      pc.w_off1 = uint32_t(arena.size()) - sh.n_kv;  // the arrival counters, zero
      ds.push_back({"span_attention_stream_last", pc, sh.n_kv, 1, splits});
    } else if (stream) {
      ds.push_back({"span_attention_stream", pc, sh.n_kv, 1, splits});
      if (splits > 1) ds.push_back({"span_attention_combine", pc, sh.n_head, 1, 1});
    } else if (decode) {
      ds.push_back({"span_attention_decode", pc, sh.n_kv, 1, splits});
      if (splits > 1) ds.push_back({"span_attention_combine", pc, sh.n_head, 1, 1});
    } else if (splits > 0) {
      ds.push_back({"span_attention_split", pc, sh.n_head, 1, splits});
      ds.push_back({"span_attention_combine", pc, sh.n_head, 1, 1});
    } else {
      ds.push_back({"span_attention", pc, sh.n_head, 1, 1});
    }
  }
  // One untimed run of 8x the passes first: the GPU's clocks ramp up under load, and these short
  // entries from idle misled (an H100 gave the stream kernel 79 us a layer at 8192 keys where the
  // forward's tok/s implied ~25: results/runs/h100-stream-d5082b3). Counters from the best
  // iteration beside the mean.
  const std::optional<SpanOpsTime> t = time_span_ops(state, *b, ds, kReps, arena, params, kv);
  if (!t) return;
  const double seconds = t->seconds, best = t->best;
  const double passes = double(state.iterations()) * kReps * n_layer;
  state.counters["us_per_layer"] = seconds / std::max(passes, 1.0) * 1e6;
  state.counters["us_per_layer_best"] = best / (double(kReps) * n_layer) * 1e6;
  state.counters["kv_GBps"] = passes * double(layer_bytes) / std::max(seconds, 1e-12) / 1e9;
  state.counters["kv_GBps_best"] =
      double(kReps) * n_layer * double(layer_bytes) / std::max(best, 1e-12) / 1e9;
  state.counters["layers"] = n_layer;
  state.counters["splits"] = splits;
  const char* names[] = {"one-pass",
                         "split-K",
                         "decode (RoPE+KV fused)",
                         "rope_kv + split-K",
                         "short (RoPE+KV fused, a workgroup a query head)",
                         "short wide (1024 threads a workgroup)",
                         "stream (RoPE+KV fused, 8 lanes a key)",
                         "stream, splits merged in it",
                         "stream, loads a pass ahead"};
  state.SetLabel(fmt::format("{} ctx {} {} {}", sh.name, ctx, names[variant], splits));
}
BENCHMARK(BM_VulkanDecodeAttention)
    ->ArgsProduct({{0, 1, 2}, {128, 512, 2048, 8192}, {0, 1, 2, 3, 4, 5, 6, 7, 8}})
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Args: workgroups, rounds per subgroup, mode, accumulators (coopmat_peak_flops: 0 the peak, 4
// named register accumulators; 1 an array of that many; 2 operands from shared memory). Modes 1
// and 2 tell what costs matmul_cm's tiles their rate: the peak is mode 0's. One untimed dispatch
// of 16x the rounds first (the GPU's clocks ramp up under load: a 0.1 ms dispatch from idle ran
// at a quarter of the rate on an H100), then TFLOPs is the best iteration's rate.
void BM_VulkanCoopmatPeak(benchmark::State& state) {
  vk::VulkanBackend* b = backend();
  const uint32_t groups = uint32_t(state.range(0)), rounds = uint32_t(state.range(1));
  const uint32_t mode = uint32_t(state.range(2)), n_acc = uint32_t(state.range(3));
  if (auto warm = b->coopmat_peak_flops(groups, 16 * rounds, mode, n_acc); !warm.ok()) {
    state.SkipWithError(warm.error().message.c_str());
    return;
  }
  double best = 0;
  for (auto _ : state) {
    auto r = b->coopmat_peak_flops(groups, rounds, mode, n_acc);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    const double flops = r.value();
    best = std::max(best, flops);
    // FLOPs of the dispatch / rate = its device time.
    const std::vector<vk::CoopmatTile> t = b->coopmat_tiles();
    const double f = double(state.range(0)) * 4.0 * double(state.range(1)) * n_acc * 2.0 * t[0].cm *
                     t[0].cn * t[0].ck;
    state.SetIterationTime(f / flops);
  }
  if (mode == 0) g_coopmat_peak_flops = best;
  state.counters["TFLOPs"] = best * 1e-12;
  const std::vector<vk::CoopmatTile> t = b->coopmat_tiles();
  static const char* const kMode[] = {"named registers", "array", "operands from shared"};
  state.SetLabel(fmt::format("{}x{}x{} f16->f32, {} accumulators ({})", t[0].cm, t[0].cn, t[0].ck,
                             n_acc, kMode[mode]));
}
BENCHMARK(BM_VulkanCoopmatPeak)
    ->Args({1024, 4096, 0, 4})
    ->Args({1024, 4096, 1, 4})
    ->Args({1024, 4096, 1, 2})
    ->Args({1024, 1024, 1, 16})
    ->Args({1024, 4096, 2, 4})
    ->Iterations(5)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Args: type id, n_out, n_in, n_tok, kernel (0 tiled f32, 1 the rule, 2 l, 3 m, 4 s, 5 lp, 6 mp,
// 7 b, 8 h, 9 w, 10 c, 11 bn, 12 g, 13 r, 14 u, 15 v, 16 x, 17 y, 18 z, 19 d, 20 e, 21 f, 22 k,
// 23 n, 24 nm, 25 o: coopmat.h's tiles forced; 26 n, 27 o with f16 sums folded into f32 every 256
// values, 28 n, 29 o with f16 sums throughout: FISH_VK_COOPMAT2_ACC fold / f16, the peer's
// accumulator width; 30 n, 31 o with FISH_VK_COOPMAT2_SCALES=0, the K-quant scales decoded with
// every value instead of staged in shared memory, the default since 0c452b0's H200 rows; 32 n,
// 33 o with FISH_VK_COOPMAT2_SCALES=2, q6_k's scales staged too; 34 p: 64 x 256, 35 q: 32 x
// 256, forced, the tiles FISH_VK_COOPMAT2_WIDE=1 lets the rule take; 36 the rule on f16 copies
// of the weights, FISH_VK_PREFILL_F16=1: dequant_f16_<type> and the f16 matmul timed together).
constexpr int64_t kFirstCoopmat2Variant = 23;  // n, nm, o: BM_VulkanPrefillMatmul's last variants

void BM_VulkanPrefillMatmul(benchmark::State& state) {
  const GgmlType t = GgmlType(state.range(0));
  const int64_t n_out = state.range(1), n_in = state.range(2), n_tok = state.range(3);
  const int64_t variant = state.range(4);
  constexpr char kKernels[] = {'t', 0,   'l', 'm', 's', 'L', 'M', 'b', 'h', 'w', 'c', 'B', 'g',
                               'r', 'u', 'v', 'x', 'y', 'z', 'd', 'e', 'f', 'k', 'n', 'N', 'o',
                               'n', 'o', 'n', 'o', 'n', 'o', 'n', 'o', 'p', 'q', 0};
  constexpr const char* kNames[] = {
      "tiled",     "",          "l",      "m",      "s",     "lp",    "mp",      "b",
      "h",         "w",         "c",      "bn",     "g",     "r",     "u",       "v",
      "x",         "y",         "z",      "d",      "e",     "f",     "k",       "n",
      "nm",        "o",         "n fold", "o fold", "n f16", "o f16", "n plain", "o plain",
      "n scales2", "o scales2", "p",      "q",      ""};
  static_assert(std::size(kKernels) == std::size(kNames));
  const char kernel = kKernels[variant];
  vk::VulkanBackend* b = variant == 36   ? copies_backend()
                         : variant >= 34 ? backend()
                         : variant >= 32 ? cm2_scales2_backend()
                         : variant >= 30 ? cm2_plain_backend()
                         : variant >= 28 ? cm2_acc_backend(vk::kCoopmat2AccF16)
                         : variant >= 26 ? cm2_acc_backend(vk::kCoopmat2AccFold)
                                         : backend();
  if (!b->supports(t)) {
    state.SkipWithError(("no Vulkan backend or type: " + b->status()).c_str());
    return;
  }
  if (variant > 0 && b->coopmat_tiles().empty()) {
    state.SkipWithError(("no cooperative matrices: " + b->status()).c_str());
    return;
  }
  // coopmat_tiles() returns a copy: one list for the search (two calls' begin() and end() would
  // walk two vectors, the bug behind earlier "no coopmat2 tile" rows on a device that has them).
  const std::vector<vk::CoopmatTile> tiles = b->coopmat_tiles();
  if (variant >= kFirstCoopmat2Variant && variant != 36 &&
      std::none_of(tiles.begin(), tiles.end(),
                   [&](const vk::CoopmatTile& x) { return x.name == kKernels[variant]; })) {
    std::string listed;
    for (const vk::CoopmatTile& x : tiles)
      listed += fmt::format("{}{}{}", listed.empty() ? "" : "/", x.label(),
                            x.unavailable ? " (rejected)" : "");
    state.SkipWithError(fmt::format("no coopmat2 tile {} (VK_NV_cooperative_matrix2; tiles {}): {}",
                                    kNames[variant], listed, b->status())
                            .c_str());
    return;
  }
  const std::vector<uint8_t>& w = bench_matrix(t, n_out, n_in);
  const MatrixView view{w.data(), t, n_in, n_out, w.size(), "bench"};
  auto h = b->upload(view);
  if (!h.ok()) {
    state.SkipWithError(h.error().message.c_str());
    return;
  }
  // Untimed warm-up of about 0.25 s of this matmul (1 s for the process's first row): 3-iteration
  // rows from an idle GPU ran at its idle clocks (the k tile at 44.5 TFLOP/s cold against 131.6
  // after other rows on an H100). A cap of 20 calls once ended a fast row's warm-up at ~0.13 s,
  // and the first row of a call (q4_k 4096x4096 on k) read 34.1 where later calls read 127.5
  // (results/runs/h100-peers-e0a22bc); the cap is now 400 calls (20,000 dispatches). Bounded by
  // time so a CPU implementation is not kept for minutes.
  {
    static bool first_row = true;
    const double warm_for = first_row ? 1.0 : 0.25;
    first_row = false;
    const WeightHandle one[] = {h.value()};
    double warm_s = 0;
    // 50 dispatches a call: within time_matmul's descriptor sets for weights of up to 4 parts.
    for (int i = 0; i < 400 && warm_s < warm_for; ++i) {
      auto r = b->time_matmul(one, n_tok, i == 0 ? 1 : 50, kernel);
      if (!r.ok() || r.value() <= 0) break;
      warm_s += r.value() * (i == 0 ? 1 : 50);
    }
  }
  // Each iteration's device time (10 dispatches); the counters from their median, with the best
  // and worst beside it (one iteration's time is one sample, not the row's number).
  std::vector<double> secs;
  for (auto _ : state) {
    const WeightHandle one[] = {h.value()};
    auto r = b->time_matmul(one, n_tok, 10, kernel);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      break;
    }
    secs.push_back(r.value());
    state.SetIterationTime(r.value());
  }
  b->release(h.value());
  std::sort(secs.begin(), secs.end());
  const double sec = secs.empty() ? 0 : secs[secs.size() / 2];
  const double flops = 2.0 * double(n_out) * double(n_in) * double(n_tok);
  auto tflops = [&](double s) { return s > 0 ? flops / s * 1e-12 : 0; };
  state.counters["TFLOPs"] = tflops(sec);
  state.counters["TFLOPs_best"] = secs.empty() ? 0 : tflops(secs.front());
  state.counters["TFLOPs_worst"] = secs.empty() ? 0 : tflops(secs.back());
  if (g_coopmat_peak_flops > 0 && sec > 0)
    state.counters["pct_peak"] = 100.0 * flops / sec / g_coopmat_peak_flops;
  state.counters["tok_per_s"] = sec > 0 ? double(n_tok) / sec : 0;
  const std::string k = variant == 0 ? "tiled"
                        : variant == 1 || variant == 36
                            ? b->prefill_kernel(n_out, n_tok, t)
                            : fmt::format("coopmat:{}", kNames[variant]);
  state.SetLabel(fmt::format("{} {}x{} {}", type_name(t), n_out, n_in, k));
}

void prefill_shapes(benchmark::internal::Benchmark* bm) {
  for (GgmlType t : {GgmlType::q4_k, GgmlType::q6_k, GgmlType::q5_k, GgmlType::fq3, GgmlType::q8_0,
                     GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1, GgmlType::f16})
    for (auto [n_out, n_in] :
         {std::pair<int64_t, int64_t>{4096, 4096}, {14336, 4096}, {4096, 14336}, {1024, 4096}}) {
      // Every tile for q4_k and q6_k (the rule's choice checked against each); the others
      // tiled f32, the rule, the single-buffered s (the fastest before b, h, w, c) and the
      // local-accumulator r, u, v, x, y, z; the named-accumulator d, e, f, k for q4_k, q6_k,
      // q8_0 and f16.
      const bool tiles = t == GgmlType::q4_k || t == GgmlType::q6_k;
      const bool named = tiles || t == GgmlType::q8_0 || t == GgmlType::f16;
      for (int64_t variant = 0; variant < kFirstCoopmat2Variant; ++variant)
        if (variant >= 19 ? named : tiles || variant <= 1 || variant == 4 || variant >= 13)
          bm->Args({int64_t(t), n_out, n_in, 512, variant});
      // The workgroup-scope coopmat2 tiles n, nm, o for the 8B Q4_K_M file's types, q8_0 and f16,
      // then n and o with f16 sums (folded, throughout), with the K-quant scales decoded with
      // every value (SCALES 0: q4_k and q5_k here; the same kernel as n / o for the others) and,
      // for q6_k, with its scales staged (SCALES 2).
      if (tiles || t == GgmlType::q8_0 || t == GgmlType::f16 || t == GgmlType::q5_k)
        for (int64_t variant = kFirstCoopmat2Variant; variant < kFirstCoopmat2Variant + 9;
             ++variant)
          bm->Args({int64_t(t), n_out, n_in, 512, variant});
      if (t == GgmlType::q6_k)
        for (int64_t variant : {32, 33}) bm->Args({int64_t(t), n_out, n_in, 512, variant});
      // p (64 x 256) against n and o just above, on the types the 8B's matrices hold.
      if (tiles || t == GgmlType::f16) bm->Args({int64_t(t), n_out, n_in, 512, 34});
      // The rule on f16 copies (FISH_VK_PREFILL_F16) for every quantised type.
      if (t != GgmlType::f16) bm->Args({int64_t(t), n_out, n_in, 512, 36});
    }
  // The Llama-1B's shapes (q / wo, k / v, gate / up, down) for q4_k and q6_k: the rule, the KHR
  // tile k, the coopmat2 tiles, n and o with f16 sums and n with the scales decoded per value,
  // where the rule's grids are smallest (its 2048-row matrices fill 64 n tiles on a 132-SM card;
  // it takes nm there; p and q: the wide rule's).
  for (GgmlType t : {GgmlType::q4_k, GgmlType::q6_k})
    for (auto [n_out, n_in] :
         {std::pair<int64_t, int64_t>{2048, 2048}, {512, 2048}, {8192, 2048}, {2048, 8192}})
      for (int64_t variant : {1, 22, 23, 24, 25, 28, 29, 30, 34, 35, 36})
        bm->Args({int64_t(t), n_out, n_in, 512, variant});
}
BENCHMARK(BM_VulkanPrefillMatmul)
    ->Apply(prefill_shapes)
    ->Iterations(5)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Args: heads (0 llama-1b, 1 llama-8b), prompt tokens, kernel (0 one-pass, 1 flash, 2 flash on
// cooperative matrices: the span's tile, flash_cm.h; 3 its variant 2, span_attention_flash_cm2).
// A whole causal prefill of n tokens from position 0 in one dispatch, device time (5 in one
// submit).
void BM_VulkanPrefillAttention(benchmark::State& state) {
  struct Heads {
    const char* name;
    uint32_t n_head, n_kv, hd;
  };
  constexpr Heads kHeads[] = {{"llama-1b", 32, 8, 64}, {"llama-8b", 32, 8, 128}};
  const Heads& sh = kHeads[state.range(0)];
  const uint32_t n = uint32_t(state.range(1));
  const int64_t kernel = state.range(2);
  vk::VulkanBackend* b = backend();
  std::optional<vk::FlashCmTile> tile;
  if (kernel >= 2 && !(tile = b->flash_cm_tile(sh.hd, uint32_t(kernel) - 1))) {
    state.SkipWithError(fmt::format("no span_attention_flash_cm{} tile (no cooperative matrices, "
                                    "or FISH_VK_FLASH_CM=0)",
                                    kernel == 3 ? "2" : "")
                            .c_str());
    return;
  }
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const uint32_t kv_words = n * sh.n_kv * sh.hd / 2;
  std::vector<uint32_t> kv(2 * size_t(kv_words));
  for (uint32_t& w : kv) w = f32_to_f16(dist(rng)) | uint32_t(f32_to_f16(dist(rng))) << 16;
  const uint32_t q_floats = sh.n_head * sh.hd;
  std::vector<float> arena(2 * size_t(n) * q_floats);
  for (size_t i = 0; i < size_t(n) * q_floats; ++i) arena[i] = dist(rng);
  const std::vector<float> params(4, 0.0f);
  vk::SpanPush pc{};
  pc.n = sh.hd;
  pc.rows = n;
  pc.a_stride = q_floats;
  pc.c_off = n * q_floats;
  pc.c_stride = q_floats;
  pc.n_rot = sh.n_head / sh.n_kv;
  pc.kv_k = 0;
  pc.kv_v = kv_words;
  pc.kv_stride = sh.n_kv * sh.hd / 2;
  pc.scale = 1.0f / std::sqrt(float(sh.hd));
  const vk::SpanDispatch d =
      kernel >= 2   ? vk::SpanDispatch{tile->module(), pc, sh.n_head,
                                     (n + tile->queries() - 1) / tile->queries(), 1}
      : kernel == 1 ? vk::SpanDispatch{"span_attention_flash", pc, sh.n_head,
                                       (n + FISH_SPAN_FLASH_TOK - 1) / FISH_SPAN_FLASH_TOK, 1}
                    : vk::SpanDispatch{"span_attention", pc, sh.n_head, n, 1};
  constexpr int kReps = 5;
  double seconds = 0;
  for (auto _ : state) {
    auto r = b->run_span_ops(std::span(&d, 1), kReps, arena, params, kv);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    state.SetIterationTime(r.value() / kReps);
    seconds += r.value() / kReps;
  }
  const double per = seconds / std::max<double>(1, double(state.iterations()));
  // q.k and p.v over the causal triangle: 2 x 2 hd flops per (query, key) pair and head.
  const double flops = 4.0 * sh.hd * sh.n_head * (double(n) * (n + 1) / 2);
  state.counters["us_per_layer"] = per * 1e6;
  state.counters["TFLOPs"] = flops / std::max(per, 1e-12) * 1e-12;
  state.SetLabel(fmt::format(
      "{} pp{} {}", sh.name, n,
      kernel >= 2   ? fmt::format("{} {}x{}x{} {} queries x {} keys", tile->module(), tile->cm,
                                  tile->cn, tile->ck, tile->queries(), tile->keys)
      : kernel == 1 ? "flash"
                    : "one-pass"));
}
// The verify model of BM_VulkanVerify (0: Llama-1B, 1: 8B) on a span of every layer, kept while
// consecutive benchmarks ask for the same one; error: why it cannot run.
struct VerifySetup {
  int which = -1;
  std::shared_ptr<const Model> model;
  std::shared_ptr<GpuPlacement> placement;
  std::unique_ptr<Session> session;
  std::string error;
};
constexpr int64_t kVerifyPos = 128;
constexpr int64_t kVerifyPiped = 16;  // pipelined decode steps a reference run (positions 128..)

std::string verify_model_path(int which) {
  if (which == 1) {
    const char* p = std::getenv("FISH_VERIFY_8B");
    return p != nullptr && std::filesystem::exists(p) ? p : "";
  }
  const std::string p =
      (std::filesystem::temp_directory_path() / "fish_bench_llama-1b-q4_k_m.gguf").string();
  if (!std::filesystem::exists(p)) {
    auto ft = parse_file_type("q4_k_m");
    if (!ft.ok() || !write_synthetic_model(*find_model_shape("llama-1b"), ft.value(), {}, p).ok())
      return "";
  }
  return p;
}

VerifySetup& verify_setup(int which) {
  static VerifySetup v;
  if (v.which == which) return v;
  v.session.reset();  // before the placement (device memory) and the model it uses
  v.placement.reset();
  v = VerifySetup{};
  v.which = which;
  const std::string path = verify_model_path(which);
  if (path.empty()) {
    v.error = which == 1 ? "FISH_VERIFY_8B unset or absent (a llama-8b q4_k_m file)"
                         : "cannot write the synthetic llama-1b";
    return v;
  }
  auto m = Model::load(path);
  if (!m.ok()) {
    v.error = m.error().message;
    return v;
  }
  v.model = m.value();
  SessionOptions opt;
  opt.n_ctx = 256;
  opt.n_batch = kVerifyPos;
  GpuRequest req;
  req.span = SpanRequest{opt.n_ctx, opt.n_batch, opt.n_ctx};
  v.placement = GpuPlacement::place_layers(*v.model, *backend(), req);
  if (v.placement->span() == nullptr || v.placement->n_gpu_layers() < v.model->params().n_layer) {
    v.error = "not every layer on a span: " + v.placement->summary();
    return v;
  }
  opt.gpu = v.placement;
  auto s = Session::create(v.model, opt);
  if (!s.ok()) {
    v.error = s.error().message;
    return v;
  }
  v.session = std::move(s.value());
  std::vector<int32_t> prompt(static_cast<size_t>(kVerifyPos));
  for (int64_t i = 0; i < kVerifyPos; ++i) prompt[size_t(i)] = int32_t((i * 7919 + 11) % 32000);
  if (auto r = v.session->forward(prompt, 0); !r.ok()) v.error = r.error().message;
  return v;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Args: model (0: 1B, 1: 8B), n_tok.
void BM_VulkanVerify(benchmark::State& state) {
  const int which = int(state.range(0));
  const int64_t n_tok = state.range(1);
  VerifySetup& v = verify_setup(which);
  if (!v.error.empty() || !v.session) {
    state.SkipWithError(v.error.c_str());
    return;
  }
  Session& s = *v.session;
  std::vector<int32_t> toks(static_cast<size_t>(n_tok));
  for (int64_t i = 0; i < n_tok; ++i) toks[size_t(i)] = int32_t(100 + 37 * i);
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // One decode step at the same position, the reference (the first calls compile pipelines).
  std::vector<double> step;
  for (int i = 0; i < 13; ++i) {
    const auto t0 = Clock::now();
    const auto r = s.forward_greedy(std::span<const int32_t>(toks.data(), 1), kVerifyPos);
    if (!r.ok()) return state.SkipWithError(r.error().message.c_str());
    if (i >= 3) step.push_back(seconds(t0));
    (void)s.kv_truncate(kVerifyPos);
  }
  // The pipelined decode step (Session::decode_greedy: the next forward recorded while the GPU
  // runs this one, as tg128 runs), the time of 16 steps from the same position over 16: what a
  // verify replaces in plain greedy decoding, where a verify itself waits for its ids.
  std::vector<double> piped;
  for (int i = 0; i < 4 && s.pipelined_decode(); ++i) {
    const auto t0 = Clock::now();
    const auto r = s.decode_greedy(toks[0], kVerifyPiped, [](int32_t) { return true; });
    if (!r.ok()) return state.SkipWithError(r.error().message.c_str());
    if (i >= 1) piped.push_back(seconds(t0) / double(kVerifyPiped));
    (void)s.kv_truncate(kVerifyPos);
  }
  for (int i = 0; i < 3; ++i) {  // warm-up of this n_tok's kernels
    (void)s.forward_greedy_rows(toks, kVerifyPos);
    (void)s.kv_truncate(kVerifyPos);
  }
  std::vector<double> verify;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const auto r = s.forward_greedy_rows(toks, kVerifyPos);
    if (!r.ok()) return state.SkipWithError(r.error().message.c_str());
    const Status st = s.kv_truncate(kVerifyPos);
    const double dt = seconds(t0);
    if (!st.ok()) return state.SkipWithError(st.error().message.c_str());
    verify.push_back(dt);
    state.SetIterationTime(dt);
  }
  const double t_verify = median_of(verify), t_step = median_of(step), t_piped = median_of(piped);
  state.counters["verify_ms"] = 1e3 * t_verify;
  state.counters["decode_step_ms"] = 1e3 * t_step;
  state.counters["tok_per_s"] = t_verify > 0 ? double(n_tok) / t_verify : 0.0;
  state.counters["ratio_to_1"] = t_step > 0 ? t_verify / t_step : 0.0;
  if (t_piped > 0) {  // absent where the span does not pipeline (FISH_GPU_PIPELINE=0)
    state.counters["decode_pipelined_ms"] = 1e3 * t_piped;
    state.counters["ratio_to_pipelined"] = t_verify / t_piped;
  }
  if (s.gpu_fallbacks() > 0) state.SkipWithError("a span forward failed and ran on the CPU");
  state.SetLabel(fmt::format("{} q4_k_m n_tok {}", which == 0 ? "llama-1b" : "llama-8b", n_tok));
}
BENCHMARK(BM_VulkanVerify)
    ->Apply([](benchmark::internal::Benchmark* bm) {  // model-major: one model resident at a time
      for (int64_t which : {0, 1})
        for (int64_t n_tok = 1; n_tok <= 8; ++n_tok) bm->Args({which, n_tok});
    })
    ->MinTime(0.5)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_VulkanPrefillAttention)
    ->ArgsProduct({{0, 1}, {512, 2048}, {0, 1, 2, 3}})
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Args: vocabulary (the synthetic Llama's 128256, SmolLM2's 49152), variant: 0 one workgroup
// over every logit (span_argmax pass 0), 1 passes 1 + 2 (a barrier between: the head's argmax
// before 3b34b60), 2 pass 3 (the slices and, in the row's last workgroup, the ranking of their
// pairs: one dispatch). Device time of 50 argmax steps a rep (a barrier after each, as in a
// decode forward), so us_per_step holds each variant's dependent-step cost; one untimed run of
// 8x first (clocks).
void BM_VulkanArgmax(benchmark::State& state) {
  const uint32_t V = uint32_t(state.range(0));
  const int variant = int(state.range(1));
  constexpr int kReps = 50;
  vk::VulkanBackend* b = backend();
  const uint32_t split = (V + FISH_SPAN_ARGMAX_SLICE - 1) / FISH_SPAN_ARGMAX_SLICE;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  // ARENA: the logits, the id, the pairs, one arrival counter (zero).
  const uint32_t c_off = V, b_off = V + 4, ctr = b_off + 2 * split;
  std::vector<float> arena(ctr + 1, 0.0f);
  for (uint32_t i = 0; i < V; ++i) arena[i] = dist(rng);
  const std::vector<float> params(4);
  std::vector<uint32_t> kv(4);
  vk::SpanPush pc{};
  pc.n = V;
  pc.a_stride = V;
  pc.c_off = c_off;
  pc.b_off = b_off;
  pc.split = split;
  pc.w_off1 = ctr;
  std::vector<vk::SpanDispatch> ds;
  if (variant == 1) {
    pc.flags = 1;
    ds.push_back({"span_argmax", pc, split, 1, 1});
    pc.flags = 2;
    ds.push_back({"span_argmax", pc, 1, 1, 1});
  } else {
    pc.flags = variant == 2 ? 3 : 0;
    ds.push_back({"span_argmax", pc, variant == 2 ? split : 1, 1, 1});
  }
  const std::optional<SpanOpsTime> t = time_span_ops(state, *b, ds, kReps, arena, params, kv);
  if (!t) return;
  const double seconds = t->seconds, best = t->best;
  state.counters["us_per_step"] = seconds / std::max(double(state.iterations()) * kReps, 1.0) * 1e6;
  state.counters["us_per_step_best"] = best / kReps * 1e6;
  state.counters["slices"] = split;
  const char* names[] = {"one workgroup", "slices + pairs (2 dispatches)",
                         "slices, pairs in the last (1 dispatch)"};
  state.SetLabel(fmt::format("vocab {} {}", V, names[variant]));
}
BENCHMARK(BM_VulkanArgmax)
    ->ArgsProduct({{49152, 128256}, {0, 1, 2}})
    ->Iterations(5)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void matvec_shapes(benchmark::internal::Benchmark* bm) {
  using Shape = std::pair<int64_t, int64_t>;
  const auto add = [&](GgmlType t, Shape s, int64_t n_tok) {
    for (vk::MatvecMode m : {vk::MatvecMode::fast, vk::MatvecMode::idot, vk::MatvecMode::generic}) {
      if (m == vk::MatvecMode::idot && !vk::has_idot_kernel(t)) continue;
      if (m == vk::MatvecMode::generic && n_tok > 1) continue;
      bm->Args({int64_t(t), s.first, s.second, n_tok, int64_t(m), 0, 0, 0, 0});
    }
  };
  // fq3 (FISH_GPU_REQUANT's device copy) next to q4_k, the type it replaces.
  for (GgmlType t : {GgmlType::q4_k, GgmlType::fq3, GgmlType::q6_k, GgmlType::q8_0, GgmlType::q4_0})
    for (Shape s : {Shape{4096, 4096}, {14336, 4096}, {4096, 14336}})
      for (int64_t n_tok : {1, 2}) add(t, s, n_tok);
  add(GgmlType::q4_k, {1024, 4096}, 1);    // the 8B's k / v
  add(GgmlType::q6_k, {128256, 4096}, 1);  // the 8B's output head
}
BENCHMARK(BM_VulkanMatvec)
    ->Apply(matvec_shapes)
    ->MinTime(0.2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The integer-dot variants (docs/gpu.md) at n_tok 1 on the 8B's and the 1B's shapes, each type
// and shape's rows together (the matrix stays resident on each variant's backend): label "idot
// rows R ahead A groups G" (wg: the rule's threads a row group).
void matvec_variants(benchmark::internal::Benchmark* bm) {
  struct Variant {
    int64_t rows, ahead, groups;
  };
  constexpr Variant kVariants[] = {
      {2, 1, 1},                        // the default
      {2, 2, 1}, {2, 4, 1}, {2, 8, 1},  // chunks loaded ahead
      {4, 4, 1},                        // more rows sharing each activation load
      {2, 1, 4}, {2, 4, 4},             // 4 warps a workgroup, each its own rows
  };
  using Shape = std::pair<int64_t, int64_t>;
  constexpr Shape k8b[] = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
  constexpr Shape k1b[] = {{2048, 2048}, {8192, 2048}, {2048, 8192}};
  const auto sweep = [&](GgmlType t, std::span<const Shape> shapes) {
    for (auto [n_out, n_in] : shapes)
      for (const Variant& v : kVariants)
        bm->Args({int64_t(t), n_out, n_in, 1, int64_t(vk::MatvecMode::idot), v.rows, 0, v.ahead,
                  v.groups});
  };
  for (GgmlType t :
       {GgmlType::q4_k, GgmlType::q6_k, GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1})
    sweep(t, k8b);
  for (GgmlType t : {GgmlType::q4_k, GgmlType::q6_k, GgmlType::q8_0})
    sweep(t, k1b);  // Q4_K_M, Q8_0
  // The output heads of the 8B and 1B Q4_K_M (q6_k, 128256 rows): one to four row groups.
  for (int64_t n_in : {4096, 2048})
    for (int64_t groups : {1, 2, 4})
      bm->Args({int64_t(GgmlType::q6_k), 128256, n_in, 1, int64_t(vk::MatvecMode::idot), 2, 0, 1,
                groups});
}
BENCHMARK(BM_VulkanMatvecVariant)
    ->Apply(matvec_variants)
    ->MinTime(0.1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void shapes(benchmark::internal::Benchmark* bm) {
  // fq3 (FISH_GPU_REQUANT's 3.5-bit device copy) next to q4_k, the type it replaces.
  for (GgmlType t : {GgmlType::q4_k, GgmlType::fq3, GgmlType::q6_k, GgmlType::q8_0, GgmlType::q4_0,
                     GgmlType::q5_k, GgmlType::f16})
    for (auto [n_out, n_in] :
         {std::pair<int64_t, int64_t>{4096, 4096}, {14336, 4096}, {4096, 14336}})
      bm->Args({int64_t(t), n_out, n_in, 512});
}
BENCHMARK(BM_VulkanMatmul)->Apply(shapes)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fish

// Own main (the executable's definition wins over benchmark_main's): the device opens before
// the run so the context line can name it.
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("vulkan", fish::backend()->status());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
