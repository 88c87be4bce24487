// The Vulkan ComputeBackend (vulkan_backend.h): open and failure state over the device layer
// (vk_context.h), weight upload and re-quantisation, matmul dispatch, span creation, and the
// start-up registration.
#include "engine/vulkan/vulkan_backend.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "engine/vulkan/device_weight.h"
#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/vk_context.h"
#include "engine/vulkan/vulkan_backend_impl.h"
#include "engine/vulkan/vulkan_device.h"
#include "engine/vulkan/vulkan_shaders.h"
#include "engine/vulkan/vulkan_span.h"
#include "fish_vk_layout.h"
#include "kernels/requant.h"
#include "kernels/thread_pool.h"

namespace fish::vk {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}
double mb(uint64_t b) {
  return double(b) / double(kMiB);
}

bool kernel_type(GgmlType t) {
  const std::string name = fmt::format("matvec_{}", type_name(t));
  return !embedded_shader(name).empty() &&
         !embedded_shader(fmt::format("matmul_{}", type_name(t))).empty() &&
         !embedded_shader(fmt::format("matmul_cm_{}", type_name(t))).empty();
}

}  // namespace

VulkanBackend::VulkanBackend(Result<VulkanOptions> options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

VulkanBackend::~VulkanBackend() {
  if (gpu_backend() == this) set_gpu_backend(nullptr);
  std::lock_guard lock(impl_->mu);
  impl_->destroy_all();
}

void VulkanBackend::Impl::destroy_all() {
  if (!ctx) return;
  if (!ctx->lost()) ctx->vk().vkDeviceWaitIdle(ctx->handle());
  for (auto& [h, w] : weights)
    for (DeviceWeight::Part& p : w.parts) ctx->free(p.buf);
  weights.clear();
  free_scratch();
  cmds = Commands{};
  sets = DescriptorPool{};
  ctx.reset();
}

void VulkanBackend::Impl::fail(VulkanBackend* self, std::string why) {
  state = State::failed;
  error = std::move(why);
  if (gpu_backend() == self) set_gpu_backend_off("vulkan: off: " + error);
  const bool verbose = opt.ok() ? opt->verbose : std::getenv("FISH_GPU_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "fish: vulkan: off: %s\n", error.c_str());
}

Status VulkanBackend::open() {
  std::lock_guard lock(impl_->mu);
  return impl_->open_locked(this);
}

Status VulkanBackend::Impl::open_locked(VulkanBackend* self) {
  if (state == State::open) return Status::success();
  if (state == State::failed) return Error{error};
  if (!opt.ok()) {
    fail(self, opt.error().message);
    return Error{error};
  }
  if (!opt->enabled) {
    fail(self, "disabled by FISH_GPU");
    return Error{error};
  }
  auto c = VkContext::open(*opt, &mu, &devices);
  if (!c.ok()) {
    fail(self, c.error().message);
    return Error{error};
  }
  ctx = std::move(c).value();
  if (opt->matvec == MatvecMode::idot && !ctx->features().integer_dot) {
    const std::string why = fmt::format(
        "FISH_VK_MATVEC=idot: {} has no integer dot product (VK_KHR_shader_integer_dot_product; "
        "features: {})",
        ctx->device().props.deviceName, ctx->features().describe());
    ctx.reset();
    fail(self, why);
    return Error{error};
  }
  // A lost device (a failed or timed-out submit, here or in a span) turns the backend off.
  ctx->set_on_lost([this, self](const std::string& why) { fail(self, why); });
  Status s = [&]() -> Status {
    FISH_ASSIGN_OR_RETURN(cmds, Commands::create(*ctx));
    FISH_ASSIGN_OR_RETURN(sets,
                          DescriptorPool::create(*ctx, kMaxSetsPerSubmit, 3 * kMaxSetsPerSubmit));
    return Status::success();
  }();
  if (!s.ok()) {
    destroy_all();
    fail(self, s.error().message);
    return Error{error};
  }
  state = State::open;
  if (opt->verbose) std::fprintf(stderr, "fish: %s\n", status_text().c_str());
  return Status::success();
}

Status VulkanBackend::Impl::ensure_scratch(Buffer& b, uint64_t bytes, VkBufferUsageFlags usage,
                                           Memory where, std::string_view what,
                                           std::optional<uint64_t> run_ceiling) {
  if (b.bytes >= bytes) return Status::success();
  const uint64_t want = std::max<uint64_t>(align_up(bytes, 64 * 1024), b.bytes * 2);
  ctx->free(b);
  auto nb = ctx->alloc(want, usage, where, true, what, run_ceiling);
  if (!nb.ok() && want > bytes) nb = ctx->alloc(bytes, usage, where, true, what, run_ceiling);
  if (!nb.ok()) return nb.take_error();
  b = std::move(nb).value();
  return Status::success();
}

std::string VulkanBackend::status() const {
  std::lock_guard lock(impl_->mu);
  return impl_->status_text();
}

std::string VulkanBackend::Impl::status_text() const {
  const Impl& m = *this;
  switch (m.state) {
    case Impl::State::unopened:
      return "vulkan: registered, device not opened yet (opens on first use)";
    case Impl::State::failed:
      return "vulkan: off: " + m.error;
    case Impl::State::open:
      break;
  }
  const VulkanDevice& d = m.ctx->device();
  const uint32_t v = d.props.apiVersion;
  return fmt::format(
      "vulkan: {} ({}, Vulkan {}.{}.{}, {} queue family {}, subgroup {}, {}){}{}",
      d.props.deviceName, device_type_name(d.props.deviceType), VK_API_VERSION_MAJOR(v),
      VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v),
      d.queue_compute_only ? "compute-only" : "graphics+compute", d.queue_family, d.subgroup_size,
      d.has_memory_budget ? "VK_EXT_memory_budget" : "no memory budget extension",
      d.validation ? ", validation layer on" : "", d.notes.empty() ? "" : "; " + d.notes);
}

std::string VulkanBackend::describe() const {
  std::lock_guard lock(impl_->mu);
  const Impl& m = *impl_;
  if (m.state != Impl::State::open) return {};
  struct Entry {
    int count = 0;
    uint64_t bytes = 0, from_bytes = 0;
    bool converted = false;
  };
  std::map<std::string, Entry> by_type;  // "q4_1", or "q4_k->fq3" for re-quantised weights
  uint64_t total = 0;
  for (const auto& [h, w] : m.weights) {
    const bool converted = w.from != w.type;
    Entry& e = by_type[converted ? fmt::format("{}->{}", type_name(w.from), type_name(w.type))
                                 : std::string(type_name(w.type))];
    e.count += 1;
    e.bytes += w.bytes;
    e.from_bytes += w.from_bytes;
    e.converted = converted;
    total += w.bytes;
  }
  std::string s =
      fmt::format("vulkan {}: {:.0f} MB weights", m.ctx->device().props.deviceName, mb(total));
  for (const auto& [name, e] : by_type) {
    s += fmt::format(", {} x {} {:.0f} MB", e.count, name, mb(e.bytes));
    if (e.converted) s += fmt::format(" (from {:.0f})", mb(e.from_bytes));
  }
  for (const LayerSpan* sp : m.ctx->spans()) {
    s += fmt::format("; span {} layers, KV {:.0f} MB f16", sp->n_layers(), mb(sp->kv_bytes()));
    if (const std::string k = sp->kernels(); !k.empty()) s += ", " + k;
  }
  const std::span<const CoopmatTile> tiles = m.ctx->coopmat_tiles();
  if (tiles.empty()) {
    s += "; prefill tiled f32";
  } else {
    const DeviceFeatures& f = m.ctx->features();
    std::string names;
    for (const CoopmatTile& t : tiles)
      names += fmt::format("{}{}", names.empty() ? "" : "/", t.label());
    s += fmt::format("; prefill coopmat {}x{}x{} tiles {}", f.coopmat_m, f.coopmat_n, f.coopmat_k,
                     m.opt->coopmat_tile ? "forced " + std::string(1, m.opt->coopmat_tile) : names);
  }
  if (const uint32_t n = prefill_f16_min_tok(*m.opt, m.ctx->features());
      n != 0 && prefill_f16_may_allocate(*m.opt, std::nullopt))
    s += fmt::format(", on f16 weight copies from {} tokens", n);
  // The decode kernel of q4_k (the common type) under FISH_VK_MATVEC's rule, and its setting.
  s += fmt::format(
      "; decode matvec {} (FISH_VK_MATVEC {})",
      matvec_kernel_name(matvec_kernel(GgmlType::q4_k, m.opt->matvec, m.ctx->features())),
      matvec_mode_name(m.opt->matvec));
  return s;
}

std::string VulkanBackend::prefill_kernel(int64_t n_out, int64_t n_tok, GgmlType type) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->open_locked(this).ok()) return "off";
  if (n_tok <= FISH_MATVEC_MAX_TOK) return "matvec";
  if (n_tok <= FISH_MATVEC_WIDE_TOK)
    return impl_->opt->verify_split ? "matvec (FISH_VK_VERIFY_SPLIT: runs of <= 4 tokens)"
                                    : "matvec8";
  // FISH_VK_PREFILL_F16: the f16 kernel over the weights' f16 copy (a part's size aside).
  DeviceWeight probe;
  probe.type = type;
  const bool f16 = prefill_f16(*impl_->opt, impl_->ctx->features(), probe, uint32_t(n_tok),
                               impl_->ctx->max_binding_bytes()) &&
                   prefill_f16_may_allocate(*impl_->opt, std::nullopt);
  const GgmlType kt = f16 ? GgmlType::f16 : type;
  const std::string copy =
      f16 ? fmt::format(", on f16 copies of the {} weights", type_name(type)) : "";
  const CoopmatTile* t = impl_->ctx->coopmat_tile(kt, uint32_t(n_out), uint32_t(n_tok));
  if (!t) return "tiled f32" + copy;
  if (t->cm2)
    return fmt::format(
        "coopmat2 workgroup tile {} {}x{}{}{}{}", t->label(), t->bm, t->bn,
        t->acc == kCoopmat2AccF32 ? "" : fmt::format(", {} sums", coopmat2_acc_name(t->acc)),
        coopmat2_stages_scales(kt, t->scales) ? ", shared scales" : "", copy);
  return fmt::format("coopmat {}x{}x{} tile {} {}x{}{}", t->cm, t->cn, t->ck, t->label(), t->bm,
                     t->bn, copy);
}

