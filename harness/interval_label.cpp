// Interval wording for tables, plots and the gate; see interval_label.h.
#include "harness/interval_label.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace fish {
namespace {

std::string n_range(const IntervalMix& m) {
  return m.min_n == m.max_n ? fmt::format("{}", m.min_n)
                            : fmt::format("{} to {}", m.min_n, m.max_n);
}

std::string percent(double p) {
  const double pct = 100 * p;
  return std::fabs(pct - std::round(pct)) < 1e-9 ? fmt::format("{:.0f}%", pct)
                                                 : fmt::format("{:.2f}%", pct);
}

}  // namespace

void IntervalMix::add(IntervalKind kind, int64_t n) {
  (kind == IntervalKind::ci95 ? any_ci95 : any_min_max) = true;
  min_n = min_n == 0 ? n : std::min(min_n, n);
  max_n = std::max(max_n, n);
}

std::string interval_cell(const std::string& median, const std::string& lo, const std::string& hi,
                          IntervalKind kind, const IntervalMix& mix) {
  std::string s = fmt::format("{} [{}, {}]", median, lo, hi);
  if (kind == IntervalKind::min_max && mix.mixed()) s += " (min-max)";
  return s;
}

std::string median_legend(const std::string& what, const IntervalMix& mix) {
  if (mix.empty()) return "";
  const std::string ci = "the order-statistic 95% CI of the median";
  const int64_t k = int64_t(kMinSamplesForMedianCi);
  if (!mix.any_min_max)
    return fmt::format("{}: median [95% CI] over {} repetitions ({}).", what, n_range(mix), ci);
  // The smallest n among the min-max rows gives the lowest coverage; every such n is below k.
  const int64_t n_low = mix.min_n;
  const std::string coverage = fmt::format("it covers the median with probability {} at n = {}",
                                           percent(min_max_coverage(size_t(n_low))), n_low);
  if (!mix.any_ci95)
    return fmt::format(
        "{}: median [min, max] over {} repetitions: fewer than {} allow no 95% CI of the median, "
        "so the brackets hold the range of the samples ({}).",
        what, n_range(mix), k, coverage);
  return fmt::format(
      "{}: median [95% CI] ({}) where a row has >= {} repetitions; [min, max], marked (min-max), "
      "where it has fewer ({}); repetitions per row: {}.",
      what, ci, k, coverage, n_range(mix));
}

std::string ratio_legend(const IntervalMix& mix) {
  if (mix.empty()) return "";
  const std::string ci =
      "95% CI of the ratio: the ratios the two-sided Mann-Whitney test does not reject at 5%";
  if (!mix.any_min_max) return fmt::format("Ratios: [{}].", ci);
  const std::string range =
      "[min, max] of the pairwise sample ratios, where the sample sizes allow no 95% CI (the "
      "smallest p they allow is above 0.05)";
  if (!mix.any_ci95) return fmt::format("Ratios: {}.", range);
  return fmt::format("Ratios: [{}]; marked (min-max): {}.", ci, range);
}

std::string plot_interval_label(const std::string& title, const IntervalMix& mix) {
  if (mix.empty()) return title + " (median)";
  if (!mix.any_min_max) return title + " (median; bars: 95% CI)";
  if (!mix.any_ci95)
    return fmt::format("{} (median; bars: min-max of n = {})", title, n_range(mix));
  return fmt::format("{} (median; bars: 95% CI, min-max where n < {})", title,
                     kMinSamplesForMedianCi);
}

}  // namespace fish
