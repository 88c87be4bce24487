#version 450
// matvec_idot_<type> for q4_0, q4_1, q8_0, q4_k, q5_k, q6_k: the integer-dot decode matvec,
// y[t][r] = sum_k W[r][k] x~[t][k] for n_tok <= FISH_MATVEC_MAX_TOK, where x~ is x rounded to the
// q8_1 layout of fish_vk_layout.h (quant_q8_1.comp.glsl writes it; FISH_Q8_*): per 32-value
// block an f32 scale d8 and s8 = d8 * sum q8, int8 codes. The codes of 4 weights and 4
// activations meet in one packed 4x8-bit signed dot product (OpSDotKHR,
// VK_KHR_shader_integer_dot_product; the device must report integer_dot), so a weight costs about
// one integer op instead of the f32 kernel's four or five (matvec_fast.comp.glsl, whose chunking,
// loads and reduction this kernel keeps); scales and the block offsets are applied once per
// 8..16 weights in f32. Bindings (fish_vk_layout.h): W uint[] packed rows (row_bytes apart), X the
// q8_1 buffer of K = n_in values per token (x_stride is not read), Y float[] n_tok rows of
// y_stride from y_offset. Push constants and grid as matvec_fast: one workgroup = ROWS rows x all
// tokens (specialisation constant 0, FISH_VK_IDOT_ROWS; default FISH_MATVEC_ROWS), WG threads
// (specialisation constant 1, the workgroup size: FISH_VK_IDOT_WG or idot_workgroup's rule in
// engine/vulkan/device_weight.h, so a short row gives each thread several chunks), grid groups_x x
// ceil(n_groups / groups_x); rows past n_out are clamped to the last row and not stored. AHEAD
// (specialisation constant 2, FISH_VK_IDOT_AHEAD, default 1): a thread loads AHEAD of its chunks
// (c, c + WG, ...; those past the row's end skipped) of every row before it uses any, so
// ROWS x AHEAD weight loads are in flight per thread rather than ROWS (docs/gpu.md: bytes in
// flight per SM at the bandwidth limit).
// GROUPS (specialisation constant 3, FISH_VK_IDOT_GROUPS, default 1): the workgroup is GROUPS
// row groups of WG / GROUPS threads, each reducing its own ROWS rows (ROWS x GROUPS a workgroup),
// so several warps share a workgroup without sharing rows.
// RESNORM (matvec_idot_res_<type>, a span's wo and down with the next rmsnorm fused; binding
// FISH_BINDING_P the span's PARAMS, push constants MatvecFusedPush): the rows are added to y (the
// residual x, y_offset its first row) instead of stored; each 32-row block has an arrival counter
// (ARENA words ctr + block) and its last workgroup writes the block's share of the next norm
// (norm_block: x w unnormalised as q8_1, the block's sum of squares), so the norm costs no
// dispatch and no barrier of its own. SCALED (matvec_idot_scaled_<type>, the consumer: q/k/v,
// gate / up) finishes that norm: its input's q8_1 codes are of x w, and each workgroup sums the
// block sums of squares (ss_off) into 1 / rms per token and scales its outputs by it.
// ACTMUL (matvec_idot_swiglu_<type>, a span's gate and up, two dispatches over one input): each
// 32-row block has a counter (ARENA words ctr + block); the last of the block's workgroups of
// both dispatches (arrivals) computes silu(gate) * up for the block (act_block) with its q8_1
// copy for the down matvec, so act*mul costs no dispatch and no barrier of its own (with SCALED
// too: matvec_idot_swiglu_scaled_<type>). The epilogues need ROWS x GROUPS dividing 32, n_out a
// multiple of 32, workgroups of >= 8 x n_tok threads and all rows in one dispatch.
// PRONORM (matvec_idot_pn_<type>: q/k/v; matvec_idot_swiglu_pn_<type> with ACTMUL: gate / up;
// FISH_VK_NORM_FUSE=2; one token): the rmsnorm before the matvec runs in every workgroup's
// prologue instead of a dispatch of its own. X is ARENA (the residual row x at pc.x_off, f32),
// FISH_BINDING_P the span's PARAMS (the norm weight at pc.w_off); the FISH_PN_WG threads of the
// workgroup compute span_rmsnorm_q8's values with its thread mapping and summation order (so the
// q8_1 codes, and every output, are bitwise those of the norm dispatch + matvec_idot_<type>) into
// shared memory, and its GROUPS = FISH_PN_WG / (the rule's threads a row) row groups read them
// there. Each row group reduces its own rows as matvec_idot_<type>'s one-group workgroup does
// (pn_reduce_store). The first chunk's weights are loaded before the norm, which they do not
// depend on. With FISH_VK_PN_GRID the grid is capped and a workgroup runs several row blocks
// after its one prologue. RESADD (matvec_idot_acc_<type>: wo / down in that mode): y += W x (the residual add
// of the norm's consumers' input), no epilogue.
// Per chunk (matvec_raw.glsl): Q4_K/Q5_K 16 code bytes = 16 values of each of two sub-blocks
// 2cc, 2cc+1, which are q8_1 blocks (the sub-block minimum times s8 is added by the even chunk of
// the pair only, since s8 covers the whole block); Q6_K 4 runs of 8 values of blocks 4h+k, the
// 6-bit code q built as the int8 4 (q - 32) so no offset term is needed; Q8_0 / Q4_0 / Q4_1 one
// block (Q4_0's -8 and Q4_1's m through s8). CPU reference: the f32 reference (dequantize_row_<type>, double dot)
// on x, within the bound of the q8_1 rounding: sum_k |w_k| d8_k / 2 (+ f32 accumulation)
// (tests/vulkan/vulkan_matvec_idot_test.cpp).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_spirv_intrinsics : require
#ifdef RESNORM
#define MATVEC_ACCUMULATE
#define MATVEC_EPILOGUE
#endif
#ifdef ACTMUL
#define MATVEC_EPILOGUE
#endif
#ifdef RESADD
#define MATVEC_ACCUMULATE
#endif
#if defined(RESNORM) || defined(ACTMUL) || defined(SCALED) || defined(PRONORM)
#extension GL_KHR_shader_subgroup_clustered : require
#define FISH_MATVEC_FUSED  // MatmulPush's epilogue fields
#endif