std::vector<CoopmatTile> VulkanBackend::coopmat_tiles() {
  std::lock_guard lock(impl_->mu);
  if (!impl_->open_locked(this).ok()) return {};
  const std::span<const CoopmatTile> t = impl_->ctx->coopmat_tiles();
  return {t.begin(), t.end()};
}

BackendInfo VulkanBackend::info() {
  BackendInfo bi;
  (void)open();
  bi.status = status();
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  bi.devices = m.devices;
  if (m.state != Impl::State::open) return bi;
  bi.open = true;
  const VulkanDevice& d = m.ctx->device();
  bi.device = d.props.deviceName;
  bi.queue = fmt::format("{} family {}", d.queue_compute_only ? "compute-only" : "graphics+compute",
                         d.queue_family);
  bi.subgroup_size = d.subgroup_size;
  bi.features = d.features.describe();
  bi.memory_budget_ext = d.has_memory_budget;
  bi.heap_bytes = m.ctx->budget().heap_bytes;
  bi.live_free_bytes = m.ctx->live_free();
  bi.ceiling_bytes = m.ctx->budget().ceiling_bytes;
  bi.headroom_bytes = m.ctx->budget().headroom_bytes;
  bi.resident_bytes = m.ctx->own_bytes();
  return bi;
}

int64_t VulkanBackend::decode_exact_tokens() const {
  // FISH_VK_VERIFY_SPLIT runs 5..8 tokens (matmuls and span forwards) as runs of the decode
  // kernels.
  return impl_->opt.ok() && impl_->opt->verify_split ? FISH_MATVEC_WIDE_TOK : FISH_MATVEC_MAX_TOK;
}

