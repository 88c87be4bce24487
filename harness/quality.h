// Output quality of a configuration against the experiment's reference configuration
// (quality.reference, run on the CPU path once per model):
//   top1      share of text positions where the cell's argmax equals the reference's;
//   kl        KL(P_ref || P_cell) in nats per position: mean, p99 (nearest rank), max;
//   ppl       the cell's perplexity on the text, exp(mean -log p(next token));
//   greedy_exact  prompts (one per line of quality.prompt_file) whose greedy continuation of
//             greedy_tokens tokens equals the reference's token for token.
// top1/kl/ppl are teacher-forced over the first n_tokens tokens of quality.text (BOS as the
// vocabulary says): every position t < n_tokens - 1 is scored on the distribution of token t+1.
// With quality.source "greedy" they are teacher-forced over the reference's own greedy run:
// prompt_file's first line, then n_tokens greedy tokens of the reference; the n_tokens
// positions that predicted a generated token are scored (the seed's GPU quality check: the
// reference's argmax there is the token that follows).
// The reference keeps its log-probabilities in memory: (n_tokens - 1) x n_vocab floats (128
// tokens of Gemma 3's 262144-token vocabulary: 133 MB).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/config.h"
#include "engine/gpu_placement.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "harness/experiment.h"

namespace fish {

struct QualityReference {
  std::vector<int32_t> text_tokens;           // teacher-forced tokens
  int64_t first_scored = 0;                   // positions [first_scored, size - 1) are scored
  std::vector<float> logprobs;                // scored positions x n_vocab, log-softmax
  std::vector<int32_t> top1;                  // argmax per scored position
  std::vector<std::vector<int32_t>> prompts;  // tokenized prompt lines
  std::vector<std::vector<int32_t>> greedy;   // reference continuation per prompt
};

struct QualityMetrics {
  std::optional<double> top1, kl_mean, kl_p99, kl_max, ppl;
  std::optional<int64_t> greedy_n, greedy_of;
  uint64_t gpu_fallbacks = 0;  // Session::gpu_fallbacks() of the scoring session
};

// Runs the reference configuration (q.reference) for what q.metrics needs.
// Errors: unreadable text or prompt file, too few text tokens, the engine's.
Result<QualityReference> build_quality_reference(std::shared_ptr<const Model> model,
                                                 const Tokenizer& tok, const QualitySpec& q);

// Scores `config` against the reference. The session is created here with the cell's options
// but n_ctx large enough for the text and the prompts (quality does not depend on n_ctx). `gpu`:
// the gpu path's placement (its row scores what the GPU computes); null: the CPU path.
Result<QualityMetrics> measure_quality(std::shared_ptr<const Model> model, const Config& config,
                                       const QualityReference& ref, const QualitySpec& q,
                                       std::shared_ptr<const GpuPlacement> gpu = nullptr);

// Fills the quality keys of a row's metrics object (null for what was not measured).
void quality_metrics_json(const QualityMetrics& m, nlohmann::json& metrics);

}  // namespace fish
