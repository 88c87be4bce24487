// The Vulkan ComputeBackend (engine/compute_backend.h): weights uploaded to device memory,
// matmuls as compute dispatches (matvec_<type> for n_tok <= 4: shaders/matvec_fast.comp.glsl
// for f16/q4_0/q8_0/q4_k/q5_k/q6_k, matvec.comp.glsl otherwise or for every type with
// FISH_VK_MATVEC=1; matmul.comp.glsl tiled for prefill), one submit and one fence wait per
// matmul_group.
//
// Start-up: a static initializer registers one backend (set_gpu_backend) unless FISH_GPU is
// 0/off/false/no; it touches no driver. The device opens lazily on the first query (supports,
// memory_free, upload). If opening fails the backend unregisters itself (gpu_backend() becomes
// nullptr, the engine runs CPU-only); the reason is in gpu_backend_status() and, with
// FISH_GPU_VERBOSE=1, on stderr. The registered object is never deleted (no driver calls at
// process exit); deleting a backend explicitly releases everything it holds.
//
// Memory (seed "Budgets and knobs"): free = heap budget - heap usage (VK_EXT_memory_budget), or
// 80% of the heap minus FISH's own allocations without it. FISH's ceiling on its own bytes
// (weights + scratch) is FISH_VRAM_BUDGET_MB or 85% of free at open, or the run's own
// (UploadOptions::budget_bytes, capped by FISH_VRAM_BUDGET_MB) for the uploads given one and for
// the scratch and spans over those weights. An allocation is refused when it would pass the
// ceiling or leave less than max(256 MB, 10% of the heap) free.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/compute_backend.h"
#include "engine/vulkan/coopmat.h"
#include "engine/vulkan/flash_cm.h"
#include "engine/vulkan/vulkan_options.h"

namespace fish::vk {

struct DeviceEntry;
struct SpanPush;
struct SpanDispatch;

// What `fish gpu` prints: devices seen and the memory picture of the opened one.
struct BackendInfo {
  std::string status;                // as vulkan_status()
  std::vector<DeviceEntry> devices;  // empty when the instance could not be created
  bool open = false;
  std::string device;  // selected device name
  std::string queue;   // "compute-only family 2" / "graphics+compute family 0"
  uint32_t subgroup_size = 0;
  std::string features;  // DeviceFeatures::describe()
  bool memory_budget_ext = false;
  uint64_t heap_bytes = 0;       // the device-local heap weights live in
  uint64_t live_free_bytes = 0;  // budget - usage (or the 80% heuristic)
  uint64_t ceiling_bytes = 0;    // FISH's own ceiling
  uint64_t headroom_bytes = 0;   // max(256 MB, 10% of heap)
  uint64_t resident_bytes = 0;
};

class VulkanBackend final : public ComputeBackend {
 public:
  // Touches no driver. Invalid options make open() fail with their message.
  explicit VulkanBackend(Result<VulkanOptions> options);
  ~VulkanBackend() override;
  VulkanBackend(const VulkanBackend&) = delete;
  VulkanBackend& operator=(const VulkanBackend&) = delete;

  // Opens the device on the first call; later calls return the same outcome.
  // Errors: as VulkanDevice::open, pipeline-layout creation.
  Status open() override;
  // "vulkan: <device> ..." when open, "vulkan: off: <reason>" after a failure, or that the
  // device is not opened yet.
  std::string status() const override;
  // One line for stats: device, resident weights by type and live spans, e.g.
  // "vulkan llvmpipe: 12 MB weights, 7 x q4_1 12 MB; span 30 layers, KV 15 MB f16; prefill
  // tiled f32" (or "prefill coopmat 16x16x16 tiles l/m/s", FISH_VK_COOPMAT_TILE's when forced);
  // weights re-quantised at upload by (from, to) pair with the bytes they had in the model (MiB,
  // like the device bytes): "vulkan NVIDIA ...: 2359 MB weights, 134 x q4_k->fq3 1740 MB (from
  // 2236), 21 x q6_k->q4_k 619 MB (from 903); span 22 layers, KV 44 MB f16".
  std::string describe() const override;
  // Opens the device (if not yet) and reports devices, budget and residency.
  BackendInfo info();

  // Device-to-device copy bandwidth, the reference for kernel GB/s: `reps` copies of `bytes`
  // between two device-local buffers in one submit; returns bytes read + written per second.
  // The buffers count against the budget and are freed before returning.
  // Errors: the device is not open, the budget refuses 2 x bytes, a device error.
  Result<double> device_copy_bytes_per_s(uint64_t bytes, int reps);

  // The same for a compute shader (shaders/copy_u4.comp.glsl, uvec4 grid-stride): `reps`
  // dispatches copying `bytes` back and forth between two device-local buffers in one submit,
  // bytes read + written per second (what a kernel can stream: the matvec reference). The
  // buffers start with a host pattern that is read back and compared after the copies, so a
  // wrong copy is an error. Errors: bytes is not a positive multiple of 16 (or exceeds the
  // storage buffer range), the budget refuses the buffers, the copy differs, a device error.
  Result<double> shader_copy_bytes_per_s(uint64_t bytes, int reps) override;
  // FISH_MATVEC_MAX_TOK: past it matvec8_ / the prefill kernels take f32 activations where the
  // decode matvec (matvec_idot_) takes q8_1 ones.
  int64_t decode_exact_tokens() const override;

  // The mode an upload without UploadOptions::requant uses: FISH_GPU_REQUANT (0 when the
  // options were invalid).
  int requant_mode() const;
  // The type upload(w, opt) would put on the device: the mode's target (kernels/requant.h
  // requant_target) when w.n_in is a multiple of its block, else w.type (also for a mode outside
  // 0..kRequantModeMax, which upload refuses).
  GgmlType device_type(const MatrixView& w, const UploadOptions& opt = {}) const;

