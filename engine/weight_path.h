// Which weights the CPU linear layers multiply with, chosen per run (seed 002, issue 6):
//   gguf   the GGUF tensors as they are, through the matvec kernels of their types;
//   w4a8   packed int4 (Int4Vnni16) x int8 activations, AMX prefill where usable (kernels/w4a8.h);
//   w4a16  packed int4 (seed layout Int4Blocks64) x bf16 activations, prefill through dequantised
//          panels + GEMM (kernels/w4a16.h);
//   ref    f32 weights and activations (the dequantised GGUF weights: ActMode::f32);
//   auto   a documented rule over the model and a hardware probe (resolve_weight_path).
// For w4a8 / w4a16, every layer matrix (and the head when quantize_head) is packed once at session
// creation: fish_i4 tensors (written by `fish quantize-w4`) convert exactly, and so do q4_0 (g32)
// and q4_1 / q4_k (g32, zero_point fp) tensors (int4_repack_is_exact: their own codes, scales and
// offsets); any other type is dequantised to f32 and fitted with group_size / zero_point.
// quantize_head false leaves the head on the gguf path (for a tied model: the 16-bit or q8
// embedding matrix — the seed's "LM-head trap": that one matrix can cost more per step than the
// whole 4-bit saving). quantize_embedding also serves embedding rows from an int4 copy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "base/result.h"
#include "engine/model.h"
#include "kernels/thread_pool.h"
#include "kernels/w4a16.h"
#include "kernels/w4a8.h"
#include "quant/int4.h"

namespace fish {

enum class WeightPath { automatic, gguf, w4a8, w4a16, ref };
std::string_view weight_path_name(WeightPath p);  // "auto", "gguf", "w4a8", "w4a16", "ref"
std::optional<WeightPath> parse_weight_path(std::string_view s);

// The Config fields of issue 6, with their JSON / CLI names.
struct WeightPathOptions {
  WeightPath weight_path = WeightPath::automatic;
  Int4Format fmt{64, Int4ZeroPoint::asym};  // group_size, zero_point (repacking non-fish_i4 types)
  bool quantize_head = true;
  bool quantize_embedding = false;
  bool prefill_dequant = true;    // w4a16
  bool direct_dequant = true;     // w4a16
  int64_t dequant_threshold = 8;  // w4a16: more tokens than this take dequantise + GEMM
};

// auto: a model whose layer matrices are fish_i4 (a `fish quantize-w4` file) runs w4a8 where AMX
// is usable (the seed's fastest path needs AMX tiles for prefill), else w4a16 (no AMX needed, bf16
// dot products where AVX512_BF16 exists); any other model runs gguf (its own kernels: no
// repacking, no added error). Explicit choices are returned as they are.
WeightPath resolve_weight_path(WeightPath requested, const Model& model);

// The packed matrices of one model for w4a8 / w4a16.
class Int4Weights {
 public:
  // Errors: path is not w4a8 / w4a16; a matrix that cannot be packed (row length not a multiple
  // of the group size: the message names the matrix and suggests a group size).
  static Result<std::unique_ptr<Int4Weights>> build(const Model& model, WeightPath path,
                                                    const WeightPathOptions& opt);

  // y = x W^T for n tokens when W is packed here; false (nothing done) when it is not.
  bool matmul(const MatrixView& w, const float* x, int64_t n, float* y, ThreadPool& pool) const;
  // One token through several packed matrices with the same input (q/k/v, gate/up) in one pool
  // dispatch: the activation is prepared once and the threads split all matrices' tiles / blocks.
  // False (nothing done) unless every matrix is packed here with the same n_in and group size.
  bool matvec_group(std::span<const MatrixView* const> ws, std::span<float* const> ys,
                    const float* x, ThreadPool& pool) const;
  // The embedding of `token` from the int4 copy (embd_scale applied); false without one.
  bool embed(int32_t token, float* out) const;

  WeightPath path() const { return path_; }
  const WeightPathOptions& options() const { return opt_; }
  size_t packed_bytes() const { return packed_bytes_; }        // all packed copies (+ duplicates)
  size_t duplicate_bytes() const { return duplicate_bytes_; }  // w4a16 row-major duplicates
  // Bytes one decode step reads: packed layer matrices and head, or the GGUF head when unpacked.
  uint64_t bytes_per_token() const { return bytes_per_token_; }
  // One line for stats: "w4a16 (avx2) g32 fp, head int4, embedding gguf, 52.1 MB packed (0.0 MB
  // row-major duplicates), 211/211 matrices repacked exactly".
  std::string describe() const;
  int exact_matrices() const { return exact_matrices_; }  // packed without a re-fit
  int matrices() const { return matrices_; }              // packed (distinct data)

 private:
  using Packed = std::variant<Int4Vnni16, W4A16Weights>;
  WeightPath path_ = WeightPath::gguf;
  WeightPathOptions opt_;
  std::unordered_map<const void*, Packed> by_data_;  // keyed by MatrixView::data
  const MatrixView* head_ = nullptr;                 // the model's output view
  bool head_packed_ = false;
  std::vector<uint8_t> embedding_;  // fish_i4 rows of token_embd (quantize_embedding), or empty
  GgmlType embedding_type_ = GgmlType::f32;
  int64_t n_embd_ = 0;
  float embd_scale_ = 1.0f;
  size_t packed_bytes_ = 0;
  size_t duplicate_bytes_ = 0;
  uint64_t bytes_per_token_ = 0;
  int matrices_ = 0;
  int exact_matrices_ = 0;
};

}  // namespace fish
