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

// splitmix64 (Steele, Lea, Flood 2014): a fixed, portable generator (std distributions are not
// specified bit-exactly across standard libraries, so they would make CIs platform-dependent).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) without modulo bias (rejection of the short top range).
  size_t below(size_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do r = next();
    while (r >= limit);
    return static_cast<size_t>(r % n);
  }
};

double resampled_median(const std::vector<double>& x, SplitMix64& rng, std::vector<double>& tmp) {
  tmp.resize(x.size());
  for (double& t : tmp) t = x[rng.below(x.size())];
  std::sort(tmp.begin(), tmp.end());
  return median_of_sorted(tmp);
}

// Quantile q of sorted v by linear interpolation between order statistics (numpy's default).
double quantile_of_sorted(const std::vector<double>& v, double q) {
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  if (i + 1 >= v.size()) return v.back();
  return v[i] + (pos - static_cast<double>(i)) * (v[i + 1] - v[i]);
}

}  // namespace

double median(std::span<const double> x) {
  assert(!x.empty());
  return median_of_sorted(sorted(x));
}

Interval median_ci95(std::span<const double> x) {
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
  if (k == 0) return {v.front(), v.back()};
  return {v[k - 1], v[n - k]};
}

double coefficient_of_variation(std::span<const double> x) {
  if (x.size() < 2) return 0;
  const double mean = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
  if (mean == 0) return 0;
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  return std::sqrt(ss / static_cast<double>(x.size() - 1)) / std::fabs(mean);
}

RatioEstimate ratio_of_medians(std::span<const double> head, std::span<const double> base,
                               int n_resamples, uint64_t seed) {
  assert(!head.empty() && !base.empty() && n_resamples >= 100);
  const std::vector<double> h = sorted(head), b = sorted(base);
  RatioEstimate r;
  const double base_median = median_of_sorted(b);
  assert(base_median != 0);
  r.ratio = median_of_sorted(h) / base_median;
  SplitMix64 rng{seed};
  std::vector<double> ratios, tmp;
  ratios.reserve(static_cast<size_t>(n_resamples));
  for (int i = 0; i < n_resamples; ++i) {
    const double mh = resampled_median(h, rng, tmp);
    const double mb = resampled_median(b, rng, tmp);
    if (mb != 0) ratios.push_back(mh / mb);
  }
  std::sort(ratios.begin(), ratios.end());
  if (ratios.empty()) return {r.ratio, {r.ratio, r.ratio}};
  r.ci95 = {quantile_of_sorted(ratios, 0.025), quantile_of_sorted(ratios, 0.975)};
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
  if (!ties && n <= 50) {
    // N(i, j, u): orderings of i a's and j b's with U = u. The largest element is an a above
    // all j b's, or a b: N(i, j, u) = N(i-1, j, u-j) + N(i, j-1, u) (Mann & Whitney 1947).
    // Counts are exact in doubles (C(50, 25) ~ 1.3e14 < 2^53).
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
    const std::vector<double>& dist = prev[na];
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

}  // namespace fish
