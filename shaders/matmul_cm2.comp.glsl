#version 450
// matmul_cm2_<type>: y[t][r] = sum_k W[r][k] x[t][k] on workgroup-scope cooperative matrices
// (VK_NV_cooperative_matrix2), the prefill matmul of matmul_cm.comp.glsl with its bindings and
// push constants (fish_vk_layout.h: W rows row_bytes apart, y f32 rows y_stride apart from
// y_offset), so a dispatch can take either, except for X: here the activations come as f16 rows
// x_stride values apart, written by to_f16 (to_f16.comp.glsl) once per matmul input.
//
// One workgroup (WG threads, specialisation constant 0) = a BM-row x BN-token tile of y in one
// f32 accumulator coopmat<float, gl_ScopeWorkgroup, BM, BN> (or f16 sums: ACC below); the grid
// is ceil(n_out / BM) x ceil(n_tok / BN). K advances by BK per step: A (BM x BK f16) comes from
// the weight rows through a tensor layout whose block is the type's (1 x QK values, BLOCK_BYTES
// bytes) and a decode function per type that turns (block, coordinate in block) into one f16
// value (f16 rows load directly); B (BK x BN f16) straight from the f16 activation rows through
// the transposed view (no decode: a callback per f32 element ran the f16 weights at 8.6 TFLOP/s
// on an H100). The driver stages both through shared memory (the one shared array here is
// SCALES's, below).
// Tiles wholly inside n_out x n_tok use unclamped layouts, KU steps per loop iteration; edge tiles
// clamped ones (rows / tokens past the end read 0). The result is stored through a clamped
// layout (elements past n_out / n_tok dropped) at y_offset rounded down to 16 bytes (the
// extension's base alignment) plus the remainder as a row offset; y_stride too short for that
// remainder (a part ending at the matrix's last row with y_offset % 4 != 0) stores element by
// element instead (coopMatPerElementNV).
// CPU reference: dequantize_row_<type>, then a double dot (tests/vulkan/vulkan_coopmat_test.cpp).
// Tiles and the device features it needs: engine/vulkan/coopmat.h (CoopmatTile::cm2).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require

#include "fish_vk_layout.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 128;
layout(constant_id = 3) const uint BK = 64;  // kCoopmat2K
layout(constant_id = 4) const uint KU = 4;  // K steps per unrolled iteration of interior tiles
// ACC (FISH_VK_COOPMAT2_ACC): 0 f32 accumulator; 1 f16 partial sums of each unrolled iteration
// (KU BK values: 256) added into the f32 one; 2 f16 throughout, converted to f32 for the store
// (llama.cpp's default f16acc pipelines). f16 sums carry about 2^-11 relative rounding a step
// and overflow past 65504 to inf.
// SCALES (FISH_VK_COOPMAT2_SCALES): from SCALES_MIN on (1: q4_k / q5_k / fq3; 2: q6_k) an
// interior tile stages the sub-block scales of each super-block in shared memory once per
// unrolled iteration (fill_scales), so the decode of each value reads them there instead of the
// block header: one vec2 (d sc, dmin m) in place of four words and their 6-bit unpacking
// (llama.cpp's fetch_scales / store_scales do the same), or for q6_k one float (d sc) in place
// of d and an int8 scale.
layout(constant_id = 5) const uint ACC = 0;
layout(constant_id = 6) const uint SCALES = 0;  // >= SCALES_MIN: scales staged in shared memory

layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf { uint w[]; };
layout(std430, binding = FISH_BINDING_X) readonly buffer XBuf { float16_t xh[]; };
layout(std430, binding = FISH_BINDING_Y) buffer YBuf { float y[]; };

// Four f32 values (f32 weights): one 16-byte block.
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vec4Ref { vec4 v; };

uint g_row0, g_tok0;  // this workgroup's tile, for store_element

float16_t decode_vec4(const in Vec4Ref b, const in uint block[2], const in uint in_block[2]) {
  return float16_t(b.v[in_block[1]]);
}

// Byte i (0..) of an array of 16-bit words.
#define BYTE16(a, i) ((uint(a[(i) >> 1u]) >> (8u * ((i) & 1u))) & 0xFFu)

