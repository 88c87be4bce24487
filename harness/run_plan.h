// The order `fish run` visits its cells in (measure.order, harness/experiment.h).
//
// The run's cells are grouped into units: a FISH cell together with the llama.cpp twins right
// after it (harness/peer_llama.h is_llama_twin), which take turns with its repetitions, or a lone
// cell. A visit measures one unit for some repetitions; the visits of a run are
//   fixed:      every unit once, in plan order, with all repetitions;
//   shuffle:    every unit once, with all repetitions, in a permutation drawn from the seed
//               (Fisher-Yates over a std::mt19937_64, so the order is the same on every platform);
//   interleave: `repetitions` rounds, each visiting every unit in plan order for one repetition;
//               `last` marks the final round, where a cell's rows are written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/experiment.h"

namespace fish {

struct Visit {
  size_t unit = 0;          // index into the run's units
  int64_t round = 0;        // 0 for fixed and shuffle
  int64_t repetitions = 0;  // recorded repetitions this visit (after measure.warmup unrecorded)
  bool last = false;        // the unit's final visit: its rows are written
  bool operator==(const Visit&) const = default;
};

// The visits of `n_units` units under m.order, m.repetitions and m.seed (see the header comment).
std::vector<Visit> plan_visits(size_t n_units, const MeasureSpec& m);

// A permutation of 0..n-1 drawn from `seed` (the shuffle order).
std::vector<size_t> shuffled_indices(size_t n, uint64_t seed);

// Units of `cells` (in plan order): each cell starts a unit unless it is a llama.cpp twin of the
// FISH cell that started the current one (same model, the cells right after it).
std::vector<std::vector<size_t>> plan_units(const std::vector<Cell>& cells);

}  // namespace fish
