#version 450
// matmul_cm_<type>: y[t][r] = sum_k W[r][k] x[t][k] on cooperative matrices (prefill, n_tok >=
// FISH_CM_MIN_TOK), the tensor-core counterpart of matmul.comp.glsl with the same bindings and
// push constants (fish_vk_layout.h). Weights are dequantised (dequant.glsl) into a shared f16
// tile, activations converted to f16 into another, the products accumulate in f32
// coopmat<float, M x N> (VK_KHR_cooperative_matrix; the shape is the device's, e.g. 16x16x16 on
// NVIDIA, 8x8x8 on lavapipe).
//
// Specialisation constants (engine/vulkan/coopmat.h, CoopmatTile): the workgroup is
// (BM / WM) x (BN / WN) subgroups of SG lanes; a workgroup computes a BM-row x BN-token tile,
// each subgroup a WM x WN block of it as (WM / CM) x (WN / CN) accumulators. K advances by BK
// (a multiple of 32 and of CK): per step the workgroup fills ws[BM][BK] (A, row-major) and
// xs[BN][BK] (B = x^T, column-major) as f16vec4 from registers (global -> registers ->
// shared), then each subgroup runs BK / CK multiply-adds per accumulator. K tails
// (n_in % BK != 0) are zero-filled. Edge rows/tokens are clamped on load; results go through a
// per-subgroup f32 staging tile in shared memory and are stored with bounds checks (any n_out,
// n_tok, y_stride, y_offset).
//
// Two pipelines of the K loop:
// - DBUF = 0 (tiles l, m, s, lp, mp): one shared buffer, two barriers per step. PREFETCH = 1
//   issues the next step's loads (with their dequantisation) right after the first barrier,
//   before this step's multiply-adds; 0 after the second barrier.
// - DBUF = 1 (tiles b, h, w, c; 2: bn, the same without the touch, for A/B runs): two shared
//   buffers, one barrier per step. Step k first issues
//   plain 32-bit "touch" loads of every 32-byte sector of step k+1's weight blocks and
//   activations (to the L1 cache; their values are folded into a sink that is never stored, so
//   the loads stay), then runs step k's multiply-adds on buffer k&1, then dequantises step k+1
//   (now L1 hits instead of a stall on L2 / memory before the multiply-adds) into buffer
//   (k+1)&1, then the barrier. The touch is type-agnostic: it needs only the block geometry
//   (CM_BLOCK_VALUES / CM_BLOCK_BYTES below), not each type's unpacking. Buffer (k+1)&1 was last
//   read in step k-1, before that step's barrier, so one barrier per step is enough.
// All loops have compile-time trip counts after specialisation; [[unroll]] asks the driver to
// unroll them so that the accumulators stay in registers.
// CPU reference: dequantize_row_<type>, then a double dot (tests/vulkan/vulkan_coopmat_test.cpp).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

#include "fish_vk_layout.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 32;
layout(constant_id = 4) const uint CM = 16;
layout(constant_id = 5) const uint CN = 16;
layout(constant_id = 6) const uint CK = 16;
layout(constant_id = 7) const uint WM = 32;
layout(constant_id = 8) const uint WN = 32;
layout(constant_id = 9) const uint WG = 128;  // = local_size_x (constant 0), for loop bounds
layout(constant_id = 10) const uint PREFETCH = 0;  // 1: next K step's loads before this one's MMAs
layout(constant_id = 11) const uint DBUF = 0;  // 1: double-buffered K loop with the touch; 2: without;
                                               // 3: local accumulators (main_local); 4: named
                                               // accumulators (main_named)
layout(constant_id = 12) const uint VEC = 0;  // 1 (DBUF 3): 16-byte weight loads (load16_step)

layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf { uint w[]; };
// The same weights as 16-byte words (load16_step; rows whose byte offsets are multiples of 16).
layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf4 { uvec4 w4[]; };
layout(std430, binding = FISH_BINDING_X) readonly buffer XBuf { vec4 x[]; };
layout(std430, binding = FISH_BINDING_Y) writeonly buffer YBuf { float y[]; };

#include "dequant.glsl"

