#include "harness/stats.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

namespace fish {
namespace {

std::vector<double> sorted(std::span<const double> x) {
  std::vector<double> v(x.begin(), x.end());
  std::sort(v.begin(), v.end());
  return v;
}

double median_of_sorted(const std::vector<double>& v) {
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Counts of the orderings of n_a a's and n_b b's by U (the a's above the b's), u = 0..n_a n_b:
// the exact null distribution of the Mann-Whitney U. The largest element is an a above all
// j b's, or a b: N(i, j, u) = N(i-1, j, u-j) + N(i, j-1, u) (Mann & Whitney 1947). Counts are
// exact in doubles for n_a + n_b <= 50 (C(50, 25) ~ 1.3e14 < 2^53).
std::vector<double> u_null_counts(size_t na, size_t nb) {
  const size_t u_max = na * nb;
  std::vector<std::vector<double>> cur(na + 1, std::vector<double>(u_max + 1, 0));
  std::vector<std::vector<double>> prev = cur;  // N(., j-1, .)
  for (size_t j = 0; j <= nb; ++j) {
    for (size_t i = 0; i <= na; ++i) {
      for (size_t u = 0; u <= u_max; ++u) {
        double c = i == 0 ? (u == 0 ? 1.0 : 0.0) : 0.0;
        if (i > 0 && j > 0) c += prev[i][u];
        if (i > 0 && u >= j) c += cur[i - 1][u - j];
        cur[i][u] = c;
      }
    }
    std::swap(cur, prev);
  }
  return prev[na];
}

// Above this many values in all the exact distribution gives way to the normal approximation.
constexpr size_t kMaxExactMannWhitney = 50;

// How many of the sorted n_a n_b pairwise differences to trim from each end for a two-sided 95%
// interval: the largest k with 2 P(U <= k-1) <= 0.05, 0 when even k = 1 falls short.
size_t u_trim_for_ci95(size_t na, size_t nb) {
  const double fa = static_cast<double>(na), fb = static_cast<double>(nb);
  std::vector<double> p_u;  // P(U = u), u = 0..n_a n_b / 2 (the lower half is all k needs)
  if (na + nb <= kMaxExactMannWhitney) {
    const std::vector<double> counts = u_null_counts(na, nb);
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    for (size_t u = 0; u <= na * nb / 2; ++u) p_u.push_back(counts[u] / total);
  } else {
    // Normal approximation with a continuity correction of 1/2: P(U <= u) = Phi((u + 1/2 - mu)
    // / sd), differenced.
    const double mu = fa * fb / 2, sd = std::sqrt(fa * fb * (fa + fb + 1) / 12);
    auto cdf = [&](double u) { return 0.5 * std::erfc(-(u + 0.5 - mu) / sd / std::sqrt(2.0)); };
    for (size_t u = 0; u <= na * nb / 2; ++u) {
      const double fu = static_cast<double>(u);
      p_u.push_back(cdf(fu) - (u == 0 ? 0.0 : cdf(fu - 1)));
    }
  }
  size_t k = 0;
  double cdf = 0;  // P(U <= k)
  for (; k < p_u.size(); ++k) {
    cdf += p_u[k];
    if (2 * cdf > 0.05 + 1e-12) break;
  }
  return k;
}

}  // namespace

double median(std::span<const double> x) {
  assert(!x.empty());
  return median_of_sorted(sorted(x));
}

const char* interval_key(IntervalKind k) {
  return k == IntervalKind::ci95 ? "ci95" : "min_max";
}

const char* interval_title(IntervalKind k) {
  return k == IntervalKind::ci95 ? "95% CI" : "min-max";
}

double min_max_coverage(size_t n) {
  return n == 0 ? 0.0 : 1.0 - std::ldexp(1.0, 1 - static_cast<int>(std::min<size_t>(n, 1100)));
}

Interval median_interval(std::span<const double> x) {
  assert(!x.empty());
  const std::vector<double> v = sorted(x);
  const size_t n = v.size();
  // P(Binom(n, 1/2) = j) via lgamma, so large n neither overflows nor underflows.
  const double fn = static_cast<double>(n);
  double cdf = 0;
  size_t k = 0;  // order statistics trimmed from each end
  for (size_t j = 0; j < n / 2; ++j) {
    const double fj = static_cast<double>(j);
    cdf += std::exp(std::lgamma(fn + 1) - std::lgamma(fj + 1) - std::lgamma(fn - fj + 1) -
                    fn * std::log(2.0));  // now P(X <= j)
    if (cdf > 0.025) break;
    k = j + 1;
  }
  if (k == 0) return {v.front(), v.back(), IntervalKind::min_max};
  return {v[k - 1], v[n - k], IntervalKind::ci95};
}

double coefficient_of_variation(std::span<const double> x) {
  if (x.size() < 2) return 0;
  const double mean = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
  if (mean == 0) return 0;
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  return std::sqrt(ss / static_cast<double>(x.size() - 1)) / std::fabs(mean);
}

RatioEstimate ratio_of_medians(std::span<const double> head, std::span<const double> base) {
  assert(!head.empty() && !base.empty());
  const std::vector<double> h = sorted(head), b = sorted(base);
  assert(b.front() > 0);
  RatioEstimate r;
  r.ratio = median_of_sorted(h) / median_of_sorted(b);
  // log(h_i) - log(b_j) is monotone in h_i / b_j: the ratios' order statistics are the
  // log-differences' ones, so no logarithm is needed.
  std::vector<double> ratios;
  ratios.reserve(h.size() * b.size());
  for (double x : h)
    for (double y : b) ratios.push_back(x / y);
  std::sort(ratios.begin(), ratios.end());
  const size_t k = u_trim_for_ci95(h.size(), b.size());
  if (k == 0) {
    r.interval = {ratios.front(), ratios.back(), IntervalKind::min_max};
  } else {
    r.interval = {ratios[k - 1], ratios[ratios.size() - k], IntervalKind::ci95};
  }
  return r;
}

MannWhitney mann_whitney_u(std::span<const double> a, std::span<const double> b) {
  assert(!a.empty() && !b.empty());
  const size_t na = a.size(), nb = b.size(), n = na + nb;
  // Mid-ranks of the pooled sample; tie groups feed the variance correction.
  std::vector<std::pair<double, int>> pooled;  // (value, 0 = a / 1 = b)
  pooled.reserve(n);
  for (double v : a) pooled.push_back({v, 0});
  for (double v : b) pooled.push_back({v, 1});
  std::sort(pooled.begin(), pooled.end());
  double rank_sum_a = 0, tie_term = 0;
  bool ties = false;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && pooled[j].first == pooled[i].first) ++j;
    const double t = static_cast<double>(j - i);
    const double mid_rank = 0.5 * (static_cast<double>(i + 1) + static_cast<double>(j));
    for (size_t k = i; k < j; ++k)
      if (pooled[k].second == 0) rank_sum_a += mid_rank;
    if (j - i > 1) ties = true;
    tie_term += t * t * t - t;
    i = j;
  }
  MannWhitney r;
  const double fa = static_cast<double>(na), fb = static_cast<double>(nb);
  r.u_a = rank_sum_a - fa * (fa + 1) / 2;
  const double mu = fa * fb / 2;
  const size_t u_max = na * nb;
  if (!ties && n <= kMaxExactMannWhitney) {
    const std::vector<double> dist = u_null_counts(na, nb);
    const double total = std::accumulate(dist.begin(), dist.end(), 0.0);
    const double u_hi = std::max(r.u_a, fa * fb - r.u_a);  // the larger U, by symmetry
    double tail = 0;
    for (size_t u = static_cast<size_t>(std::ceil(u_hi)); u <= u_max; ++u) tail += dist[u];
    r.p = std::min(1.0, 2 * tail / total);
    r.exact = true;
    return r;
  }
  const double fn = static_cast<double>(n);
  const double var = fa * fb / 12 * ((fn + 1) - tie_term / (fn * (fn - 1)));
  if (var <= 0) return r;  // every value equal: no evidence of a difference
  const double z = std::max(0.0, std::fabs(r.u_a - mu) - 0.5) / std::sqrt(var);
  r.p = std::min(1.0, std::erfc(z / std::sqrt(2.0)));
  return r;
}

double mann_whitney_min_p(size_t n_a, size_t n_b) {
  if (n_a == 0 || n_b == 0) return 1;
  std::vector<double> a(n_a), b(n_b);  // a below b throughout: the most extreme U
  std::iota(a.begin(), a.end(), 0.0);
  std::iota(b.begin(), b.end(), static_cast<double>(n_a));
  return mann_whitney_u(a, b).p;
}

}  // namespace fish