#include "fish_vk_layout.h"

// OpSDotKHR (4450) on two 32-bit words as 4 packed int8 (PackedVectorFormat4x8Bit = 0);
// capabilities DotProductKHR (6019), DotProductInput4x8BitPackedKHR (6018). Through
// GL_EXT_spirv_intrinsics so Debian 12's glslang compiles it too.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4450) int sdot(uint a, uint b, spirv_literal int packed_format);
int dot4(uint a, uint b) {
  return sdot(a, b, 0);
}

layout(local_size_x_id = 1) in;  // WG threads: GROUPS x (32..256), a multiple of the subgroup size
layout(constant_id = 0) const uint ROWS = FISH_MATVEC_ROWS;  // rows a workgroup (1..32)
// Chunks of its rows a thread loads before it uses any (FISH_VK_IDOT_AHEAD: 1, 2, 4, 8).
layout(constant_id = 2) const uint AHEAD = 1u;
// Row groups a workgroup, each of WG / GROUPS threads and its own ROWS rows (FISH_VK_IDOT_GROUPS).
layout(constant_id = 3) const uint GROUPS = 1u;
// EXACT (FISH_VK_IDOT_EXACT): 1..FISH_MATVEC_MAX_TOK compiles the pipeline for exactly that many
// tokens (pc.n_tok must equal it): the token loops have no branch on pc.n_tok, so a chunk's
// weight decoding is the same expression for every token and the compiler can share it; 0 (the
// default) any n_tok up to FISH_MATVEC_MAX_TOK. Same arithmetic in the same order either way.
layout(constant_id = 4) const uint EXACT = 0u;
// FOLD (FISH_VK_IDOT_FOLD, q4_k / q5_k / q6_k): 1 folds each sub-block's row scale into one
// factor per chunk and row (d x scale, dmin x min), which every token of a verify shares, and
// adds each sub-block's term into the accumulator with one fma a token (chunk_acc); 0 (the
// default) chunk_dot's sum, added once. Other roundings (the products' order), not other math.
layout(constant_id = 5) const uint FOLD = 0u;
const uint NT = EXACT == 0u ? FISH_MATVEC_MAX_TOK : EXACT;  // accumulator slots a row
bool tok_live(uint t) {
  return EXACT != 0u || t < pc.n_tok;
}
layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf { uint w[]; };
layout(std430, binding = FISH_BINDING_W) readonly buffer WBuf4 { uvec4 w4[]; };
#ifdef PRONORM
// X: ARENA, the residual rows (f32); the q8_1 input lives in shared memory, read through XQ4 ..
// XDS4 with the global layout's indices (token 0).
layout(std430, binding = FISH_BINDING_X) readonly buffer XF4 { vec4 xf4[]; };
layout(std430, binding = FISH_BINDING_P) readonly buffer PBufPn { vec4 pn_w4[]; };
shared uvec4 pn_codes[FISH_PN_MAX_K / 16u];  // the codes, 16 a uvec4
shared vec4 pn_ds[FISH_PN_MAX_K / 64u];      // (d, s) of blocks 2j and 2j + 1
#define PN_CODES16 (FISH_Q8_CODES(pc.n_in) / 16u)  // uvec4 index of code 0 in the global layout
uvec4 XQ4(uint i) {
  return pn_codes[i - PN_CODES16];
}
uvec2 XQ2(uint i) {
  const uint j = i - 2u * PN_CODES16;
  return (j & 1u) == 0u ? pn_codes[j >> 1u].xy : pn_codes[j >> 1u].zw;
}
vec2 XDS(uint i) {
  return (i & 1u) == 0u ? pn_ds[i >> 1u].xy : pn_ds[i >> 1u].zw;
}
vec4 XDS4(uint i) {
  return pn_ds[i];
}
#else
layout(std430, binding = FISH_BINDING_X) readonly buffer XQ4b { uvec4 xq4[]; };
layout(std430, binding = FISH_BINDING_X) readonly buffer XQ2b { uvec2 xq2[]; };
layout(std430, binding = FISH_BINDING_X) readonly buffer XDs { vec2 xds[]; };
layout(std430, binding = FISH_BINDING_X) readonly buffer XDs4 { vec4 xds4[]; };
#define XQ4(i) xq4[i]
#define XQ2(i) xq2[i]
#define XDS(i) xds[i]
#define XDS4(i) xds4[i]
#endif
#ifdef MATVEC_EPILOGUE
// Y is the span's ARENA: the output rows, the counters, the epilogue's rows and their q8_1 copy;
// coherent, since a block's last workgroup reads rows the others wrote.
layout(std430, binding = FISH_BINDING_Y) coherent buffer YBuf { float y[]; };
layout(std430, binding = FISH_BINDING_Y) coherent buffer YBuf4 { vec4 y4[]; };
layout(std430, binding = FISH_BINDING_Y) coherent buffer YBufU { uint yu[]; };
#ifdef RESNORM
layout(std430, binding = FISH_BINDING_P) readonly buffer PBuf4 { vec4 p4[]; };
#endif
#define Q8_WORDS yu
#define Q8_FLOATS y
#define Q8_BASE pc.q8_off
#include "q8_1_store.glsl"
#elif defined(SCALED) || defined(RESADD)
// scaled reads the sums of squares, acc the residual rows it adds to.
layout(std430, binding = FISH_BINDING_Y) buffer YBuf { float y[]; };
#else
layout(std430, binding = FISH_BINDING_Y) writeonly buffer YBuf { float y[]; };
#endif