GgmlType VulkanBackend::Impl::device_type(const MatrixView& w, const UploadOptions& u) const {
  const int mode = requant_mode(u);
  if (mode <= 0 || mode > kRequantModeMax) return w.type;
  const std::optional<GgmlType> to = requant_target(mode, w.type);
  if (!to || w.n_in <= 0 || w.n_in % type_info(*to).block_elems != 0 || !kernel_type(*to))
    return w.type;
  return *to;
}

int VulkanBackend::requant_mode() const {
  std::lock_guard lock(impl_->mu);
  return impl_->requant_mode({});
}

GgmlType VulkanBackend::device_type(const MatrixView& w, const UploadOptions& opt) const {
  std::lock_guard lock(impl_->mu);
  return impl_->device_type(w, opt);
}

bool VulkanBackend::supports(GgmlType t) {
  return open().ok() && kernel_type(t);
}

uint64_t VulkanBackend::memory_free(const UploadOptions& opt) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->open_locked(this).ok()) return 0;
  return impl_->ctx->allocatable(opt.budget_bytes);
}

uint64_t VulkanBackend::bytes_resident() const {
  std::lock_guard lock(impl_->mu);
  return impl_->ctx ? impl_->ctx->own_bytes() : 0;
}

Status VulkanBackend::Impl::upload_part(const MatrixView& w, const DeviceWeight& wt,
                                        DeviceWeight::Part& part, Buffer& staging, int n_threads) {
  const size_t src_row = row_bytes(w.type, w.n_in);
  const size_t elem = w.type == GgmlType::f32 ? 4 : 2;  // only f32/f16 rows are repacked
  const uint32_t rows_per_chunk = uint32_t(staging.bytes / wt.row_bytes);
  for (uint32_t r = 0; r < part.n_rows; r += rows_per_chunk) {
    const uint32_t n = std::min(rows_per_chunk, part.n_rows - r);
    const uint8_t* src = static_cast<const uint8_t*>(w.data) + size_t(part.row0 + r) * src_row;
    auto* dst = static_cast<uint8_t*>(staging.mapped);
    if (wt.type != w.type) {  // re-quantised: quantised rows, n_in_pad == n_in
      const int threads = n_threads > 0 ? n_threads : default_thread_count();
      if (!requant_pool || requant_pool->size() != threads)
        requant_pool = std::make_unique<ThreadPool>(threads);
      requantize_rows(w.type, src, wt.type, dst, n, w.n_in, *requant_pool);
    } else if (wt.n_in_pad == wt.n_in) {
      std::memcpy(dst, src, size_t(n) * src_row);
    } else {
      for (uint32_t i = 0; i < n; ++i) {
        std::memcpy(dst + size_t(i) * wt.row_bytes, src + size_t(i) * src_row, src_row);
        std::memset(dst + size_t(i) * wt.row_bytes + src_row, 0,
                    size_t(wt.n_in_pad - wt.n_in) * elem);
      }
    }
    FISH_TRY(cmds.begin());
    cmds.copy(staging, 0, part.buf, uint64_t(r) * wt.row_bytes, uint64_t(n) * wt.row_bytes);
    FISH_TRY(cmds.submit_and_wait(Work::transfer, w.name));
  }
  return Status::success();
}