// Per type: QK values and BLOCK_BYTES bytes a block (quant/<type>.h), the block as a
// buffer_reference struct (16-bit words where blocks are only 2-aligned), and decode_w (value c
// of the block, dequantised as dequant.glsl's load_unit). f16 has no decode (DIRECT_F16).
#if defined(TYPE_F32)
#define QK 4u
#define BLOCK_BYTES 16u
#define DECODE_W decode_vec4
#elif defined(TYPE_F16)
#define QK 1u
#define BLOCK_BYTES 2u
#define DIRECT_F16 1
layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf16 { float16_t wh[]; };
#elif defined(TYPE_Q4_0) || defined(TYPE_Q4_1) || defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
// Blocks of 32: value c is the low nibble of qs[c] (c < 16) or the high nibble of qs[c - 16];
// Q5's fifth bit is bit c of qh. Q4_0 d (q - 8), Q5_0 d (q - 16), Q4_1 / Q5_1 d q + m.
#define QK 32u
#if defined(TYPE_Q4_0)
#define BLOCK_BYTES 18u
layout(buffer_reference, std430, buffer_reference_align = 2) buffer BlockRef {
  float16_t d;
  uint16_t qs[8];
};
#elif defined(TYPE_Q4_1)
#define BLOCK_BYTES 20u
layout(buffer_reference, std430, buffer_reference_align = 4) buffer BlockRef {
  float16_t d;
  float16_t m;
  uint16_t qs[8];
};
#elif defined(TYPE_Q5_0)
#define BLOCK_BYTES 22u
layout(buffer_reference, std430, buffer_reference_align = 2) buffer BlockRef {
  float16_t d;
  uint16_t qh[2];
  uint16_t qs[8];
};
#else
#define BLOCK_BYTES 24u
layout(buffer_reference, std430, buffer_reference_align = 8) buffer BlockRef {
  float16_t d;
  float16_t m;
  uint16_t qh[2];
  uint16_t qs[8];
};
#endif
float16_t decode_w(const in BlockRef b, const in uint block[2], const in uint in_block[2]) {
  const uint c = in_block[1];
  uint q = (BYTE16(b.qs, c & 15u) >> (4u * (c >> 4u))) & 15u;
#if defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
  q |= ((uint(b.qh[c >> 4u]) >> (c & 15u)) & 1u) << 4u;
#endif
  const float d = float(b.d);
#if defined(TYPE_Q4_0)
  return float16_t(d * (float(q) - 8.0));
#elif defined(TYPE_Q5_0)
  return float16_t(d * (float(q) - 16.0));
#else
  return float16_t(d * float(q) + float(b.m));
#endif
}
#define DECODE_W decode_w
#elif defined(TYPE_Q8_0)
// 34-byte blocks of 32: f16 d, int8 qs[32]; d q.
#define QK 32u
#define BLOCK_BYTES 34u
layout(buffer_reference, std430, buffer_reference_align = 2) buffer BlockRef {
  float16_t d;
  uint16_t qs[16];
};
float16_t decode_w(const in BlockRef b, const in uint block[2], const in uint in_block[2]) {
  const int q = int(BYTE16(b.qs, in_block[1]) << 24u) >> 24;
  return float16_t(float(b.d) * float(q));
}
#define DECODE_W decode_w
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_FQ3)
// Super-blocks of 256 with f16 d, f16 dmin and Q4_K's 12 bytes of 6-bit scales and mins (sc[0]:
// scales 0..3 and the top bits of 4..7, sc[1]: mins 0..3 and the top bits of mins 4..7, sc[2]:
// the low nibbles of scales / mins 4..7; ggml get_scale_min_k4): d sc_g q - dmin m_g for
// sub-block g = c / 32.
#define QK 256u
#if defined(TYPE_Q4_K)
// Q4_K 144 bytes: qs[128]; value 64i + l (l < 32) the low nibble of qs[32i + l], 64i + 32 + l
// the high nibble.
#define BLOCK_BYTES 144u
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BlockRef {
  uint dm;
  uint sc[3];
  uint qs[32];
};
#elif defined(TYPE_Q5_K)
// Q5_K 176 bytes: qh[32], then qs[128] as Q4_K's; the fifth bit of value c is bit c / 32 of
// qh[c % 32].
#define BLOCK_BYTES 176u
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BlockRef {
  uint dm;
  uint sc[3];
  uint qh[8];
  uint qs[32];
};
#else
// FQ3 112 bytes (quant/fq3.h): per group g the words A, B, C; value 4s + j of a group (s < 8,
// j < 4): bits 2(s&3) of byte j of A (s < 4) or B, and bit s of byte j of C as bit 2.
#define BLOCK_BYTES 112u
layout(buffer_reference, std430, buffer_reference_align = 16) buffer BlockRef {
  uint dm;
  uint sc[3];
  uint q[24];
};
#endif
// Sub-block g's (d sc, dmin m) from the block's header words: dm (f16 d, dmin), then the 12
// bytes of 6-bit scales and mins.
vec2 sub_scale(const uint dm_word, const uint sc0, const uint sc1, const uint sc2, const uint g) {
  const uint sh = 8u * (g & 3u);
  const uint lo_sc = sc0 >> sh, lo_m = sc1 >> sh, top = sc2 >> sh;
  const uint sc = g < 4u ? lo_sc & 63u : (top & 15u) | ((lo_sc >> 2u) & 48u);
  const uint m = g < 4u ? lo_m & 63u : ((top >> 4u) & 15u) | ((lo_m >> 2u) & 48u);
  const vec2 dm = unpackHalf2x16(dm_word);
  return vec2(dm.x * float(sc), dm.y * float(m));
}
// Value c's quant (0..15 / 0..31 / 0..7).
uint quant_of(const in BlockRef b, const uint c) {
  const uint g = c >> 5u;  // sub-block of 32
#if defined(TYPE_FQ3)
  const uint v = c & 31u, s = v >> 2u, j = v & 3u;
  const uint ab = b.q[3u * g + (s >> 2u)];
  const uint q = ((ab >> (8u * j + 2u * (s & 3u))) & 3u) |
                 (((b.q[3u * g + 2u] >> (8u * j + s)) & 1u) << 2u);
#else
  const uint l = c & 31u;
  const uint byte_i = 32u * (c >> 6u) + l;  // qs byte of this value
  uint q = (b.qs[byte_i >> 2u] >> (8u * (byte_i & 3u) + 4u * (g & 1u))) & 15u;
#if defined(TYPE_Q5_K)
  q |= ((b.qh[l >> 2u] >> (8u * (l & 3u) + g)) & 1u) << 4u;
#endif
#endif
  return q;
}
float16_t decode_w(const in BlockRef b, const in uint block[2], const in uint in_block[2]) {
  const uint c = in_block[1];
  const vec2 s = sub_scale(b.dm, b.sc[0], b.sc[1], b.sc[2], c >> 5u);
  return float16_t(s.x * float(quant_of(b, c)) - s.y);
}
#define DECODE_W decode_w
// SCALES >= 1 (FISH_VK_COOPMAT2_SCALES): an interior tile's sub-block scales of the super-block
// in flight, (d sc, dmin m) for 8 sub-blocks x BM rows, computed once per unrolled K iteration
// (KU steps of BK: one super-block) by fill_scales, read by decode_w_sh instead of the header.
#define HAS_SHARED_SCALES 1
#define SCALES_MIN 1u
// One element where SCALES stages nothing (0): no shared memory held for an unused array.
shared vec2 sh_scales[8u * BM * ((SCALES + 1u) >> 1u) + 1u];
float16_t decode_w_sh(const in BlockRef b, const in uint block[2], const in uint in_block[2]) {
  const uint c = in_block[1];
  const vec2 s = sh_scales[(c >> 5u) * BM + block[0] % BM];  // tiles start at multiples of BM
  return float16_t(s.x * float(quant_of(b, c)) - s.y);
}
// Half `part` (sub-blocks 4 part ..) of row r's scales, from its super-block at byte0 (4-aligned:
// 144 / 176 / 112-byte blocks in rows of whole words).
void stage_scales(const uint r, const uint part, const uint byte0) {
  const uint word = byte0 >> 2u;
  const uint dm = w[word], sc0 = w[word + 1u], sc1 = w[word + 2u], sc2 = w[word + 3u];
  [[unroll]] for (uint j = 0u; j < 4u; ++j) {
    const uint g = 4u * part + j;
    sh_scales[g * BM + r] = sub_scale(dm, sc0, sc1, sc2, g);
  }
}
#elif defined(TYPE_Q6_K)
// 210-byte super-blocks of 256 (2-aligned): ql[128], qh[64], int8 scales[16], f16 d. Value
// 128h + 32k + l (k < 4, l < 32): low 4 bits from ql[64h + 32(k&1) + l] (nibble k>>1), high 2
// from qh[32h + l] >> 2k; scale of value / 16; d sc (q - 32).
#define QK 256u
#define BLOCK_BYTES 210u
layout(buffer_reference, std430, buffer_reference_align = 2) buffer BlockRef {
  uint16_t ql[64];
  uint16_t qh[32];
  uint16_t sc[8];
  float16_t d;
};
// Value c's 6-bit quant, 0..63.
uint quant_of(const in BlockRef b, const uint c) {
  const uint h = c >> 7u, k = (c >> 5u) & 3u, l = c & 31u;
  const uint lo = (BYTE16(b.ql, 64u * h + 32u * (k & 1u) + l) >> (4u * (k >> 1u))) & 15u;
  const uint hi = (BYTE16(b.qh, 32u * h + l) >> (2u * k)) & 3u;
  return lo | (hi << 4u);
}
float16_t decode_w(const in BlockRef b, const in uint block[2], const in uint in_block[2]) {
  const uint c = in_block[1];
  const int sc = int(BYTE16(b.sc, c >> 4u) << 24u) >> 24;
  return float16_t(float(b.d) * float(sc) * (float(quant_of(b, c)) - 32.0));
}
#define DECODE_W decode_w
// SCALES >= 2: d sc of each 16-value sub-block of the super-block in flight, 16 x BM rows, staged
// by fill_scales (the f32 product decode_w forms; exact in f32 for d's 11 bits x sc's 8, and so
// the same bits either way, denormal d aside where a driver flushes one conversion only).
#define HAS_SHARED_SCALES 1
#define SCALES_MIN 2u  // not yet run on a GPU: staged only on request (FISH_VK_COOPMAT2_SCALES=2)
shared float sh_scales[16u * BM * (SCALES >> 1u) + 1u];  // one element below level 2
float16_t decode_w_sh(const in BlockRef b, const in uint block[2], const in uint in_block[2]) {
  const uint c = in_block[1];
  const float s = sh_scales[(c >> 4u) * BM + block[0] % BM];  // tiles start at multiples of BM
  return float16_t(s * (float(quant_of(b, c)) - 32.0));
}
// Byte o of the weights (w as words).
uint w_byte(const uint o) { return (w[o >> 2u] >> (8u * (o & 3u))) & 0xFFu; }
// Half `part` (sub-blocks 8 part ..) of row r's d sc, from its super-block at byte0 (2-aligned:
// 210-byte blocks): int8 scales at bytes 192.., f16 d at 208 (a 16-bit word never straddles two
// 32-bit ones at an even offset).
void stage_scales(const uint r, const uint part, const uint byte0) {
  const uint od = byte0 + 208u;
  const float d = unpackHalf2x16(w[od >> 2u] >> (8u * (od & 3u))).x;
  [[unroll]] for (uint j = 0u; j < 8u; ++j) {
    const uint g = 8u * part + j;
    const int sc = int(w_byte(byte0 + 192u + g) << 24u) >> 24;
    sh_scales[g * BM + r] = d * float(sc);
  }
}
#else
#error "matmul_cm2.comp.glsl: define one TYPE_<type> (shaders/CMakeLists.txt FISH_VK_CM2_TYPES)"
#endif