#include "matvec_raw.glsl"

// ---- per type: the values of a chunk (CHUNK_SHIFT: log2), one token's q8_1 data for chunk c
// (struct XQ, load_xq: codes_byte = byte of the token's code 0, ds_vec2 = vec2 index of its
// block 0), and the chunk's dot (chunk_dot).
#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#define CHUNK_SHIFT 5u
struct XQ {
  uvec4 lo, hi;  // codes of values 64cc + l0 + 0..15 (block 2cc), + 32 (block 2cc + 1)
  vec4 ds;       // (d8, s8) of blocks 2cc, 2cc + 1
};
XQ load_xq(uint codes_byte, uint ds_vec2, uint c) {
  const uint c16 = c & 7u, v0 = 256u * (c >> 3u) + 64u * (c16 >> 1u) + 16u * (c16 & 1u);
  XQ q;
  q.lo = XQ4((codes_byte + v0) >> 4u);
  q.hi = XQ4((codes_byte + v0 + 32u) >> 4u);
  q.ds = XDS4((ds_vec2 + 8u * (c >> 3u) + 2u * (c16 >> 1u)) >> 1u);
  return q;
}
// The chunk's integer dots with token q: its 16 values of sub-block s0 (x) and of s0 + 1 (y).
ivec2 sub_dots(Raw r, uint s0, XQ q) {
  int lo = 0, hi = 0;
  [[unroll]] for (uint j = 0u; j < 4u; ++j) {
    const uvec2 k = kq_codes(r, s0, j);
    lo += dot4(k.x, q.lo[j]);
    hi += dot4(k.y, q.hi[j]);
  }
  return ivec2(lo, hi);
}
float chunk_dot(Raw r, uint c, XQ q) {
  const uint s0 = 2u * ((c & 7u) >> 1u);
  const uvec2 sm0 = scale_min(r.hdr, s0), sm1 = scale_min(r.hdr, s0 + 1u);
  const vec2 dm = unpackHalf2x16(r.hdr.x);
  const ivec2 d = sub_dots(r, s0, q);
  const int lo = d.x, hi = d.y;
  // The minimum of a sub-block times its whole block's sum: once per pair of chunks.
  const float mins = (c & 1u) == 0u ? float(sm0.y) * q.ds.y + float(sm1.y) * q.ds.w : 0.0;
  return dm.x * (float(sm0.x) * q.ds.x * float(lo) + float(sm1.x) * q.ds.z * float(hi)) -
         dm.y * mins;
}
#elif defined(TYPE_Q6_K)
#define CHUNK_SHIFT 5u
struct XQ {
  uvec2 c[4];  // codes of values 128h + 32k + 8g + 0..7 (block 4h + k), k = 0..3
  vec4 ds01, ds23;
};
XQ load_xq(uint codes_byte, uint ds_vec2, uint c) {
  const uint u = c & 7u, h = u >> 2u, g = u & 3u;
  const uint v0 = 256u * (c >> 3u) + 128u * h + 8u * g;
  XQ q;
  [[unroll]] for (uint k = 0u; k < 4u; ++k) q.c[k] = XQ2((codes_byte + v0 + 32u * k) >> 3u);
  const uint b = (ds_vec2 + 8u * (c >> 3u) + 4u * h) >> 1u;
  q.ds01 = XDS4(b);
  q.ds23 = XDS4(b + 1u);
  return q;
}
// Run k's integer dot with token q (8 values of block 4h + k) and that block's d8.
int run_dot(Raw r, XQ q, uint k) {
  const uvec2 lq = (k & 1u) != 0u ? r.ql1 : r.ql0;
  // Low 4 bits to bits 2..5, high 2 bits to 6..7: the byte is 4q; ^ 0x80 makes it 4 (q - 32).
  const uvec2 lo4 = ((k >> 1u) == 0u ? lq << 2u : lq >> 2u) & 0x3C3C3C3Cu;
  const uvec2 hi2 = (r.qh << (6u - 2u * k)) & 0xC0C0C0C0u;
  const uvec2 b = (lo4 | hi2) ^ 0x80808080u;
  return dot4(b.x, q.c[k].x) + dot4(b.y, q.c[k].y);
}
float run_d8(XQ q, uint k) {
  return k == 0u ? q.ds01.x : k == 1u ? q.ds01.z : k == 2u ? q.ds23.x : q.ds23.z;
}
float chunk_dot(Raw r, uint c, XQ q) {
  float s = 0.0;
  [[unroll]] for (uint k = 0u; k < 4u; ++k)
    s += sbyte(r.sc, 2u * k + (r.g >> 1u)) * run_d8(q, k) * float(run_dot(r, q, k));
  return 0.25 * unpackHalf2x16(r.d).x * s;
}
#elif defined(TYPE_Q8_0) || defined(TYPE_Q4_0) || defined(TYPE_Q4_1)
#define CHUNK_SHIFT 5u
struct XQ {
  uvec4 a, b;  // codes of values 0..15, 16..31 of block c
  vec2 ds;
};
XQ load_xq(uint codes_byte, uint ds_vec2, uint c) {
  XQ q;
  q.a = XQ4((codes_byte + 32u * c) >> 4u);
  q.b = XQ4((codes_byte + 32u * c + 16u) >> 4u);
  q.ds = XDS(ds_vec2 + c);
  return q;
}
#if defined(TYPE_Q4_1)
float chunk_dot(Raw r, uint c, XQ q) {
  const vec2 dm = unpackHalf2x16(r.wd[0]);
  int s = 0;
  [[unroll]] for (uint i = 0u; i < 4u; ++i)
    s += dot4(r.wd[i + 1u] & kLo, q.a[i]) + dot4((r.wd[i + 1u] >> 4u) & kLo, q.b[i]);
  return dm.x * q.ds.x * float(s) + dm.y * q.ds.y;  // d sum(q x) + m sum(x)
}
#else
float chunk_dot(Raw r, uint c, XQ q) {
  const float d = unpackHalf2x16(r.odd ? r.wd[0] >> 16u : r.wd[0]).x;
  int s = 0;
  [[unroll]] for (uint i = 0u; i < CODE_WORDS; ++i) {
    const uint wq = r.odd ? r.wd[i + 1u] : (r.wd[i] >> 16u) | (r.wd[i + 1u] << 16u);
#if defined(TYPE_Q8_0)
    s += dot4(wq, i < 4u ? q.a[i] : q.b[i - 4u]);
#else
    s += dot4(wq & kLo, q.a[i]) + dot4((wq >> 4u) & kLo, q.b[i]);
#endif
  }
#if defined(TYPE_Q8_0)
  return d * q.ds.x * float(s);
#else
  return d * (q.ds.x * float(s) - 8.0 * q.ds.y);
#endif
}
#endif
#else
#error "matvec_idot.comp.glsl: TYPE_Q4_0, Q4_1, Q8_0, Q4_K, Q5_K or Q6_K (shaders/CMakeLists.txt)"
#endif

