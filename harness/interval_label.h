// How tables, plots and the gate name an interval: "median [lo, hi]" with one legend line per
// table saying whether the brackets are a 95% CI or the [min, max] of too few repetitions (and
// that range's coverage), and a "(min-max)" mark on each cell where one table mixes both. The
// one place that wording lives, so report, compare, gate and the run's Markdown agree.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "harness/stats.h"

namespace fish {

// The intervals one table shows: which kinds occur and the range of sample counts.
struct IntervalMix {
  bool any_ci95 = false, any_min_max = false;
  int64_t min_n = 0, max_n = 0;  // over the intervals added; 0 when none
  void add(IntervalKind kind, int64_t n);
  bool mixed() const { return any_ci95 && any_min_max; }
  bool empty() const { return !any_ci95 && !any_min_max; }
};

// "MEDIAN [LO, HI]", with " (min-max)" appended to a min_max interval in a mixed table. The
// numbers come formatted (each table has its own precision).
std::string interval_cell(const std::string& median, const std::string& lo, const std::string& hi,
                          IntervalKind kind, const IntervalMix& mix);

// The legend under a table of medians of `what` (e.g. "Speeds"), e.g. "Speeds: median [min, max]
// over 3 repetitions: fewer than 6 allow no 95% CI of the median, so brackets hold the range of
// the samples (it covers the median with probability 75%)." Empty for an empty mix.
std::string median_legend(const std::string& what, const IntervalMix& mix);

// The legend under a table of ratios of medians (compare, gate), same rules, for the ratio's
// interval (harness/stats.h ratio_of_medians). Empty for an empty mix.
std::string ratio_legend(const IntervalMix& mix);

// A plot's y-axis label: "TITLE (median; bars: 95% CI)", "... bars: min-max of n = 3", or "...
// bars: 95% CI, min-max where n < 6".
std::string plot_interval_label(const std::string& title, const IntervalMix& mix);

}  // namespace fish
