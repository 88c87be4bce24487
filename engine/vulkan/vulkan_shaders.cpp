// The embedded SPIR-V table; FISH_VK_SHADERS_INC is the generated (or prebuilt) include.
#include "engine/vulkan/vulkan_shaders.h"

namespace fish::vk {
namespace {
#include FISH_VK_SHADERS_INC
}  // namespace

std::span<const uint32_t> embedded_shader(std::string_view name) {
  for (const EmbeddedShader& s : kEmbeddedShaders)
    if (name == s.name) return {s.words, s.n_words};
  return {};
}

std::span<const EmbeddedShader> embedded_shaders() {
  return kEmbeddedShaders;
}

}  // namespace fish::vk