// Block geometry of the weight rows (quant/<type>.h; f32 / f16 rows are padded to 32 values):
// what the DBUF touch walks.
#if defined(TYPE_F32)
#define CM_BLOCK_VALUES 32u
#define CM_BLOCK_BYTES 128u
#elif defined(TYPE_F16)
#define CM_BLOCK_VALUES 32u
#define CM_BLOCK_BYTES 64u
#elif defined(TYPE_Q4_0)
#define CM_BLOCK_VALUES 32u
#define CM_BLOCK_BYTES 18u
#elif defined(TYPE_Q4_1)
#define CM_BLOCK_VALUES 32u
#define CM_BLOCK_BYTES 20u
#elif defined(TYPE_Q5_0)
#define CM_BLOCK_VALUES 32u
#define CM_BLOCK_BYTES 22u
#elif defined(TYPE_Q5_1)
#define CM_BLOCK_VALUES 32u
#define CM_BLOCK_BYTES 24u
#elif defined(TYPE_Q8_0)
#define CM_BLOCK_VALUES 32u
#define CM_BLOCK_BYTES 34u
#elif defined(TYPE_Q4_K)
#define CM_BLOCK_VALUES 256u
#define CM_BLOCK_BYTES 144u
#elif defined(TYPE_Q5_K)
#define CM_BLOCK_VALUES 256u
#define CM_BLOCK_BYTES 176u
#elif defined(TYPE_Q6_K)
#define CM_BLOCK_VALUES 256u
#define CM_BLOCK_BYTES 210u
#elif defined(TYPE_FQ3)
#define CM_BLOCK_VALUES 256u
#define CM_BLOCK_BYTES 112u
#endif

// Types with a 16-byte weight loader (load16_step, VEC = 1).
#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_F16) || defined(TYPE_Q6_K) || \
    defined(TYPE_Q8_0) || defined(TYPE_Q4_0) || defined(TYPE_FQ3)
#define CM_HAS_LOAD16 1
const bool USE16 = VEC != 0u;
#else
const bool USE16 = false;
#endif

const uint LDS = BK + 8u;         // shared row stride (f16): pads banks, keeps 16-byte rows
const uint LDS4 = LDS / 4u;       // ... in f16vec4
const uint TM = WM / CM;          // accumulators per subgroup, rows
const uint TN = WN / CN;          // ... tokens
const uint SG_COLS = BN / WN;     // subgroups along tokens
const uint N_SG = (BM / WM) * SG_COLS;
const uint W_UNITS = BM * (BK / 8u);            // 8-value W units per K step
const uint X_QUADS = BN * (BK / 4u);            // x vec4 per K step
const uint WPT = (W_UNITS + WG - 1u) / WG;      // ... per thread
const uint XPT = (X_QUADS + WG - 1u) / WG;
const uint NBUF = DBUF != 0u ? 2u : 1u;         // shared buffers of each operand
const uint A_BUF = BM * LDS4;                   // f16vec4 of one W buffer
const uint B_BUF = BN * LDS4;                   // ... of one x buffer
// DBUF touch: 32-byte sectors of one row's blocks of a K step (+1: a block range that does not
// start on a sector boundary), and of one token's BK activations.
const uint STEP_BLOCKS = (BK + CM_BLOCK_VALUES - 1u) / CM_BLOCK_VALUES;
const uint W_SECT = (STEP_BLOCKS * CM_BLOCK_BYTES + 31u) / 32u + 1u;
const uint X_SECT = BK / 8u;  // 8 f32 = 32 bytes = 2 vec4
const uint TWPT = (BM * W_SECT + WG - 1u) / WG;
const uint TXPT = (BN * X_SECT + WG - 1u) / WG;

shared f16vec4 ws[NBUF * A_BUF];
shared f16vec4 xs[NBUF * B_BUF];
shared float cs[N_SG * CM * CN];  // each subgroup's staging tile for the store

// A K step's operands staged in registers between the global loads and the shared stores.
f16vec4 wr[2u * WPT];
f16vec4 xr[XPT];

uint g_row0, g_tok0, g_units, g_x_row;

