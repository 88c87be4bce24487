#version 450
// prefetch: reads the 16-byte vectors [pc.n_in, pc.n_in + pc.n_out) of W and nothing else, so that
// they sit in the device's L2 cache when a later dispatch reads them: a decode step's weights,
// read beside a latency-bound step with no barrier between the two (FISH_VK_PREFETCH_MB,
// engine/vulkan/prefetch.h). Each thread folds its loads into one word and stores it at
// Y[pc.y_offset + its lane] (the span's sink region, which nothing reads), so the loads stay.
// Every workgroup and every prefetch dispatch of a step stores the same words with no barrier
// between them: a race on values nobody reads (synchronisation validation reports it).
// Bindings and push constants of fish_vk_layout.h; FISH_COPY_WG threads, each loading
// FISH_PREFETCH_VECS vectors a round (all issued before any is used), any 1-D grid.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "fish_vk_layout.h"

#define FISH_PREFETCH_VECS 4

layout(local_size_x = FISH_COPY_WG) in;
layout(std430, binding = FISH_BINDING_W) readonly buffer W { uvec4 w[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer Y { uint y[]; };

void main() {
  const uint chunk = FISH_COPY_WG * FISH_PREFETCH_VECS;
  const uint last = pc.n_out;
  uint sink = 0u;
  for (uint base = gl_WorkGroupID.x * chunk; base < last; base += gl_NumWorkGroups.x * chunk) {
    uvec4 v[FISH_PREFETCH_VECS];
    [[unroll]] for (uint j = 0u; j < FISH_PREFETCH_VECS; ++j) {
      const uint i = min(base + j * FISH_COPY_WG + gl_LocalInvocationID.x, last - 1u);
      v[j] = w[pc.n_in + i];
    }
    [[unroll]] for (uint j = 0u; j < FISH_PREFETCH_VECS; ++j)
      sink ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  y[pc.y_offset + gl_LocalInvocationID.x] = sink;
}
