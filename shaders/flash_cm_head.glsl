// The shared head of attention_flash_cm.comp.glsl and attention_flash_cm2.comp.glsl: extensions,
// the span layout and the specialisation constants in FlashCmTile::constants()'s order
// (engine/vulkan/flash_cm.h).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "fish_vk_span.h"
#include "span_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint SG = 32;  // lanes per subgroup (required by the pipeline)
layout(constant_id = 2) const uint CM = 16;
layout(constant_id = 3) const uint CN = 16;
layout(constant_id = 4) const uint CK = 16;
layout(constant_id = 5) const uint HD = 128;  // head dimension (= pc.n), a multiple of CN and CK
layout(constant_id = 6) const uint NSG = 4;   // subgroups
layout(constant_id = 7) const uint KT = 32;   // keys per tile, a multiple of CN and CK (variant 2: of 4 LPR)
layout(constant_id = 8) const uint WG = 128;  // = NSG x SG = local_size_x, for loop bounds
