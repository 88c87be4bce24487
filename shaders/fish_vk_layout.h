// Layout shared by the C++ backend (engine/vulkan) and the GLSL shaders (shaders/*.comp.glsl):
// workgroup geometry, descriptor bindings and the push-constant block of the matmul kernels.
// Valid C++ and GLSL 450: only #defines and the one push-constant block below.
#ifndef FISH_VK_LAYOUT_H
#define FISH_VK_LAYOUT_H

// matvec (n_tok <= FISH_MATVEC_MAX_TOK): one workgroup = FISH_MATVEC_ROWS rows x all tokens,
// FISH_MATVEC_WG threads striding over the rows' 8-value units (4 warps of 32 on NVIDIA).
// matvec8_<type> (a speculative verify's FISH_MATVEC_MAX_TOK + 1 .. FISH_MATVEC_WIDE_TOK
// tokens, weights read once for all of them): the f32 matvec sources compiled with
// FISH_MATVEC_MAX_TOK = FISH_MATVEC_WIDE_TOK (shaders/CMakeLists.txt), so decode's kernels and
// their registers stay as they are.
#define FISH_MATVEC_WG 128
#define FISH_MATVEC_ROWS 4
#ifndef FISH_MATVEC_MAX_TOK
#define FISH_MATVEC_MAX_TOK 4
#endif
#define FISH_MATVEC_WIDE_TOK 8

#include "fish_vk_q8.h"  // the q8_1 activation layout of matvec_idot_<type>

// copy_u4 (bandwidth reference): threads per workgroup of the grid-stride uvec4 copy.
#define FISH_COPY_WG 256

// tiled (prefill): one workgroup = a FISH_TILE_ROWS x FISH_TILE_TOK output tile, 256 threads
// each computing 4 rows x 4 tokens, K stepped by FISH_TILE_K (one 32-value block or sub-block).
#define FISH_TILE_ROWS 64
#define FISH_TILE_TOK 64
#define FISH_TILE_K 32
#define FISH_TILE_WG 256

// Weight rows of f32/f16 are padded to this many values at upload (zeros), so every kernel
// steps K in whole 32-value units; quantised types are multiples of 32 already.
#define FISH_K_ALIGN 32

// Descriptor set 0: W (uint[], packed rows), X (vec4[], n_tok rows of x_stride f32),
// Y (float[], n_tok rows of y_stride f32). A matrix larger than the device's storage-buffer
// range is uploaded as parts of whole rows; each part is one dispatch writing its rows of Y.
#define FISH_BINDING_W 0
#define FISH_BINDING_X 1
#define FISH_BINDING_Y 2
// matvec_idot_res_<type> and the PRONORM variants: the span's PARAMS (the norm weight).
#define FISH_BINDING_P 3
// matvec_idot's PRONORM variants (the rmsnorm in the matvec's prologue): threads a workgroup and
// vec4s a thread holds, span_rmsnorm's FISH_SPAN_NORM_WG / FISH_SPAN_NORM_CACHE (vulkan_span.cpp
// checks they agree: the same mapping gives the same sums), and the longest input row (values).
#define FISH_PN_WG 512
#define FISH_PN_CACHE 4
#define FISH_PN_MAX_K 8192

// One block declared as a C++ struct and as a GLSL push-constant block.
// clang-format off
#ifdef __cplusplus
#include <cstdint>
namespace fish::vk {
struct MatmulPush {
#define FISH_U32 uint32_t
#else
layout(push_constant) uniform MatmulPush {
#define FISH_U32 uint
#endif
  FISH_U32 n_in;       // values per row (padded to FISH_K_ALIGN for f32/f16)
  FISH_U32 n_out;      // rows of this part
  FISH_U32 n_tok;      // tokens (x rows); matvec: <= FISH_MATVEC_MAX_TOK
  FISH_U32 row_bytes;  // bytes from one weight row to the next
  FISH_U32 x_stride;   // f32 values from one x row to the next (multiple of FISH_K_ALIGN)
  FISH_U32 groups_x;   // matvec: workgroups per dispatch row (grid may be 2-D past 65535)
  FISH_U32 n_groups;   // matvec: workgroups holding rows; the rest of the grid returns
  FISH_U32 y_stride;   // f32 values from one y row to the next (the whole matrix's n_out)
  FISH_U32 y_offset;   // f32 values before row 0 of this part in y (a part's first row)
#if !defined(__cplusplus) && defined(FISH_MATVEC_FUSED)
  // The fused variants of matvec_idot (MatvecFusedPush below; matvec_idot.comp.glsl says which
  // reads what): res (y += W x, then each 32-row block's share of the next rmsnorm), scaled (the
  // input is such a block-wise rmsnorm: the outputs times its 1 / rms), swiglu (gate / up, then
  // silu(gate) * up per 32-row block).
  uint q8_off;    // ARENA floats: the q8_1 copy an epilogue writes (K = n_out)
  uint ctr;       // ARENA word: the first of n_out / 32 block arrival counters
  uint arrivals;  // workgroups (of every dispatch sharing the counters) that write a block
  uint w_off;     // PARAMS floats: res: the next norm's weight (n_out floats); pn: its own
  uint ss_off;    // ARENA floats: per token, a sum of squares per 32-value block (res writes)
  uint gate_off;  // ARENA floats: swiglu: token 0's gate row (up n_out floats on)
  float eps;      // scaled, pn: the norm's epsilon
  uint x_off;     // ARENA floats: pn: the residual row the prologue normalises (w_off: its weight)
#endif
#ifdef __cplusplus
};
static_assert(sizeof(MatmulPush) == 36, "push constants: 9 x u32");
// The push constants of the fused matvec_idot variants: MatmulPush, then their epilogues' fields.
struct MatvecFusedPush {
  MatmulPush mm;
  uint32_t q8_off = 0, ctr = 0, arrivals = 0, w_off = 0, ss_off = 0, gate_off = 0;
  float eps = 0;
  uint32_t x_off = 0;
};
static_assert(sizeof(MatvecFusedPush) == 68, "push constants: 17 x 4 bytes");
}  // namespace fish::vk
#else
} pc;
#endif
#undef FISH_U32
// clang-format on

#endif  // FISH_VK_LAYOUT_H