// Branch-free: every load of the step is issued unconditionally (indices clamped, values past
// the K end selected to zero), so the unrolled loop can put all of them in flight before the
// first is used. (A load under an `if` whose result is used inside it waits for that load before
// the next iteration's: per step one memory round trip per unit. The likely reason every tile
// of the earlier conditional form ran at 25-31 TFLOP/s on the H200, double-buffered or not:
// results/runs/h200-gpupre-mid/.) Indices past the tile (i >=
// W_UNITS / X_QUADS where the thread count does not divide them) load a duplicate that
// store_step does not store.
void load_step(uint k0) {
  const uint tid = gl_LocalInvocationID.x;
  // USE16: the weights come from load16_step instead.
  if (!USE16) [[unroll]] for (uint j = 0u; j < WPT; ++j) {
    const uint i = min(tid + j * WG, W_UNITS - 1u);
    const uint lr = i / (BK / 8u), u = k0 / 8u + i % (BK / 8u);
    vec4 a, b;
    dequant8(min(g_row0 + lr, pc.n_out - 1u) * pc.row_bytes, min(u, g_units - 1u), a, b);
    const bvec4 in_k = bvec4(u < g_units);
    wr[2u * j] = f16vec4(mix(vec4(0.0), a, in_k));
    wr[2u * j + 1u] = f16vec4(mix(vec4(0.0), b, in_k));
  }
  [[unroll]] for (uint j = 0u; j < XPT; ++j) {
    const uint i = min(tid + j * WG, X_QUADS - 1u);
    const uint lt = i / (BK / 4u), q = k0 / 4u + i % (BK / 4u);
    const vec4 v = x[min(g_tok0 + lt, pc.n_tok - 1u) * g_x_row + min(q, pc.n_in / 4u - 1u)];
    xr[j] = f16vec4(mix(vec4(0.0), v, bvec4(q < pc.n_in / 4u)));
  }
}

// Writes the registers of load_step into shared buffer `buf` (0 .. NBUF-1).
void store_step(uint buf) {
  const uint tid = gl_LocalInvocationID.x;
  if (!USE16) [[unroll]] for (uint j = 0u; j < WPT; ++j) {
    const uint i = tid + j * WG;
    if (i < W_UNITS) {
      const uint o = buf * A_BUF + (i / (BK / 8u)) * LDS4 + 2u * (i % (BK / 8u));
      ws[o] = wr[2u * j];
      ws[o + 1u] = wr[2u * j + 1u];
    }
  }
  [[unroll]] for (uint j = 0u; j < XPT; ++j) {
    const uint i = tid + j * WG;
    if (i < X_QUADS) xs[buf * B_BUF + (i / (BK / 4u)) * LDS4 + i % (BK / 4u)] = xr[j];
  }
}

// VEC = 1: the weights of a K step as 16-value units, two lanes per row, instead of load_step's
// 8-value units: q4_k, q5_k and f16 (rows 16-byte aligned) from 16-byte loads (q4_k: one for
// the block's d, dmin and scales, one for the 16 quants, against 6 32-bit loads per 8 values;
// q5_k one more for the fifth bits; fq3 the header and 2 words); q6_k,
// q8_0, q4_0 (2-aligned blocks) from 5 consecutive words per 16 bytes (ld128; q6_k 12 loads per
// 16 values against 22). The other types run load_step. K tails are zero-filled.
const uint W16_UNITS = BM * (BK / 16u);           // 16-value W units per K step
const uint W16PT = (W16_UNITS + WG - 1u) / WG;    // ... per thread
f16vec4 wv[4u * W16PT];

#if defined(CM_HAS_LOAD16)
// 16 bytes at a 2-aligned byte offset: 5 words, funnel-shifted where the offset is not 4-aligned
// (the fifth exists: buffers are padded by 16 bytes, dequant.glsl).
uvec4 ld128(uint byte_off) {
  const uint i = byte_off >> 2u, sh = (byte_off & 3u) * 8u;
  const uvec4 lo = uvec4(w[i], w[i + 1u], w[i + 2u], w[i + 3u]);
  const uint w4_ = w[i + 4u];
  const uvec4 hi = uvec4(lo.yzw, w4_);
  return sh == 0u ? lo : (lo >> sh) | (hi << (32u - sh));
}

// 16 byte codes (4 per word) as scale * code / 255 + offset in 4 f16vec4.
void scale16(uvec4 q, float scale, float offset, out f16vec4 v0, out f16vec4 v1, out f16vec4 v2,
             out f16vec4 v3) {
  v0 = f16vec4(scale * unpackUnorm4x8(q.x) + offset);
  v1 = f16vec4(scale * unpackUnorm4x8(q.y) + offset);
  v2 = f16vec4(scale * unpackUnorm4x8(q.z) + offset);
  v3 = f16vec4(scale * unpackUnorm4x8(q.w) + offset);
}

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_FQ3)
// Scale and offset of sub-block s (0..7) from a K-quant block's first 16 bytes h (f16 d, f16
// dmin, 12 bytes of 6-bit scales and mins, ggml get_scale_min_k4): d sc / 255 per code, -dmin m.
void kscale(uvec4 h, uint s, out float scale, out float offset) {
  const vec2 dm = unpackHalf2x16(h.x);
  const uint ssh = 8u * (s & 3u);
  const uint lo_sc = h.y >> ssh, lo_m = h.z >> ssh, top = h.w >> ssh;
  const uint sc = s < 4u ? lo_sc & 63u : (top & 15u) | ((lo_sc >> 2u) & 48u);
  const uint m = s < 4u ? lo_m & 63u : ((top >> 4u) & 15u) | ((lo_m >> 2u) & 48u);
  scale = 255.0 * dm.x * float(sc);
  offset = -dm.y * float(m);
}
#endif

