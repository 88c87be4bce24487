// Included (no main) by attention.comp.glsl and attention_decode.comp.glsl (Q8 variants): one
// 32-value block of an output row written as q8_1 (fish_vk_q8.h, K values per token, at ARENA
// float pc.q8_off) by one thread from 32 consecutive floats of the includer's shared array Q8_SRC,
// quant_q8_1's rule (d = amax / 127, q = round(c / d), s = d sum q). The includer declares the
// uint view arenau[] of ARENA and includes fish_vk_q8.h.

// Block blk of token t's row from Q8_SRC[src .. src + 32).
void q8_block(uint K, uint t, uint blk, uint src) {
  float amax = 0.0;
  for (uint k = 0u; k < 32u; ++k) amax = max(amax, abs(Q8_SRC[src + k]));
  const float id = amax > 0.0 ? 127.0 / amax : 0.0;
  const uint w0 = pc.q8_off + (FISH_Q8_CODES(K) + t * K) / 4u + blk * 8u;
  int sum = 0;
  for (uint w = 0u; w < 8u; ++w) {
    const uint e = src + 4u * w;
    const ivec4 q = clamp(
        ivec4(round(vec4(Q8_SRC[e], Q8_SRC[e + 1u], Q8_SRC[e + 2u], Q8_SRC[e + 3u]) * id)),
        ivec4(-127), ivec4(127));
    sum += q.x + q.y + q.z + q.w;
    arenau[w0 + w] = uint(q.x & 255) | (uint(q.y & 255) << 8u) | (uint(q.z & 255) << 16u) |
                     (uint(q.w & 255) << 24u);
  }
  const uint ds = pc.q8_off + 2u * (t * FISH_Q8_DS_STRIDE(K) + blk);
  arena[ds] = amax / 127.0;
  arena[ds + 1u] = amax / 127.0 * float(sum);
}
