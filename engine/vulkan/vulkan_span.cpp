// VulkanSpan: the Vulkan LayerSpan (vulkan_span.h). Creation validates the model against what
// the span ops take, allocates ARENA / PARAMS / KV / x staging, uploads the parameters and the
// RoPE table once and builds every descriptor set; forward() records one command buffer:
// x in, per chunk of <= FISH_SPAN_CHUNK tokens per layer the whole layer graph with
// compute->compute barriers between dependent steps, x out; one submit, one fence.
#include "engine/vulkan/vulkan_span.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "engine/vulkan/compute_layout.h"
#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/vulkan_shaders.h"
#include "fish_vk_layout.h"
#include "fish_vk_span.h"

namespace fish::vk {
namespace {

constexpr int64_t kChunk = FISH_SPAN_CHUNK;
constexpr uint64_t kNsTimeout = 120ull * 1000 * 1000 * 1000;  // a hung device, not a slow one

// Profile stages (seed: matvec, rmsnorm, attention, act*mul, add, KV store, RoPE).
enum Stage { kMatvec, kRmsnorm, kAttention, kActMul, kAdd, kKvStore, kRope, kNumStages };
constexpr const char* kStageNames[kNumStages] = {"matvec", "rmsnorm",  "attention", "act*mul",
                                                 "add",    "KV store", "RoPE"};

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

// One matmul of a layer: a weight part bound as W, its input region as X, ARENA as Y.
struct MatmulStep {
  VkPipeline vec = VK_NULL_HANDLE, tiled = VK_NULL_HANDLE;
  VkDescriptorSet set = VK_NULL_HANDLE;
  MatmulPush push{};  // n_tok and the grid filled per chunk
};

struct LayerState {
  const LayerWeights* w = nullptr;
  std::vector<MatmulStep> qkv, wo, gate_up, down;
  uint32_t attn_norm = 0, ffn_norm = 0;            // PARAMS offsets (floats)
  uint32_t q_norm = 0, k_norm = 0;                 // per-head norms, when present
  uint32_t post_attn = 0, post_ffn = 0, bias = 0;  // gemma3 norms, qwen2 bq|bk|bv
  bool has_qk_norm = false, has_post = false, has_bias = false;
  uint32_t rope_table = 0;  // PARAMS offset of this layer's variant's cos/sin table
  uint32_t window = 0;
};

class VulkanSpan final : public LayerSpan {
 public:
  VulkanSpan(SpanHost h, const SpanDesc& d) : h_(std::move(h)), p_(*d.params), d_(d) {}
  ~VulkanSpan() override;

  Status init();
  Status forward(float* x, int64_t n_tok, int64_t pos0) override;
  void kv_truncate(int64_t n) override {
    std::lock_guard lock(*h_.mu);
    kv_len_ = std::min(kv_len_, std::max<int64_t>(0, n));
  }
  Status kv_reserve(int64_t n) override {
    std::lock_guard lock(*h_.mu);
    return reserve_locked(n);
  }
  int64_t kv_length() const override { return kv_len_; }
  int64_t kv_capacity() const override { return kv_cap_; }
  int64_t n_layers() const override { return int64_t(layers_.size()); }
  int64_t first_layer() const override { return d_.first_layer; }
  int64_t max_tok() const override { return d_.max_tok; }
  int64_t n_ctx() const override { return d_.n_ctx; }
  uint64_t kv_bytes() const override { return kv_.alloc_bytes; }
  uint64_t bytes() const override {
    return kv_.alloc_bytes + arena_.alloc_bytes + params_.alloc_bytes + x_host_.alloc_bytes;
  }
  std::string profile() const override;

 private:
  const VolkDeviceTable& vk() const { return h_.dev->vk; }
  VkDevice device() const { return h_.dev->device; }
  Status reserve_locked(int64_t n);
  Status submit_and_wait(std::string_view what);
  Result<VkPipeline> op_pipeline(const std::string& name);
  Status build_matmul(WeightHandle wh, int64_t expect_out, int64_t expect_in, uint32_t x_region,
                      uint32_t x_stride, uint32_t y_off, uint32_t y_stride,
                      std::vector<MatmulStep>* out);
  void update_ops_set();
  void record_chunk(int64_t t0, int64_t nc, int64_t pos);
  void op(VkPipeline p, const SpanPush& pc, uint32_t gx, uint32_t gy, uint32_t gz = 1);
  void matmuls(const std::vector<MatmulStep>& steps, uint32_t n_tok);
  void barrier();
  void stage_done(Stage s);