// Values 16 u .. 16 u + 15 of the row at byte row_byte (a multiple of 16) as 4 f16vec4 (four
// out parameters: an array parameter sized by specialisation constants read as zeros on Mesa's
// lavapipe).
void dequant16(uint row_byte, uint u, out f16vec4 v0, out f16vec4 v1, out f16vec4 v2,
               out f16vec4 v3) {
#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
  // Q4_K 144-byte blocks (9 words of 16 bytes): word 0 = d, dmin, scales[12]; words 1..8 =
  // qs[128]. Q5_K 176 bytes (11 words): word 0 as Q4_K, words 1..2 = qh[32], 3..10 = qs[128].
  // Values 64c + l (l < 32): low nibbles of qs[32c + l], 64c + 32 + l: high nibbles; Q5_K's
  // fifth bit of sub-block s is bit s of qh[l].
#if defined(TYPE_Q4_K)
  const uint blk = (row_byte >> 4u) + (u >> 4u) * 9u, qs0 = 1u;
#else
  const uint blk = (row_byte >> 4u) + (u >> 4u) * 11u, qs0 = 3u;
#endif
  const uint j = u & 15u;            // 16-value group within the block
  const uint c = j >> 2u, hi = (j >> 1u) & 1u;
  const uint s = 2u * c + hi;        // sub-block of 32
  const uvec4 h = w4[blk];
  uvec4 q = w4[blk + qs0 + 2u * c + (j & 1u)];
  float scale, offset;
  kscale(h, s, scale, offset);
  q = (q >> (4u * hi)) & 0x0F0F0F0Fu;
#if defined(TYPE_Q5_K)
  q |= ((w4[blk + 1u + (j & 1u)] >> s) & 0x01010101u) << 4u;
#endif
  scale16(q, scale, offset, v0, v1, v2, v3);
#elif defined(TYPE_Q6_K)
  // 210-byte blocks (2-aligned): ql[128], qh[64], int8 scales[16], f16 d. Value 128h + 32k + l
  // (k < 4, l < 32): low 4 bits from ql[64h + 32(k&1) + l] (nibble k>>1), high 2 from
  // qh[32h + l] >> 2k; scale of value / 16. Unit j of the block: h = j>>3, k = (j>>1)&3, l from
  // 16 (j&1): 16 consecutive bytes of ql and of qh (5 words each, funnel-shifted).
  const uint blk = row_byte + (u >> 4u) * 210u;
  const uint j = u & 15u;
  const uint h = j >> 3u, k = (j >> 1u) & 3u, l0 = (j & 1u) * 16u;
  const uvec4 ql = ld128(blk + 64u * h + 32u * (k & 1u) + l0);
  const uvec4 qh = ld128(blk + 128u + 32u * h + l0);
  const float ds = ld_half(blk + 208u) * float(int(ld32(blk + 192u + j) << 24u) >> 24);
  const float scale = 255.0 * ds, offset = -32.0 * ds;
  const uint shl = (k >> 1u) * 4u, shh = 2u * k;
  const uvec4 q = ((ql >> shl) & 0x0F0F0F0Fu) | (((qh >> shh) & 0x03030303u) << 4u);
  scale16(q, scale, offset, v0, v1, v2, v3);
#elif defined(TYPE_Q8_0)
  // 34-byte blocks of 32: f16 d, int8 qs[32] (biased to unsigned as dequant.glsl's).
  const uint blk = row_byte + (u >> 1u) * 34u;
  const uvec4 q = ld128(blk + 2u + 16u * (u & 1u)) ^ 0x80808080u;
  const float d = ld_half(blk);
  const float scale = 255.0 * d, offset = -128.0 * d;
  scale16(q, scale, offset, v0, v1, v2, v3);
#elif defined(TYPE_Q4_0)
  // 18-byte blocks of 32: f16 d, qs[16]; values 0..15 low nibbles, 16..31 high: d (q - 8).
  const uint blk = row_byte + (u >> 1u) * 18u;
  const uvec4 q = (ld128(blk + 2u) >> (4u * (u & 1u))) & 0x0F0F0F0Fu;
  const float d = ld_half(blk);
  const float scale = 255.0 * d, offset = -8.0 * d;
  scale16(q, scale, offset, v0, v1, v2, v3);
#elif defined(TYPE_FQ3)
  // 112-byte blocks (7 words of 16 bytes, dequant.glsl): word 0 = d, dmin, scales[12] (Q4_K
  // packing); group g of 32 values in the 32-bit words A, B, C at 4 + 3g: values 4s..4s+3 are
  // the bytes of ((s < 4 ? A : B) >> 2(s&3)) & 0x03030303 | ((C >> s) & 0x01010101) << 2. Unit
  // (g, hf): quads s = 4 hf .. 4 hf + 3, all from A (hf 0) or B (hf 1).
  const uint blk = (row_byte >> 4u) + (u >> 4u) * 7u;
  const uint j = u & 15u, g = j >> 1u, hf = j & 1u;
  const uvec4 h = w4[blk];
  const uint gw = 4u * blk + 4u + 3u * g;
  const uint ab = w[gw + hf], c = w[gw + 2u] >> (4u * hf);
  float scale, offset;
  kscale(h, g, scale, offset);
  const uvec4 q = ((uvec4(ab) >> uvec4(0u, 2u, 4u, 6u)) & 0x03030303u) |
                  (((uvec4(c) >> uvec4(0u, 1u, 2u, 3u)) & 0x01010101u) << 2u);
  scale16(q, scale, offset, v0, v1, v2, v3);
#else  // TYPE_F16: 32 bytes
  const uint i = (row_byte >> 4u) + 2u * u;
  const uvec4 a = w4[i], b = w4[i + 1u];
  v0 = f16vec4(unpackFloat2x16(a.x), unpackFloat2x16(a.y));
  v1 = f16vec4(unpackFloat2x16(a.z), unpackFloat2x16(a.w));
  v2 = f16vec4(unpackFloat2x16(b.x), unpackFloat2x16(b.y));
  v3 = f16vec4(unpackFloat2x16(b.z), unpackFloat2x16(b.w));
#endif
}
#endif