// acc + the chunk's dot (FOLD: the same terms, the row's factors first, one fma a term).
#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
float chunk_acc(Raw r, uint c, XQ q, float acc) {
  if (FOLD == 0u) return acc + chunk_dot(r, c, q);
  const uint s0 = 2u * ((c & 7u) >> 1u);
  const uvec2 sm0 = scale_min(r.hdr, s0), sm1 = scale_min(r.hdr, s0 + 1u);
  const vec2 dm = unpackHalf2x16(r.hdr.x);
  const ivec2 d = sub_dots(r, s0, q);
  const int lo = d.x, hi = d.y;
  // (d sc) and (dmin m) are the row's, the same for every token: computed once a chunk.
  acc = fma((dm.x * float(sm0.x)) * q.ds.x, float(lo), acc);
  acc = fma((dm.x * float(sm1.x)) * q.ds.z, float(hi), acc);
  if ((c & 1u) == 0u) {  // the minimums times their blocks' sums: once per pair of chunks
    acc = fma(-(dm.y * float(sm0.y)), q.ds.y, acc);
    acc = fma(-(dm.y * float(sm1.y)), q.ds.w, acc);
  }
  return acc;
}
#elif defined(TYPE_Q6_K)
float chunk_acc(Raw r, uint c, XQ q, float acc) {
  if (FOLD == 0u) return acc + chunk_dot(r, c, q);
  const float d4 = 0.25 * unpackHalf2x16(r.d).x;
  [[unroll]] for (uint k = 0u; k < 4u; ++k)
    acc = fma((d4 * sbyte(r.sc, 2u * k + (r.g >> 1u))) * run_d8(q, k), float(run_dot(r, q, k)),
              acc);
  return acc;
}
#else
float chunk_acc(Raw r, uint c, XQ q, float acc) {
  return acc + chunk_dot(r, c, q);
}
#endif

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_Q6_K)
// Chunk c, its place in the super-block (c & 7) given as `place`: the same chunk, the place known.
uint in_block(uint c, uint place) {
  return (c & ~7u) | place;
}
#else
uint in_block(uint c, uint place) {  // a chunk is a whole block
  return c;
}
#endif

