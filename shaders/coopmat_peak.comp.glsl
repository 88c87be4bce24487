#version 450
// coopmat_peak: the device's cooperative-matrix f16 x f16 -> f32 multiply-add rate with no
// memory traffic (the peak the prefill matmul's TFLOP/s is compared with; bench/vulkan_bench.cpp
// BM_VulkanCoopmatPeak). Each subgroup keeps 4 independent accumulators (so consecutive
// multiply-adds do not wait on each other) and runs ITERS rounds of 4 coopMatMulAdd on operands
// built from its workgroup id; lane 0 of each subgroup writes one element of the sum so nothing
// is dead code. FLOPs = groups x subgroups x ITERS x 4 x 2 M N K.
// Specialisation constants: 0 workgroup size, 1..3 M, N, K (the device's shape), 4 ITERS.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint CM = 16;
layout(constant_id = 2) const uint CN = 16;
layout(constant_id = 3) const uint CK = 16;
layout(constant_id = 4) const uint ITERS = 1024;
layout(std430, binding = 0) writeonly buffer OutBuf { float out_[]; };

shared float cs[CM * CN];

void main() {
  const float16_t v = float16_t(1.0 + float(gl_WorkGroupID.x & 7u) * 1e-3);
  coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> a =
      coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA>(v);
  coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b =
      coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB>(float16_t(1e-4));
  coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> c0 =
      coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);
  coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> c1 = c0, c2 = c0, c3 = c0;
  for (uint i = 0u; i < ITERS; ++i) {
    c0 = coopMatMulAdd(a, b, c0);
    c1 = coopMatMulAdd(a, b, c1);
    c2 = coopMatMulAdd(a, b, c2);
    c3 = coopMatMulAdd(a, b, c3);
  }
  for (uint i = 0u; i < c0.length(); ++i) c0[i] += c1[i] + c2[i] + c3[i];
  if (gl_SubgroupID == 0u) {
    coopMatStore(c0, cs, 0, CM, gl_CooperativeMatrixLayoutColumnMajor);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    if (gl_SubgroupInvocationID == 0u) out_[gl_WorkGroupID.x] = cs[0];
  }
}