// load_step's weight half for VEC = 1 (load_step's activation half runs as before).
void load16_step(uint k0) {
#if defined(CM_HAS_LOAD16)
  const uint tid = gl_LocalInvocationID.x;
  const uint units = pc.n_in / 16u;
  [[unroll]] for (uint j = 0u; j < W16PT; ++j) {
    const uint i = min(tid + j * WG, W16_UNITS - 1u);
    const uint lr = i / (BK / 16u), u = k0 / 16u + i % (BK / 16u);
    f16vec4 v0, v1, v2, v3;
    dequant16(min(g_row0 + lr, pc.n_out - 1u) * pc.row_bytes, min(u, units - 1u), v0, v1, v2, v3);
    const f16vec4 zero = f16vec4(0.0);
    const bool in_k = u < units;
    wv[4u * j] = in_k ? v0 : zero;
    wv[4u * j + 1u] = in_k ? v1 : zero;
    wv[4u * j + 2u] = in_k ? v2 : zero;
    wv[4u * j + 3u] = in_k ? v3 : zero;
  }
#endif
}

void store16_step(uint buf) {
  const uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint j = 0u; j < W16PT; ++j) {
    const uint i = tid + j * WG;
    if (i < W16_UNITS) {
      const uint o = buf * A_BUF + (i / (BK / 16u)) * LDS4 + 4u * (i % (BK / 16u));
      [[unroll]] for (uint k = 0u; k < 4u; ++k) ws[o + k] = wv[4u * j + k];
    }
  }
}

// DBUF: one 32-bit load per 32-byte sector of step k0's weight blocks (every row of the tile) and
// activations (every token), into tw / tx; fold() consumes them after the multiply-adds.
uint tw[TWPT];
float tx[TXPT];
uint g_sink = 0u;