Result<WeightHandle> VulkanBackend::upload(const MatrixView& w, const UploadOptions& opt) {
  if (opt.requant && (*opt.requant < 0 || *opt.requant > kRequantModeMax))
    return make_error(
        "vulkan: {}: gpu_requant {} is not one of 0..{} (0 off, 1 every quantised weight -> fq3, "
        "2 q6_k -> q4_k, 3 q4_k -> fq3 and q6_k -> q4_k)",
        w.name, *opt.requant, kRequantModeMax);
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  FISH_TRY(m.open_locked(this));
  const GgmlType dev_type = m.device_type(w, opt);
  if (!kernel_type(dev_type))
    return make_error("vulkan: {}: type {} has no Vulkan kernel", w.name, type_name(dev_type));
  const TypeInfo& ti = type_info(w.type);
  if (w.n_in <= 0 || w.n_out <= 0 || w.n_in % ti.block_elems != 0 || !w.data)
    return make_error(
        "vulkan: {}: bad shape {} x {} for {} (n_in must be a positive multiple of {})", w.name,
        w.n_out, w.n_in, ti.name, ti.block_elems);
  if (w.n_bytes != row_bytes(w.type, w.n_in) * size_t(w.n_out))
    return make_error("vulkan: {}: {} bytes, expected {} for {} x {} {}", w.name, w.n_bytes,
                      row_bytes(w.type, w.n_in) * size_t(w.n_out), w.n_out, w.n_in, ti.name);
  DeviceWeight wt;
  wt.name = w.name;
  wt.type = dev_type;
  wt.from = w.type;
  wt.from_bytes = w.n_bytes;
  wt.budget_bytes = opt.budget_bytes;
  wt.n_in = uint32_t(w.n_in);
  wt.n_in_pad =
      uint32_t(ti.is_quantized() ? w.n_in : int64_t(align_up(uint64_t(w.n_in), FISH_K_ALIGN)));
  assert(wt.n_in_pad % FISH_K_ALIGN == 0);  // quantised blocks are 32 or 256 values
  const uint64_t dev_row = row_bytes(wt.type, wt.n_in_pad);
  uint64_t max_binding = m.ctx->max_binding_bytes() - kBufferPad;
  if (m.opt->max_part_bytes) max_binding = std::min(max_binding, m.opt->max_part_bytes);
  if (dev_row > max_binding || w.n_out > int64_t(UINT32_MAX) / 2)
    return make_error("vulkan: {}: a row of {} bytes exceeds the device's storage buffer range",
                      w.name, dev_row);
  wt.row_bytes = uint32_t(dev_row);
  wt.n_out = uint32_t(w.n_out);
  const uint32_t rows_per_part = uint32_t(std::min<uint64_t>(max_binding / dev_row, wt.n_out));

  auto staging = m.ctx->alloc(
      std::min<uint64_t>(kStagingBytes,
                         std::max<uint64_t>(dev_row, uint64_t(rows_per_part) * dev_row)),
      VK_BUFFER_USAGE_TRANSFER_SRC_BIT, Memory::host, false, w.name + " staging");
  if (!staging.ok()) return staging.take_error();
  if (staging->bytes < dev_row) {
    m.ctx->free(*staging);
    return make_error("vulkan: {}: a row of {} bytes exceeds the staging buffer", w.name, dev_row);
  }
  Status s;
  for (uint32_t r0 = 0; r0 < wt.n_out && s.ok(); r0 += rows_per_part) {
    DeviceWeight::Part p;
    p.row0 = r0;
    p.n_rows = std::min(rows_per_part, wt.n_out - r0);
    auto buf = m.ctx->alloc(uint64_t(p.n_rows) * dev_row + kBufferPad,
                            VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                            Memory::device, true, w.name, opt.budget_bytes);
    if (!buf.ok()) {
      s = buf.take_error();
      break;
    }
    p.buf = std::move(buf).value();
    wt.bytes += p.buf.alloc_bytes;
    wt.parts.push_back(p);
    s = m.upload_part(w, wt, wt.parts.back(), *staging, opt.n_threads);
  }
  m.ctx->free(*staging);
  if (!s.ok()) {
    for (DeviceWeight::Part& p : wt.parts) m.ctx->free(p.buf);
    if (m.weights.empty()) m.free_scratch();
    return s.take_error();
  }
  const WeightHandle h = m.next_handle++;
  m.weights.emplace(h, std::move(wt));
  return h;
}

