// The SPIR-V modules embedded in the binary (generated from shaders/*.comp.glsl at build time,
// or the committed shaders/prebuilt/fish_vk_shaders.inc), looked up by name: "<op>_<type>",
// e.g. "matvec_q4_k" / "matvec1_q4_k" (types spelled as quant/types.h), or a typeless name
// ("copy_u4").
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace fish::vk {

struct EmbeddedShader {
  const char* name;
  const uint32_t* words;
  size_t n_words;
};

// Empty span when no module has that name.
std::span<const uint32_t> embedded_shader(std::string_view name);
// Every embedded module, in generation order.
std::span<const EmbeddedShader> embedded_shaders();

}  // namespace fish::vk