void touch_step(uint k0) {
  const uint tid = gl_LocalInvocationID.x;
  const uint blk = k0 / CM_BLOCK_VALUES;
  // Every step touches its whole blocks, also those it shares with the step before (k-quants: 8
  // steps a 256-value block): those loads hit L1 where the lines stayed and bring them back
  // where the activations' lines pushed them out.
  const uint n_blk = min(STEP_BLOCKS, (pc.n_in + CM_BLOCK_VALUES - 1u) / CM_BLOCK_VALUES - blk);
  [[unroll]] for (uint j = 0u; j < TWPT; ++j) {  // branch-free like load_step
    const uint i = min(tid + j * WG, BM * W_SECT - 1u);
    const uint lr = i / W_SECT, sct = i % W_SECT;
    const uint b0 = min(g_row0 + lr, pc.n_out - 1u) * pc.row_bytes + blk * CM_BLOCK_BYTES;
    const uint b1 = b0 + n_blk * CM_BLOCK_BYTES;  // one past the last byte
    tw[j] = w[min((b0 & ~31u) + 32u * sct, b1 - 1u) >> 2u];
  }
  [[unroll]] for (uint j = 0u; j < TXPT; ++j) {
    const uint i = min(tid + j * WG, BN * X_SECT - 1u);
    const uint lt = i / X_SECT, q = min(k0 / 4u + 2u * (i % X_SECT), pc.n_in / 4u - 1u);
    tx[j] = x[min(g_tok0 + lt, pc.n_tok - 1u) * g_x_row + q].x;
  }
}

void fold() {
  [[unroll]] for (uint j = 0u; j < TWPT; ++j) g_sink ^= tw[j];
  [[unroll]] for (uint j = 0u; j < TXPT; ++j) g_sink += floatBitsToUint(tx[j]);
}

coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc[TM * TN];

// Step's multiply-adds on shared buffer `buf`: this subgroup's TM x TN accumulators.
void mma_step(uint buf, uint sg_row, uint sg_tok) {
  // Offsets and strides in f16vec4 (the arrays' element): 4 f16 each.
  [[unroll]] for (uint kk = 0u; kk < BK; kk += CK) {
    coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> bm[TN];
    [[unroll]] for (uint j = 0u; j < TN; ++j)
      coopMatLoad(bm[j], xs, buf * B_BUF + (sg_tok + j * CN) * LDS4 + kk / 4u, LDS4,
                  gl_CooperativeMatrixLayoutColumnMajor);
    [[unroll]] for (uint i = 0u; i < TM; ++i) {
      coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> am;
      coopMatLoad(am, ws, buf * A_BUF + (sg_row + i * CM) * LDS4 + kk / 4u, LDS4,
                  gl_CooperativeMatrixLayoutRowMajor);
      [[unroll]] for (uint j = 0u; j < TN; ++j)
        acc[i * TN + j] = coopMatMulAdd(am, bm[j], acc[i * TN + j]);
    }
  }
}