void VulkanBackend::release(WeightHandle h) {
  if (h == 0) return;
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  auto it = m.weights.find(h);
  assert(it != m.weights.end() && "release: not a live handle of this backend");
  if (it == m.weights.end()) return;
  if (!m.ctx->lost()) m.ctx->vk().vkDeviceWaitIdle(m.ctx->handle());
  for (DeviceWeight::Part& p : it->second.parts) m.ctx->free(p.buf);
  m.weights.erase(it);
  if (m.weights.empty()) m.free_scratch();  // scratch goes with the last weight
}

Status VulkanBackend::matmul(WeightHandle w, const float* x, int64_t n_tok, float* y) {
  const MatmulOp op{w, y};
  return matmul_group({&op, 1}, x, n_tok);
}

Status VulkanBackend::matmul_group(std::span<const MatmulOp> ops, const float* x, int64_t n_tok) {
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  if (m.state != Impl::State::open)
    return make_error("vulkan: matmul on a backend that is not open ({})", m.status_text());
  // FISH_VK_VERIFY_SPLIT: 5..8 tokens as runs on the decode kernels (the rows of a one-token
  // matmul: decode_exact_tokens); x rows n_in apart, each op's y rows its n_out apart.
  const int64_t c = verify_run(*m.opt, n_tok);
  if (c == n_tok) return m.run(ops, x, n_tok);
  std::vector<int64_t> n_out(ops.size());
  int64_t n_in = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    auto it = m.weights.find(ops[i].w);
    if (it == m.weights.end())
      return make_error("vulkan: matmul: unknown weight handle {}", ops[i].w);
    n_out[i] = it->second.n_out;
    n_in = it->second.n_in;
  }
  std::vector<MatmulOp> part(ops.begin(), ops.end());
  for (int64_t t0 = 0; t0 < n_tok; t0 += c) {
    for (size_t i = 0; i < ops.size(); ++i) part[i].y = ops[i].y + t0 * n_out[i];
    FISH_TRY(m.run(part, x + t0 * n_in, std::min(c, n_tok - t0)));
  }
  return Status::success();
}

