// Chunked perplexity and KL statistics against a reference, as llama-perplexity computes and
// names them (fish perplexity; docs/perplexity.md).
//
// Chunking (llama-perplexity's): the text is tokenized with BOS as the vocabulary says and cut
// into n_chunks chunks of n_ctx tokens (what does not fill a chunk is dropped); each chunk runs
// from an empty cache with its first token replaced by BOS when the vocabulary adds one, and its
// positions [first, n_ctx - 1) with first = n_ctx / 2 are scored on the token that follows (so
// every scored token has at least n_ctx / 2 tokens of context).
//
// Per scored position: nll = -ln p(token); against a reference also KL(P_ref || P) in nats,
// Δp = p(token) - p_ref(token) and whether both argmaxes agree. Uncertainties are standard
// errors of the mean over the scored positions (positions are treated as independent, as
// llama-perplexity does); PPL ± is exp(mean nll) x that error; percentiles interpolate linearly
// between the order statistics at (n - 1) x fraction.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/tokenizer.h"

namespace fish {

struct TextChunks {
  int64_t n_ctx = 0;
  int64_t first = 0;
  int64_t n_chunks = 0;
  int64_t text_tokens = 0;      // tokens of the whole text (with BOS)
  std::vector<int32_t> tokens;  // n_chunks x n_ctx, as evaluated (BOS substituted)

  std::span<const int32_t> chunk(int64_t c) const {
    return std::span<const int32_t>(tokens).subspan(size_t(c * n_ctx), size_t(n_ctx));
  }
  int64_t n_scored() const { return n_ctx - 1 - first; }
};

// Errors: n_ctx < 4; fewer tokens than one chunk (naming how many the text has and needs);
// n_chunks larger than the text allows. n_chunks <= 0: as many as the text fills.
Result<TextChunks> chunk_text(const Tokenizer& tok, const std::string& text, int64_t n_ctx,
                              int64_t n_chunks);

// One scored position.
struct PositionScore {
  double nll = 0;  // -ln p(token)
  // Against a reference (unset without one):
  double nll_ref = 0, kld = 0, p = 0, p_ref = 0;
  bool same_top = false;
};

// Scores one position: lp = the model's log-softmax, lp_ref the reference's (empty: none),
// `next` the token that follows.
PositionScore score_position(std::span<const float> lp, int32_t top, std::span<const float> lp_ref,
                             int32_t top_ref, int32_t next);

struct ValueSummary {
  double mean = 0, se = 0;
  std::vector<std::pair<double, double>> quantiles;  // (fraction, value), fraction descending
};

struct PerplexityStats {
  int64_t n = 0;  // scored positions
  double ppl = 0, ppl_se = 0;
  bool has_reference = false;
  double ppl_ref = 0, ppl_ref_se = 0;
  double cor_ln_ppl = 0;  // correlation of the positions' nll with the reference's
  double ln_ratio = 0, ln_ratio_se = 0;
  double ratio = 0, ratio_se = 0;
  double diff = 0, diff_se = 0;  // PPL - PPL(ref)
  ValueSummary kld;              // nats; quantiles max, 99.9, 99, median, 10, 5, 1, 0.1, min
  ValueSummary dp;  // percent; max, 99.9, 99, 95, 90, 75, median, 25, 10, 5, 1, 0.1, min
  double rms_dp = 0, rms_dp_se = 0;      // percent
  double same_top = 0, same_top_se = 0;  // percent
};

// Precondition: !scores.empty(); has_reference when the scores carry reference fields.
PerplexityStats summarize(std::span<const PositionScore> scores, bool has_reference);

// llama-perplexity's blocks ("====== Perplexity statistics ======" ...), or one "Final estimate:
// PPL = X +/- Y" line without a reference.
std::string stats_text(const PerplexityStats& s);
nlohmann::json stats_json(const PerplexityStats& s);

}  // namespace fish