  SpanHost h_;
  ModelParams p_;
  SpanDesc d_;
  std::vector<LayerState> layers_;
  SpanBuffer arena_, params_, kv_, x_host_;
  int64_t kv_cap_ = 0, kv_len_ = 0;
  // ARENA regions (floats; each starts on the storage-offset alignment).
  uint32_t off_x_ = 0, off_xn_ = 0, off_qkv_ = 0, off_att_ = 0, off_tmp_ = 0, off_gu_ = 0;
  uint32_t off_parts_ = 0;   // split-K attention partials: parts_cap_ x (head_dim + 2)
  uint32_t parts_cap_ = 0;   // n_head x FISH_SPAN_ATTN_SPLIT_TOK x FISH_SPAN_ATTN_MAX_SPLIT
  uint32_t qkv_stride_ = 0;  // q_dim + 2 kv_dim
  VkDescriptorSetLayout ops_set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout ops_layout_ = VK_NULL_HANDLE;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkDescriptorSet ops_set_ = VK_NULL_HANDLE;
  std::map<std::string, VkPipeline> pipelines_;
  VkPipeline rmsnorm_ = VK_NULL_HANDLE, add_rmsnorm_ = VK_NULL_HANDLE,
             head_rmsnorm_ = VK_NULL_HANDLE, rope_ = VK_NULL_HANDLE, kv_store_ = VK_NULL_HANDLE,
             attention_ = VK_NULL_HANDLE, attention_split_ = VK_NULL_HANDLE,
             attention_combine_ = VK_NULL_HANDLE, add_ = VK_NULL_HANDLE, bias_ = VK_NULL_HANDLE,
             act_ = VK_NULL_HANDLE;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  // Profiling: one timestamp after each step; stage_of_[i] is the stage that ended at query i+1.
  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t n_queries_ = 0, used_queries_ = 0;
  std::vector<Stage> stage_of_;
  std::array<double, kNumStages> stage_ms_{};
  int64_t n_profiled_ = 0;
  double timestamp_ns_ = 1.0;
  bool registered_ = false;
};

VulkanSpan::~VulkanSpan() {
  std::lock_guard lock(*h_.mu);
  if (registered_) h_.registry(this, false);
  if (h_.is_open()) vk().vkDeviceWaitIdle(device());
  for (auto& [name, p] : pipelines_) vk().vkDestroyPipeline(device(), p, nullptr);
  if (queries_) vk().vkDestroyQueryPool(device(), queries_, nullptr);
  if (fence_) vk().vkDestroyFence(device(), fence_, nullptr);
  if (cmd_pool_) vk().vkDestroyCommandPool(device(), cmd_pool_, nullptr);
  if (pool_) vk().vkDestroyDescriptorPool(device(), pool_, nullptr);
  if (ops_layout_) vk().vkDestroyPipelineLayout(device(), ops_layout_, nullptr);
  if (ops_set_layout_) vk().vkDestroyDescriptorSetLayout(device(), ops_set_layout_, nullptr);
  for (SpanBuffer* b : {&arena_, &params_, &kv_, &x_host_})
    if (b->buf) h_.free(*b);
}

Result<VkPipeline> VulkanSpan::op_pipeline(const std::string& name) {
  if (auto it = pipelines_.find(name); it != pipelines_.end()) return it->second;
  const std::span<const uint32_t> code = embedded_shader(name);
  if (code.empty()) return make_error("span: no embedded shader '{}'", name);
  VkShaderModuleCreateInfo si{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  si.codeSize = code.size_bytes();
  si.pCode = code.data();
  VkShaderModule mod;
  FISH_VK_CHECK(vk().vkCreateShaderModule(device(), &si, nullptr, &mod));
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = mod;
  ci.stage.pName = "main";
  ci.layout = ops_layout_;
  VkPipeline pl;
  const VkResult r = vk().vkCreateComputePipelines(device(), VK_NULL_HANDLE, 1, &ci, nullptr, &pl);
  vk().vkDestroyShaderModule(device(), mod, nullptr);
  if (r < 0)
    return make_error("span: vkCreateComputePipelines({}) failed: {}", name, vk_result_name(r));
  pipelines_.emplace(name, pl);
  return pl;
}

Status VulkanSpan::submit_and_wait(std::string_view what) {
  FISH_VK_CHECK(vk().vkEndCommandBuffer(cmd_));
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  FISH_VK_CHECK(vk().vkResetFences(device(), 1, &fence_));
  FISH_VK_CHECK(vk().vkQueueSubmit(h_.dev->queue, 1, &si, fence_));
  const VkResult r = vk().vkWaitForFences(device(), 1, &fence_, VK_TRUE, kNsTimeout);
  if (r == VK_TIMEOUT) return make_error("span: {}: no completion after 120 s", what);
  FISH_VK_CHECK(r);
  return Status::success();
}

Status VulkanSpan::build_matmul(WeightHandle wh, int64_t expect_out, int64_t expect_in,
                                uint32_t x_region, uint32_t x_stride, uint32_t y_off,
                                uint32_t y_stride, std::vector<MatmulStep>* out) {
  if (wh == 0) return make_error("span: a layer matrix is not resident on the device");
  FISH_ASSIGN_OR_RETURN(SpanWeight w, h_.weight(wh));
  if (w.n_out != expect_out || w.n_in != expect_in || w.n_in_pad != w.n_in)
    return make_error("span: {}: {} x {} (padded to {}), expected {} x {}", w.name, w.n_out, w.n_in,
                      w.n_in_pad, expect_out, expect_in);
  FISH_ASSIGN_OR_RETURN(VkPipeline vec,
                        h_.matmul_pipeline(fmt::format("matvec_{}", type_name(w.type))));
  FISH_ASSIGN_OR_RETURN(VkPipeline tiled,
                        h_.matmul_pipeline(fmt::format("matmul_{}", type_name(w.type))));
  for (const SpanWeight::Part& part : w.parts) {
    MatmulStep st;
    st.vec = vec;
    st.tiled = tiled;
    VkDescriptorSetAllocateInfo dai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    dai.descriptorPool = pool_;
    dai.descriptorSetCount = 1;
    dai.pSetLayouts = &h_.matmul_set_layout;
    FISH_VK_CHECK(vk().vkAllocateDescriptorSets(device(), &dai, &st.set));
    VkDescriptorBufferInfo bufs[3] = {
        {part.buf, 0, VK_WHOLE_SIZE},
        {arena_.buf, uint64_t(x_region) * 4, VK_WHOLE_SIZE},
        {arena_.buf, 0, VK_WHOLE_SIZE},
    };
    VkWriteDescriptorSet wr[3];
    for (uint32_t b = 0; b < 3; ++b) {
      wr[b] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      wr[b].dstSet = st.set;
      wr[b].dstBinding = b;
      wr[b].descriptorCount = 1;
      wr[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      wr[b].pBufferInfo = &bufs[b];
    }
    vk().vkUpdateDescriptorSets(device(), 3, wr, 0, nullptr);
    st.push.n_in = w.n_in_pad;
    st.push.n_out = part.n_rows;
    st.push.row_bytes = w.row_bytes;
    st.push.x_stride = x_stride;
    st.push.y_stride = y_stride;
    st.push.y_offset = y_off + part.row0;
    out->push_back(st);
  }
  return Status::success();
}

void VulkanSpan::update_ops_set() {
  VkDescriptorBufferInfo bufs[3] = {
      {arena_.buf, 0, VK_WHOLE_SIZE},
      {params_.buf, 0, VK_WHOLE_SIZE},
      {kv_.buf, 0, VK_WHOLE_SIZE},
  };
  VkWriteDescriptorSet wr[3];
  for (uint32_t b = 0; b < 3; ++b) {
    wr[b] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    wr[b].dstSet = ops_set_;
    wr[b].dstBinding = b;
    wr[b].descriptorCount = 1;
    wr[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    wr[b].pBufferInfo = &bufs[b];
  }
  vk().vkUpdateDescriptorSets(device(), 3, wr, 0, nullptr);
}

Status VulkanSpan::init() {
  const int64_t E = p_.n_embd, Q = p_.q_dim(), KV = p_.kv_dim(), F = p_.n_ff, hd = p_.head_dim;
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

  // ARENA layout.
  const uint64_t align_f =
      std::max<uint64_t>(16, h_.dev->props.limits.minStorageBufferOffsetAlignment) / 4;
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
  parts_cap_ = uint32_t(p_.n_head) * FISH_SPAN_ATTN_SPLIT_TOK * FISH_SPAN_ATTN_MAX_SPLIT;
  off_parts_ = region(uint64_t(parts_cap_) * uint64_t(hd + 2));
  const uint64_t arena_bytes = cur * 4 + 16;

  // PARAMS layout and contents.
  std::vector<float> prm;
  auto put = [&](const std::vector<float>& v) {
    prm.resize(align_up(prm.size(), 4));  // 16-byte aligned: rmsnorm's vec4 path reads w
    const uint32_t o = uint32_t(prm.size());
    prm.insert(prm.end(), v.begin(), v.end());
    return o;
  };
  layers_.resize(d_.layers.size());
  const int n_var = p_.sliding_window > 0 ? 2 : 1;
  for (size_t i = 0; i < d_.layers.size(); ++i) {
    const LayerWeights& L = *d_.layers[i].w;
    LayerState& s = layers_[i];
    s.w = &L;
    if (int64_t(L.attn_norm.size()) != E || int64_t(L.ffn_norm.size()) != E)
      return make_error("span: layer {}: norm sizes", d_.first_layer + int64_t(i));
    s.attn_norm = put(L.attn_norm);
    s.ffn_norm = put(L.ffn_norm);
    s.has_qk_norm = !L.q_norm.empty();
    if (s.has_qk_norm) {
      if (int64_t(L.q_norm.size()) != hd || int64_t(L.k_norm.size()) != hd)
        return make_error("span: layer {}: q/k norm of {} / {} values, expected {}",
                          d_.first_layer + int64_t(i), L.q_norm.size(), L.k_norm.size(), hd);
      s.q_norm = put(L.q_norm);
      s.k_norm = put(L.k_norm);
    }
    s.has_post = !L.post_attn_norm.empty();
    if (s.has_post) {
      if (int64_t(L.post_attn_norm.size()) != E || int64_t(L.post_ffn_norm.size()) != E)
        return make_error("span: layer {}: post norm sizes", d_.first_layer + int64_t(i));
      s.post_attn = put(L.post_attn_norm);
      s.post_ffn = put(L.post_ffn_norm);
    }
    s.has_bias = !L.bq.empty();
    if (s.has_bias) {
      if (int64_t(L.bq.size()) != Q || int64_t(L.bk.size()) != KV || int64_t(L.bv.size()) != KV)
        return make_error("span: layer {}: bias sizes", d_.first_layer + int64_t(i));
      s.bias = put(L.bq);
      put(L.bk);
      put(L.bv);
    }
    s.window = L.swa ? uint32_t(p_.sliding_window) : 0;
  }
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

  const uint64_t range = h_.dev->props.limits.maxStorageBufferRange;
  if (arena_bytes > range || prm.size() * 4 > range)
    return make_error("span: arena {} / params {} bytes exceed the storage buffer range {}",
                      arena_bytes, prm.size() * 4, range);
  if (uint64_t(d_.layers.size()) * uint64_t(d_.n_ctx) * uint64_t(KV) * 4 > range)
    return make_error("span: a KV of {} layers x {} positions exceeds the storage buffer range",
                      d_.layers.size(), d_.n_ctx);

  constexpr VkBufferUsageFlags kDev = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
  FISH_ASSIGN_OR_RETURN(arena_, h_.alloc(arena_bytes, kDev, false, "span arena"));
  FISH_ASSIGN_OR_RETURN(params_, h_.alloc(prm.size() * 4 + 16, kDev, false, "span params"));
  FISH_ASSIGN_OR_RETURN(
      x_host_, h_.alloc(uint64_t(d_.max_tok * E) * 4,
                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, true,
                        "span x staging"));

  // Command objects.
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = h_.dev->queue_family;
  FISH_VK_CHECK(vk().vkCreateCommandPool(device(), &cpi, nullptr, &cmd_pool_));
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = cmd_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  FISH_VK_CHECK(vk().vkAllocateCommandBuffers(device(), &cai, &cmd_));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  FISH_VK_CHECK(vk().vkCreateFence(device(), &fci, nullptr, &fence_));

  // PARAMS upload through a transient staging buffer.
  {
    FISH_ASSIGN_OR_RETURN(SpanBuffer st, h_.alloc(prm.size() * 4, VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                                                  true, "span params staging"));
    std::memcpy(st.mapped, prm.data(), prm.size() * 4);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    Status s = [&]() -> Status {
      FISH_VK_CHECK(vk().vkBeginCommandBuffer(cmd_, &bi));
      const VkBufferCopy c{0, 0, prm.size() * 4};
      vk().vkCmdCopyBuffer(cmd_, st.buf, params_.buf, 1, &c);
      return submit_and_wait("span params upload");
    }();
    h_.free(st);
    FISH_TRY(s);
  }

  // Descriptor layout of the span ops (FISH_SPAN_ARENA, _PARAMS, _KV), pool for every set.
  static_assert(FISH_SPAN_ARENA == 0 && FISH_SPAN_PARAMS == 1 && FISH_SPAN_KV == 2);
  FISH_ASSIGN_OR_RETURN(const ComputeLayout cl,
                        create_compute_layout(vk(), device(), 3, sizeof(SpanPush)));
  ops_set_layout_ = cl.set;
  ops_layout_ = cl.pipeline;
  uint32_t n_sets = 1;
  for (const SpanDesc::Layer& l : d_.layers)
    for (WeightHandle w : {l.wq, l.wk, l.wv, l.wo, l.gate, l.up, l.down}) {
      if (w == 0) return make_error("span: a layer matrix is not resident on the device");
      FISH_ASSIGN_OR_RETURN(SpanWeight sw, h_.weight(w));
      n_sets += uint32_t(sw.parts.size());
    }
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3 * n_sets};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dpi.maxSets = n_sets;
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &ps;
  FISH_VK_CHECK(vk().vkCreateDescriptorPool(device(), &dpi, nullptr, &pool_));
  VkDescriptorSetAllocateInfo dai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  dai.descriptorPool = pool_;
  dai.descriptorSetCount = 1;
  dai.pSetLayouts = &ops_set_layout_;
  FISH_VK_CHECK(vk().vkAllocateDescriptorSets(device(), &dai, &ops_set_));

  for (size_t i = 0; i < d_.layers.size(); ++i) {
    const SpanDesc::Layer& l = d_.layers[i];
    LayerState& s = layers_[i];
    const uint32_t qs = qkv_stride_;
    FISH_TRY(build_matmul(l.wq, Q, E, off_xn_, uint32_t(E), off_qkv_, qs, &s.qkv));
    FISH_TRY(build_matmul(l.wk, KV, E, off_xn_, uint32_t(E), off_qkv_ + uint32_t(Q), qs, &s.qkv));
    FISH_TRY(
        build_matmul(l.wv, KV, E, off_xn_, uint32_t(E), off_qkv_ + uint32_t(Q + KV), qs, &s.qkv));
    FISH_TRY(build_matmul(l.wo, E, Q, off_att_, uint32_t(Q), off_tmp_, uint32_t(E), &s.wo));
    FISH_TRY(
        build_matmul(l.gate, F, E, off_xn_, uint32_t(E), off_gu_, uint32_t(2 * F), &s.gate_up));
    FISH_TRY(build_matmul(l.up, F, E, off_xn_, uint32_t(E), off_gu_ + uint32_t(F), uint32_t(2 * F),
                          &s.gate_up));
    FISH_TRY(build_matmul(l.down, E, F, off_gu_, uint32_t(2 * F), off_tmp_, uint32_t(E), &s.down));
  }

  FISH_ASSIGN_OR_RETURN(rmsnorm_, op_pipeline("span_rmsnorm"));
  FISH_ASSIGN_OR_RETURN(add_rmsnorm_, op_pipeline("span_add_rmsnorm"));
  FISH_ASSIGN_OR_RETURN(head_rmsnorm_, op_pipeline("span_head_rmsnorm"));
  FISH_ASSIGN_OR_RETURN(rope_, op_pipeline("span_rope"));
  FISH_ASSIGN_OR_RETURN(kv_store_, op_pipeline("span_kv_store"));
  FISH_ASSIGN_OR_RETURN(attention_, op_pipeline("span_attention"));
  FISH_ASSIGN_OR_RETURN(attention_split_, op_pipeline("span_attention_split"));
  FISH_ASSIGN_OR_RETURN(attention_combine_, op_pipeline("span_attention_combine"));
  FISH_ASSIGN_OR_RETURN(add_, op_pipeline("span_add"));
  FISH_ASSIGN_OR_RETURN(bias_, op_pipeline("span_bias"));
  FISH_ASSIGN_OR_RETURN(act_, op_pipeline(p_.arch == Arch::gemma3 ? "span_geglu" : "span_swiglu"));

  if (h_.profile) {
    uint32_t n_fam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(h_.dev->phys, &n_fam, nullptr);
    std::vector<VkQueueFamilyProperties> fam(n_fam);
    vkGetPhysicalDeviceQueueFamilyProperties(h_.dev->phys, &n_fam, fam.data());
    if (h_.dev->queue_family < n_fam && fam[h_.dev->queue_family].timestampValidBits > 0) {
      const int64_t n_chunks = (d_.max_tok + kChunk - 1) / kChunk;
      n_queries_ = uint32_t(n_chunks * int64_t(layers_.size()) * 20 + 2);
      VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = n_queries_;
      FISH_VK_CHECK(vk().vkCreateQueryPool(device(), &qi, nullptr, &queries_));
      timestamp_ns_ = h_.dev->props.limits.timestampPeriod;
    }
  }

  FISH_TRY(reserve_locked(d_.kv_reserve > 0 ? std::min(d_.kv_reserve, d_.n_ctx) : d_.n_ctx));
  h_.registry(this, true);
  registered_ = true;
  return Status::success();
}

Status VulkanSpan::reserve_locked(int64_t n) {
  if (n > d_.n_ctx) return make_error("span: kv_reserve({}) beyond n_ctx {}", n, d_.n_ctx);
  if (n <= kv_cap_) return Status::success();
  // K then V per layer, cap positions of kv_dim / 2 words each; a larger cache copies the valid
  // positions of every layer over in one submit.
  const uint64_t words_pos = uint64_t(p_.kv_dim() / 2);
  const uint64_t n_layer = layers_.size();
  FISH_ASSIGN_OR_RETURN(SpanBuffer nk, h_.alloc(n_layer * 2 * uint64_t(n) * words_pos * 4 + 16,
                                                VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                                    VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                                                false, fmt::format("span KV ({} positions)", n)));
  if (kv_.buf && kv_len_ > 0) {
    std::vector<VkBufferCopy> copies;
    for (uint64_t l = 0; l < 2 * n_layer; ++l)  // K and V of each layer
      copies.push_back({l * uint64_t(kv_cap_) * words_pos * 4, l * uint64_t(n) * words_pos * 4,
                        uint64_t(kv_len_) * words_pos * 4});
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    Status s = [&]() -> Status {
      FISH_VK_CHECK(vk().vkBeginCommandBuffer(cmd_, &bi));
      vk().vkCmdCopyBuffer(cmd_, kv_.buf, nk.buf, uint32_t(copies.size()), copies.data());
      return submit_and_wait("span KV grow");
    }();
    if (!s.ok()) {
      h_.free(nk);
      return s;
    }
  }
  if (kv_.buf) h_.free(kv_);
  kv_ = nk;
  kv_cap_ = n;
  update_ops_set();
  return Status::success();
}

void VulkanSpan::barrier() {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vk().vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0,
                            nullptr);
}

void VulkanSpan::stage_done(Stage s) {
  if (!queries_ || used_queries_ >= n_queries_) return;
  vk().vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, used_queries_++);
  stage_of_.push_back(s);
}

void VulkanSpan::op(VkPipeline p, const SpanPush& pc, uint32_t gx, uint32_t gy, uint32_t gz) {
  vk().vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  vk().vkCmdPushConstants(cmd_, ops_layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
  vk().vkCmdDispatch(cmd_, gx, gy, gz);
}

void VulkanSpan::matmuls(const std::vector<MatmulStep>& steps, uint32_t n_tok) {
  const bool vec = n_tok <= FISH_MATVEC_MAX_TOK;
  const uint32_t max_groups_x = h_.dev->props.limits.maxComputeWorkGroupCount[0];
  for (const MatmulStep& st : steps) {
    MatmulPush pc = st.push;
    pc.n_tok = n_tok;
    uint32_t gx, gy;
    if (vec) {
      pc.n_groups = (pc.n_out + FISH_MATVEC_ROWS - 1) / FISH_MATVEC_ROWS;
      pc.groups_x = std::min(pc.n_groups, max_groups_x);
      gx = pc.groups_x;
      gy = (pc.n_groups + gx - 1) / gx;
    } else {
      gx = (pc.n_out + FISH_TILE_ROWS - 1) / FISH_TILE_ROWS;
      gy = (n_tok + FISH_TILE_TOK - 1) / FISH_TILE_TOK;
      pc.groups_x = gx;
      pc.n_groups = gx * gy;
    }
    vk().vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, vec ? st.vec : st.tiled);
    vk().vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, h_.matmul_layout, 0, 1,
                                 &st.set, 0, nullptr);
    vk().vkCmdPushConstants(cmd_, h_.matmul_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
    vk().vkCmdDispatch(cmd_, gx, gy, 1);
  }
}

// One chunk of nc tokens (rows t0.. of x) at positions pos.., through every layer.
void VulkanSpan::record_chunk(int64_t t0, int64_t nc, int64_t pos) {
  const uint32_t E = uint32_t(p_.n_embd), Q = uint32_t(p_.q_dim()), KV = uint32_t(p_.kv_dim()),
                 F = uint32_t(p_.n_ff), hd = uint32_t(p_.head_dim);
  const uint32_t n = uint32_t(nc);
  const uint32_t x_off = off_x_ + uint32_t(t0) * E;
  const uint32_t heads = uint32_t(p_.n_head + p_.n_head_kv);
  auto groups = [](uint64_t v) { return uint32_t((v + FISH_SPAN_WG - 1) / FISH_SPAN_WG); };
  auto bind_ops = [&] {
    vk().vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, ops_layout_, 0, 1, &ops_set_,
                                 0, nullptr);
  };
  // Whole-row norm of n rows of E: A at a_off (stride a_stride) -> C, weight at params[w].
  auto norm_push = [&](uint32_t a_off, uint32_t a_stride, uint32_t c_off, uint32_t c_stride,
                       uint32_t w) {
    SpanPush pc{};
    pc.n = E;
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
  };
  auto rmsnorm = [&](uint32_t a_off, uint32_t a_stride, uint32_t c_off, uint32_t c_stride,
                     uint32_t w) {
    op(rmsnorm_, norm_push(a_off, a_stride, c_off, c_stride, w), n, 1);
  };
  auto add_rmsnorm = [&](uint32_t w) {  // x += tmp; xn = rmsnorm(x) * w
    SpanPush pc = norm_push(x_off, E, off_xn_, E, w);
    pc.b_off = off_tmp_;
    pc.b_stride = E;
    op(add_rmsnorm_, pc, n, 1);
  };
  auto add_into_x = [&] {  // x += tmp
    SpanPush pc{};
    pc.n = E;
    pc.rows = n;
    pc.a_off = pc.c_off = x_off;
    pc.a_stride = pc.c_stride = E;
    pc.b_off = off_tmp_;
    pc.b_stride = E;
    op(add_, pc, groups(E), n);
  };
  for (const LayerState& L : layers_) {
    bind_ops();
    if (&L == &layers_.front()) {  // later layers get xn from the previous one's fused add
      rmsnorm(x_off, E, off_xn_, E, L.attn_norm);
      barrier();
      stage_done(kRmsnorm);
    }
    matmuls(L.qkv, n);
    barrier();
    stage_done(kMatvec);
    bind_ops();
    if (L.has_bias) {
      SpanPush pc{};
      pc.n = qkv_stride_;
      pc.rows = n;
      pc.a_off = off_qkv_;
      pc.a_stride = qkv_stride_;
      pc.w_off0 = L.bias;
      op(bias_, pc, groups(qkv_stride_), n);
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
      op(head_rmsnorm_, pc, n * heads, 1);
      barrier();
      stage_done(kRmsnorm);
    }
    {
      SpanPush pc{};
      pc.n = hd;
      pc.rows = n;
      pc.rows_per_tok = heads;
      pc.a_off = off_qkv_;
      pc.a_stride = qkv_stride_;
      pc.w_off0 = L.rope_table;
      pc.pos0 = uint32_t(pos);
      pc.n_rot = uint32_t(p_.n_rot);
      pc.flags = p_.rope_style == RopeStyle::neox ? 1u : 0u;
      op(rope_, pc, groups(uint64_t(n) * heads * uint64_t(p_.n_rot / 2)), 1);
      barrier();
      stage_done(kRope);
    }
    const uint32_t layer = uint32_t(&L - layers_.data());
    const uint32_t kv_words = uint32_t(kv_cap_) * (KV / 2);
    const uint32_t kv_k = 2 * layer * kv_words, kv_v = kv_k + kv_words;
    {
      SpanPush pc{};
      pc.n = KV;
      pc.rows = n;
      pc.a_off = off_qkv_ + Q;
      pc.b_off = off_qkv_ + Q + KV;
      pc.a_stride = pc.b_stride = qkv_stride_;
      pc.pos0 = uint32_t(pos);
      pc.kv_k = kv_k;
      pc.kv_v = kv_v;
      pc.kv_stride = KV / 2;
      op(kv_store_, pc, groups(KV / 2), n);
      barrier();
      stage_done(kKvStore);
    }
    {
      SpanPush pc{};
      pc.n = hd;
      pc.rows = n;
      pc.a_off = off_qkv_;
      pc.a_stride = qkv_stride_;
      pc.c_off = off_att_;
      pc.c_stride = Q;
      pc.pos0 = uint32_t(pos);
      pc.n_rot = uint32_t(p_.n_head / p_.n_head_kv);  // group size
      pc.kv_k = kv_k;
      pc.kv_v = kv_v;
      pc.kv_stride = KV / 2;
      pc.window = L.window;
      pc.scale = p_.attn_scale;
      // Short query batches (decode, verify) fill the grid with KV splits (split-K), then
      // merge the partials; prefill chunks keep the one-pass kernel.
      const uint32_t last = uint32_t(pos) + n;  // positions of the last token's range, causal
      const uint32_t len_max = L.window > 0 ? std::min(L.window, last) : last;
      pc.split = attention_splits(h_.attn_split, uint32_t(p_.n_head), n, len_max, parts_cap_);
      if (pc.split > 0) {
        pc.b_off = off_parts_;
        op(attention_split_, pc, uint32_t(p_.n_head), n, pc.split);
        barrier();
        op(attention_combine_, pc, uint32_t(p_.n_head), n);
      } else {
        op(attention_, pc, uint32_t(p_.n_head), n);
      }
      barrier();
      stage_done(kAttention);
    }
    matmuls(L.wo, n);
    barrier();
    stage_done(kMatvec);
    bind_ops();
    if (L.has_post) {
      rmsnorm(off_tmp_, E, off_tmp_, E, L.post_attn);
      barrier();
      stage_done(kRmsnorm);
    }
    add_rmsnorm(L.ffn_norm);
    barrier();
    stage_done(kRmsnorm);
    matmuls(L.gate_up, n);
    barrier();
    stage_done(kMatvec);
    bind_ops();
    {
      SpanPush pc{};
      pc.n = F;
      pc.rows = n;
      pc.a_off = off_gu_;
      pc.b_off = off_gu_ + F;
      pc.a_stride = pc.b_stride = 2 * F;
      op(act_, pc, groups(F), n);
      barrier();
      stage_done(kActMul);
    }
    matmuls(L.down, n);
    barrier();
    stage_done(kMatvec);
    bind_ops();
    if (L.has_post) {
      rmsnorm(off_tmp_, E, off_tmp_, E, L.post_ffn);
      barrier();
      stage_done(kRmsnorm);
    }
    if (&L != &layers_.back()) {
      add_rmsnorm((&L + 1)->attn_norm);
      barrier();
      stage_done(kRmsnorm);
    } else {
      add_into_x();
      barrier();
      stage_done(kAdd);
    }
  }
}

Status VulkanSpan::forward(float* x, int64_t n_tok, int64_t pos0) {
  std::lock_guard lock(*h_.mu);
  if (!h_.is_open()) return make_error("span: the device is not open (lost or failed)");
  if (n_tok < 1 || n_tok > d_.max_tok)
    return make_error("span: forward of {} tokens, the span takes 1..{}", n_tok, d_.max_tok);
  if (pos0 < 0 || pos0 > kv_len_)
    return make_error("span: forward at position {} but the device KV holds {} (a gap)", pos0,
                      kv_len_);
  if (pos0 + n_tok > d_.n_ctx)
    return make_error("span: positions {}..{} exceed n_ctx {}", pos0, pos0 + n_tok - 1, d_.n_ctx);
  kv_len_ = pos0;  // positions >= pos0 are rewritten
  if (pos0 + n_tok > kv_cap_)
    FISH_TRY(reserve_locked(std::min(d_.n_ctx, std::max(pos0 + n_tok, 2 * kv_cap_))));
  const uint64_t x_bytes = uint64_t(n_tok * p_.n_embd) * 4;
  std::memcpy(x_host_.mapped, x, x_bytes);

  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  FISH_VK_CHECK(vk().vkBeginCommandBuffer(cmd_, &bi));
  used_queries_ = 0;
  stage_of_.clear();
  if (queries_) vk().vkCmdResetQueryPool(cmd_, queries_, 0, n_queries_);
  const VkBufferCopy in{0, uint64_t(off_x_) * 4, x_bytes};
  vk().vkCmdCopyBuffer(cmd_, x_host_.buf, arena_.buf, 1, &in);
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vk().vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0,
                            nullptr);
  if (queries_) {  // the reference timestamp; not a stage
    vk().vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 0);
    used_queries_ = 1;
  }
  // Chunks in order: a chunk's attention reads the KV the earlier chunks wrote (causal).
  for (int64_t t0 = 0; t0 < n_tok; t0 += kChunk)
    record_chunk(t0, std::min(kChunk, n_tok - t0), pos0 + t0);
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
  vk().vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                            VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  const VkBufferCopy out{uint64_t(off_x_) * 4, 0, x_bytes};
  vk().vkCmdCopyBuffer(cmd_, arena_.buf, x_host_.buf, 1, &out);
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vk().vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                            &mb, 0, nullptr, 0, nullptr);
  Status s = submit_and_wait("span forward");
  if (!s.ok()) {
    if (s.error().message.find("VK_ERROR_DEVICE_LOST") != std::string::npos)
      h_.failed(s.error().message);
    return s;  // kv_len_ stays at pos0: nothing at or past it is trusted
  }
  std::memcpy(x, x_host_.mapped, x_bytes);
  kv_len_ = pos0 + n_tok;
  if (queries_ && used_queries_ > 1) {
    std::vector<uint64_t> ts(used_queries_);
    if (vk().vkGetQueryPoolResults(device(), queries_, 0, used_queries_, ts.size() * 8, ts.data(),
                                   8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) >= 0) {
      for (uint32_t i = 1; i < used_queries_; ++i)
        stage_ms_[stage_of_[i - 1]] += double(ts[i] - ts[i - 1]) * timestamp_ns_ * 1e-6;
      ++n_profiled_;
    }
  }
  return Status::success();
}

