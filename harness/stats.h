// Statistics for result rows: medians with distribution-free 95% CIs, the coefficient of
// variation, the ratio of two medians with a bootstrap CI, and the two-sided Mann-Whitney U test.
// Everything is deterministic (the bootstrap uses its own seeded generator), so reports and gate
// verdicts are reproducible byte for byte.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fish {

struct Interval {
  double lo = 0;
  double hi = 0;
};

// Median of x (mean of the two middle values for an even count). Precondition: x non-empty.
double median(std::span<const double> x);

// 95% CI of the median by order statistics (binomial, distribution-free): [x_(k), x_(n+1-k)] with
// the largest k whose two-sided coverage 1 - 2 P(Binom(n, 1/2) <= k-1) is still >= 95%. Below 6
// samples no pair reaches 95%, and [min, max] is returned (coverage 1 - 2^(1-n), 93.75% at n = 5).
// Precondition: x non-empty.
Interval median_ci95(std::span<const double> x);

// Sample standard deviation (n-1) over the mean; 0 for fewer than 2 samples or a zero mean.
double coefficient_of_variation(std::span<const double> x);

struct RatioEstimate {
  double ratio = 0;  // median(head) / median(base)
  Interval ci95;     // percentile bootstrap interval (2.5%, 97.5%)
};

// median(head) / median(base) with a percentile-bootstrap 95% CI: `n_resamples` times both
// groups are resampled with replacement (independently), the ratio of the resampled medians is
// taken, and the 2.5% / 97.5% quantiles of those ratios form the CI. The generator is
// splitmix64 seeded with `seed`, so the interval is reproducible. Preconditions: both non-empty,
// median(base) != 0, n_resamples >= 100.
RatioEstimate ratio_of_medians(std::span<const double> head, std::span<const double> base,
                               int n_resamples = 4000, uint64_t seed = 0x5eed'f15b'0001ULL);

struct MannWhitney {
  double u_a = 0;      // U of sample a: pairs (a_i, b_j) with a_i > b_j, ties counting 1/2
  double p = 1;        // two-sided p-value
  bool exact = false;  // true: exact permutation distribution; false: normal approximation
};

// Two-sided Mann-Whitney U test of a vs b. Without ties and with n_a + n_b <= 50 the p-value is
// exact (the permutation distribution of U, counted by dynamic programming: what tables list);
// otherwise it is the normal approximation with the tie-corrected variance
// n_a n_b / 12 ((n+1) - sum(t^3 - t) / (n (n-1))) and a continuity correction of 1/2 (the same
// as scipy.stats.mannwhitneyu's asymptotic method). All values equal: p = 1.
// Precondition: both non-empty.
MannWhitney mann_whitney_u(std::span<const double> a, std::span<const double> b);

}  // namespace fish
