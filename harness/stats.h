// Statistics for result rows: medians with their distribution-free intervals, the coefficient of
// variation, the ratio of two medians with a distribution-free interval, and the two-sided
// Mann-Whitney U test with the smallest p-value two sample sizes allow. An interval is named for
// what it is: a 95% CI only where the sample sizes allow one, otherwise the range [min, max].
// Everything is deterministic, so reports and gate verdicts are reproducible byte for byte.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace fish {

// ci95: covers the true value with probability >= 95% (distribution-free). min_max: the sample
// sizes allow no such interval, so the range of the samples is given (and labelled as such).
enum class IntervalKind { ci95, min_max };

struct Interval {
  double lo = 0;
  double hi = 0;
  IntervalKind kind = IntervalKind::ci95;
};

// "ci95" / "min_max": the JSON key of a results file's speed metric and the CSV value.
const char* interval_key(IntervalKind k);
// "95% CI" / "min-max": how tables, plots and the gate label an interval.
const char* interval_title(IntervalKind k);

// The fewest samples whose order statistics give a 95% CI of the median: 1 - 2^(1-n) >= 0.95.
inline constexpr size_t kMinSamplesForMedianCi = 6;

// Median of x (mean of the two middle values for an even count). Precondition: x non-empty.
double median(std::span<const double> x);

// Interval of the median by order statistics (binomial, distribution-free): [x_(k), x_(n+1-k)]
// with the largest k whose two-sided coverage 1 - 2 P(Binom(n, 1/2) <= k-1) is >= 95%, kind
// ci95. Below kMinSamplesForMedianCi samples no pair reaches 95%: [min, max], kind min_max
// (coverage min_max_coverage(n): 75% at n = 3, 93.75% at n = 5). Precondition: x non-empty.
Interval median_interval(std::span<const double> x);

// Probability that [min, max] of n samples covers the median: 1 - 2^(1-n) (0 for n = 1).
double min_max_coverage(size_t n);

// Sample standard deviation (n-1) over the mean; 0 for fewer than 2 samples or a zero mean.
double coefficient_of_variation(std::span<const double> x);

struct RatioEstimate {
  double ratio = 0;   // median(head) / median(base)
  Interval interval;  // of the ratio, see ratio_of_medians
};

// median(head) / median(base) with the distribution-free interval of the ratio that inverts the
// Mann-Whitney test on log samples (Bauer 1972; R's wilcox.test(log h, log b, conf.int = TRUE)):
// of the n_h n_b pairwise ratios h_i / b_j sorted, [r_(k), r_(N+1-k)] with the largest k whose
// coverage 1 - 2 P(U <= k-1) is >= 95% (P from the exact null distribution of U for n_h + n_b <=
// 50, else its normal approximation), kind ci95. Where even k = 1 falls short (the smallest
// two-sided p the sizes allow exceeds 0.05, e.g. 3 vs 3) the interval is the range of the
// pairwise ratios [min h / max b, max h / min b], kind min_max. The CI excludes 1 exactly when
// the exact test would reject at 5% (no ties). Preconditions: both non-empty, base samples > 0.
RatioEstimate ratio_of_medians(std::span<const double> head, std::span<const double> base);

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

// The smallest two-sided p-value mann_whitney_u can return for samples of these sizes (complete
// separation, no ties): 2 / C(n_a + n_b, n_a) where exact, e.g. 0.1 for 3 vs 3, 0.029 for 4 vs 4.
// A test whose smallest p is >= alpha cannot reject at alpha whatever the data: underpowered.
// 1 when a size is 0.
double mann_whitney_min_p(size_t n_a, size_t n_b);

}  // namespace fish