  // supports(t): t has kernels (re-quantisation does not widen it: a mode-1 upload of a q3_k
  // weight works although supports(q3_k) is false; upload() is the test that counts).
  bool supports(GgmlType t) override;
  // Under a re-quantisation mode (opt.requant, else FISH_GPU_REQUANT) the device copy is
  // device_type(w, opt): rows are dequantised and re-quantised (kernels/requant.h
  // requantize_rows) chunk by chunk into the staging buffer on a thread pool of opt.n_threads
  // (kept while the next conversion asks for as many); w's memory and the CPU path are untouched.
  Result<WeightHandle> upload(const MatrixView& w, const UploadOptions& opt = {}) override;
  Status matmul(WeightHandle w, const float* x, int64_t n_tok, float* y) override;
  Status matmul_group(std::span<const MatmulOp> ops, const float* x, int64_t n_tok) override;
  // matmul_group, returning the device seconds of its dispatches (quant_q8_1 and the matmuls,
  // from timestamps; 0 where the queue has none): the kernels' time without the submit, x upload
  // and y readback around them (the matvec benchmark's device_GBps).
  Result<double> matmul_group_device_s(std::span<const MatmulOp> ops, const float* x,
                                       int64_t n_tok);
  uint64_t memory_free(const UploadOptions& opt = {}) override;
  uint64_t bytes_resident() const override;
  void release(WeightHandle w) override;
  // Stage 2 (engine/vulkan/vulkan_span.h). FISH_GPU_PROFILE=2 adds per-stage timestamps.
  Result<std::unique_ptr<LayerSpan>> span_create(const SpanDesc& desc) override;
  // One dispatch of a span op on host copies of its buffers (vulkan_span.h run_span_op; tests).
  Status run_span_op(const std::string& name, const SpanPush& pc, uint32_t gx, uint32_t gy,
                     std::vector<float>& arena, const std::vector<float>& params,
                     std::vector<uint32_t>& kv);
  // A sequence of span-op dispatches, reps times, timed (vulkan_span.h run_span_ops; tests and
  // the attention benchmark). Returns device seconds.
  Result<double> run_span_ops(std::span<const SpanDispatch> dispatches, int reps,
                              std::vector<float>& arena, const std::vector<float>& params,
                              std::vector<uint32_t>& kv);
  // The tile of span_attention_flash_cm (variant 1) or _cm2 (2) for prefill chunks of this head
  // dimension (flash_cm.h pick_flash_cm_tile); nullopt: no coopmat, FISH_VK_FLASH_CM=0, no tile
  // fits, or not open.
  std::optional<FlashCmTile> flash_cm_tile(uint32_t head_dim, uint32_t variant);
  // The kernel a matmul of n_out rows x n_tok tokens of `type` weights runs on: "matvec",
  // "tiled f32", or "coopmat 16x16x16 tile z 32x32", "coopmat2 workgroup tile n 128x128" (+ ",
  // fold sums" / ", f16 sums" under FISH_VK_COOPMAT2_ACC) (coopmat.h; FISH_VK_COOPMAT,
  // FISH_VK_COOPMAT2, FISH_VK_COOPMAT_TILE). Opens the device if
  // not yet; "off" when it cannot be opened.
  std::string prefill_kernel(int64_t n_out, int64_t n_tok, GgmlType type);
  // Cooperative-matrix tiles of the opened device (empty: none, FISH_VK_COOPMAT=0, not open).
  std::vector<CoopmatTile> coopmat_tiles();
  // Benchmarks (bench/vulkan_bench.cpp). Device seconds of one matmul over n_tok tokens (x = 0.5
  // everywhere, already on the device), the mean of `reps` dispatches in one submit with a
  // compute barrier between them, as a span's dependent steps run (timestamps; the host's time
  // of the submit where the queue has none); dispatch r multiplies ws[r % ws.size()] (copies of
  // one matrix, so a chain over more bytes than the L2 streams from device memory as a span's
  // layers do), after one untimed dispatch (which also writes x's q8_1 copy for an integer-dot
  // decode step: the timed ones are the matvec alone), on `kernel`: 0 what matmul() picks, 't'
  // the f32 tiled kernel, 'l' / 'm' / 's' that cooperative-matrix tile. Errors: n_tok or reps <
  // 1, no weights or weights of different shapes, a tile the device lacks, the budget refuses
  // the scratch, a device error.
  Result<double> time_matmul(std::span<const WeightHandle> ws, int64_t n_tok, int reps,
                             char kernel);
  // FLOP/s of shaders/coopmat_peak.comp.glsl (f16 x f16 -> f32 multiply-adds on the device's
  // shape) over `groups` workgroups of 4 subgroups, iters rounds each; `mode` 0: 4 named
  // register accumulators (the peak), 1: an array of `n_acc` (1..16), 2: 4 named with operands
  // loaded from shared memory. Errors: no cooperative matrices, n_acc out of range, a device
  // error.
  Result<double> coopmat_peak_flops(uint32_t groups, uint32_t iters, uint32_t mode = 0,
                                    uint32_t n_acc = 4);
  // Tests: the n-th compute submit from now fails as `kind` (FISH_VK_FAULT's effect, relative to
  // now). No effect before the device is open.
  void inject_fault(DeviceFaultKind kind, uint64_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The backend registered at start-up; nullptr when FISH_GPU turned it off. Never freed.
VulkanBackend* startup_backend();

}  // namespace fish::vk

namespace fish::gpu {
// Why the GPU backend is or is not in use (see VulkanBackend::status; "vulkan: off: disabled
// by FISH_GPU=0" when it was never registered).
std::string vulkan_status();
}  // namespace fish::gpu
