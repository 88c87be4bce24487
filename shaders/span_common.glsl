// Bindings of the span ops (fish_vk_span.h); included after the push-constant block.
layout(std430, binding = FISH_SPAN_ARENA) buffer ArenaBuf { float arena[]; };
layout(std430, binding = FISH_SPAN_PARAMS) readonly buffer ParamsBuf { float params[]; };
layout(std430, binding = FISH_SPAN_KV) buffer KvBuf { uint kv[]; };

// The first position a query at `pos` attends: pos + 1 - window under a sliding window of
// pc.window positions (Gemma 3's local layers), else 0.
uint window_begin(uint pos) {
  return pc.window > 0u && pos + 1u > pc.window ? pos + 1u - pc.window : 0u;
}