// Stores accumulator fragment (i, j) of this subgroup, rows sg_row + i CM.., tokens sg_tok + j
// CN..: staged column-major in cs (element (r, t) at t CM + r) so consecutive lanes write
// consecutive rows of y. One fragment per call (a whole accumulator array as a parameter is what
// main_local avoids).
void store_fragment(coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> a, uint i,
                    uint j, uint sg, uint sg_row, uint sg_tok) {
  const uint lane = gl_SubgroupInvocationID, n_lanes = gl_SubgroupSize;
  const uint stage = sg * CM * CN;
  coopMatStore(a, cs, stage, CM, gl_CooperativeMatrixLayoutColumnMajor);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  for (uint e = lane; e < CM * CN; e += n_lanes) {
    const uint r = g_row0 + sg_row + i * CM + e % CM;
    const uint t = g_tok0 + sg_tok + j * CN + e / CM;
    if (r < pc.n_out && t < pc.n_tok) y[pc.y_offset + t * pc.y_stride + r] = cs[stage + e];
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}

// The register-prefetch K loop's staging, shared by main_local and main_named: step 0 into
// buffer 0; then each step issues the next step's global loads (and dequantisation) before its
// multiply-adds and stores them into the other buffer after.
void stage_first() {
  load_step(0u);
  if (USE16) load16_step(0u);
  store_step(0u);
  if (USE16) store16_step(0u);
  barrier();
}

void load_next(uint k0) {
  load_step(k0);
  if (USE16) load16_step(k0);
}

void store_next(uint buf) {
  store_step(buf);
  if (USE16) store16_step(buf);
}

// DBUF = 3 (tiles r, u, v; x, y, z with VEC = 1): the accumulators are a local array of this
// function, not the module-scope acc[] above, which a driver may keep in local memory rather
// than registers (a round trip per multiply-add). A hypothesis, not a measured cause: on the
// H200 the kernels with acc[] local to main (89b4a08) and at module scope (e231dde) both ran
// 25-44 TFLOP/s, against 72-128 for a lost earlier kernel of this design (run 5ae1ceb); these
// tiles and their BM_VulkanPrefillMatmul rows are the A/B. The K loop: two shared buffers, one
// barrier per step; step k issues step k+1's global loads (and their dequantisation) into
// registers before its multiply-adds on buffer k&1 and stores them into buffer (k+1)&1 after,
// so the memory latency runs under the multiply-adds. Buffer (k+1)&1 was last read in step k-1,
// before that step's barrier.
void main_local() {
  const uint sg = gl_SubgroupID;
  const uint sg_row = (sg / SG_COLS) * WM;
  const uint sg_tok = (sg % SG_COLS) * WN;
  coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> la[TM * TN];
  [[unroll]] for (uint i = 0u; i < TM * TN; ++i)
    la[i] = coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);
  stage_first();
  uint buf = 0u;
  for (uint k0 = 0u; k0 < pc.n_in; k0 += BK) {
    const bool more = k0 + BK < pc.n_in;
    if (more) load_next(k0 + BK);
    [[unroll]] for (uint kk = 0u; kk < BK; kk += CK) {
      coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> bm[TN];
      [[unroll]] for (uint j = 0u; j < TN; ++j)
        coopMatLoad(bm[j], xs, buf * B_BUF + (sg_tok + j * CN) * LDS4 + kk / 4u, LDS4,
                    gl_CooperativeMatrixLayoutColumnMajor);
      [[unroll]] for (uint i = 0u; i < TM; ++i) {
        coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> am;
        coopMatLoad(am, ws, buf * A_BUF + (sg_row + i * CM) * LDS4 + kk / 4u, LDS4,
                    gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint j = 0u; j < TN; ++j)
          la[i * TN + j] = coopMatMulAdd(am, bm[j], la[i * TN + j]);
      }
    }
    if (more) store_next(buf ^ 1u);
    barrier();
    buf ^= 1u;
  }
  [[unroll]] for (uint i = 0u; i < TM; ++i)
    [[unroll]] for (uint j = 0u; j < TN; ++j) store_fragment(la[i * TN + j], i, j, sg, sg_row, sg_tok);
}

// DBUF = 4 (tiles d, e, f, k): main_local's K loop with each accumulator its own named variable
// (c<i><j>, up to 4 x 4) instead of an array element, and each B fragment likewise; the unused
// ones fold away once TM / TN are specialised. The hypothesis under test (docs/gpu-prefill.md):
// every tile with more than two accumulators per subgroup runs at 25-29 TFLOP/s on NVIDIA
// whatever the type because the driver keeps an array of cooperative matrices out of registers;
// coopmat_peak.comp.glsl's MODE 1 measures the same question without memory traffic.
#define CM_ACC coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>
#define CM_LOAD_B(J, B) \
  if (J < TN) coopMatLoad(B, xs, buf * B_BUF + (sg_tok + J * CN) * LDS4 + kk / 4u, LDS4, \
                          gl_CooperativeMatrixLayoutColumnMajor)
// Row I of the subgroup's block: one A fragment, then its multiply-adds into C0..C3.
#define CM_ROW(I, C0, C1, C2, C3)                                                             \
  if (I < TM) {                                                                               \
    coopMatLoad(am, ws, buf * A_BUF + (sg_row + I * CM) * LDS4 + kk / 4u, LDS4,              \
                gl_CooperativeMatrixLayoutRowMajor);                                          \
    C0 = coopMatMulAdd(am, b0, C0);                                                           \
    if (TN > 1u) C1 = coopMatMulAdd(am, b1, C1);                                              \
    if (TN > 2u) C2 = coopMatMulAdd(am, b2, C2);                                              \
    if (TN > 3u) C3 = coopMatMulAdd(am, b3, C3);                                              \
  }