const uint OWN = ROWS * NT;  // a thread's accumulators: its group's rows x NT tokens
const uint NACC = GROUPS * OWN;                // the workgroup's
#ifdef PRONORM
#define MATVEC_NO_REDUCE
#endif
#define MV_TOK NT  // matvec_reduce.glsl's accumulator layout acc[row * NT + token]
#define MV_LIVE(t) tok_live(t)
#include "matvec_reduce.glsl"

#ifdef MATVEC_EPILOGUE
shared bool last_wg;

// Whether this workgroup is the last of `arrivals` to count at ARENA word c (its rows written
// before it counts); the last one resets the counter for the next dispatch. Uniform.
bool arrive_last(uint c, uint arrivals) {
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationID.x == 0u) last_wg = atomicAdd(yu[c], 1u) == arrivals - 1u;
  barrier();
  if (!last_wg) return false;
  memoryBarrierBuffer();
  if (gl_LocalInvocationID.x == 0u) yu[c] = 0u;
  return true;
}
#endif

#ifdef ACTMUL
// The last of a 32-row block's workgroups (gate's and up's): product = silu(gate) * up of the
// block's 32 values per token (span_swiglu_q8's values), over the gate rows and as q8_1 at
// q8_off; lane 8 t + i holds token t's vec4 i (a token's 8 lanes all in or all out).
void act_block(uint blk) {
  const uint lid = gl_LocalInvocationID.x, t = lid / 8u, i = lid % 8u;
  if (t >= pc.n_tok) return;
  const uint g4 = (pc.gate_off + t * pc.y_stride) / 4u + 8u * blk + i;
  const vec4 g = y4[g4], u = y4[g4 + pc.n_out / 4u];
  const vec4 o = g / (1.0 + exp(-g)) * u;
  y4[g4] = o;
  q8_store(pc.n_out, t, 8u * blk + i, o);
}
#endif

