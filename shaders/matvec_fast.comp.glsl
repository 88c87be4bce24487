#version 450
// matvec_<type> for f16, q4_0, q8_0, q4_k, q5_k, q6_k, fq3: the bandwidth-bound decode matvec,
// y[t][r] = sum_k W[r][k] x[t][k] for n_tok <= FISH_MATVEC_MAX_TOK (the generic matvec.comp.glsl
// is built as matvec1_<type> for every type and is the reference design; FISH_VK_MATVEC=1).
// Same contract: bindings and push constants of fish_vk_layout.h, one workgroup =
// FISH_MATVEC_ROWS rows x all tokens, FISH_MATVEC_WG threads, grid groups_x x ceil(n_groups /
// groups_x).
// Work unit: a "chunk" of CHUNK_VEC4 x 4 values of a row (32 values: Q4_0/Q8_0: one block;
// Q4_K/Q5_K: one 16-byte run of codes = 16 values of two sub-blocks; Q6_K: 8 columns x 4
// quarter-rows of a super-block half; f16: 64 bytes; 64 values: FQ3: two 32-value groups, 24
// bytes). Thread i takes chunks i, i + WG, ... so each thread owns whole scale groups
// (scales read once per chunk) and a subgroup reads contiguous bytes. Per chunk: the raw words of
// all the workgroup's rows are loaded first (Q4_K/Q5_K/f16/FQ3: 16-byte uvec4 loads (FQ3: + one
// 8-byte uvec2), the super-block header is one uvec4; Q4_0/Q8_0/Q6_K: unaligned blocks, several
// 4-byte loads funnelled by 16 bits), so ROWS x (2..9) independent loads are in flight per
// thread; then each token's x values (CHUNK_VEC4 vec4 loads, shared by the rows) are applied as
// scale * dot(code, x) + offset * sum(x) per scale group, codes turned into floats without
// conversion instructions (udot). Partial sums: subgroupAdd, one shared slot per subgroup (any
// subgroup size: the slots are drained in passes of 32). Rows past n_out are clamped to the last
// row and not stored; the hot loop has no bounds checks. Device buffers carry 16 bytes of padding
// past the last row (funnel reads touch the next word).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require

#include "fish_vk_layout.h"

