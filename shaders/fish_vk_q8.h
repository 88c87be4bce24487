// The q8_1 activation layout (valid C++ and GLSL: #defines only), shared by quant_q8_1, the
// integer-dot matvec (matvec_idot_<type>), the rmsnorm that writes it fused (span_rmsnorm_q8,
// span_add_rmsnorm_q8) and the C++ that sizes it. FISH_Q8_MAX_TOK is FISH_MATVEC_MAX_TOK
// (fish_vk_layout.h; device_weight.cpp checks the two agree).
#ifndef FISH_VK_Q8_H
#define FISH_VK_Q8_H

#define FISH_Q8_MAX_TOK 4
// q8_1 activations, the input of the integer-dot matvec (matvec_idot_<type>) as quant_q8_1 writes
// it for n_tok <= FISH_Q8_MAX_TOK tokens of K values (K a multiple of 32):
// per 32-value block b of token t a vec2 (d, d * sum q) at vec2 index
// t * FISH_Q8_DS_STRIDE(K) + b (d = amax / 127, q = round(x / d), int8 codes as ggml block_q8_1,
// scales kept in f32), then from byte FISH_Q8_CODES(K) the int8 codes, token t's K codes at
// byte FISH_Q8_CODES(K) + t * K. The stride is even so a block pair is one 16-byte load.
#define FISH_Q8_BLOCK 32
#define FISH_Q8_DS_STRIDE(K) ((((K) / 32) + 1) / 2 * 2)
#define FISH_Q8_CODES(K) (FISH_Q8_MAX_TOK * FISH_Q8_DS_STRIDE(K) * 8)
#define FISH_Q8_BYTES(K) (FISH_Q8_CODES(K) + FISH_Q8_MAX_TOK * (K))
#define FISH_Q8_WG 64  // quant_q8_1: threads per workgroup, one vec4 each (8 a block)

#endif  // FISH_VK_Q8_H
