// Named model shapes for synthetic models (`fish make-model --shape NAME`): the hyper-parameters
// of real architectures, so throughput experiments reproduce the real models' memory traffic.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace fish {

struct ModelShape {
  std::string_view name;          // "llama-8b"
  std::string_view architecture;  // GGUF general.architecture: "llama" | "gemma3"
  std::string_view description;   // the real model this mirrors
  int n_layer;
  int n_embd;
  int n_ff;
  int n_head;
  int n_head_kv;
  int head_dim;
  int n_vocab;
  bool tied_output;  // no output.weight: the head reuses token_embd
  int n_ctx_train;
  float rope_freq_base;
  float norm_eps;
  int sliding_window;  // 0: none (gemma3: 512)
};

std::span<const ModelShape> model_shapes();
const ModelShape* find_model_shape(std::string_view name);  // nullptr when unknown
std::string model_shape_names();                            // "tiny, smollm2-135m, ..."

}  // namespace fish
