// Greedy and seeded temperature / top-k / top-p sampling; see sampling.h.
#include "engine/sampling.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace fish {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

int32_t greedy_token(std::span<const float> logits) {
  assert(!logits.empty());
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return int32_t(best);
}

int32_t log_softmax(std::span<const float> logits, float* out) {
  const int32_t top = greedy_token(logits);
  const double mx = logits[size_t(top)];
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - mx);
  const double lse = mx + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = float(double(logits[i]) - lse);
  return top;
}

Sampler::Sampler(const SamplingParams& p) : p_(p) {
  uint64_t x = p.seed;
  for (uint64_t& s : s_) s = splitmix64(x);
}

double Sampler::uniform() {
  // xoshiro256** (Blackman & Vigna).
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return double(result >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (p_.temperature <= 0.0f) return greedy_token(logits);
  const int64_t n = int64_t(logits.size());
  const int64_t k = (p_.top_k > 0 && p_.top_k < n) ? p_.top_k : n;
  ids_.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) ids_[size_t(i)] = int32_t(i);
  // Most likely first; ties by lower id so the order is fully defined.
  auto more_likely = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] ||
           (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  if (k < n) std::nth_element(ids_.begin(), ids_.begin() + k, ids_.end(), more_likely);
  ids_.resize(size_t(k));
  std::sort(ids_.begin(), ids_.end(), more_likely);

  const double inv_t = 1.0 / double(p_.temperature);
  const double mx = double(logits[size_t(ids_[0])]);
  probs_.resize(size_t(k));
  double sum = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    probs_[size_t(i)] = std::exp((double(logits[size_t(ids_[size_t(i)])]) - mx) * inv_t);
    sum += probs_[size_t(i)];
  }
  // Nucleus: keep the smallest prefix whose mass reaches top_p (at least one token).
  int64_t keep = k;
  if (p_.top_p < 1.0f) {
    double acc = 0.0;
    for (int64_t i = 0; i < k; ++i) {
      acc += probs_[size_t(i)] / sum;
      if (acc >= double(p_.top_p)) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0.0;
  for (int64_t i = 0; i < keep; ++i) kept += probs_[size_t(i)];
  const double r = uniform() * kept;
  double acc = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += probs_[size_t(i)];
    if (r < acc) return ids_[size_t(i)];
  }
  return ids_[size_t(keep - 1)];
}

}  // namespace fish