// One K step: A = weight rows [row0, row0 + BM) x [k0, k0 + BK) through la, B = tokens
// [tok0, tok0 + BN) of the same K range through lb, acc += A B. A macro, not a function: the
// layout types differ by clamp mode, and the loads take the buffers themselves.
#if defined(DIRECT_F16)
#define LOAD_A(mat, la, k0, dec) \
  coopMatLoadTensorNV(mat, wh, 0, sliceTensorLayoutNV(la, row0, BM, k0, BK))
#else
#define LOAD_A(mat, la, k0, dec) \
  coopMatLoadTensorNV(mat, w, 0, sliceTensorLayoutNV(la, row0, BM, k0, BK), dec)
#endif
#define K_STEP_INTO(sum, la, lb, k0, dec)                                                   \
  {                                                                                         \
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> a;                         \
    coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> bm;                        \
    LOAD_A(a, la, k0, dec);                                                                 \
    coopMatLoadTensorNV(bm, xh, 0, sliceTensorLayoutNV(lb, tok0, BN, k0, BK), transposed); \
    sum = coopMatMulAdd(a, bm, sum);                                                        \
  }
#define K_STEP(la, lb, k0) K_STEP_INTO(acc, la, lb, k0, DECODE_W)
#define K_STEP16(la, lb, k0) K_STEP_INTO(acc16, la, lb, k0, DECODE_W)

