#version 450
// coopmat_peak: the device's cooperative-matrix f16 x f16 -> f32 multiply-add rate with no
// memory traffic (the peak the prefill matmul's TFLOP/s is compared with; bench/vulkan_bench.cpp
// BM_VulkanCoopmatPeak). Each subgroup runs ITERS rounds of NACC independent coopMatMulAdd (so
// consecutive multiply-adds do not wait on each other) on operands built from its workgroup id;
// lane 0 of each subgroup writes one element of the sum so nothing is dead code. FLOPs = groups x
// subgroups x ITERS x NACC x 2 M N K. MODE says where the accumulators and operands live, to tell
// which of them costs the prefill matmul its rate (matmul_cm.comp.glsl keeps arrays of
// accumulators and loads operands from shared memory):
//   0  4 named accumulators, operands in registers (NACC = 4): the peak
//   1  an array of NACC accumulators indexed in [[unroll]] loops, operands in registers
//   2  4 named accumulators, A and B loaded from shared memory each round (coopMatLoad from an
//      f16vec4 array, rows of 40 f16 as matmul_cm's tiles)
// Specialisation constants: 0 workgroup size, 1..3 M, N, K (the device's shape), 4 ITERS,
// 5 MODE, 6 NACC (1..16).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint CM = 16;
layout(constant_id = 2) const uint CN = 16;
layout(constant_id = 3) const uint CK = 16;
layout(constant_id = 4) const uint ITERS = 1024;
layout(constant_id = 5) const uint MODE = 0;
layout(constant_id = 6) const uint NACC = 4;
layout(std430, binding = 0) writeonly buffer OutBuf { float out_[]; };

shared float cs[CM * CN];
const uint LDS4 = 10u;  // 40 f16 a row, as matmul_cm.comp.glsl's shared tiles (in f16vec4)
shared f16vec4 ops_s[2u * 16u * LDS4];

coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc_arr[NACC];

void store_result(coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> c) {
  if (gl_SubgroupID == 0u) {
    coopMatStore(c, cs, 0, CM, gl_CooperativeMatrixLayoutColumnMajor);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    if (gl_SubgroupInvocationID == 0u) out_[gl_WorkGroupID.x] = cs[0];
  }
}

void main() {
  const float16_t v = float16_t(1.0 + float(gl_WorkGroupID.x & 7u) * 1e-3);
  coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> a =
      coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA>(v);
  coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b =
      coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB>(float16_t(1e-4));
  coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> c0 =
      coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);
  if (MODE == 1u) {
    [[unroll]] for (uint j = 0u; j < NACC; ++j) acc_arr[j] = c0;
    for (uint i = 0u; i < ITERS; ++i)
      [[unroll]] for (uint j = 0u; j < NACC; ++j) acc_arr[j] = coopMatMulAdd(a, b, acc_arr[j]);
    [[unroll]] for (uint j = 1u; j < NACC; ++j)
      for (uint e = 0u; e < c0.length(); ++e) acc_arr[0][e] += acc_arr[j][e];
    store_result(acc_arr[0]);
    return;
  }
  coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> c1 = c0, c2 = c0, c3 = c0;
  if (MODE == 2u) {
    for (uint e = gl_LocalInvocationID.x; e < 2u * 16u * LDS4; e += gl_WorkGroupSize.x)
      ops_s[e] = f16vec4(v + float16_t(float(e & 3u) * 1e-3));
    barrier();
    for (uint i = 0u; i < ITERS; ++i) {
      const uint o = (i & 1u) * 16u * LDS4;  // alternate halves: loads the compiler cannot hoist
      coopMatLoad(a, ops_s, o, LDS4, gl_CooperativeMatrixLayoutRowMajor);
      coopMatLoad(b, ops_s, 16u * LDS4 - o, LDS4, gl_CooperativeMatrixLayoutColumnMajor);
      c0 = coopMatMulAdd(a, b, c0);
      c1 = coopMatMulAdd(a, b, c1);
      c2 = coopMatMulAdd(a, b, c2);
      c3 = coopMatMulAdd(a, b, c3);
    }
  } else {
    for (uint i = 0u; i < ITERS; ++i) {
      c0 = coopMatMulAdd(a, b, c0);
      c1 = coopMatMulAdd(a, b, c1);
      c2 = coopMatMulAdd(a, b, c2);
      c3 = coopMatMulAdd(a, b, c3);
    }
  }
  for (uint i = 0u; i < c0.length(); ++i) c0[i] += c1[i] + c2[i] + c3[i];
  store_result(c0);
}