#define CM_STORE_ROW(I, C0, C1, C2, C3)                                \
  if (I < TM) {                                                        \
    store_fragment(C0, I, 0u, sg, sg_row, sg_tok);                     \
    if (TN > 1u) store_fragment(C1, I, 1u, sg, sg_row, sg_tok);        \
    if (TN > 2u) store_fragment(C2, I, 2u, sg, sg_row, sg_tok);        \
    if (TN > 3u) store_fragment(C3, I, 3u, sg, sg_row, sg_tok);        \
  }

void main_named() {
  const uint sg = gl_SubgroupID;
  const uint sg_row = (sg / SG_COLS) * WM;
  const uint sg_tok = (sg % SG_COLS) * WN;
  const CM_ACC zero = CM_ACC(0.0);
  CM_ACC c00 = zero, c01 = zero, c02 = zero, c03 = zero, c10 = zero, c11 = zero, c12 = zero,
         c13 = zero, c20 = zero, c21 = zero, c22 = zero, c23 = zero, c30 = zero, c31 = zero,
         c32 = zero, c33 = zero;
  stage_first();
  uint buf = 0u;
  for (uint k0 = 0u; k0 < pc.n_in; k0 += BK) {
    const bool more = k0 + BK < pc.n_in;
    if (more) load_next(k0 + BK);
    [[unroll]] for (uint kk = 0u; kk < BK; kk += CK) {
      coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b0, b1, b2, b3;
      CM_LOAD_B(0u, b0);
      CM_LOAD_B(1u, b1);
      CM_LOAD_B(2u, b2);
      CM_LOAD_B(3u, b3);
      coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> am;
      CM_ROW(0u, c00, c01, c02, c03)
      CM_ROW(1u, c10, c11, c12, c13)
      CM_ROW(2u, c20, c21, c22, c23)
      CM_ROW(3u, c30, c31, c32, c33)
    }
    if (more) store_next(buf ^ 1u);
    barrier();
    buf ^= 1u;
  }
  CM_STORE_ROW(0u, c00, c01, c02, c03)
  CM_STORE_ROW(1u, c10, c11, c12, c13)
  CM_STORE_ROW(2u, c20, c21, c22, c23)
  CM_STORE_ROW(3u, c30, c31, c32, c33)
}

void main() {
  g_row0 = gl_WorkGroupID.x * BM;
  g_tok0 = gl_WorkGroupID.y * BN;
  g_units = pc.n_in / 8u;          // 8-value units of a row
  g_x_row = pc.x_stride >> 2u;     // vec4 per x row
  const uint sg = gl_SubgroupID;
  const uint sg_row = (sg / SG_COLS) * WM;  // this subgroup's block within the tile
  const uint sg_tok = (sg % SG_COLS) * WN;

  [[unroll]] for (uint i = 0u; i < TM * TN; ++i)
    acc[i] = coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);

  if (DBUF == 3u) {
    main_local();  // tiles r, u, v: the accumulators local to one function (below)
    return;
  }
  if (DBUF == 4u) {
    main_named();  // tiles d, e, f, k: one named variable per accumulator
    return;
  }
  if (DBUF != 0u) {
    load_step(0u);
    store_step(0u);
    barrier();
    uint buf = 0u;
    for (uint k0 = 0u; k0 < pc.n_in; k0 += BK) {
      const bool more = k0 + BK < pc.n_in;
      if (DBUF == 1u && more) touch_step(k0 + BK);  // in flight during the multiply-adds
      mma_step(buf, sg_row, sg_tok);
      if (more) {
        if (DBUF == 1u) fold();
        load_step(k0 + BK);
        store_step(buf ^ 1u);
      }
      barrier();
      buf ^= 1u;
    }
  } else {
    load_step(0u);
    for (uint k0 = 0u; k0 < pc.n_in; k0 += BK) {
      store_step(0u);
      barrier();
      const bool more = k0 + BK < pc.n_in;
      if (PREFETCH != 0u && more) load_step(k0 + BK);  // global latency under the MMAs
      mma_step(0u, sg_row, sg_tok);
      barrier();
      if (PREFETCH == 0u && more) load_step(k0 + BK);
    }
  }

  [[unroll]] for (uint i = 0u; i < TM; ++i)
    [[unroll]] for (uint j = 0u; j < TN; ++j) store_fragment(acc[i * TN + j], i, j, sg, sg_row, sg_tok);
  // Keeps the DBUF touch loads: never true for a dispatched matmul (n_tok >= 1).
  if (DBUF == 1u && pc.n_tok == 0u && g_sink == 0x9e3779b9u) y[pc.y_offset] = 0.0;
}
