// matmul_module / matmul_grid and the weights' run ceiling (device_weight.h).
#include "engine/vulkan/device_weight.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include <fmt/format.h>

#include "engine/vulkan/vulkan_device.h"
#include "engine/vulkan/vulkan_shaders.h"

namespace fish::vk {

std::optional<uint64_t> tightest_budget(std::span<const DeviceWeight* const> ws) {
  std::optional<uint64_t> b;
  for (const DeviceWeight* w : ws)
    if (w->budget_bytes && (!b || *w->budget_bytes < *b)) b = w->budget_bytes;
  return b;
}

static_assert(FISH_Q8_MAX_TOK == FISH_MATVEC_MAX_TOK, "shaders/fish_vk_q8.h");

bool has_idot_kernel(GgmlType type) {
  return !embedded_shader(fmt::format("matvec_idot_{}", type_name(type))).empty();
}

MatvecKernel matvec_kernel(GgmlType type, MatvecMode mode, const DeviceFeatures& f) {
  // quant_q8_1 and the fused norms round a 32-value block in 8 lanes of one subgroup.
  const bool idot = has_idot_kernel(type) && f.subgroup_min >= 8;
  switch (mode) {
    case MatvecMode::generic:
      return MatvecKernel::generic;
    case MatvecMode::fast:
      return MatvecKernel::fast;
    case MatvecMode::idot:
      return f.integer_dot && idot ? MatvecKernel::idot : MatvecKernel::fast;
    case MatvecMode::automatic:
      break;
  }
  return f.integer_dot_4x8_fast && idot ? MatvecKernel::idot : MatvecKernel::fast;
}

const char* matvec_kernel_name(MatvecKernel k) {
  return k == MatvecKernel::idot ? "idot" : k == MatvecKernel::fast ? "fast" : "generic";
}

std::string matmul_module(GgmlType type, int64_t n_tok, MatvecKernel k) {
  if (n_tok > FISH_MATVEC_WIDE_TOK) return fmt::format("matmul_{}", type_name(type));
  if (n_tok > FISH_MATVEC_MAX_TOK) return fmt::format("matvec8_{}", type_name(type));
  const char* op = k == MatvecKernel::idot   ? "matvec_idot"
                   : k == MatvecKernel::fast ? "matvec"
                                             : "matvec1";
  return fmt::format("{}_{}", op, type_name(type));
}

uint32_t idot_workgroup(int64_t n_in, uint32_t forced) {
  if (forced != 0) return forced;
  uint32_t wg = n_in >= kIdotLongRow ? 64 : 32;  // the reduction handles any subgroup size
  while (wg < 128 && n_in > int64_t(wg) * 16 * 32) wg *= 2;  // <= 16 chunks of 32 a thread
  return wg;
}

namespace {

// The idot pipelines' constants without FOLD (ROWS, WG, AHEAD, GROUPS).
PipelineSpec idot_base_spec(GgmlType type, int64_t n_tok, MatvecKernel k, const VulkanOptions& o,
                            int64_t n_in) {
  PipelineSpec s;
  s.module = matmul_module(type, n_tok, k);
  if (n_tok <= FISH_MATVEC_MAX_TOK && k == MatvecKernel::idot) {
    const uint32_t groups = idot_groups(n_in, o.idot_groups);
    s.constants = {o.idot_rows, groups * idot_workgroup(n_in, o.idot_wg), o.idot_ahead, groups};
  }
  return s;
}

// FISH_VK_IDOT_FOLD: FOLD, the sixth constant, after EXACT (0, any count, where none is set).
PipelineSpec with_fold(PipelineSpec s, const VulkanOptions& o) {
  if (!o.idot_fold || s.constants.empty()) return s;
  if (s.constants.size() == 4) s.constants.push_back(0);
  s.constants.push_back(1);
  return s;
}

}  // namespace

PipelineSpec matmul_spec(GgmlType type, int64_t n_tok, MatvecKernel k, const VulkanOptions& o,
                         int64_t n_in) {
  return with_fold(idot_base_spec(type, n_tok, k, o, n_in), o);
}

PipelineSpec matvec_exact_spec(GgmlType type, int64_t n_tok, MatvecKernel k, const VulkanOptions& o,
                               int64_t n_in) {
  PipelineSpec s = idot_base_spec(type, n_tok, k, o, n_in);
  if (o.idot_exact && !s.constants.empty() && n_tok >= 1) {
    s.constants.push_back(uint32_t(n_tok));
    s.constants[0] = exact_rows(o, n_tok);  // FISH_VK_IDOT_ROWS_MULTI from 2 tokens
  }
  return with_fold(std::move(s), o);
}

PipelineSpec matmul_res_spec(GgmlType type, const VulkanOptions& o, int64_t n_in,
                             std::string_view variant, int64_t n_tok) {
  PipelineSpec s = idot_base_spec(type, 1, MatvecKernel::idot, o, n_in);
  s.module = fmt::format("{}_{}", variant, type_name(type));
  const bool pn = variant == "matvec_idot_pn" || variant == "matvec_idot_swiglu_pn";
  if (variant == "matvec_idot_res" || pn) s.bindings = {1, 1, 1, 1};  // + FISH_BINDING_P
  if (pn) {  // FISH_PN_WG threads: the rule's row groups of idot_workgroup threads each
    const uint32_t gt = idot_workgroup(n_in, o.idot_wg);
    s.constants = {o.idot_rows, FISH_PN_WG, o.idot_ahead, FISH_PN_WG / gt};
  }
  // FISH_VK_IDOT_ROWS_ACT: the swiglu variants' rows (the pn one keeps pn_rows' rule).
  if ((variant == "matvec_idot_swiglu" || variant == "matvec_idot_swiglu_scaled") &&
      !s.constants.empty())
    s.constants[0] = act_rows(o);
  if (o.idot_exact && n_tok >= 1) s.constants.push_back(uint32_t(n_tok));  // EXACT
  return with_fold(std::move(s), o);
}

uint32_t act_rows(const VulkanOptions& o) {
  return o.idot_rows_act != 0 ? o.idot_rows_act : o.idot_rows;
}

uint32_t pn_rows(const VulkanOptions& o, int64_t n_in) {
  return o.idot_rows * (FISH_PN_WG / idot_workgroup(n_in, o.idot_wg));
}

uint32_t idot_groups(int64_t n_in, uint32_t forced) {
  (void)n_in;  // one rule for every row length now (device_weight.h)
  return forced != 0 ? forced : 1;
}

uint32_t exact_rows(const VulkanOptions& o, int64_t n_tok) {
  return o.idot_exact && n_tok >= 2 && o.idot_rows_multi != 0 ? o.idot_rows_multi : o.idot_rows;
}

uint32_t matvec_rows(MatvecKernel k, const VulkanOptions& o, int64_t n_in, int64_t n_tok) {
  return k == MatvecKernel::idot ? exact_rows(o, n_tok) * idot_groups(n_in, o.idot_groups)
                                 : FISH_MATVEC_ROWS;
}

uint64_t q8_bytes(uint32_t k) {
  return uint64_t(FISH_Q8_BYTES(uint64_t(k)));
}

MatmulPush quant_push(uint32_t k, uint32_t n_tok, uint32_t x_stride) {
  MatmulPush pc{};
  pc.n_in = k;
  pc.n_tok = n_tok;
  pc.x_stride = x_stride;
  return pc;
}

uint32_t quant_groups(uint32_t k, uint32_t n_tok) {
  return (n_tok * (k / 4) + FISH_Q8_WG - 1) / FISH_Q8_WG;  // one vec4 a thread
}

MatmulPush half_push(uint32_t k, uint32_t n_tok, uint32_t x_stride, uint32_t h_stride) {
  assert(h_stride % 8 == 0 && h_stride >= k && x_stride % 4 == 0);
  MatmulPush pc{};
  pc.n_in = k;
  pc.n_tok = n_tok;
  pc.x_stride = x_stride;
  pc.y_stride = h_stride;
  return pc;
}

uint32_t half_groups(uint32_t h_stride, uint32_t n_tok, uint32_t max_groups) {
  const uint64_t need = (uint64_t(n_tok) * (h_stride / 8) + 255) / 256;  // 8 values a thread
  return uint32_t(std::min<uint64_t>(need, std::max<uint32_t>(max_groups, 1)));
}

bool has_dequant_f16(GgmlType type) {
  switch (type) {  // shaders/CMakeLists.txt FISH_VK_DEQUANT_F16_TYPES
    case GgmlType::q4_0:
    case GgmlType::q4_1:
    case GgmlType::q5_0:
    case GgmlType::q5_1:
    case GgmlType::q8_0:
    case GgmlType::q4_k:
    case GgmlType::q5_k:
    case GgmlType::q6_k:
    case GgmlType::fq3:
      return true;
    default:
      return false;
  }
}

uint32_t prefill_f16_min_tok(const VulkanOptions& o, const DeviceFeatures& f) {
  if (o.prefill_f16 == 0 || !f.storage_16bit || !f.shader_float16) return 0;
  const uint32_t n = o.prefill_f16 > 0 ? uint32_t(o.prefill_f16)
                     : f.coopmat2      ? kPrefillF16AutoTok
                                       : 0;
  return n == 0 ? 0 : std::max<uint32_t>(n, FISH_MATVEC_WIDE_TOK + 1);
}

bool prefill_f16_may_allocate(const VulkanOptions& o, std::optional<uint64_t> ceiling) {
  return o.prefill_f16 > 0 || (!o.budget_bytes && !ceiling);
}

bool prefill_f16(const VulkanOptions& o, const DeviceFeatures& f, const DeviceWeight& w,
                 uint32_t n_tok, uint64_t max_binding) {
  const uint32_t min_tok = prefill_f16_min_tok(o, f);
  return min_tok != 0 && n_tok >= min_tok && has_dequant_f16(w.type) &&
         std::all_of(w.parts.begin(), w.parts.end(), [&](const DeviceWeight::Part& p) {
           return f16_copy_bytes(w, p) <= max_binding;
         });
}

int64_t verify_run(const VulkanOptions& o, int64_t n) {
  if (!o.verify_split || n <= FISH_MATVEC_MAX_TOK || n > FISH_MATVEC_WIDE_TOK) return n;
  const int64_t parts = (n + FISH_MATVEC_MAX_TOK - 1) / FISH_MATVEC_MAX_TOK;
  return (n + parts - 1) / parts;
}

uint64_t f16_copy_bytes(const DeviceWeight& w, const DeviceWeight::Part& part) {
  return (uint64_t(part.n_rows) * w.n_in_pad * 2 + 255) / 256 * 256;
}

MatmulPush dequant_push(const DeviceWeight& w, const DeviceWeight::Part& part) {
  MatmulPush pc{};
  pc.n_in = w.n_in_pad;
  pc.n_out = part.n_rows;
  pc.row_bytes = w.row_bytes;
  return pc;
}

uint32_t dequant_groups(const DeviceWeight& w, const DeviceWeight::Part& part,
                        uint32_t max_groups) {
  const uint64_t need = (uint64_t(part.n_rows) * (w.n_in_pad / 8) + 255) / 256;
  return uint32_t(std::clamp<uint64_t>(need, 1, std::max<uint32_t>(max_groups, 1)));
}

MatmulGrid f16_copy_grid(const DeviceWeight& w, const DeviceWeight::Part& part, uint32_t n_tok,
                         uint32_t x_stride, uint32_t y_stride, uint32_t y_offset,
                         uint32_t max_groups_x, const CoopmatTile* cm) {
  MatmulGrid g = matmul_grid(w, part, n_tok, x_stride, y_stride, y_offset, max_groups_x, cm);
  g.pc.row_bytes = w.n_in_pad * 2;
  return g;
}

MatmulGrid matmul_grid(const DeviceWeight& w, const DeviceWeight::Part& part, uint32_t n_tok,
                       uint32_t x_stride, uint32_t y_stride, uint32_t y_offset,
                       uint32_t max_groups_x, const CoopmatTile* cm, uint32_t vec_rows) {
  MatmulGrid g;
  g.pc.n_in = w.n_in_pad;
  g.pc.n_out = part.n_rows;
  g.pc.n_tok = n_tok;
  g.pc.row_bytes = w.row_bytes;
  g.pc.x_stride = x_stride;
  g.pc.y_stride = y_stride;
  g.pc.y_offset = y_offset;
  if (n_tok <= FISH_MATVEC_MAX_TOK || (n_tok <= FISH_MATVEC_WIDE_TOK && !cm)) {
    // vec_rows rows a workgroup (matvec8: FISH_MATVEC_ROWS), 2-D past the limit
    if (n_tok > FISH_MATVEC_MAX_TOK) vec_rows = FISH_MATVEC_ROWS;
    g.pc.n_groups = (part.n_rows + vec_rows - 1) / vec_rows;
    g.pc.groups_x = std::min(g.pc.n_groups, max_groups_x);
    g.gx = g.pc.groups_x;
    g.gy = (g.pc.n_groups + g.gx - 1) / g.gx;
  } else if (cm) {  // the cooperative-matrix tile
    g.gx = (part.n_rows + cm->bm - 1) / cm->bm;
    g.gy = (n_tok + cm->bn - 1) / cm->bn;
    g.pc.groups_x = g.gx;
    g.pc.n_groups = g.gx * g.gy;
  } else {  // FISH_TILE_ROWS x FISH_TILE_TOK tiles
    g.gx = (part.n_rows + FISH_TILE_ROWS - 1) / FISH_TILE_ROWS;
    g.gy = (n_tok + FISH_TILE_TOK - 1) / FISH_TILE_TOK;
    g.pc.groups_x = g.gx;
    g.pc.n_groups = g.gx * g.gy;
  }
  return g;
}

}  // namespace fish::vk
