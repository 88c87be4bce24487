// Visiting order of a run's cells; see run_plan.h.
#include "harness/run_plan.h"

#include <numeric>
#include <random>

#include "harness/peer_llama.h"

namespace fish {

std::vector<size_t> shuffled_indices(size_t n, uint64_t seed) {
  std::vector<size_t> v(n);
  std::iota(v.begin(), v.end(), size_t(0));
  // Fisher-Yates with a plain modulo: std::shuffle and uniform_int_distribution are
  // implementation-defined, and the order must be the same wherever the seed is read back.
  std::mt19937_64 rng(seed);
  for (size_t i = n; i > 1; --i) std::swap(v[i - 1], v[size_t(rng() % i)]);
  return v;
}

std::vector<Visit> plan_visits(size_t n_units, const MeasureSpec& m) {
  std::vector<Visit> out;
  if (m.order == "interleave") {
    for (int64_t r = 0; r < m.repetitions; ++r)
      for (size_t u = 0; u < n_units; ++u) out.push_back({u, r, 1, r + 1 == m.repetitions});
    return out;
  }
  std::vector<size_t> order(n_units);
  std::iota(order.begin(), order.end(), size_t(0));
  if (m.order == "shuffle") order = shuffled_indices(n_units, uint64_t(m.seed));
  for (size_t u : order) out.push_back({u, 0, m.repetitions, true});
  return out;
}

std::vector<std::vector<size_t>> plan_units(const std::vector<Cell>& cells) {
  std::vector<std::vector<size_t>> units;
  for (size_t i = 0; i < cells.size();) {
    std::vector<size_t> unit = {i};
    size_t j = i + 1;
    if (cells[i].config.engine == "fish")
      for (; j < cells.size() && cells[j].model_index == cells[i].model_index &&
             is_llama_twin(cells[i].config, cells[j].config);
           ++j)
        unit.push_back(j);
    units.push_back(std::move(unit));
    i = j;
  }
  return units;
}

}  // namespace fish
