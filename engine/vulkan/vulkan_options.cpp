// Environment parsing for the Vulkan backend's knobs (vulkan_options.h).
#include "engine/vulkan/vulkan_options.h"

#include <optional>
#include <string>
#include <string_view>

#include "base/env_knobs.h"
#include "engine/vulkan/coopmat.h"
#include "fish_vk_layout.h"
#include "fish_vk_span.h"
#include "kernels/requant.h"

namespace fish::vk {
bool gpu_disabled_by(const char* v) {
  return v != nullptr && is_off_word(v);
}

const char* matvec_mode_name(MatvecMode m) {
  switch (m) {
    case MatvecMode::idot:
      return "idot";
    case MatvecMode::fast:
      return "fast";
    case MatvecMode::generic:
      return "generic";
    case MatvecMode::automatic:
      break;
  }
  return "auto";
}

namespace {

// A knob of words auto | the off words | the on words (its table row lists them): -1 when unset
// or auto, 0 off, 1 on.
Result<int> env_auto_switch(std::string_view name) {
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> w, env_word(name));
  if (!w || *w == "auto") return -1;
  return is_off_word(*w) ? 0 : 1;
}

// A knob of words the off words | the on words | 2 (and auto where its row lists it): `fallback`
// when unset or auto, else 0 off, 1 on, 2.
Result<int> env_switch_or_2(std::string_view name, int fallback) {
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> w, env_word(name));
  const std::string v = w.value_or("auto");  // a copy: GCC 12 misreads *w as uninitialised here
  if (v == "auto") return fallback;
  return v == "2" ? 2 : is_off_word(v) ? 0 : 1;
}

}  // namespace

