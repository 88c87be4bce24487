// Next-token choice from logits: greedy (argmax), or seeded sampling with temperature, top-k and
// top-p (nucleus), applied in that order as llama.cpp's default chain does (top-k, top-p on the
// tempered distribution).
//
// Deterministic: the same seed and logits give the same tokens on every platform (a 64-bit
// SplitMix/xoshiro generator and an explicit uniform conversion; no std:: distributions, whose
// output is implementation-defined).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fish {

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy
  int top_k = 40;            // <= 0: no top-k cut
  float top_p = 0.95f;       // >= 1: no nucleus cut
  uint64_t seed = 0;
};

// argmax; ties go to the lower id. Precondition: logits not empty.
int32_t greedy_token(std::span<const float> logits);

// log-softmax of `logits` into out[0, logits.size()) (sums in double); returns the argmax.
// Precondition: logits not empty.
int32_t log_softmax(std::span<const float> logits, float* out);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);

  // Greedy when temperature <= 0; else draws from softmax(logits / T) restricted to the top_k
  // most likely tokens and then to the smallest prefix whose probability reaches top_p.
  int32_t sample(std::span<const float> logits);

  const SamplingParams& params() const { return p_; }

 private:
  double uniform();  // [0, 1) with 53 random bits

  SamplingParams p_;
  uint64_t s_[4];              // xoshiro256** state
  std::vector<int32_t> ids_;   // candidate ids, reused between calls
  std::vector<double> probs_;  // their probabilities
};

}  // namespace fish