layout(local_size_x = FISH_MATVEC_WG) in;
// W seen as words (unaligned blocks) and as 16-byte vectors (aligned layouts): one binding.
layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf { uint w[]; };
layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf4 { uvec4 w4[]; };
layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf2 { uvec2 w2[]; };
layout(std430, binding = FISH_BINDING_X) readonly buffer XBuf { vec4 x[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer YBuf { float y[]; };

#include "matvec_raw.glsl"

// dot(the 4 bytes of q as unsigned integers, v). Bytes become floats by the 2^23 magic number
// (bits 0x4B0000bb are 2^23 + bb exactly): integer ops and one exact subtraction per value,
// where unpackUnorm4x8 / uint-to-float conversions run at a quarter of the FP32 rate on NVIDIA
// (16 per SM per clock on sm_80/sm_90), which would bound Q4_K below HBM bandwidth.
float udot(uint q, vec4 v) {
  const uvec4 b = uvec4(q, q >> 8u, q >> 16u, q >> 24u) & 0xFFu;
  return dot(uintBitsToFloat(b | 0x4B000000u) - 8388608.0, v);
}

// ---- per type: where a chunk's x values are (x_off: value index of vec4 j = 0..CHUNK_VEC4-1
// of chunk c), its raw words (Raw, load_raw: matvec_raw.glsl, which also describes the chunks;
// here for FQ3 and f16), and its dot with x (chunk_dot; xs[k] = sum of vec4s 2k, 2k+1).
#if defined(TYPE_FQ3)
#define CHUNK_VEC4 16u
#else
#define CHUNK_VEC4 8u
#endif
#define CHUNK_SHIFT (CHUNK_VEC4 == 16u ? 6u : 5u)  // log2(values per chunk)
#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
uint x_off(uint c, uint j) {
  const uint c16 = c & 7u;
  return 256u * (c >> 3u) + 64u * (c16 >> 1u) + 16u * (c16 & 1u) + 4u * (j & 3u) + 32u * (j >> 2u);
}
float chunk_dot(Raw r, uint c, vec4 xv[CHUNK_VEC4], float xs[CHUNK_VEC4 / 2u]) {
  const uint s0 = 2u * ((c & 7u) >> 1u);
  const uvec2 sm0 = scale_min(r.hdr, s0), sm1 = scale_min(r.hdr, s0 + 1u);
  const vec2 dm = unpackHalf2x16(r.hdr.x);
  float lo = 0.0, hi = 0.0;
  [[unroll]] for (uint j = 0u; j < 4u; ++j) {
    const uvec2 q = kq_codes(r, s0, j);
    lo += udot(q.x, xv[j]);
    hi += udot(q.y, xv[4u + j]);
  }
  return dm.x * (float(sm0.x) * lo + float(sm1.x) * hi) -
         dm.y * (float(sm0.y) * (xs[0] + xs[1]) + float(sm1.y) * (xs[2] + xs[3]));
}
#elif defined(TYPE_Q6_K)
uint x_off(uint c, uint j) {
  const uint u = c & 7u;
  return 256u * (c >> 3u) + 128u * (u >> 2u) + 32u * (j >> 1u) + 8u * (u & 3u) + 4u * (j & 1u);
}
float chunk_dot(Raw r, uint c, vec4 xv[CHUNK_VEC4], float xs[CHUNK_VEC4 / 2u]) {
  float s = 0.0;
  [[unroll]] for (uint k = 0u; k < 4u; ++k) {
    const uvec2 lq = (k & 1u) != 0u ? r.ql1 : r.ql0;
    const uint shl = (k >> 1u) * 4u;
    const uint qa = ((lq.x >> shl) & kLo) | (((r.qh.x >> (2u * k)) & 0x03030303u) << 4u);
    const uint qb = ((lq.y >> shl) & kLo) | (((r.qh.y >> (2u * k)) & 0x03030303u) << 4u);
    const float sc = sbyte(r.sc, 2u * k + (r.g >> 1u));
    s += sc * (udot(qa, xv[2u * k]) + udot(qb, xv[2u * k + 1u]) - 32.0 * xs[k]);
  }
  return unpackHalf2x16(r.d).x * s;
}
#elif defined(TYPE_Q8_0) || defined(TYPE_Q4_0)
uint x_off(uint c, uint j) {
  return 32u * c + 4u * j;
}
float chunk_dot(Raw r, uint c, vec4 xv[CHUNK_VEC4], float xs[CHUNK_VEC4 / 2u]) {
  const float d = unpackHalf2x16(r.odd ? r.wd[0] >> 16u : r.wd[0]).x;
  float s = 0.0;
  [[unroll]] for (uint i = 0u; i < CODE_WORDS; ++i) {
    const uint q = r.odd ? r.wd[i + 1u] : (r.wd[i] >> 16u) | (r.wd[i + 1u] << 16u);
#if defined(TYPE_Q8_0)
    s += udot(q ^ 0x80808080u, xv[i]);
#else
    s += udot(q & kLo, xv[i]) + udot((q >> 4u) & kLo, xv[4u + i]);
#endif
  }
#if defined(TYPE_Q8_0)
  const float bias = 128.0;
#else
  const float bias = 8.0;
#endif
  return d * (s - bias * (xs[0] + xs[1] + xs[2] + xs[3]));
}
#elif defined(TYPE_FQ3)
// FQ3 112-byte (7 x uvec4) super-blocks of 256 (quant/fq3.h), 16-aligned since rows are whole
// super-blocks: uvec4 0 = f16 d, f16 dmin, scales[12] (Q4_K packing); then per 32-value group g
// the words A, B, C at word 4 + 3g. Chunk c = groups 2k, 2k + 1 (k = c & 3) of super-block c / 4:
// 6 words at word 4 + 6k, i.e. k even: one uvec4 at word 4 + 6k (A0 B0 C0 A1) + one uvec2 after it
// (B1 C1); k odd: one uvec2 at word 4 + 6k (A0 B0) + one uvec4 after it (C0 A1 B1 C1). Four
// consecutive threads read one whole super-block, every byte once. Values 4s..4s+3 of a group
// (x vec4 s) are the bytes of ((s < 4 ? A : B) >> 2(s&3)) & 0x03030303 | ((C >> s) & 0x01010101)
// << 2; a group's value is d sc q - dmin m, so its dot is d sc dot(q, x) - dmin m sum(x).
uint x_off(uint c, uint j) {
  return 64u * c + 4u * j;
}
struct Raw {
  uvec4 hdr;
  uvec4 v;
  uvec2 p;
  bool odd;  // k odd: p holds A0 B0, v the rest
};
Raw load_raw(uint row_byte, uint c) {
  const uint sbw = (row_byte >> 2u) + (c >> 2u) * 28u;  // super-block's first word
  const uint k = c & 3u, gw = sbw + 4u + 6u * k;         // the pair's first word
  Raw r;
  r.hdr = w4[sbw >> 2u];
  r.odd = (k & 1u) != 0u;
  r.v = w4[(r.odd ? gw + 2u : gw) >> 2u];
  r.p = w2[(r.odd ? gw : gw + 4u) >> 1u];
  return r;
}
// dot(codes of a group's words abc = A, B, C, x vec4s 8i .. 8i + 7): quad q with xv[8i + q].
float group_dot(uvec3 abc, vec4 xv[CHUNK_VEC4], uint i) {
  float s = 0.0;
  [[unroll]] for (uint q = 0u; q < 8u; ++q) {
    const uint ab = q < 4u ? abc.x : abc.y;
    s += udot(((ab >> (2u * (q & 3u))) & 0x03030303u) | (((abc.z >> q) & 0x01010101u) << 2u),
              xv[8u * i + q]);
  }
  return s;
}
float chunk_dot(Raw r, uint c, vec4 xv[CHUNK_VEC4], float xs[CHUNK_VEC4 / 2u]) {
  const uint g0 = 2u * (c & 3u);
  const uvec2 sm0 = scale_min(r.hdr, g0), sm1 = scale_min(r.hdr, g0 + 1u);
  const vec2 dm = unpackHalf2x16(r.hdr.x);
  const uvec3 w0 = r.odd ? uvec3(r.p, r.v.x) : r.v.xyz;   // A, B, C of group g0
  const uvec3 w1 = r.odd ? r.v.yzw : uvec3(r.v.w, r.p);  // of group g0 + 1
  const float q0 = group_dot(w0, xv, 0u), q1 = group_dot(w1, xv, 1u);
  return dm.x * (float(sm0.x) * q0 + float(sm1.x) * q1) -
         dm.y * (float(sm0.y) * (xs[0] + xs[1] + xs[2] + xs[3]) +
                 float(sm1.y) * (xs[4] + xs[5] + xs[6] + xs[7]));
}
#elif defined(TYPE_F16)
// Rows padded to FISH_K_ALIGN (32) values = 64 bytes: a chunk is 4 aligned uvec4 of 8 halves.
uint x_off(uint c, uint j) {
  return 32u * c + 4u * j;
}
struct Raw {
  uvec4 v[4];
};
Raw load_raw(uint row_byte, uint c) {
  const uint i = (row_byte >> 4u) + 4u * c;
  Raw r;
  [[unroll]] for (uint k = 0u; k < 4u; ++k) r.v[k] = w4[i + k];
  return r;
}
float chunk_dot(Raw r, uint c, vec4 xv[CHUNK_VEC4], float xs[CHUNK_VEC4 / 2u]) {
  float s = 0.0;
  [[unroll]] for (uint k = 0u; k < 4u; ++k) {
    s += dot(vec4(unpackHalf2x16(r.v[k].x), unpackHalf2x16(r.v[k].y)), xv[2u * k]);
    s += dot(vec4(unpackHalf2x16(r.v[k].z), unpackHalf2x16(r.v[k].w)), xv[2u * k + 1u]);
  }
  return s;
}
#else
#error "matvec_fast.comp.glsl: TYPE_F16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K or FQ3 (shaders/CMakeLists.txt)"
#endif

#define ROWS FISH_MATVEC_ROWS  // rows a workgroup
#define NACC (ROWS * FISH_MATVEC_MAX_TOK)
#include "matvec_reduce.glsl"

void main() {
  uint row0, rb[ROWS];
  if (!workgroup_rows(ROWS, 0u, row0, rb)) return;

  float acc[NACC];
  [[unroll]] for (uint i = 0u; i < NACC; ++i) acc[i] = 0.0;
  const uint n_chunks = pc.n_in >> CHUNK_SHIFT;
  for (uint c = gl_LocalInvocationID.x; c < n_chunks; c += FISH_MATVEC_WG) {
    Raw raw[ROWS];  // every row's loads issued before any use
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) raw[r] = load_raw(rb[r], c);
    [[unroll]] for (uint t = 0u; t < FISH_MATVEC_MAX_TOK; ++t) {
      if (t < pc.n_tok) {
        vec4 xv[CHUNK_VEC4];
        float xs[CHUNK_VEC4 / 2u];
        const uint xrow = t * pc.x_stride;
        [[unroll]] for (uint j = 0u; j < CHUNK_VEC4; ++j) xv[j] = x[(xrow + x_off(c, j)) >> 2u];
        [[unroll]] for (uint k = 0u; k < CHUNK_VEC4 / 2u; ++k)
          xs[k] = dot(xv[2u * k] + xv[2u * k + 1u], vec4(1.0));
        [[unroll]] for (uint r = 0u; r < ROWS; ++r)
          acc[r * FISH_MATVEC_MAX_TOK + t] += chunk_dot(raw[r], c, xv, xs);
      }
    }
  }

  reduce_store(acc, row0);
}
