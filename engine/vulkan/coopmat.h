// Cooperative-matrix prefill matmul (shaders/matmul_cm.comp.glsl): the device's f16 x f16 -> f32
// subgroup shape (VK_KHR_cooperative_matrix), the workgroup tiles built on it and the rule that
// picks one per matmul.
//
// Tiles, in units of the shape M x N x K (16x16x16 on NVIDIA, 8x8x8 on lavapipe), K step 32.
// Double-buffered (matmul_cm.comp.glsl DBUF = 1: two shared buffers, one barrier per step, the
// next step's weight blocks and activations touched into L1 before this step's multiply-adds):
//   b  8M x 8N, 4 subgroups of 4M x 4N   (128 x 128 on NVIDIA, 128 threads)
//   h  8M x 4N, 4 subgroups of 4M x 2N   (128 rows x 64 tokens)
//   w  4M x 8N, 4 subgroups of 2M x 4N   (64 rows x 128 tokens)
//   c  4M x 4N, 4 subgroups of 2M x 2N   (64 x 64)
//   bn b without the touch (DBUF = 2; A/B runs of the L1 prefetch, never the rule's)
//   g  8M x 8N, 8 subgroups of 4M x 2N   (128 x 128, 256 threads: b's tile on twice the warps,
//      half the dequantisation per thread; forced only)
// Local accumulators (DBUF = 3, main_local: the accumulators a local array, not module scope;
// double-buffered, one barrier per step, the next step's global loads and dequantisation in
// registers under this step's multiply-adds):
//   r  8M x 8N, 4 subgroups of 4M x 4N   (b's shape: 16 accumulators a subgroup, each A
//      fragment feeding 4 MMAs, each B fragment 4)
//   u  4M x 4N, 4 subgroups of 2M x 2N   (c's shape)
//   v  2M x 2N, 2 subgroups of 2M x N    (s's shape)
//   x, y, z  r, u, v with the weights of each K step as 16-value units from 16-byte loads
//      (load16_step: q4_k, q5_k, fq3, f16, q6_k, q8_0, q4_0; others as r, u, v)
// Named accumulators (DBUF = 4, main_named: r's K loop with one named variable per accumulator
// and B fragment instead of arrays; the A/B of the array hypothesis, forced only):
//   d  r's shape; e  x's (r with 16-value loads); f  y's (u with 16-value loads)
//   k  8M x 8N, 8 subgroups of 4M x 2N with 16-value loads (l's shape: 8 accumulators a
//      subgroup, 256 threads)
// Single-buffered (DBUF = 0, the previous kernel, kept for A/B runs):
//   l  8M x 8N, 8 subgroups of 4M x 2N   (128 x 128 on NVIDIA, 256 threads)
//   m  4M x 4N, 4 subgroups of 2M x 2N   (64 x 64, 128 threads)
//   s  2M x 2N, 2 subgroups of 2M x N    (32 x 32, 64 threads)
//   lp, mp  l and m with register prefetch (PREFETCH: the next K step's global loads and their
//           dequantisation issued before this step's multiply-adds)
// The rule: at kNamedMinTok tokens or more the named-accumulator tiles k (grids under about
// twice the SM count) or e (larger grids) for every type but f16 / f32 (coopmat_named_rule); else
// z for the types whose 16-value loader beat s (coopmat_vec_rule: q4_k, q5_k, fq3, f16), s for
// the others (coopmat.cpp has the measurements). Its candidates are
// CoopmatTile::rule; where the limits drop s, b, h, w, c (else l, m, s) and among
// them the largest whose grid (ceil(n_out / rows) x ceil(n_tok / tokens)) has at least target
// workgroups (3/4 of the SM count where VK_NV_shader_sm_builtins reports it, else 64), the one of
// most workgroups when none has; for the single-buffered family its prefetch variant where one
// exists and n_out <= kPrefetchMaxRows (an earlier kernel of this design on the H200: prefetch
// +23-42% on 4096-row shapes, -12% on 14336 x 4096).
// FISH_VK_COOPMAT_TILE=b|h|w|c|bn|g|l|m|s|lp|mp|r|u|v|x|y|z forces one.
// Matmuls of fewer than kCoopmatMinTok tokens stay on the f32 tiled kernel (matvec below
// FISH_MATVEC_MAX_TOK).
//
// Workgroup-scope tiles (matmul_cm2.comp.glsl, VK_NV_cooperative_matrix2; CoopmatTile::cm2): one
// BM x BN f32 accumulator per workgroup, the weights decoded by tensor-layout block loads, the
// driver staging both operands through shared memory. Where the device offers a flexible f16 x
// f16 -> f32 workgroup shape for the thread count whose granularities divide the tile:
//   n   128 x 128, 256 threads
//   nm  64 x 64, 128 threads   (small grids)
//   o   128 rows x 256 tokens, 256 threads
//   p   64 rows x 256 tokens, 256 threads (FISH_VK_COOPMAT2_WIDE=1, or forced): n's accumulator
//       with o's 256 tokens, so each decoded weight serves twice n's tokens on the grids where o
//       has too few workgroups (the 8B's 4096-row matrices at 512 tokens: o 64, p and n 128).
//       q4_k's n ran at 0.62x of f16 weights' n on an H200 (136 against 220 TFLOP/s): decoding
//       A bounds it, and p decodes half of n's A per step. Unmeasured, so off by default.
//   q   32 rows x 256 tokens, 256 threads (the same): nm's accumulator size a thread, a quarter
//       of nm's decoding per product, where p's grid is short too (the 1B's 2048-row matrices
//       at 512 tokens: o 32, p 64, q 128 workgroups, where the rule takes nm).
// Where the device has them (FISH_VK_COOPMAT2 not 0) they are the rule's for every type from
// kNamedMinTok tokens on (pick_coopmat2_tile): the first of o, (p, q,) n, nm whose grid has at
// least target workgroups and whose token tile is no wider than n_tok, else the one of most
// workgroups (ties to the smaller tile). Measured on an H200 (binary c75a0f7,
// results/runs/h200-cm2-c75a0f7, 512 tokens, TFLOP/s) against the KHR tile k in the same run:
// q4_k 4096 x 4096 n 136.2 (o 89.8: a 64-workgroup grid) against k 129.9 (the KHR rule's pick
// there), 14336 x 4096 o 149.5 / n 117.5 against k 94.2 (the KHR rule picks e there: 123 on an
// H100, not in this run); f16 n 220.1 / 199.1 against k 101.8 / 91.6 (the KHR rule picks z for
// f16: 66 on an H100). End to end on an H100 (binary 260a0a1): pp512 1.18x (8B) / 1.21x (1B)
// the KHR rule. FISH_VK_COOPMAT_TILE=n|nm|o|p|q forces one.
// A tile whose pipeline the driver rejects is marked unavailable and the rule takes over.
#pragma once