#ifdef RESNORM
// The last of a 32-row block's workgroups: the block's share of the next rmsnorm. Per token t
// (lane 8 t + i, vec4 i of the block) its values x (the residual rows after this dispatch's add)
// times the norm weight w, unnormalised, as q8_1 at q8_off (the 1 / rms is a common factor the
// scaled consumer applies: the q8_1 codes of c x w are those of x w), and the block's sum of
// squares of x at ss_off + t n_out / 32 + block.
void norm_block(uint blk) {
  const uint lid = gl_LocalInvocationID.x, t = lid / 8u, i = lid % 8u;
  if (t >= pc.n_tok) return;  // a token's 8 lanes are all in or all out
  const uint v4 = 8u * blk + i;
  const vec4 v = y4[(pc.y_offset + t * pc.y_stride) / 4u + v4];
  const float ss = subgroupClusteredAdd(dot(v, v), 8u);
  q8_store(pc.n_out, t, v4, v * p4[pc.w_off / 4u + v4]);
  if (i == 0u) y[pc.ss_off + t * (pc.n_out / 32u) + blk] = ss;
}
#endif

#ifdef SCALED
shared float ss_sh[FISH_MATVEC_MAX_TOK][32];  // subgroup sums, 32 subgroups a pass

// Per token, 1 / rms of the input: its n_in / 32 block sums of squares (part: this thread's
// share) summed over the workgroup (in passes of 32 subgroups, as reduce_store); every thread
// gets the scales.
void norm_scales(inout float part[FISH_MATVEC_MAX_TOK], out float sc[FISH_MATVEC_MAX_TOK]) {
  float tot[FISH_MATVEC_MAX_TOK];
  [[unroll]] for (uint t = 0u; t < FISH_MATVEC_MAX_TOK; ++t) {
    part[t] = subgroupAdd(part[t]);
    tot[t] = 0.0;
  }
  for (uint g0 = 0u; g0 < gl_NumSubgroups; g0 += 32u) {
    if (subgroupElect() && gl_SubgroupID - g0 < 32u)
      [[unroll]] for (uint t = 0u; t < FISH_MATVEC_MAX_TOK; ++t) ss_sh[t][gl_SubgroupID - g0] = part[t];
    barrier();
    [[unroll]] for (uint t = 0u; t < FISH_MATVEC_MAX_TOK; ++t)
      for (uint g = 0u; g < min(32u, gl_NumSubgroups - g0); ++g) tot[t] += ss_sh[t][g];
    barrier();
  }
  [[unroll]] for (uint t = 0u; t < FISH_MATVEC_MAX_TOK; ++t)
    sc[t] = 1.0 / sqrt(tot[t] / float(pc.n_in) + pc.eps);
}
#endif

#ifdef PRONORM
#undef Q8_BASE
#define Q8_BASE 0u
#define Q8_STORE_FN pn_q8_store
#define Q8_STORE_WORD(j, v) pn_codes[((j) - 4u * PN_CODES16) >> 2u][((j) - 4u * PN_CODES16) & 3u] = (v)
#define Q8_STORE_FLOAT(j, v) pn_ds[(j) >> 2u][(j) & 3u] = (v)
#include "q8_1_store.glsl"
shared float pn_part[FISH_PN_WG / 8u];  // a slot a subgroup (>= 8 lanes)

