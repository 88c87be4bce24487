// Statistics against values computed by hand or read from published tables (no scipy here):
// order-statistic CIs of the median (the binomial table), Mann-Whitney critical values
// (two-sided alpha = 0.05: n = 5 -> 2, n = 8 -> 13, n = 10 -> 23), the tie-corrected normal
// approximation worked through on paper; the ratio's interval by inverting the tested test.
#include "harness/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace fish {
namespace {

std::vector<double> iota(int from, int to) {  // from..to inclusive
  std::vector<double> v;
  for (int i = from; i <= to; ++i) v.push_back(i);
  return v;
}

// Two samples of n each whose U of `a` (pairs a_i > b_j) is exactly `u`: b = 0, 2, 4, ...;
// each a value is odd and sits just above as many b values as still needed.
void samples_with_u(int n, int u, std::vector<double>* a, std::vector<double>* b) {
  a->clear();
  b->clear();
  for (int j = 0; j < n; ++j) b->push_back(2.0 * j);
  for (int i = 0; i < n; ++i) {
    const int above = std::min(u, n);  // b values below this a
    u -= above;
    a->push_back(2.0 * above - 1 + 1e-3 * i);  // distinct, between b[above-1] and b[above]
  }
}

TEST(Stats, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(median(std::vector<double>{3, 1, 2}), 2);
  EXPECT_EQ(median(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median(std::vector<double>{7}), 7);
}

TEST(Stats, MedianCiFollowsTheBinomialTable) {
  // n = 9: P(X <= 1) = 10/512 <= 2.5% < P(X <= 2) = 46/512 -> [x2, x8].
  Interval ci = median_interval(iota(1, 9));
  EXPECT_EQ(ci.lo, 2);
  EXPECT_EQ(ci.hi, 8);
  // n = 10: P(X <= 1) = 11/1024, P(X <= 2) = 56/1024 -> [x2, x9].
  ci = median_interval(iota(1, 10));
  EXPECT_EQ(ci.lo, 2);
  EXPECT_EQ(ci.hi, 9);
  // n = 20: P(X <= 5) = 0.0207, P(X <= 6) = 0.0577 -> [x6, x15].
  ci = median_interval(iota(1, 20));
  EXPECT_EQ(ci.lo, 6);
  EXPECT_EQ(ci.hi, 15);
  // n = 6: P(X <= 0) = 1/64 -> [min, max] with 96.9% coverage.
  ci = median_interval(std::vector<double>{6, 5, 4, 3, 2, 1});
  EXPECT_EQ(ci.lo, 1);
  EXPECT_EQ(ci.hi, 6);
  EXPECT_EQ(ci.kind, IntervalKind::ci95);
}

TEST(Stats, BelowSixSamplesTheMedianHasNoCiOnlyItsRangeLabelledAsSuch) {
  const Interval ci = median_interval(std::vector<double>{10, 12, 11, 30, 9});
  EXPECT_EQ(ci.lo, 9);
  EXPECT_EQ(ci.hi, 30);
  EXPECT_EQ(ci.kind, IntervalKind::min_max);
  EXPECT_EQ(median_interval(std::vector<double>{7}).kind, IntervalKind::min_max);
  EXPECT_EQ(std::string(interval_title(ci.kind)), "min-max");
  EXPECT_EQ(std::string(interval_key(ci.kind)), "min_max");
  // [min, max] of n samples covers the median with 1 - 2^(1-n): 75% at 3, 93.75% at 5.
  EXPECT_EQ(min_max_coverage(3), 0.75);
  EXPECT_EQ(min_max_coverage(5), 0.9375);
  EXPECT_EQ(min_max_coverage(1), 0);
  EXPECT_GE(min_max_coverage(kMinSamplesForMedianCi), 0.95);
  EXPECT_LT(min_max_coverage(kMinSamplesForMedianCi - 1), 0.95);
}

TEST(Stats, CoefficientOfVariationUsesSampleStdDev) {
  // mean 5, sum of squares 32, sample variance 32/7.
  EXPECT_NEAR(coefficient_of_variation(std::vector<double>{2, 4, 4, 4, 5, 5, 7, 9}),
              std::sqrt(32.0 / 7.0) / 5.0, 1e-15);
  EXPECT_EQ(coefficient_of_variation(std::vector<double>{3}), 0);
  EXPECT_EQ(coefficient_of_variation(std::vector<double>{4, 4, 4}), 0);
}

TEST(Stats, RatioOfConstantSamplesHasAPointInterval) {
  const RatioEstimate r = ratio_of_medians(std::vector<double>{2, 2, 2}, std::vector<double>{1, 1});
  EXPECT_EQ(r.ratio, 2);
  EXPECT_EQ(r.interval.lo, 2);
  EXPECT_EQ(r.interval.hi, 2);
}

// The p-value of the Mann-Whitney test of head / rho against base.
double p_at_ratio(const std::vector<double>& head, const std::vector<double>& base, double rho) {
  std::vector<double> scaled;
  for (double x : head) scaled.push_back(x / rho);
  return mann_whitney_u(scaled, base).p;
}

TEST(Stats, RatioCiIsTheSetOfRatiosTheMannWhitneyTestDoesNotReject) {
  // 5 vs 5: the critical U is 2, so the CI is the 3rd..23rd of the 25 pairwise ratios; a ratio
  // just inside is not rejected at 5%, one just outside is.
  const std::vector<double> head{10.3, 11.9, 12.2, 13.7, 14.1}, base{5.1, 5.45, 6.2, 6.6, 7.3};
  const RatioEstimate r = ratio_of_medians(head, base);
  EXPECT_EQ(r.ratio, 12.2 / 6.2);
  ASSERT_EQ(r.interval.kind, IntervalKind::ci95);
  std::vector<double> ratios;
  for (double h : head)
    for (double b : base) ratios.push_back(h / b);
  std::sort(ratios.begin(), ratios.end());
  EXPECT_EQ(r.interval.lo, ratios[2]);
  EXPECT_EQ(r.interval.hi, ratios[22]);
  EXPECT_GT(p_at_ratio(head, base, r.interval.lo * (1 + 1e-9)), 0.05);
  EXPECT_GT(p_at_ratio(head, base, r.interval.hi * (1 - 1e-9)), 0.05);
  EXPECT_LE(p_at_ratio(head, base, r.interval.lo * (1 - 1e-9)), 0.05);
  EXPECT_LE(p_at_ratio(head, base, r.interval.hi * (1 + 1e-9)), 0.05);
}

TEST(Stats, RatioCiOfLargeSamplesUsesTheNormalApproximation) {
  // 30 vs 30 (> 50 values): still the inversion of the test, now of its normal approximation.
  std::vector<double> head, base;
  for (int i = 0; i < 30; ++i) {
    head.push_back(200 + 7.0 * ((i * 17) % 30) + 0.01 * i);
    base.push_back(100 + 3.0 * ((i * 11) % 30) + 0.013 * i);
  }
  const RatioEstimate r = ratio_of_medians(head, base);
  ASSERT_EQ(r.interval.kind, IntervalKind::ci95);
  EXPECT_LT(r.interval.lo, r.ratio);
  EXPECT_GT(r.interval.hi, r.ratio);
  EXPECT_GT(p_at_ratio(head, base, r.interval.lo * (1 + 1e-9)), 0.05);
  EXPECT_LE(p_at_ratio(head, base, r.interval.lo * (1 - 1e-6)), 0.05);
}

TEST(Stats, RatioOfThreeVersusThreeHasOnlyTheRangeOfThePairwiseRatios) {
  // The smallest two-sided p of 3 vs 3 is 0.1: no interval reaches 95%.
  const RatioEstimate r =
      ratio_of_medians(std::vector<double>{50, 52, 49}, std::vector<double>{100, 97, 103});
  EXPECT_EQ(r.interval.kind, IntervalKind::min_max);
  EXPECT_EQ(r.interval.lo, 49.0 / 103.0);
  EXPECT_EQ(r.interval.hi, 52.0 / 97.0);
  // 4 vs 4 reaches it (2 / C(8, 4) = 0.029): the same range, now a 97.1% CI.
  EXPECT_EQ(
      ratio_of_medians(std::vector<double>{50, 52, 49, 51}, std::vector<double>{100, 97, 103, 99})
          .interval.kind,
      IntervalKind::ci95);
}

TEST(Stats, SmallestMannWhitneyPOfTwoSampleSizes) {
  EXPECT_NEAR(mann_whitney_min_p(3, 3), 0.1, 1e-15);         // 2 / C(6, 3)
  EXPECT_NEAR(mann_whitney_min_p(4, 4), 2.0 / 70.0, 1e-15);  // 2 / C(8, 4)
  EXPECT_NEAR(mann_whitney_min_p(2, 2), 1.0 / 3.0, 1e-15);   // 2 / C(4, 2)
  EXPECT_NEAR(mann_whitney_min_p(3, 4), 2.0 / 35.0, 1e-15);  // above 0.05: underpowered
  EXPECT_NEAR(mann_whitney_min_p(8, 8), 2.0 / 12870.0, 1e-18);
  EXPECT_LT(mann_whitney_min_p(30, 30), 1e-9);  // the normal approximation
  EXPECT_EQ(mann_whitney_min_p(0, 5), 1);
}

TEST(Stats, MannWhitneyExactSmallSamples) {
  // {1,2,3} vs {4,5,6}: U = 0 in 1 of C(6,3) = 20 orderings; two-sided p = 2/20.
  MannWhitney r = mann_whitney_u(iota(1, 3), iota(4, 6));
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.u_a, 0);
  EXPECT_NEAR(r.p, 0.1, 1e-15);
  // {1..5} vs {6..10}: 1 of C(10,5) = 252; p = 2/252. Symmetric in the argument order.
  r = mann_whitney_u(iota(6, 10), iota(1, 5));
  EXPECT_EQ(r.u_a, 25);
  EXPECT_NEAR(r.p, 2.0 / 252.0, 1e-15);
  // Unequal sizes: {1,2} vs {3,4,5}: 1 of C(5,2) = 10 orderings has U = 0; {2,4} vs {1,3,5}:
  // U = 1 + 2 = 3 = n_a n_b / 2, the centre, so p = 1.
  r = mann_whitney_u(iota(1, 2), iota(3, 5));
  EXPECT_NEAR(r.p, 0.2, 1e-15);
  r = mann_whitney_u(std::vector<double>{2, 4}, std::vector<double>{1, 3, 5});
  EXPECT_EQ(r.u_a, 3);
  EXPECT_EQ(r.p, 1);
}

TEST(Stats, MannWhitneyMatchesPublishedCriticalValues) {
  // Critical U (two-sided 0.05): significant at U = crit, not at crit + 1.
  for (const auto& [n, crit] : {std::pair{5, 2}, std::pair{8, 13}, std::pair{10, 23}}) {
    std::vector<double> a, b;
    samples_with_u(n, crit, &a, &b);
    MannWhitney r = mann_whitney_u(a, b);
    EXPECT_EQ(r.u_a, crit) << "n=" << n;
    EXPECT_LE(r.p, 0.05) << "n=" << n;
    samples_with_u(n, crit + 1, &a, &b);
    r = mann_whitney_u(a, b);
    EXPECT_EQ(r.u_a, crit + 1) << "n=" << n;
    EXPECT_GT(r.p, 0.05) << "n=" << n;
  }
  // Exact tails by the recurrence, checked by hand for n = 5: P(U <= 2) = 4/252 -> p = 8/252.
  std::vector<double> a, b;
  samples_with_u(5, 2, &a, &b);
  EXPECT_NEAR(mann_whitney_u(a, b).p, 8.0 / 252.0, 1e-15);
}

TEST(Stats, MannWhitneyTieCorrectedNormalApproximation) {
  // Pooled 1 2 2 2 3 3 4 5: mid-ranks 1, 3, 3, 3, 5.5, 5.5, 7, 8; R_a = 1+3+3+5.5 = 12.5,
  // U_a = 12.5 - 10 = 2.5; mu = 8; ties t = 3, 2: sum(t^3 - t) = 30;
  // var = 16/12 (9 - 30/56) = 11.2857; z = (5.5 - 0.5) / 3.35942 = 1.48835; p = erfc(z / sqrt 2).
  const MannWhitney r =
      mann_whitney_u(std::vector<double>{1, 2, 2, 3}, std::vector<double>{2, 3, 4, 5});
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.u_a, 2.5);
  EXPECT_NEAR(r.p, 0.13665824773814753, 1e-12);
}

TEST(Stats, MannWhitneyNormalApproximationForLargeSamples) {
  // 26 + 26 > 50 values: U = 0, mu = 338, var = 26*26/12 * 53; z = 337.5 / 54.641.
  std::vector<double> a = iota(1, 26), b;
  for (int i = 0; i < 26; ++i) b.push_back(26.5 + i);
  const MannWhitney r = mann_whitney_u(a, b);
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.u_a, 0);
  EXPECT_NEAR(r.p, 6.547526643655674e-10, 1e-20);
}

TEST(Stats, MannWhitneyOfIdenticalSamplesIsNotSignificant) {
  EXPECT_EQ(mann_whitney_u(std::vector<double>{3, 3, 3}, std::vector<double>{3, 3}).p, 1);
  EXPECT_EQ(mann_whitney_u(iota(1, 6), iota(1, 6)).p, 1);
}

}  // namespace
}  // namespace fish
