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
// matvec_idot_res_<type> only: the span's PARAMS (the norm weight of its epilogue).
#define FISH_BINDING_P 3

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
#if !defined(__cplusplus) && defined(FISH_MATVEC_RESNORM)
  // matvec_idot_res_<type> (MatvecResPush below): y += W x, then the next rmsnorm of y's rows
  uint xn_off;  // ARENA floats: the normalised rows (n_out floats apart)
  uint q8_off;  // ARENA floats: their q8_1 copy (fish_vk_q8.h, K = n_out)
  uint w_off;   // PARAMS floats: the norm weight (n_out floats)
  uint ctr;     // ARENA word: the arrival counter (0 between dispatches)
  float eps;
#endif
#if !defined(__cplusplus) && defined(FISH_MATVEC_ACTMUL)
  // matvec_idot_swiglu_<type> (MatvecActPush below): gate / up rows, then silu(gate) * up
  uint gate_off;  // ARENA floats: token 0's gate row (its up row n_out floats on, y_stride apart)
  uint q8_off;    // ARENA floats: the product's q8_1 copy (fish_vk_q8.h, K = n_out)
  uint ctr;       // ARENA word: the first of n_out / 32 arrival counters (0 between dispatches)
  uint arrivals;  // workgroups (of both dispatches) that write a 32-row block
#endif
#ifdef __cplusplus
};
static_assert(sizeof(MatmulPush) == 36, "push constants: 9 x u32");
// The push constants of matvec_idot_res_<type>: MatmulPush, then its epilogue's offsets.
struct MatvecResPush {
  MatmulPush mm;
  uint32_t xn_off, q8_off, w_off, ctr;
  float eps;
};
static_assert(sizeof(MatvecResPush) == 56, "push constants: 14 x 4 bytes");
// The push constants of matvec_idot_swiglu_<type>: MatmulPush, then its epilogue's offsets.
struct MatvecActPush {
  MatmulPush mm;
  uint32_t gate_off, q8_off, ctr, arrivals;
};
static_assert(sizeof(MatvecActPush) == 52, "push constants: 13 x u32");
}  // namespace fish::vk
#else
} pc;
#endif
#undef FISH_U32
// clang-format on

#endif  // FISH_VK_LAYOUT_H