// span_rmsnorm_q8 on token 0's residual row, its vec4 path (n_in and the offsets multiples of 4):
// the same loads, sums and order (thread tid holds vec4s tid + k FISH_PN_WG), into pn_codes /
// pn_ds. The workgroup is FISH_PN_WG threads (the host checks).
void pro_norm() {
  const uint tid = gl_LocalInvocationID.x, WGN = FISH_PN_WG;
  const uint n4 = pc.n_in / 4u, a4 = pc.x_off / 4u, w4 = pc.w_off / 4u;
  vec4 x[FISH_PN_CACHE], wt[FISH_PN_CACHE];
  [[unroll]] for (uint k = 0u; k < FISH_PN_CACHE; ++k) {
    const uint i = tid + k * WGN;
    x[k] = i < n4 ? xf4[a4 + i] : vec4(0.0);
    wt[k] = i < n4 ? pn_w4[w4 + i] : vec4(0.0);
  }
  float ss = 0.0;
  [[unroll]] for (uint k = 0u; k < FISH_PN_CACHE; ++k) ss += dot(x[k], x[k]);
  for (uint i = tid + FISH_PN_CACHE * WGN; i < n4; i += WGN) {
    const vec4 v = xf4[a4 + i];
    ss += dot(v, v);
  }
  ss = subgroupAdd(ss);
  if (subgroupElect()) pn_part[gl_SubgroupID] = ss;
  barrier();
  float tot = 0.0;
  for (uint g = 0u; g < gl_NumSubgroups; ++g) tot += pn_part[g];
  const float s = 1.0 / sqrt(tot / float(pc.n_in) + pc.eps);
  [[unroll]] for (uint k = 0u; k < FISH_PN_CACHE; ++k) {
    const uint i = tid + k * WGN;
    if (i < n4) pn_q8_store(pc.n_in, 0u, i, x[k] * s * wt[k]);
  }
  for (uint i = tid + FISH_PN_CACHE * WGN; i < n4; i += WGN)
    pn_q8_store(pc.n_in, 0u, i, xf4[a4 + i] * s * pn_w4[w4 + i]);
  barrier();
}

shared float pn_red[FISH_PN_WG / 8u][ROWS];  // [subgroup][row of its group]

// Token 0's rows: each row group sums its own ROWS rows as a one-group workgroup of gt threads
// does in reduce_store (subgroupAdd, then 0 + the group's subgroups in order), so the result is
// bitwise matvec_idot_<type>'s; gt is a multiple of the subgroup size (the host checks).
void pn_reduce_store(float acc[OWN], uint row0, uint grp, uint lane, uint gt) {
  float s[ROWS];
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) s[r] = subgroupAdd(acc[r * NT]);
  if (subgroupElect())
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) pn_red[gl_SubgroupID][r] = s[r];
  barrier();
  const uint per = gt / gl_SubgroupSize;
  if (lane < ROWS) {
    float total = 0.0;
    for (uint g = 0u; g < per; ++g) total += pn_red[grp * per + g][lane];
    const uint r = row0 + grp * ROWS + lane;
    if (r < pc.n_out) y[pc.y_offset + r] = total;
  }
}
#endif

// A thread's AHEAD chunks c0, c0 + gt, ... of its ROWS rows into dst (those past the row's end
// neither loaded nor used). A macro: arrays sized by specialisation constants are no parameters.
#define LOAD_CHUNKS(c0, dst)                                                             \
  [[unroll]] for (uint u = 0u; u < AHEAD; ++u) {                                         \
    if (u == 0u || (c0) + u * gt < n_chunks) {                                           \
      const uint c = in_block((c0) + u * gt, place);                                     \
      [[unroll]] for (uint r = 0u; r < ROWS; ++r) dst[u * ROWS + r] = load_raw(rb[r], c); \
    }                                                                                    \
  }

