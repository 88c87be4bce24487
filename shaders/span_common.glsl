// Bindings of the span ops (fish_vk_span.h); included after the push-constant block.
layout(std430, binding = FISH_SPAN_ARENA) buffer ArenaBuf { float arena[]; };
layout(std430, binding = FISH_SPAN_PARAMS) readonly buffer ParamsBuf { float params[]; };
layout(std430, binding = FISH_SPAN_KV) buffer KvBuf { uint kv[]; };
