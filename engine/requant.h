// Re-quantisation of a GGUF model's matmul weights (issue 5): which tensors, into what, with
// what error and how fast. Used at model load (ModelLoadOptions::requant: the copy lives in
// memory, the file is untouched) and by `fish requant IN OUT --mode N` (the copy is written).
//
// Candidates are the matrices a forward pass multiplies with: blk.N.{attn_q, attn_k, attn_v,
// attn_output, ffn_gate, ffn_up, ffn_down}.weight, output.weight, and token_embd.weight when the
// model has no output.weight (tied: it is the output projection; its embedding lookups then read
// the re-quantised rows too, so a loaded model and a written file agree). A candidate whose row
// length is not a multiple of the target's 256-value block stays as it is and is listed as
// skipped (SmolLM2's and Gemma 3 270M's n_embd rows: 576, 640).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/gguf.h"
#include "kernels/thread_pool.h"
#include "quant/types.h"

namespace fish {

struct RequantTensor {
  std::string name;
  GgmlType from = GgmlType::f32;
  GgmlType to = GgmlType::f32;  // == from when skipped
  int64_t n_in = 0, n_rows = 0;
  size_t bytes_from = 0, bytes_to = 0;
  double relative_rms = 0;    // ||W' - W|| / ||W||, W the file's weights dequantised
  double seconds = 0;         // wall time of this tensor's re-quantisation
  std::string skipped;        // why it was left as it is; empty when converted
  std::vector<uint8_t> data;  // the re-quantised rows (empty when skipped)
};

// One (from, to) type pair over the converted tensors.
struct RequantPairSummary {
  GgmlType from = GgmlType::f32, to = GgmlType::f32;
  int count = 0;
  double rms_min = 0, rms_mean = 0, rms_max = 0;  // relative RMS over the pair's tensors
  size_t bytes_from = 0, bytes_to = 0;
};

struct RequantResult {
  int mode = 0;
  std::optional<GgmlType> to;  // requantize_gguf_to's target (mode unused)
  int n_threads = 1;
  double seconds = 0;                  // wall time of all conversions
  int64_t n_weights = 0;               // values converted
  std::vector<RequantTensor> tensors;  // every candidate the mode names (converted or skipped)

  double ns_per_weight() const { return n_weights ? seconds * 1e9 / double(n_weights) : 0.0; }
  std::vector<RequantPairSummary> summary() const;  // pairs in first-seen order
  // "134 x q4_k->fq3 1740 MB (from 2236), 21 x q6_k->q4_k ..." (the seed's describe line)
  std::string describe() const;
  const RequantTensor* find(std::string_view name) const;  // a converted tensor, or nullptr
};

// True for the tensors re-quantisation considers (see above).
bool is_requant_candidate(const GgufFile& f, const GgufTensorInfo& t);

// Column importance per tensor name (activation-aware fit); a tensor not listed gets the plain
// fit.
struct RequantImportance {
  std::vector<std::pair<std::string, std::vector<float>>> columns;
  const std::vector<float>* find(std::string_view name) const;
};

// Re-quantises every candidate of `f` that `mode` names, rows on `pool`.
// importance: per-tensor column weights for an activation-aware fq3 fit (name -> n_in values),
// or nullptr. Errors: mode outside 0..kRequantModeMax (mode 0 gives an empty result).
Result<RequantResult> requantize_gguf(const GgufFile& f, int mode, ThreadPool& pool,
                                      const RequantImportance* importance = nullptr);

// Re-quantises every candidate of another type with a dequantiser (quantised or float) into
// `to` (e.g. a q8_0 reference copy of a Q4_K_M model: fish requant IN OUT --to q8_0), rows on
// `pool`. A candidate whose row length is not a multiple of to's block is skipped and listed.
// Errors: `to` has no quantiser.
Result<RequantResult> requantize_gguf_to(const GgufFile& f, GgmlType to, ThreadPool& pool);

// Writes f to `path` with the converted tensors of `rq` (from requantize_gguf over the same f)
// in place of the originals, every other tensor and all metadata copied, plus fish.requant.mode
// (fish.requant.to for requantize_gguf_to).
// Errors: the writer's (I/O, naming the path).
Status write_requantized_gguf(const GgufFile& f, const RequantResult& rq, const std::string& path);

}  // namespace fish
