// Synthetic random-weight GGUF models (`fish make-model`): the real architecture's metadata and
// tensor names, a synthetic vocabulary of the right size, and the per-tensor type mix a real
// llama.cpp quantisation would choose. Throughput depends only on shape and types, so these
// reproduce speed experiments anywhere; quality needs the real models.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/model_shapes.h"
#include "quant/types.h"

namespace fish {

// A file type as llama-quantize names them: a pure tensor type ("q4_0", "q8_0", "f16", "q4_k",
// ...) or a mix ("q4_k_m", "q5_k_m").
struct FileType {
  std::string_view name;
  uint32_t gguf_file_type;  // general.file_type (llama_ftype)
  GgmlType base;            // type of most matrices
  bool mixed;               // _M mixes: attn_v / ffn_down of some layers get q6_k
};
std::vector<std::string_view> file_type_names();
Result<FileType> parse_file_type(std::string_view name);

struct SyntheticTensor {
  std::string name;
  std::vector<int64_t> dims;  // dims[0] = row length
  GgmlType type;
};

// The tensors of `shape` quantised as `ftype`, in file order, with llama.cpp's rules: norms f32;
// the output projection (token_embd when tied) q6_k unless the base is q8_0 or a float type;
// in _M mixes attn_v and ffn_down q6_k on the layers llama.cpp's use_more_bits() picks; a
// K-quant whose row length is not a multiple of 256 falls back (q4_k->q5_0, q5_k->q5_1,
// q6_k->q8_0) as llama.cpp does.
std::vector<SyntheticTensor> synthetic_tensors(const ModelShape& shape, const FileType& ftype);

struct SyntheticModelOptions {
  uint64_t seed = 1;
  int n_threads = 0;  // 0: all hardware threads
};

// Writes the model. Weights are Gaussian (std 0.02; norms 1), generated per row from
// (seed, tensor, row) so the file is identical for any thread count. Errors: I/O (path named),
// a type without a reference quantiser.
Status write_synthetic_model(const ModelShape& shape, const FileType& ftype,
                             const SyntheticModelOptions& opt, const std::string& path);

}  // namespace fish
