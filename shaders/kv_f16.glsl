// Included (no main) by the kernels that store keys and values into the f16 KV themselves
// (attention_decode.comp.glsl, attention_short.comp.glsl): the cache's rounding, so the
// dispatch's own key and value, used from shared memory, equal what later steps read back.

// x rounded to the nearest f16 (ties to even), as packHalf2x16 stores it in the KV. In bits, not
// unpackHalf2x16(packHalf2x16(x)): NVIDIA's compiler folds that round trip to x (the H200 gave
// this batch's own keys and values unrounded, 2-5e-4 off the cache's f16). Exact for f16's
// normal range; below it (|x| < 2^-14, where f16 is subnormal) and past 65504 the round trip.
float f16_round(float x) {
  const float a = abs(x);
  if (!(a >= 6.103515625e-05 && a < 65504.0)) return unpackHalf2x16(packHalf2x16(vec2(x, 0.0))).x;
  const uint u = floatBitsToUint(x);
  return uintBitsToFloat((u + 0x0FFFu + ((u >> 13) & 1u)) & ~0x1FFFu);
}
