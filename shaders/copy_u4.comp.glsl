#version 450
// copy_u4: dst[i] = src[i] for i < n_in 16-byte vectors, grid-stride (the bandwidth a compute
// shader can move, the reference for the matvec kernels' GB/s; vkCmdCopyBuffer uses the copy
// engine). Bindings and push constants of fish_vk_layout.h: src = FISH_BINDING_W, dst =
// FISH_BINDING_Y, pc.n_in = vectors to copy; FISH_COPY_WG threads per workgroup, any grid.
#extension GL_GOOGLE_include_directive : require

#include "fish_vk_layout.h"

layout(local_size_x = FISH_COPY_WG) in;
layout(std430, binding = FISH_BINDING_W) readonly buffer Src { uvec4 src[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer Dst { uvec4 dst[]; };

void main() {
  const uint stride = gl_NumWorkGroups.x * FISH_COPY_WG;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n_in; i += stride) dst[i] = src[i];
}