#if defined(HAS_SHARED_SCALES)
// The scales of super-block k0 / QK of the tile's BM rows into sh_scales, between barriers (the
// previous iteration's decodes have read theirs; this iteration's wait for these). Interior
// tiles only: every row exists.
void fill_scales(const uint row0, const uint k0) {
  barrier();
  // Two invocations a row, each half of the row's sub-blocks (stage_scales, per type).
  for (uint i = gl_LocalInvocationIndex; i < 2u * BM; i += gl_WorkGroupSize.x) {
    const uint r = i % BM, part = i / BM;
    stage_scales(r, part, (row0 + r) * pc.row_bytes + (k0 / QK) * BLOCK_BYTES);
  }
  barrier();
}
#define K_STEP_SH(k0) K_STEP_INTO(acc, la, lb, k0, decode_w_sh)
#define K_STEP16_SH(k0) K_STEP_INTO(acc16, la, lb, k0, decode_w_sh)
// An interior tile's unrolled iterations with SCALES: each super-block's scales staged, then its
// KU steps (`step`), then `after` (ACC 1's fold); k0 ends where the plain iterations would.
#define SCALED_ITERATIONS(step, after)                              \
  if (SCALES >= SCALES_MIN && KU * BK == QK) { /* a super-block */  \
    for (; k0 + KU * BK <= pc.n_in; k0 += KU * BK) {                \
      fill_scales(row0, k0);                                        \
      [[unroll]] for (uint u = 0u; u < KU; ++u) step(k0 + u * BK) \
      after                                                         \
    }                                                               \
  }
