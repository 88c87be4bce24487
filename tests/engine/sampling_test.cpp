// Greedy and seeded sampling: determinism, the top-k / top-p cuts and the sampled frequencies.
#include "engine/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace fish {
namespace {

TEST(Sampling, GreedyPicksTheArgmaxAndTheLowerIdOnTies) {
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  EXPECT_EQ(greedy_token(l), 1);
  const std::vector<float> one = {-3.0f};
  EXPECT_EQ(greedy_token(one), 0);
}

TEST(Sampling, ZeroTemperatureIsGreedy) {
  Sampler s({.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 5});
  const std::vector<float> l = {0.1f, 0.3f, 0.2f};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.sample(l), 1);
}

std::vector<int32_t> draws(const SamplingParams& p, const std::vector<float>& l, int n) {
  Sampler s(p);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.sample(l));
  return out;
}

TEST(Sampling, SameSeedGivesTheSameTokensAndAnotherSeedDoesNot) {
  std::vector<float> l(100);
  for (size_t i = 0; i < l.size(); ++i) l[i] = float(std::sin(double(i)));  // a flat-ish spread
  const SamplingParams p{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 42};
  SamplingParams q = p;
  q.seed = 43;
  EXPECT_EQ(draws(p, l, 200), draws(p, l, 200));
  EXPECT_NE(draws(p, l, 200), draws(q, l, 200));
}

TEST(Sampling, TopKOneIsGreedyAtAnyTemperature) {
  const std::vector<float> l = {0.0f, 0.1f, 0.05f, 0.09f};
  for (int32_t t : draws({.temperature = 5.0f, .top_k = 1, .top_p = 1.0f, .seed = 1}, l, 50))
    EXPECT_EQ(t, 1);
}

TEST(Sampling, TopKKeepsOnlyTheKMostLikely) {
  const std::vector<float> l = {3.0f, 0.0f, 2.9f, 2.8f, 0.1f, 2.7f};
  for (int32_t t : draws({.temperature = 10.0f, .top_k = 3, .top_p = 1.0f, .seed = 2}, l, 300))
    EXPECT_TRUE(t == 0 || t == 2 || t == 3) << t;
}

TEST(Sampling, TopPKeepsTheSmallestPrefixReachingP) {
  // softmax: p(0) ~ 0.84, p(1) ~ 0.11, others small. top_p 0.8 keeps only token 0; 0.9 adds 1.
  const std::vector<float> l = {4.0f, 2.0f, 0.0f, 0.0f, -1.0f};
  for (int32_t t : draws({.temperature = 1.0f, .top_k = 0, .top_p = 0.8f, .seed = 3}, l, 200))
    EXPECT_EQ(t, 0);
  bool saw1 = false;
  for (int32_t t : draws({.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .seed = 3}, l, 400)) {
    EXPECT_TRUE(t == 0 || t == 1) << t;
    saw1 |= t == 1;
  }
  EXPECT_TRUE(saw1);
}

TEST(Sampling, FrequenciesFollowTheTemperedSoftmax) {
  const std::vector<float> l = {1.0f, 0.0f, -1.0f};
  const float temp = 2.0f;
  const int n = 40000;
  std::vector<int> count(3);
  for (int32_t t : draws({.temperature = temp, .top_k = 0, .top_p = 1.0f, .seed = 9}, l, n))
    ++count[size_t(t)];
  double z = 0;
  for (float x : l) z += std::exp(double(x) / temp);
  for (size_t i = 0; i < 3; ++i) {
    const double want = std::exp(double(l[i]) / temp) / z;
    // 40000 draws: the standard error is < 0.0025; 0.015 is > 6 sigma.
    EXPECT_NEAR(double(count[i]) / n, want, 0.015) << "token " << i;
  }
}

}  // namespace
}  // namespace fish