void main() {
  // Row group grp: threads grp GT .. (GT = WG / GROUPS, a multiple of 8), rows grp ROWS .. of the
  // workgroup's ROWS x GROUPS.
  const uint gt = gl_WorkGroupSize.x / GROUPS;
  const uint grp = GROUPS == 1u ? 0u : gl_LocalInvocationID.x / gt;
  const uint lane = gl_LocalInvocationID.x - grp * gt;
  uint row0, rb[ROWS];
#ifdef PRONORM
  // FISH_VK_PN_GRID: the host may dispatch fewer workgroups than row blocks. Each workgroup then
  // runs blocks g, g + (workgroups dispatched), ... after one prologue. The codes are the same for
  // every block, so the results do not depend on the grid. Uniform: every branch on `group` and
  // every barrier is the whole workgroup's.
  const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
  const uint first_group = gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x;
  for (uint group = first_group; group < pc.n_groups; group += stride) {
  group_rows(group, ROWS * GROUPS, grp * ROWS, row0, rb);
  const bool opening = group == first_group;
#else
  if (!workgroup_rows(ROWS * GROUPS, grp * ROWS, row0, rb)) return;
#endif
  const uint codes0 = FISH_Q8_CODES(pc.n_in), ds_stride = FISH_Q8_DS_STRIDE(pc.n_in);

  float acc[OWN];
  [[unroll]] for (uint i = 0u; i < OWN; ++i) acc[i] = 0.0;
#ifdef SCALED
  // The input's block sums of squares, loaded now and summed after the loop.
  float ss_part[FISH_MATVEC_MAX_TOK];
  const uint n_blocks = pc.n_in / 32u;
  [[unroll]] for (uint t = 0u; t < FISH_MATVEC_MAX_TOK; ++t) {
    ss_part[t] = 0.0;
    if (t < pc.n_tok)
      for (uint b = gl_LocalInvocationID.x; b < n_blocks; b += gl_WorkGroupSize.x)
        ss_part[t] += y[pc.ss_off + t * n_blocks + b];
  }
#endif
  const uint n_chunks = pc.n_in >> CHUNK_SHIFT;
  // A thread's chunks are lane + i GT: their place in a super-block, c & 7, is the thread's own,
  // which in_block states so the per-place scale and offset math leaves the loop.
  const uint place = lane & 7u;
#ifdef PRONORM
  // The first chunks' weights in flight while the prologue normalises the input.
  Raw first[AHEAD * ROWS];
  if (opening) {
    if (lane < n_chunks) {
      LOAD_CHUNKS(lane, first)
    }
    pro_norm();
  }
#endif
  for (uint c0 = lane; c0 < n_chunks; c0 += AHEAD * gt) {
    Raw raw[AHEAD * ROWS];  // AHEAD chunks of every row loaded before any is used
#ifdef PRONORM
    if (opening && c0 == lane) {
      [[unroll]] for (uint i = 0u; i < AHEAD * ROWS; ++i) raw[i] = first[i];
    } else
#endif
    {
      LOAD_CHUNKS(c0, raw)
    }
    [[unroll]] for (uint t = 0u; t < NT; ++t) {
      if (tok_live(t)) {
        [[unroll]] for (uint u = 0u; u < AHEAD; ++u) {
          if (u == 0u || c0 + u * gt < n_chunks) {
            const uint c = in_block(c0 + u * gt, place);
            const XQ q = load_xq(codes0 + t * pc.n_in, t * ds_stride, c);
            [[unroll]] for (uint r = 0u; r < ROWS; ++r)
              acc[r * NT + t] = chunk_acc(raw[u * ROWS + r], c, q, acc[r * NT + t]);
          }
        }
      }
    }
  }

#ifdef SCALED
  float sc[FISH_MATVEC_MAX_TOK];
  norm_scales(ss_part, sc);
  [[unroll]] for (uint r = 0u; r < ROWS; ++r)
    [[unroll]] for (uint t = 0u; t < NT; ++t) acc[r * NT + t] *= sc[t];
#endif
#ifdef PRONORM
  pn_reduce_store(acc, row0, grp, lane, gt);
#else
  // The other groups' rows are zeros here: one reduction over the workgroup sums each row.
  float all[NACC];
  [[unroll]] for (uint g = 0u; g < GROUPS; ++g)
    [[unroll]] for (uint i = 0u; i < OWN; ++i) all[g * OWN + i] = g == grp ? acc[i] : 0.0;
  reduce_store(all, row0);
#endif
#ifdef MATVEC_EPILOGUE
  const uint blk = row0 / 32u;  // ROWS x GROUPS divides 32: the workgroup's rows are one block's
#endif
#ifdef RESNORM
  if (arrive_last(pc.ctr + blk, pc.arrivals)) norm_block(blk);
#endif
#ifdef ACTMUL
  if (arrive_last(pc.ctr + blk, pc.arrivals)) act_block(blk);
#endif
#ifdef PRONORM
  if (group + stride < pc.n_groups) barrier();  // pn_red and last_wg are the next block's
  }
#endif
}