Status VulkanBackend::Impl::run(std::span<const MatmulOp> ops, const float* x, int64_t n_tok,
                                VkQueryPool stamps) {
  assert(n_tok >= 1 && !ops.empty());
  std::vector<const DeviceWeight*> ws;
  for (const MatmulOp& op : ops) {
    auto it = weights.find(op.w);
    assert(it != weights.end() && "matmul: not a live handle of this backend");
    if (it == weights.end()) return make_error("vulkan: matmul: unknown weight handle {}", op.w);
    ws.push_back(&it->second);
  }
  const uint32_t n_in = ws[0]->n_in, x_stride = ws[0]->n_in_pad;
  for (const DeviceWeight* w : ws) {
    assert(w->n_in == n_in);
    if (w->n_in != n_in)
      return make_error("vulkan: matmul_group: {} has n_in {}, expected {}", w->name, w->n_in,
                        n_in);
  }
  const std::optional<uint64_t> ceiling = tightest_budget(ws);  // the scratch serves these
  // Inputs: n_tok rows of x_stride floats (zero padding for f32/f16 rows).
  const uint64_t x_bytes = uint64_t(n_tok) * x_stride * 4 + kBufferPad;
  FISH_TRY(ensure_scratch(x_host, x_bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, Memory::host,
                          "matmul input", ceiling));
  FISH_TRY(ensure_scratch(x_dev, x_bytes,
                          VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                          Memory::device, "matmul input", ceiling));
  auto* xd = static_cast<float*>(x_host.mapped);
  if (x_stride == n_in) {
    std::memcpy(xd, x, size_t(n_tok) * n_in * 4);
  } else {
    for (int64_t t = 0; t < n_tok; ++t) {
      std::memcpy(xd + t * x_stride, x + t * n_in, size_t(n_in) * 4);
      std::memset(xd + t * x_stride + n_in, 0, size_t(x_stride - n_in) * 4);
    }
  }
  // Outputs: one aligned region per op.
  std::vector<uint64_t> y_off(ops.size());
  uint64_t y_bytes = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    y_off[i] = y_bytes;
    y_bytes = align_up(y_bytes + uint64_t(n_tok) * ws[i]->n_out * 4, ctx->binding_align());
  }
  FISH_TRY(ensure_scratch(y_host, y_bytes, VK_BUFFER_USAGE_TRANSFER_DST_BIT, Memory::host,
                          "matmul output", ceiling));
  FISH_TRY(ensure_scratch(y_dev, y_bytes,
                          VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                          Memory::device, "matmul output", ceiling));

  if (any_idot(ws, n_tok))
    FISH_TRY(ensure_scratch(xq_dev, q8_bytes(x_stride), VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                            Memory::device, "matmul input q8_1", ceiling));
  FISH_TRY(sets.reset());
  FISH_TRY(cmds.begin());
  cmds.copy(x_host, 0, x_dev, 0, x_bytes);
  cmds.barrier(Sync::transfer, Sync::compute);
  if (stamps) {
    ctx->vk().vkCmdResetQueryPool(cmds.cmd(), stamps, 0, 2);
    cmds.timestamp(stamps, 0);
  }
  FISH_TRY(record_matmuls(ws, y_off, n_tok));
  if (stamps) cmds.timestamp(stamps, 1);
  // y back to host-visible memory, then visible to the host read after the fence.
  cmds.barrier(Sync::compute, Sync::transfer);
  cmds.copy(y_dev, 0, y_host, 0, y_bytes);
  cmds.barrier(Sync::transfer, Sync::host);
  FISH_TRY(cmds.submit_and_wait(Work::compute, "matmul"));
  const auto* yd = static_cast<const uint8_t*>(y_host.mapped);
  for (size_t i = 0; i < ops.size(); ++i)
    std::memcpy(ops[i].y, yd + y_off[i], size_t(n_tok) * ws[i]->n_out * 4);
  return Status::success();
}

