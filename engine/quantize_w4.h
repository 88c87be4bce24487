// `fish quantize-w4`: rewrites a GGUF with its linear-layer weights as FISH's packed int4 tensor
// types (quant/int4.h: fish_i4_g32 / g64 / g128), so later runs load the int4 codes as they are
// instead of re-fitting them. Each selected matrix is dequantised to f32 row by row (from any
// decodable type) and fitted per group (sym, asym or fp, quant/int4.h), except where the source
// repacks exactly (int4_repack_is_exact: q4_0 at g32, q4_1 / q4_k at g32 fp: codes, scales and
// offsets taken as they are); fp writes the fish_i4fp types. Every other tensor and all metadata
// are copied unchanged, plus the keys
//   fish.int4.group_size (u32), fish.int4.zero_point ("sym" | "asym" | "fp"),
//   fish.int4.quantize_head (bool), fish.int4.quantize_embedding (bool).
// Selected: blk.*.{attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down}.weight; the
// output head when quantize_head (a tied model is untied: output.weight is written from the
// embedding's rows, which stay as they are unless quantize_embedding); token_embd.weight when
// quantize_embedding. A selected matrix whose row length is not a multiple of the group size
// is an error naming it.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "base/result.h"
#include "quant/int4.h"
#include "quant/types.h"

namespace fish {

struct QuantizeW4Options {
  Int4Format fmt;
  bool quantize_head = true;
  bool quantize_embedding = false;
  int n_threads = 0;  // 0: default_thread_count()
};

// The repack error of the packed tensors of one source type: sum of squared (int4 - source)
// and of squared source values over all their weights (rel RMS = sqrt(err_sq / ref_sq); 0 for an
// exact bit-for-bit repack).
struct QuantizeW4TypeError {
  int64_t tensors = 0;
  double err_sq = 0.0;
  double ref_sq = 0.0;
  double rel_rms() const { return ref_sq > 0.0 ? std::sqrt(err_sq / ref_sq) : 0.0; }
};

struct QuantizeW4Summary {
  int64_t tensors_packed = 0;
  int64_t tensors_copied = 0;
  uint64_t bytes_packed_in = 0;   // the packed tensors' bytes in the input
  uint64_t bytes_packed_out = 0;  // their bytes as fish_i4
  int64_t tensors_exact = 0;      // packed tensors repacked exactly (every row), no re-fit
  bool untied_head = false;
  std::map<GgmlType, QuantizeW4TypeError> error_by_type;  // by source type
};

// Errors: the input cannot be opened or parsed (the GGUF reader's message), a selected tensor is
// not 2-D, cannot be decoded or has a row length that is not a multiple of the group size, or
// the output cannot be written (written via OUT.tmp, renamed at the end).
Result<QuantizeW4Summary> quantize_w4_gguf(const std::string& in_path, const std::string& out_path,
                                           const QuantizeW4Options& opt);

}  // namespace fish
