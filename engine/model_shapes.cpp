#include "engine/model_shapes.h"

namespace fish {
namespace {

// Hyper-parameters from the models' published configs / GGUF metadata.
constexpr ModelShape kShapes[] = {
    {"tiny", "llama", "a 2-layer llama for tests", 2, 256, 512, 4, 2, 64, 512, true, 2048, 10000.0f,
     1e-5f, 0},
    {"smollm2-135m", "llama", "SmolLM2-135M-Instruct", 30, 576, 1536, 9, 3, 64, 49152, true, 8192,
     100000.0f, 1e-5f, 0},
    {"llama-1b", "llama", "Llama-3.2-1B layers with an untied 128k output (the peer benchmark)", 16,
     2048, 8192, 32, 8, 64, 128256, false, 131072, 500000.0f, 1e-5f, 0},
    {"llama-8b", "llama", "Llama-3.1-8B / DeepSeek-R1-Distill-Llama-8B", 32, 4096, 14336, 32, 8,
     128, 128256, false, 131072, 500000.0f, 1e-5f, 0},
    {"gemma3-270m", "gemma3", "Gemma 3 270M", 18, 640, 2048, 4, 1, 256, 262144, true, 32768,
     1000000.0f, 1e-6f, 512},
    {"tiny-gemma3", "gemma3", "a 6-layer gemma3 for tests (5 sliding-window layers, window 16)", 6,
     256, 512, 4, 1, 64, 512, true, 2048, 1000000.0f, 1e-6f, 16},
};

}  // namespace

std::span<const ModelShape> model_shapes() {
  return kShapes;
}

const ModelShape* find_model_shape(std::string_view name) {
  for (const ModelShape& s : kShapes)
    if (s.name == name) return &s;
  return nullptr;
}

std::string model_shape_names() {
  std::string s;
  for (const ModelShape& m : kShapes) {
    if (!s.empty()) s += ", ";
    s += m.name;
  }
  return s;
}

}  // namespace fish
