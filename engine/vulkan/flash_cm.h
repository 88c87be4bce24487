// Cooperative-matrix flash attention for prefill chunks (shaders/attention_flash_cm.comp.glsl,
// span_attention_flash_cm): the tile a device and head dimension get, its specialisation
// constants, and the selection the span and the op tests share.
//
// A tile is NSG subgroups x CM query rows (the device's f16 x f16 -> f32 subgroup shape CM x CN
// x CK, coopmat.h) and KT keys a step. Its shared memory (shared_bytes) is Q (queries x head_dim
// f16), K and V (KT x head_dim f16 each; rows padded by 8 values), S (queries x KT f32), P
// (queries x (KT + 8) f16) and three floats a query (running max, sum, correction). Candidates,
// first that fits the device's shared memory and workgroup size: 4 subgroups x 32 keys (64
// queries on NVIDIA: 47.75 KiB at head_dim 128 of the H100's 48), 4 x 16, 2 x 32, 2 x 16, 1 x 16
// (head_dim 256 on NVIDIA: 2 x 16, 36.9 KiB).
//
// Variant 2 (span_attention_flash_cm2, FISH_VK_FLASH_CM=2, the default;
// attention_flash_cm2.comp.glsl): Q in registers, K and V double-buffered (2 x 2 x KT x head_dim
// f16, Q staged there first, so queries <= 4 KT), S with rows of KT + 4 floats, P as variant 1;
// keys a multiple of 4 x the lanes a softmax row takes (subgroup / m, at least 1). Candidates:
// variant 1's, then 4 x 8, 2 x 8, 1 x 8 (lavapipe's 8x8x8 at head_dim 256); on NVIDIA 4 x 32 at
// head_dim 64 and 128 (48 KiB exactly at 128), 4 x 16 at 256.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace fish::vk {

class VkContext;
struct PipelineSpec;

inline constexpr char kFlashCmModule[] = "span_attention_flash_cm";
inline constexpr char kFlashCm2Module[] = "span_attention_flash_cm2";

struct FlashCmTile {
  uint32_t subgroup = 0;            // lanes per subgroup (the pipeline requires it where it can)
  uint32_t cm = 0, cn = 0, ck = 0;  // the coopmat shape
  uint32_t head_dim = 0;            // HD: the module is specialised per head dimension
  uint32_t subgroups = 0;           // NSG
  uint32_t keys = 0;                // KT: keys per tile
  uint32_t variant = 1;             // 1: span_attention_flash_cm, 2: span_attention_flash_cm2
  uint32_t queries() const { return subgroups * cm; }  // query rows of a workgroup
  uint32_t threads() const { return subgroups * subgroup; }
  uint32_t shared_bytes() const;
  const char* module() const { return variant == 2 ? kFlashCm2Module : kFlashCmModule; }
  std::vector<uint32_t> constants() const;  // in constant_id order
};

// The first candidate tile (above) of `variant` (1 or 2) on shape m x n x k for subgroups of
// `subgroup` lanes within max_shared bytes and max_threads invocations; nullopt where head_dim is
// not a multiple of n, k and 4, exceeds FISH_SPAN_MAX_HEAD, or m x n is not a multiple of the
// subgroup (each lane owns m n / subgroup values of an output block); variant 2 also where
// neither of m and the subgroup divides the other.
std::optional<FlashCmTile> flash_cm_tile(uint32_t m, uint32_t n, uint32_t k, uint32_t subgroup,
                                         uint32_t max_shared, uint32_t max_threads,
                                         uint32_t head_dim, uint32_t variant = 1);

// flash_cm_tile of `variant` on the device's shape where it has cooperative matrices and
// FISH_VK_FLASH_CM is not 0 (variant 2 falls back to variant 1's tile where it has none);
// nullopt: span_attention_flash (f32). The span's choice for prefill
// chunks (dispatches of FISH_SPAN_FLASH_MIN_TOK tokens or more) passes FISH_VK_FLASH_CM's variant.
std::optional<FlashCmTile> pick_flash_cm_tile(const VkContext& ctx, uint32_t head_dim,
                                              uint32_t variant);

// t.module() specialised for t (the subgroup size required where it may vary).
PipelineSpec flash_cm_spec(const VkContext& ctx, const FlashCmTile& t);

}  // namespace fish::vk