#else
#define SCALED_ITERATIONS(step, after)
#endif
// ACC 1: the f16 sums so far into the f32 accumulator, then from zero again.
#define FOLD_F16()                                                                         \
  {                                                                                        \
    acc = acc + coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc16); \
    acc16 = coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);   \
  }

// coopMatPerElementNV callback of the element-wise store: element (r, t) of the tile to y.
float store_element(const in uint r, const in uint t, const in float v) {
  if (g_row0 + r < pc.n_out && g_tok0 + t < pc.n_tok)
    y[pc.y_offset + (g_tok0 + t) * pc.y_stride + g_row0 + r] = v;
  return v;
}

void main() {
  const uint row0 = gl_WorkGroupID.x * BM, tok0 = gl_WorkGroupID.y * BN;
  g_row0 = row0;
  g_tok0 = tok0;
  // Row strides of f16 values are multiples of 8 (16 bytes: half_push asserts it for the
  // activations, FISH_K_ALIGN pads f16 weight rows to 32 values). The & ~7 says so to the
  // compiler, as llama.cpp's ALIGNED pipelines do, so the driver may load 16 bytes at a time
  // rather than element by element. Block strides of the other types need no such hint.
  const uint xs = pc.x_stride & ~7u;
#if defined(DIRECT_F16)
  const uint ws = (pc.row_bytes / BLOCK_BYTES) & ~7u;
#else
  const uint ws = pc.row_bytes / BLOCK_BYTES;
#endif
  // Weights: n_out x n_in values in blocks of 1 x QK, rows row_bytes / BLOCK_BYTES blocks apart
  // (rows are whole blocks: engine/vulkan/device_weight.h).
  tensorLayoutNV<2> la = createTensorLayoutNV(2);
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> la_edge =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  la = setTensorLayoutBlockSizeNV(la, 1, QK);
  la_edge = setTensorLayoutBlockSizeNV(la_edge, 1, QK);
  la = setTensorLayoutDimensionNV(la, pc.n_out, pc.n_in);
  la_edge = setTensorLayoutDimensionNV(la_edge, pc.n_out, pc.n_in);
  la = setTensorLayoutStrideNV(la, ws, 1);
  la_edge = setTensorLayoutStrideNV(la_edge, ws, 1);
  // Activations: n_tok x n_in f16, rows x_stride values apart (a multiple of 8: 16 bytes).
  tensorLayoutNV<2> lb = createTensorLayoutNV(2);
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lb_edge =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  lb = setTensorLayoutDimensionNV(lb, pc.n_tok, pc.n_in);
  lb_edge = setTensorLayoutDimensionNV(lb_edge, pc.n_tok, pc.n_in);
  lb = setTensorLayoutStrideNV(lb, xs, 1);
  lb_edge = setTensorLayoutStrideNV(lb_edge, xs, 1);
  // B's element (k, t) is x[t][k]: the layout's dimensions swapped.
  tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

  coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
      coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
  const bool interior = row0 + BM <= pc.n_out && tok0 + BN <= pc.n_tok && pc.n_in % BK == 0u;
  if (ACC == 0u) {
    if (interior) {
      uint k0 = 0u;
      SCALED_ITERATIONS(K_STEP_SH, )
      for (; k0 + KU * BK <= pc.n_in; k0 += KU * BK)
        [[unroll]] for (uint u = 0u; u < KU; ++u) K_STEP(la, lb, k0 + u * BK)
      for (; k0 < pc.n_in; k0 += BK) K_STEP(la, lb, k0)
    } else {
      for (uint k0 = 0u; k0 < pc.n_in; k0 += BK) K_STEP(la_edge, lb_edge, k0)
    }
  } else {  // f16 sums: folded into acc every KU steps (ACC 1) or once at the end (ACC 2)
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc16 =
        coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
    uint k0 = 0u;
    if (interior) {
      SCALED_ITERATIONS(K_STEP16_SH, if (ACC == 1u) FOLD_F16())
      for (; k0 + KU * BK <= pc.n_in; k0 += KU * BK) {
        [[unroll]] for (uint u = 0u; u < KU; ++u) K_STEP16(la, lb, k0 + u * BK)
        if (ACC == 1u) {
          FOLD_F16()
        }
      }
      for (; k0 < pc.n_in; k0 += BK) K_STEP16(la, lb, k0)
    } else {
      for (uint u = 1u; k0 < pc.n_in; k0 += BK, ++u) {
        K_STEP16(la_edge, lb_edge, k0)
        if (ACC == 1u && u % KU == 0u) {
          FOLD_F16()
        }
      }
    }
    if (ACC == 2u)  // no f32 tile held through the loop, as the peer's f16acc kernels
      acc = coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc16);
    else  // the steps after the last fold (the remainder, a clamped tile's last < KU steps)
      acc = acc + coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc16);
  }

  // y[y_offset + t y_stride + r]: base y_offset & ~3 (16-byte aligned), the rest a row offset.
  const uint base = pc.y_offset & ~3u, r_off = pc.y_offset & 3u;
  if (r_off + pc.n_out <= pc.y_stride) {
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ld =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    ld = setTensorLayoutDimensionNV(ld, pc.n_tok, r_off + pc.n_out);
    ld = setTensorLayoutStrideNV(ld, pc.y_stride, 1);
    coopMatStoreTensorNV(acc, y, base, sliceTensorLayoutNV(ld, tok0, BN, r_off + row0, BM),
                         transposed);
  } else {
    coopMatPerElementNV(acc, acc, store_element);
  }
}