#include <volk.h>

#include "quant/types.h"

#include <cctype>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

// Debian 12's Vulkan headers (1.3.239) predate VK_KHR_cooperative_matrix (1.3.255): the few
// definitions FISH uses, with the registry's values.
#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
inline constexpr VkStructureType VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR =
    VkStructureType(1000506000);
inline constexpr VkStructureType VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR =
    VkStructureType(1000506001);
typedef enum VkComponentTypeKHR {
  VK_COMPONENT_TYPE_FLOAT16_KHR = 0,
  VK_COMPONENT_TYPE_FLOAT32_KHR = 1,
  VK_COMPONENT_TYPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkComponentTypeKHR;
typedef enum VkScopeKHR {
  VK_SCOPE_WORKGROUP_KHR = 2,
  VK_SCOPE_SUBGROUP_KHR = 3,
  VK_SCOPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkScopeKHR;
typedef struct VkCooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize;
  uint32_t NSize;
  uint32_t KSize;
  VkComponentTypeKHR AType;
  VkComponentTypeKHR BType;
  VkComponentTypeKHR CType;
  VkComponentTypeKHR ResultType;
  VkBool32 saturatingAccumulation;
  VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef VkResult(VKAPI_PTR* PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice, uint32_t*, VkCooperativeMatrixPropertiesKHR*);
#endif

// ... and VK_NV_cooperative_matrix2 (1.3.301): the definitions the workgroup-scope kernel
// (matmul_cm2.comp.glsl) needs, with the registry's values.
#ifndef VK_NV_cooperative_matrix2
#define VK_NV_cooperative_matrix2 1
#define VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME "VK_NV_cooperative_matrix2"
inline constexpr VkStructureType
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV =
        VkStructureType(1000593000);
inline constexpr VkStructureType
    VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV =
        VkStructureType(1000593001);
inline constexpr VkStructureType
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV =
        VkStructureType(1000593002);
typedef struct VkCooperativeMatrixFlexibleDimensionsPropertiesNV {
  VkStructureType sType;
  void* pNext;
  uint32_t MGranularity;
  uint32_t NGranularity;
  uint32_t KGranularity;
  VkComponentTypeKHR AType;
  VkComponentTypeKHR BType;
  VkComponentTypeKHR CType;
  VkComponentTypeKHR ResultType;
  VkBool32 saturatingAccumulation;
  VkScopeKHR scope;
  uint32_t workgroupInvocations;
} VkCooperativeMatrixFlexibleDimensionsPropertiesNV;
typedef struct VkPhysicalDeviceCooperativeMatrix2FeaturesNV {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrixWorkgroupScope;
  VkBool32 cooperativeMatrixFlexibleDimensions;
  VkBool32 cooperativeMatrixReductions;
  VkBool32 cooperativeMatrixConversions;
  VkBool32 cooperativeMatrixPerElementOperations;
  VkBool32 cooperativeMatrixTensorAddressing;
  VkBool32 cooperativeMatrixBlockLoads;
} VkPhysicalDeviceCooperativeMatrix2FeaturesNV;
typedef struct VkPhysicalDeviceCooperativeMatrix2PropertiesNV {
  VkStructureType sType;
  void* pNext;
  uint32_t cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
  uint32_t cooperativeMatrixFlexibleDimensionsMaxDimension;
  uint32_t cooperativeMatrixWorkgroupScopeReservedSharedMemory;
} VkPhysicalDeviceCooperativeMatrix2PropertiesNV;
typedef VkResult(VKAPI_PTR* PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)(
    VkPhysicalDevice, uint32_t*, VkCooperativeMatrixFlexibleDimensionsPropertiesNV*);
#endif

namespace fish::vk {

inline constexpr uint32_t kCoopmatMinTok = 16;  // fewer tokens: the f32 tiled kernel
inline constexpr uint32_t kCoopmatK = 32;       // K step of every KHR tile (one 32-value block)
// K step of the coopmat2 tiles: 64 values, as the peer engine's workgroup-scope tiles on NVIDIA
// (half the driver's staging rounds a FLOP of BK 32, whose tiles ran at 37-61 TFLOP/s where the
// KHR tile k ran 95-128: results/runs/h100-splits-4c61d4e). KU 4 steps an unrolled iteration
// (256 values: one K-quant super-block).
inline constexpr uint32_t kCoopmat2K = 64;
// The coopmat2 tiles' accumulation (matmul_cm2.comp.glsl's ACC, FISH_VK_COOPMAT2_ACC): an f32
// accumulator (the default, the tests' f32 bound); f16 partial sums of each unrolled iteration
// (KU steps: 256 values) added into it; f16 throughout, as llama.cpp's default f16acc pipelines
// on NVIDIA (which its coopmat2 prefill uses at GGML_PREC_DEFAULT).
inline constexpr uint32_t kCoopmat2AccF32 = 0;
inline constexpr uint32_t kCoopmat2AccFold = 1;
inline constexpr uint32_t kCoopmat2AccF16 = 2;
const char* coopmat2_acc_name(uint32_t acc);        // "f32", "fold", "f16"
inline constexpr uint32_t kPrefetchMaxRows = 8192;  // the rule's prefetch variants: n_out <= this
inline constexpr uint32_t kNamedMinTok =
    64;  // the rule's 128 x 128 named tiles (e, k): n_tok >= this

struct CoopmatTile {
  // 'b', 'h', 'w', 'c', 'g', 'l', 'm', 's', 'r', 'u', 'v', 'x', 'y', 'z'; 'L', 'M': l, m with
  // prefetch ("lp", "mp"); 'B': b without the touch ("bn"); coopmat2: 'n', 'N' ("nm"), 'o'
  char name = 'm';
  bool cm2 = false;          // workgroup scope (matmul_cm2.comp.glsl); wm, wn, cm.. unused
  bool unavailable = false;  // cm2: the driver rejected its pipeline; never picked
  uint32_t wg = 0;           // cm2: threads of the workgroup
  uint32_t ku = 0;           // cm2: K steps per unrolled loop iteration
  uint32_t acc = 0;          // cm2: kCoopmat2Acc* (FISH_VK_COOPMAT2_ACC)
  uint32_t scales = 0;       // cm2: K-quant scales in shared memory at this level (the SCALES
                             // constant, FISH_VK_COOPMAT2_SCALES; coopmat2_stages_scales' types)
  bool prefetch = false;
  bool dbuf = false;                // double-buffered K loop (tiles b, h, w, c, bn, g)
  bool touch = false;               // ... with the next step touched into L1 (b, h, w, c, g)
  bool local = false;               // ... with local accumulators and register prefetch (r, u, v)
  bool vec = false;                 // ... and 16-value weight units (load16_step: x, y, z)
  bool named = false;               // ... with named accumulators (main_named: d, e, f, k)
  bool rule = false;                // a tile pick_coopmat_tile's rule chooses among; the others
                                    // (bn, g) only when forced
  uint32_t bm = 0, bn = 0;          // rows x tokens of a workgroup's tile
  uint32_t wm = 0, wn = 0;          // rows x tokens of a subgroup's block
  uint32_t cm = 0, cn = 0, ck = 0;  // the coopmat shape
  uint32_t subgroup = 0;            // lanes per subgroup (the pipeline requires it where it can)
  std::string label() const {       // "b", ..., "s", "lp", "mp", "bn", "g", "n", "nm", "o"
    const std::string lower(1, char(std::tolower(static_cast<unsigned char>(name))));
    if (cm2) return name == lower[0] ? lower : lower + "m";
    if (dbuf) return touch || local ? lower : lower + "n";
    return prefetch ? lower + "p" : lower;
  }
  uint32_t subgroups() const { return cm2 ? wg / subgroup : (bm / wm) * (bn / wn); }
  uint32_t threads() const { return cm2 ? wg : subgroups() * subgroup; }
  uint32_t shared_bytes() const {  // cm2: the driver's staging aside, SCALES's 64 bm bytes at most
                                   // (8 x bm vec2, or q6_k's 16 x bm float at level 2)
    if (cm2) return scales ? 8 * bm * 8 : 0;
    return (dbuf ? 2 : 1) * (bm + bn) * (kCoopmatK + 8) * 2 + subgroups() * cm * cn * 4;
  }
  // Specialisation constants of matmul_cm.comp.glsl (cm2: matmul_cm2.comp.glsl), in constant_id
  // order.
  std::vector<uint32_t> constants() const {
    if (cm2) return {wg, bm, bn, kCoopmat2K, ku, acc, scales};
    std::vector<uint32_t> c = {threads(), bm, bn, kCoopmatK, cm, cn, ck, wm, wn, threads()};
    c.push_back(prefetch ? 1u : 0u);                                       // PREFETCH
    c.push_back(named ? 4u : local ? 3u : dbuf ? (touch ? 1u : 2u) : 0u);  // DBUF
    c.push_back(vec ? 1u : 0u);                                            // VEC
    return c;
  }
};

// The tiles b, h, w, c, then l, m, s, then lp, mp, bn, g, on shape m x n x k for a subgroup of
// `subgroup` lanes, without those that pass max_shared bytes or max_threads invocations. Empty when
// the shape's K does not divide kCoopmatK. (VkContext::coopmat_pipeline builds matmul_cm_<type> on
// one.)
std::vector<CoopmatTile> coopmat_tiles(uint32_t m, uint32_t n, uint32_t k, uint32_t subgroup,
                                       uint32_t max_shared, uint32_t max_threads);

// Whether the rule takes the 16-value-load tile (z) rather than s for weights of this type.
bool coopmat_vec_rule(GgmlType type);
// Whether the rule takes the named-accumulator tiles e / k at kNamedMinTok tokens or more for
// weights of this type (all but f16 and f32, where z measured faster).
bool coopmat_named_rule(GgmlType type);
// Whether matmul_cm2 with SCALES = level (FISH_VK_COOPMAT2_SCALES) stages this type's sub-block
// scales in shared memory: q4_k, q5_k and fq3 from level 1, q6_k from level 2 (the others
// never: they ignore the constant).
bool coopmat2_stages_scales(GgmlType type, uint32_t level);

// The coopmat2 tile of the rule for n_out x n_tok (above; null where `tiles` has none).
const CoopmatTile* pick_coopmat2_tile(std::span<const CoopmatTile> tiles, uint32_t n_out,
                                      uint32_t n_tok, uint32_t target_groups);

// The tile for n_out rows x n_tok tokens of `type` weights (the rule above): a coopmat2 tile
// (pick_coopmat2_tile) from kNamedMinTok tokens on where any exists, else e or k for
// coopmat_named_rule types at kNamedMinTok tokens or more (k while the 128 x 128 grid is under
// 8/3 target_groups, e above), else among the small tiles those with 16-value weight units
// (coopmat_vec_rule) where any is one, else those without. `forced` (a CoopmatTile::name; 0: the
// rule) picks by name where that tile exists, else the rule. Null when `tiles` is empty.
const CoopmatTile* pick_coopmat_tile(std::span<const CoopmatTile> tiles, uint32_t n_out,
                                     uint32_t n_tok, uint32_t target_groups, char forced,
                                     GgmlType type = GgmlType::f32);

// One f16 x f16 -> f32 workgroup-scope shape of VK_NV_cooperative_matrix2's flexible dimensions:
// matrices whose M, N, K are multiples of these, in workgroups of `invocations` threads.
struct Coopmat2Shape {
  uint32_t m_gran = 0, n_gran = 0, k_gran = 0;
  uint32_t invocations = 0;
  bool f16_acc = false;  // f16 x f16 -> f16 (C and result f16): the f16 sums' shape
};

// The workgroup-scope tiles n, nm, o, p, q (above) that one of `shapes` admits, with no dimension
// past max_dim, no workgroup past max_threads; subgroup: lanes per subgroup (for subgroups()); acc:
// their accumulation (kCoopmat2Acc*): an f32 shape for every tile, and for fold / f16 an f16_acc
// shape of the same thread count too (the f16 sums), else no tiles. scales: their SCALES
// constant (FISH_VK_COOPMAT2_SCALES: interior tiles of the types coopmat2_stages_scales names
// at that level take each super-block's sub-block scales from shared memory, computed once a
// tile). wide: p and q are the rule's tiles (FISH_VK_COOPMAT2_WIDE=1); else they are listed but
// reachable only forced.
std::vector<CoopmatTile> coopmat2_tiles(std::span<const Coopmat2Shape> shapes, uint32_t max_dim,
                                        uint32_t max_threads, uint32_t subgroup,
                                        uint32_t acc = kCoopmat2AccF32, uint32_t scales = 0,
                                        bool wide = false);

// Whether pick_coopmat_tile(tiles, ..., forced, type) can return t for some shape: the forced
// tile where it exists (and is not unavailable), else the rule's candidates for that type. Spans
// build pipelines only for these.
bool coopmat_tile_reachable(std::span<const CoopmatTile> tiles, const CoopmatTile& t, char forced,
                            GgmlType type = GgmlType::f32);

// Workgroups the rule wants a grid to fill: 3/4 of the SMs, or 64 when the count is unknown.
uint32_t coopmat_target_groups(uint32_t sm_count);

}  // namespace fish::vk
