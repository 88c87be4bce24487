// Included (no main) by quant_q8_1.comp.glsl and rmsnorm.comp.glsl (Q8 variants): one vec4 of
// activations written in the q8_1 layout of fish_vk_q8.h by the thread holding it. The 8 vec4s of
// a 32-value block are 8 consecutive lanes of one subgroup (subgroups of >= 8 lanes, consecutive
// invocations; callers keep a block's lanes all active or all inactive): clustered max and add
// give the block's amax and code sum. Rule (quant_q8_1's, tests/vulkan/vulkan_matvec_idot_test.cpp
// emulates it): d = amax / 127, q = round(c * 127 / amax) (0 codes for an all-zero block), s = d *
// sum q. The includer defines Q8_WORDS / Q8_FLOATS (the q8_1 buffer as uint[] / float[]) and
// Q8_BASE (its first word there) and enables GL_KHR_shader_subgroup_clustered. An includer that
// stores elsewhere (matvec_idot's PRONORM: shared memory) defines Q8_STORE_WORD(j, v) /
// Q8_STORE_FLOAT(j, v) for word j of the layout and Q8_STORE_FN, the function's name (default
// q8_store); the three are undefined again at the end, so a second include can name others.
#ifndef Q8_STORE_FN
#define Q8_STORE_FN q8_store
#endif
#ifndef Q8_STORE_WORD
#define Q8_STORE_WORD(j, v) Q8_WORDS[j] = (v)
#endif
#ifndef Q8_STORE_FLOAT
#define Q8_STORE_FLOAT(j, v) Q8_FLOATS[j] = (v)
#endif

// vec4 i (values 4i .. 4i + 3) of token t of K values per token.
void Q8_STORE_FN(uint k, uint t, uint i, vec4 c) {
  const vec4 a = abs(c);
  const float amax = subgroupClusteredMax(max(max(a.x, a.y), max(a.z, a.w)), 8u);
  const float d = amax / 127.0;
  const float id = amax > 0.0 ? 127.0 / amax : 0.0;
  const ivec4 q = clamp(ivec4(round(c * id)), ivec4(-127), ivec4(127));
  const int sum = subgroupClusteredAdd(q.x + q.y + q.z + q.w, 8u);
  Q8_STORE_WORD(Q8_BASE + (FISH_Q8_CODES(k) + t * k) / 4u + i,
                uint(q.x & 255) | (uint(q.y & 255) << 8u) | (uint(q.z & 255) << 16u) |
                    (uint(q.w & 255) << 24u));
  if ((i & 7u) == 0u) {  // the block's first lane: (d, d sum q)
    const uint ds = Q8_BASE + 2u * (t * FISH_Q8_DS_STRIDE(k) + i / 8u);
    Q8_STORE_FLOAT(ds, d);
    Q8_STORE_FLOAT(ds + 1u, d * float(sum));
  }
}
#undef Q8_STORE_FN
#undef Q8_STORE_WORD
#undef Q8_STORE_FLOAT