std::string VulkanSpan::profile() const {
  std::lock_guard lock(*h_.mu);
  if (!queries_) return h_.profile ? "span profile: no timestamp support on this queue" : "";
  double total = 0;
  for (double v : stage_ms_) total += v;
  std::string s = fmt::format("span profile: {} forwards, {:.2f} ms GPU", n_profiled_, total);
  for (int i = 0; i < kNumStages; ++i)
    s += fmt::format("{} {} {:.2f} ms {:.1f}%", i == 0 ? ":" : ",", kStageNames[i], stage_ms_[i],
                     total > 0 ? 100.0 * stage_ms_[i] / total : 0.0);
  return s;
}

}  // namespace

uint32_t attention_splits(int forced, uint32_t n_head, uint32_t n_tok, uint32_t len_max,
                          uint32_t parts_cap) {
  const uint64_t rows = uint64_t(n_head) * n_tok;  // one-pass workgroups
  if (forced == 0 || rows == 0) return 0;
  const uint64_t fit = std::min<uint64_t>(FISH_SPAN_ATTN_MAX_SPLIT, parts_cap / rows);
  if (forced > 0) return uint32_t(std::min<uint64_t>(uint64_t(forced), fit));
  if (rows >= FISH_SPAN_ATTN_TARGET_WG) return 0;
  // Enough workgroups to fill the GPU, and at long contexts enough that no split walks more than
  // kAttnSplitKeys keys serially (one workgroup streams its keys at a few GB/s).
  const uint64_t want = std::max((FISH_SPAN_ATTN_TARGET_WG + rows - 1) / rows,
                                 (uint64_t(len_max) + kAttnSplitKeys - 1) / kAttnSplitKeys);
  const uint64_t s = std::min({want, uint64_t(len_max / FISH_SPAN_ATTN_TILE), fit});
  return s >= 2 ? uint32_t(s) : 0;
}

Result<std::unique_ptr<LayerSpan>> create_vulkan_span(SpanHost host, const SpanDesc& desc) {
  std::lock_guard lock(*host.mu);
  if (!host.is_open()) return make_error("span: the device is not open");
  std::mutex* mu = host.mu;
  auto span = std::make_unique<VulkanSpan>(std::move(host), desc);
  Status s = span->init();
  if (!s.ok()) {
    mu->unlock();  // the destructor takes the lock to release what init allocated
    span.reset();
    mu->lock();
    return s.take_error();
  }
  return std::unique_ptr<LayerSpan>(std::move(span));
}

}  // namespace fish::vk