// One dispatch per weight part: W the part, X all of x_dev (matvec_idot_: xq_dev, written by one
// quant_q8_1 dispatch first; matmul_cm2_: xh_dev, written by one to_f16 dispatch first), Y the
// op's region of y_dev.
Status VulkanBackend::Impl::record_matmuls(std::span<const DeviceWeight* const> ws,
                                           std::span<const uint64_t> y_off, int64_t n_tok,
                                           char kernel, bool quantize) {
  // Each weight's kernel first: the inputs its steps read (q8_1, f16) are written once, before.
  // f16: FISH_VK_PREFILL_F16 runs this weight's matmul on its f16 copy (wh_dev at wh_off).
  struct Pick {
    const CoopmatTile* cm = nullptr;
    Pipeline p;
    bool f16 = false;
    uint64_t wh_off = 0;
  };
  std::vector<Pick> picks(ws.size());
  uint64_t wh_bytes = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const DeviceWeight& w = *ws[i];
    picks[i].f16 = prefill_f16(*opt, ctx->features(), w, uint32_t(n_tok), ctx->max_binding_bytes());
    picks[i].wh_off = wh_bytes;
    if (picks[i].f16)
      for (const DeviceWeight::Part& part : w.parts) wh_bytes += f16_copy_bytes(w, part);
  }
  if (wh_bytes != 0 && !prefill_f16_may_allocate(*opt, tightest_budget(ws))) {
    for (Pick& p : picks) p.f16 = false;  // auto under a VRAM ceiling: no copies
    wh_bytes = 0;
  }
  if (wh_bytes != 0) {
    const Status s =
        ensure_scratch(wh_dev, wh_bytes + kBufferPad, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                       Memory::device, "matmul weights f16", tightest_budget(ws));
    if (!s.ok() && opt->prefill_f16 > 0) return s;
    if (!s.ok()) {  // auto: no copies where they do not fit the budget
      for (Pick& p : picks) p.f16 = false;
      wh_bytes = 0;
    }
  }
  for (size_t i = 0; i < ws.size(); ++i) {
    const DeviceWeight& w = *ws[i];
    // The kernel's type: f16 where it reads the copy.
    const GgmlType type = picks[i].f16 ? GgmlType::f16 : w.type;
    // 5..8 tokens run matvec8_<type> (weights read once) unless a tile is forced.
    const bool wide = n_tok > FISH_MATVEC_MAX_TOK && n_tok <= FISH_MATVEC_WIDE_TOK;
    const CoopmatTile* cm =
        kernel == 't' || wide ? nullptr : ctx->coopmat_tile(type, w.n_out, uint32_t(n_tok));
    if (kernel != 0 && kernel != 't') {
      cm = nullptr;
      for (const CoopmatTile& t : ctx->coopmat_tiles())
        if (t.name == kernel) cm = &t;
      if (!cm) return make_error("vulkan: no cooperative-matrix tile '{}' on this device", kernel);
    }
    Result<Pipeline> pr = cm ? ctx->coopmat_pipeline(type, *cm) : Result<Pipeline>(Pipeline{});
    // A coopmat2 tile the driver rejects (forced or the rule's) is marked unavailable by
    // coopmat_pipeline: the rule's next pick, until one builds or it is no coopmat2 tile.
    for (size_t left = ctx->coopmat_tiles().size();
         !pr.ok() && cm && cm->cm2 && kernel == 0 && left; --left) {
      cm = ctx->coopmat_tile(type, w.n_out, uint32_t(n_tok));
      if (cm) pr = ctx->coopmat_pipeline(type, *cm);
    }
    if (!cm)
      pr = ctx->pipeline(matvec_exact_spec(type, n_tok, decode_kernel(type), *opt, w.n_in_pad));
    FISH_ASSIGN_OR_RETURN(picks[i].p, std::move(pr));
    picks[i].cm = cm;
  }
  const bool any_cm2 =
      std::any_of(picks.begin(), picks.end(), [](const Pick& p) { return p.cm && p.cm->cm2; });
  const uint32_t k = ws[0]->n_in_pad;  // x_stride: x_dev's rows (f32), xh_dev's (f16)
  uint32_t n_sets = 0;
  // One input conversion: a typeless module, binding W unread (x_dev bound there).
  auto convert = [&](const char* module, const Buffer& out, const MatmulPush& pc,
                     uint32_t groups) -> Status {
    FISH_ASSIGN_OR_RETURN(const Pipeline q, ctx->pipeline(module));
    const BufferRange r[3] = {
        {x_dev.buf, 0, VK_WHOLE_SIZE}, {x_dev.buf, 0, VK_WHOLE_SIZE}, {out.buf, 0, VK_WHOLE_SIZE}};
    FISH_ASSIGN_OR_RETURN(const VkDescriptorSet set, sets.allocate(q, r));
    ++n_sets;
    cmds.bind(q, set);
    cmds.push(q, &pc, sizeof pc);
    cmds.dispatch(groups, 1);
    cmds.barrier(Sync::compute, Sync::compute);
    return Status::success();
  };
  if (quantize && any_idot(ws, n_tok))
    FISH_TRY(convert("quant_q8_1", xq_dev, quant_push(k, uint32_t(n_tok), k),
                     quant_groups(k, uint32_t(n_tok))));
  if (quantize && any_cm2) {
    FISH_TRY(ensure_scratch(xh_dev, uint64_t(n_tok) * k * 2 + kBufferPad,
                            VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, Memory::device, "matmul input f16",
                            tightest_budget(ws)));
    FISH_TRY(convert("to_f16", xh_dev, half_push(k, uint32_t(n_tok), k, k),
                     half_groups(k, uint32_t(n_tok), ctx->limits().maxComputeWorkGroupCount[0])));
  }
  // The f16 copies (FISH_VK_PREFILL_F16), one a part, all written before any matmul reads one.
  if (wh_bytes != 0) {
    for (size_t i = 0; i < ws.size(); ++i) {
      if (!picks[i].f16) continue;
      const DeviceWeight& w = *ws[i];
      FISH_ASSIGN_OR_RETURN(const Pipeline d,
                            ctx->pipeline(fmt::format("dequant_f16_{}", type_name(w.type))));
      uint64_t off = picks[i].wh_off;
      for (const DeviceWeight::Part& part : w.parts) {
        if (++n_sets > kMaxSetsPerSubmit)
          return make_error("vulkan: matmul_group: more than {} weight parts", kMaxSetsPerSubmit);
        const BufferRange r[3] = {{part.buf.buf, 0, VK_WHOLE_SIZE},
                                  {x_dev.buf, 0, VK_WHOLE_SIZE},
                                  {wh_dev.buf, off, f16_copy_bytes(w, part)}};
        FISH_ASSIGN_OR_RETURN(const VkDescriptorSet set, sets.allocate(d, r));
        const MatmulPush pc = dequant_push(w, part);
        cmds.bind(d, set);
        cmds.push(d, &pc, sizeof pc);
        cmds.dispatch(dequant_groups(w, part, ctx->copy_groups_max()), 1);
        off += f16_copy_bytes(w, part);
      }
    }
    cmds.barrier(Sync::compute, Sync::compute);
  }
  for (size_t i = 0; i < ws.size(); ++i) {
    const DeviceWeight& w = *ws[i];
    const CoopmatTile* cm = picks[i].cm;
    const Pipeline& p = picks[i].p;
    const MatvecKernel mk = decode_kernel(w.type);
    const bool q8 = n_tok <= FISH_MATVEC_MAX_TOK && mk == MatvecKernel::idot;
    const Buffer& x = q8 ? xq_dev : cm && cm->cm2 ? xh_dev : x_dev;
    uint64_t wh_off = picks[i].wh_off;
    for (const DeviceWeight::Part& part : w.parts) {
      if (++n_sets > kMaxSetsPerSubmit)
        return make_error("vulkan: matmul_group: more than {} weight parts", kMaxSetsPerSubmit);
      const uint64_t wh = picks[i].f16 ? f16_copy_bytes(w, part) : 0;
      const BufferRange r[3] = {picks[i].f16 ? BufferRange{wh_dev.buf, wh_off, wh}
                                             : BufferRange{part.buf.buf, 0, VK_WHOLE_SIZE},
                                {x.buf, 0, VK_WHOLE_SIZE},
                                {y_dev.buf, y_off[i], uint64_t(n_tok) * w.n_out * 4}};
      wh_off += wh;
      FISH_ASSIGN_OR_RETURN(const VkDescriptorSet set, sets.allocate(p, r));
      const uint32_t max_x = ctx->limits().maxComputeWorkGroupCount[0];
      const MatmulGrid g =
          picks[i].f16 ? f16_copy_grid(w, part, uint32_t(n_tok), k, w.n_out, part.row0, max_x, cm)
                       : matmul_grid(w, part, uint32_t(n_tok), k, w.n_out, part.row0, max_x, cm,
                                     matvec_rows(mk, *opt, w.n_in_pad, n_tok));
      cmds.bind(p, set);
      cmds.push(p, &g.pc, sizeof g.pc);
      cmds.dispatch(g.gx, g.gy);
    }
  }
  return Status::success();
}