Result<VulkanOptions> VulkanOptions::from_env() {
  // Every knob goes through the one table, so a value it does not list is an error naming the
  // variable and its allowed values (and the backend reports it as the reason it is off).
  static_assert(FISH_SPAN_ATTN_MAX_SPLIT == 64, "FISH_VK_ATTN_SPLIT's row in base/env_knobs.cpp");
  VulkanOptions o;
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> gpu, env_word("FISH_GPU"));
  o.enabled = !(gpu && is_off_word(*gpu));
  o.allow_cpu = gpu && *gpu == "cpu";
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> device, env_int("FISH_GPU_DEVICE"));
  if (device) o.device = uint32_t(*device);
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> queue, env_word("FISH_VK_QUEUE"));
  o.universal_queue = queue && *queue == "universal";
  FISH_ASSIGN_OR_RETURN(o.validate, env_switch("FISH_VK_VALIDATE", false));
  FISH_ASSIGN_OR_RETURN(o.verbose, env_switch("FISH_GPU_VERBOSE", false));
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> matvec, env_word("FISH_VK_MATVEC"));
  if (matvec) {  // the table admits only these words
    if (*matvec == "idot") o.matvec = MatvecMode::idot;
    if (*matvec == "fast") o.matvec = MatvecMode::fast;
    if (*matvec == "generic" || *matvec == "1") o.matvec = MatvecMode::generic;
  }
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> rows, env_word("FISH_VK_IDOT_ROWS"));
  if (rows) o.idot_rows = uint32_t(std::stoul(*rows));  // one of the row's words: 1..16
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> wg, env_word("FISH_VK_IDOT_WG"));
  if (wg && *wg != "auto") o.idot_wg = uint32_t(std::stoul(*wg));  // the row's words: 32..256
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> ahead, env_word("FISH_VK_IDOT_AHEAD"));
  if (ahead) o.idot_ahead = uint32_t(std::stoul(*ahead));  // the row's words: 1..8
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> groups, env_word("FISH_VK_IDOT_GROUPS"));
  if (groups && *groups != "auto") o.idot_groups = uint32_t(std::stoul(*groups));  // 1, 2, 4
  FISH_ASSIGN_OR_RETURN(o.idot_exact, env_switch("FISH_VK_IDOT_EXACT", true));
  FISH_ASSIGN_OR_RETURN(o.idot_exact_fused, env_switch("FISH_VK_IDOT_EXACT_FUSED", true));
  FISH_ASSIGN_OR_RETURN(o.idot_fold, env_switch("FISH_VK_IDOT_FOLD", false));
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> rows_act, env_word("FISH_VK_IDOT_ROWS_ACT"));
  if (rows_act && *rows_act != "auto") o.idot_rows_act = uint32_t(std::stoul(*rows_act));
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> rows_multi, env_word("FISH_VK_IDOT_ROWS_MULTI"));
  if (rows_multi && *rows_multi != "auto") o.idot_rows_multi = uint32_t(std::stoul(*rows_multi));
  FISH_ASSIGN_OR_RETURN(o.head, env_switch("FISH_VK_HEAD", true));
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> split, env_int("FISH_VK_ATTN_SPLIT"));  // auto: -1
  if (split) o.attn_split = int(*split);
  FISH_ASSIGN_OR_RETURN(o.attn_decode, env_auto_switch("FISH_VK_ATTN_DECODE"));
  FISH_ASSIGN_OR_RETURN(o.attn_short, env_auto_switch("FISH_VK_ATTN_SHORT"));
  FISH_ASSIGN_OR_RETURN(o.attn_stream, env_switch_or_2("FISH_VK_ATTN_STREAM", -1));
  FISH_ASSIGN_OR_RETURN(o.stream_pipe, env_switch("FISH_VK_ATTN_STREAM_PIPE", false));
  FISH_ASSIGN_OR_RETURN(o.attn_short_prev, env_switch("FISH_VK_ATTN_SHORT_PREV", false));
  FISH_ASSIGN_OR_RETURN(o.norm_fuse, env_switch_or_2("FISH_VK_NORM_FUSE", -1));
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> pn_grid, env_int("FISH_VK_PN_GRID"));
  if (pn_grid) o.pn_grid = uint32_t(*pn_grid);  // the row's range: 0..64
  FISH_ASSIGN_OR_RETURN(o.pn_ffn, env_auto_switch("FISH_VK_PN_FFN"));
  FISH_ASSIGN_OR_RETURN(o.act_fuse, env_auto_switch("FISH_VK_ACT_FUSE"));
  FISH_ASSIGN_OR_RETURN(o.record_ahead, env_switch("FISH_VK_RECORD_AHEAD", true));
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> spin, env_int("FISH_VK_FENCE_SPIN_US"));
  if (spin) o.fence_spin_us = uint32_t(*spin);  // the row's range: 0..10000
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> prefetch, env_int("FISH_VK_PREFETCH_MB"));
  if (prefetch) o.prefetch_mb = uint32_t(*prefetch);  // the row's range: 0..256
  FISH_ASSIGN_OR_RETURN(o.coopmat, env_auto_switch("FISH_VK_COOPMAT"));
  FISH_ASSIGN_OR_RETURN(o.coopmat2, env_auto_switch("FISH_VK_COOPMAT2"));
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> acc, env_word("FISH_VK_COOPMAT2_ACC"));
  if (acc) o.coopmat2_acc = *acc == "fold" ? kCoopmat2AccFold : *acc == "f16" ? kCoopmat2AccF16 : 0;
  FISH_ASSIGN_OR_RETURN(const int scales, env_switch_or_2("FISH_VK_COOPMAT2_SCALES", 1));
  o.coopmat2_scales = uint32_t(scales);
  FISH_ASSIGN_OR_RETURN(o.coopmat2_wide, env_auto_switch("FISH_VK_COOPMAT2_WIDE"));
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> prefill_f16, env_int("FISH_VK_PREFILL_F16"));
  if (prefill_f16) o.prefill_f16 = int(*prefill_f16);  // the row's range: 0..65536; auto: -1
  FISH_ASSIGN_OR_RETURN(o.prefill_f16_ahead, env_switch_or_2("FISH_VK_PREFILL_F16_AHEAD", 1));
  FISH_ASSIGN_OR_RETURN(o.prefill_f16_resident, env_switch("FISH_VK_PREFILL_F16_RESIDENT", false));
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> copy_wg, env_int("FISH_VK_PREFILL_F16_COPY_WG"));
  if (copy_wg) o.prefill_f16_copy_wg = uint32_t(*copy_wg);  // the row's range: 1..65535; auto: 0
  FISH_ASSIGN_OR_RETURN(o.verify_split, env_switch("FISH_VK_VERIFY_SPLIT", false));
  FISH_ASSIGN_OR_RETURN(const int flash_cm, env_switch_or_2("FISH_VK_FLASH_CM", 2));
  o.flash_cm = uint32_t(flash_cm);
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> tile, env_word("FISH_VK_COOPMAT_TILE"));
  if (tile && *tile != "auto")  // l, m, s, p, q; lp, mp, bn, nm: 'L', 'M', 'B', 'N'
    o.coopmat_tile = tile->size() == 2 ? char((*tile)[0] - 'a' + 'A') : (*tile)[0];
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> mb, env_int("FISH_VRAM_BUDGET_MB"));
  if (mb) o.budget_bytes = uint64_t(*mb) << 20;
  static_assert(kRequantModeMax == 3, "FISH_GPU_REQUANT's row in base/env_knobs.cpp");
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> requant, env_int("FISH_GPU_REQUANT"));
  if (requant) o.requant = int(*requant);
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> profile, env_word("FISH_GPU_PROFILE"));
  o.profile = profile ? std::stoi(*profile) : 0;  // the row lists 0, 1, 2 only
  FISH_ASSIGN_OR_RETURN(std::optional<std::string> fault, env_word("FISH_VK_FAULT"));
  if (fault) {
    FISH_ASSIGN_OR_RETURN(o.fault, parse_device_fault(*fault));
  }
  return o;
}

}  // namespace fish::vk
