// A weight matrix resident on the device, and how one matmul dispatch over it is sized: shared
// by the per-matmul backend (vulkan_backend.cpp) and layer spans (vulkan_span.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/vulkan/vk_context.h"
#include "fish_vk_layout.h"
#include "quant/types.h"

namespace fish::vk {

struct DeviceWeight {
  // A run of whole rows in one storage buffer (maxStorageBufferRange bounds one binding: 128 MB
  // on lavapipe, 4 GB on desktop GPUs); each part is one dispatch writing its rows of y.
  struct Part {
    Buffer buf;
    uint32_t row0 = 0, n_rows = 0;
  };
  std::string name;
  GgmlType type = GgmlType::f32;  // on the device
  GgmlType from = GgmlType::f32;  // in the model (!= type: re-quantised at upload)
  uint64_t from_bytes = 0;        // the model's bytes of this weight
  uint32_t n_in = 0;              // as in the file
  uint32_t n_in_pad = 0;          // K the kernels see (f32/f16 padded to FISH_K_ALIGN)
  uint32_t n_out = 0;
  uint32_t row_bytes = 0;  // device row stride
  std::vector<Part> parts;
  uint64_t bytes = 0;  // device bytes of all parts
  // The run ceiling it was uploaded under (UploadOptions::budget_bytes; nullopt: the backend's):
  // the matmul scratch and the spans over it allocate under it too.
  std::optional<uint64_t> budget_bytes;
};

// The tightest run ceiling of `ws` (nullopt when none has one): what allocations made for
// these weights together are refused under.
std::optional<uint64_t> tightest_budget(std::span<const DeviceWeight* const> ws);

// The decode kernel family of one weight type (FISH_VK_MATVEC, vulkan_options.h): idot
// (matvec_idot_<type> over q8_1 activations, quant_q8_1 first), fast (matvec_<type>, f32) or
// generic (matvec1_<type>).
enum class MatvecKernel { idot, fast, generic };
// FISH_VK_MATVEC's rule: generic / fast as asked; idot where the type has a matvec_idot_ kernel,
// subgroups have >= 8 lanes (the q8_1 rounding's clusters) and the device has integer dot
// products (mode idot) or accelerated 4x8-bit ones (automatic); fast otherwise.
MatvecKernel matvec_kernel(GgmlType type, MatvecMode mode, const DeviceFeatures& f);
const char* matvec_kernel_name(MatvecKernel k);  // "idot", "fast", "generic"
bool has_idot_kernel(GgmlType type);

// The module of a matmul over n_tok tokens: the decode kernel `k` names for n_tok <=
// FISH_MATVEC_MAX_TOK (matvec_idot_<type>, matvec_<type>, matvec1_<type>), matvec8_<type> (f32
// activations) up to FISH_MATVEC_WIDE_TOK, else matmul_<type>.
std::string matmul_module(GgmlType type, int64_t n_tok, MatvecKernel k);
// The integer-dot matvec's workgroup size for rows of n_in values: `forced` (FISH_VK_IDOT_WG)
// when non-zero, else 32 threads (one NVIDIA warp: the reduction is one subgroupAdd and no
// barrier does real work) below kIdotLongRow values, 64 from there (two warps a row group), and
// twice that per doubling past 16 of the row's 32-value chunks a thread, at most 128. The H200
// sweep (rows 1/2/4 x 32/64/128 threads, 2048..14336-value rows, independent dispatches:
// results/runs/h200-decode-wg-586895f) had 32 threads first on 11 of 12 shapes; in the span
// (dependent steps, FISH_GPU_PROFILE=2 on an H100, results/runs/h100-session-232ddba) the down
// rows (n_in 8192 / 14336) ran faster at 64 threads x 1 row group than at 32 x 4 (the previous
// rule): 8B q6_k 46.7 -> 43.2 us a step, q4_k 33.3 -> 30.0; 1B q6_k 17.8 -> 13.3, q4_k 13.7 ->
// 10.9, while the 4096- and 2048-value rows lost at 64 (gate/up 40.3 -> 43.1, q/k/v 17.6 -> 20.6).
inline constexpr int64_t kIdotLongRow = 8192;
uint32_t idot_workgroup(int64_t n_in, uint32_t forced);
// The integer-dot matvec's row groups a workgroup for rows of n_in values: `forced`
// (FISH_VK_IDOT_GROUPS) when non-zero, else 1. (Four row groups on rows of kIdotLongRow values or
// more lifted the independent-dispatch rate on an H100, results/runs/h100-mixed-0a83b5f-a: q4_k
// 4096x14336 1.73 -> 2.51 TB/s; in the span the two-warp row groups of idot_workgroup beat them,
// above.)
uint32_t idot_groups(int64_t n_in, uint32_t forced);
// Its pipeline over rows of n_in values: matvec_idot_ specialised (o's FISH_VK_IDOT_* knobs) to
// idot_rows rows a row group, idot_groups(n_in, o.idot_groups) row groups of
// idot_workgroup(n_in, idot_wg) threads a workgroup and idot_ahead chunks a thread loaded ahead.
PipelineSpec matmul_spec(GgmlType type, int64_t n_tok, MatvecKernel k, const VulkanOptions& o,
                         int64_t n_in);
// matmul_spec for a dispatch of exactly n_tok tokens: with FISH_VK_IDOT_EXACT (o.idot_exact), an
// idot decode pipeline of 1..FISH_MATVEC_MAX_TOK tokens gets n_tok as its EXACT constant (the
// fifth), so its token loops need no branch on the count; else matmul_spec's. With
// FISH_VK_IDOT_FOLD (o.idot_fold) every idot spec here ends with FOLD = 1, the sixth (EXACT 0
// before it where none is set).
PipelineSpec matvec_exact_spec(GgmlType type, int64_t n_tok, MatvecKernel k, const VulkanOptions& o,
                               int64_t n_in);
// A fused variant of that idot pipeline (matvec_idot.comp.glsl), the same constants and
// MatvecFusedPush's push constants: "matvec_idot_res" (y += W x, then each 32-row block's share
// of the next rmsnorm; a span's wo and down; PARAMS as a fourth binding, FISH_BINDING_P),
// "matvec_idot_scaled" (its consumers: outputs times the norm's 1 / rms), "matvec_idot_swiglu"
// and "matvec_idot_swiglu_scaled" (gate / up, then silu(gate) * up per 32-row block).
// "matvec_idot_acc" (y += W x: wo / down under FISH_VK_NORM_FUSE=2), "matvec_idot_pn" and
// "matvec_idot_swiglu_pn" (q/k/v, gate / up: the rmsnorm of their input in the prologue of every
// workgroup of FISH_PN_WG threads, FISH_PN_WG / idot_workgroup(n_in) row groups; PARAMS as the
// fourth binding) are that mode's.
// n_tok >= 1 (with FISH_VK_IDOT_EXACT): specialised to exactly that many tokens, as
// matvec_exact_spec; 0 any count.
PipelineSpec matmul_res_spec(GgmlType type, const VulkanOptions& o, int64_t n_in,
                             std::string_view variant, int64_t n_tok = 0);
// Rows a row group of the "matvec_idot_swiglu" / "_scaled" pipelines (FISH_VK_IDOT_ROWS_ACT, else
// idot_rows); their workgroups hold act_rows x idot_groups(n_in, ...) rows.
uint32_t act_rows(const VulkanOptions& o);
// Rows a workgroup of the pn variants over rows of n_in values (their matmul_grid vec_rows).
uint32_t pn_rows(const VulkanOptions& o, int64_t n_in);
// Rows a row group of the idot pipeline matvec_exact_spec builds for n_tok tokens: idot_rows, or
// FISH_VK_IDOT_ROWS_MULTI's for exact pipelines of 2 or more tokens.
uint32_t exact_rows(const VulkanOptions& o, int64_t n_tok);
// Rows a workgroup of decode kernel k over rows of n_in values (matmul_grid's vec_rows) in
// matvec_exact_spec's pipeline for n_tok tokens: exact_rows x idot_groups(n_in, ...) for idot.
uint32_t matvec_rows(MatvecKernel k, const VulkanOptions& o, int64_t n_in, int64_t n_tok = 1);

// Bytes of the q8_1 activations of FISH_MATVEC_MAX_TOK tokens of K values (FISH_Q8_BYTES), and
// the quant_q8_1 dispatch that writes them from x rows x_stride floats apart.
uint64_t q8_bytes(uint32_t k);
MatmulPush quant_push(uint32_t k, uint32_t n_tok, uint32_t x_stride);
uint32_t quant_groups(uint32_t k, uint32_t n_tok);
// to_f16 (the f16 B rows of matmul_cm2_<type>): K values of n_tok rows x_stride f32 apart into
// rows h_stride f16 apart (a multiple of 8), and its 1-D grid of 256-thread workgroups: one
// thread per 8 values, at most max_groups (the device's maxComputeWorkGroupCount[0]; the shader
// strides over the rest).
MatmulPush half_push(uint32_t k, uint32_t n_tok, uint32_t x_stride, uint32_t h_stride);
uint32_t half_groups(uint32_t h_stride, uint32_t n_tok, uint32_t max_groups);

// FISH_VK_PREFILL_F16 (o.prefill_f16): whether a matmul of n_tok tokens over `w` first writes
// its rows as f16 (dequant_f16_<type>, shaders/dequant_f16.comp.glsl) and multiplies those with
// the f16 kernel of the tile it picks for f16 (matmul_cm2_f16, matmul_cm_f16 or matmul_f16):
// prefill chunks (more than FISH_MATVEC_WIDE_TOK tokens, at least o.prefill_f16) of the types
// that have the module, on a device with 16-bit storage and f16 arithmetic, where every part's
// copy fits one binding (max_binding bytes, VkContext::max_binding_bytes). The copy costs a
// read of the weights and a write of 2 bytes a value before the matmul, for a K loop that
// decodes nothing; the f16 values are the tiled kernel's dequantisation rounded to f16, as the
// cooperative-matrix kernels round them in their own decode.
// auto (o.prefill_f16 < 0): from kPrefillF16AutoTok tokens on, where the device has coopmat2
// tiles (measured there: H100, 512-token chunks, results/runs/h100-session-faf1566); the
// callers then run without copies where the copy buffer does not fit the budget.
inline constexpr uint32_t kPrefillF16AutoTok = 512;
// The fewest tokens a matmul on copies has under o on a device with f (0: never).
uint32_t prefill_f16_min_tok(const VulkanOptions& o, const DeviceFeatures& f);
// Whether auto may allocate copies for weights under run ceiling `ceiling`: not where the run
// has a VRAM ceiling (FISH_VRAM_BUDGET_MB, o.budget_bytes, or the weights' own), so a budgeted
// placement's memory (the seed's 4 GB card) stays the placement's; an explicit N always may.
bool prefill_f16_may_allocate(const VulkanOptions& o, std::optional<uint64_t> ceiling);
bool prefill_f16(const VulkanOptions& o, const DeviceFeatures& f, const DeviceWeight& w,
                 uint32_t n_tok, uint64_t max_binding);
bool has_dequant_f16(GgmlType type);
// FISH_VK_VERIFY_SPLIT (o.verify_split): the run length a matmul or span forward of n tokens is
// cut into: for FISH_MATVEC_MAX_TOK + 1 .. FISH_MATVEC_WIDE_TOK tokens the balanced size of at most
// FISH_MATVEC_MAX_TOK (8: 4 + 4, 5: 3 + 2), so each run is on the decode kernels; else n (whole).
int64_t verify_run(const VulkanOptions& o, int64_t n);

// The f16 copy of one part: its bytes (rows of n_in_pad values, rounded up to 256 so that copies
// placed one after another keep every binding offset aligned), the dequant dispatch's push
// constants (n_in, n_out, row_bytes of the part) and 1-D grid (one thread per 8 values, at most
// max_groups workgroups of 256; the shader strides over the rest), and the f16 matmul's
// grid over it (matmul_grid of an f16 weight with the same rows: row_bytes 2 x n_in_pad).
uint64_t f16_copy_bytes(const DeviceWeight& w, const DeviceWeight::Part& part);
MatmulPush dequant_push(const DeviceWeight& w, const DeviceWeight::Part& part);
uint32_t dequant_groups(const DeviceWeight& w, const DeviceWeight::Part& part, uint32_t max_groups);

// Push constants and grid of one part's dispatch: x rows x_stride floats apart, y rows y_stride
// apart with the part's row 0 at y_offset (floats from the Y binding's start). With a
// cooperative-matrix tile `cm` (matmul_cm_<type>), the grid is of that tile's rows x tokens; a
// matvec's workgroups hold vec_rows rows (matvec_rows; matvec8's FISH_MATVEC_ROWS: 5..8 tokens
// without a tile are matvec8's grid).
struct MatmulGrid {
  MatmulPush pc{};
  uint32_t gx = 1, gy = 1;
};
MatmulGrid matmul_grid(const DeviceWeight& w, const DeviceWeight::Part& part, uint32_t n_tok,
                       uint32_t x_stride, uint32_t y_stride, uint32_t y_offset,
                       uint32_t max_groups_x, const CoopmatTile* cm = nullptr,
                       uint32_t vec_rows = FISH_MATVEC_ROWS);
// matmul_grid over a part's f16 copy (f16_copy_bytes): the same rows and outputs, f16 rows.
MatmulGrid f16_copy_grid(const DeviceWeight& w, const DeviceWeight::Part& part, uint32_t n_tok,
                         uint32_t x_stride, uint32_t y_stride, uint32_t y_offset,
                         uint32_t max_groups_x, const CoopmatTile* cm);

}  // namespace fish::vk