// ---- layer spans (the span itself is vulkan_span.cpp) ----------------------------------------

Result<std::unique_ptr<LayerSpan>> VulkanBackend::span_create(const SpanDesc& desc) {
  std::lock_guard lock(impl_->mu);
  FISH_TRY(impl_->open_locked(this));
  return create_vulkan_span(*impl_->ctx, desc, impl_->weights);
}

Status VulkanBackend::run_span_op(const std::string& name, const SpanPush& pc, uint32_t gx,
                                  uint32_t gy, std::vector<float>& arena,
                                  const std::vector<float>& params, std::vector<uint32_t>& kv) {
  const SpanDispatch d{name, pc, gx, gy, 1};
  FISH_TRY(run_span_ops(std::span(&d, 1), 1, arena, params, kv));
  return Status::success();
}

Result<double> VulkanBackend::run_span_ops(std::span<const SpanDispatch> dispatches, int reps,
                                           std::vector<float>& arena,
                                           const std::vector<float>& params,
                                           std::vector<uint32_t>& kv) {
  std::lock_guard lock(impl_->mu);
  FISH_TRY(impl_->open_locked(this));
  return vk::run_span_ops(*impl_->ctx, dispatches, reps, arena, params, kv);
}

std::optional<FlashCmTile> VulkanBackend::flash_cm_tile(uint32_t head_dim, uint32_t variant) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->open_locked(this).ok()) return std::nullopt;
  return pick_flash_cm_tile(*impl_->ctx, head_dim, variant);
}

void VulkanBackend::inject_fault(DeviceFaultKind kind, uint64_t n) {
  std::lock_guard lock(impl_->mu);
  if (impl_->ctx) impl_->ctx->inject_fault(kind, n);
}

// ---- start-up registration --------------------------------------------------------------------

namespace {
// Registers the process's backend before main(); touches no driver (seed: a Vulkan instance
// created under a loader lock can deadlock). Leaked on purpose: no teardown at exit.
VulkanBackend* register_at_startup() {
  if (const char* v = std::getenv("FISH_GPU"); gpu_disabled_by(v)) {
    set_gpu_backend_off(fmt::format("vulkan: off: disabled by FISH_GPU={}", v ? v : ""));
    return nullptr;
  }
  auto* b = new VulkanBackend(VulkanOptions::from_env());
  set_gpu_backend(b);
  return b;
}
VulkanBackend* const g_startup_backend = register_at_startup();
}  // namespace

VulkanBackend* startup_backend() {
  return g_startup_backend;
}

}  // namespace fish::vk

namespace fish::gpu {

std::string vulkan_status() {
  if (!vk::startup_backend()) {
    const char* v = std::getenv("FISH_GPU");
    return fmt::format("vulkan: off: disabled by FISH_GPU={}", v ? v : "");
  }
  return vk::startup_backend()->status();
}

}  // namespace fish::gpu
