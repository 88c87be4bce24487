// `fish merge OUT IN...`: joins results files (the shards of a Slurm array, resumed runs) into one
// fish-results/1 file: every context line kept (once per run_id), the current rows only (per
// (cell_id, path) the later row of equal provenance wins, inputs in the order given, lines in
// file order; results_reader.h latest_rows), written sorted by (cell_index, path) so the output
// does not depend on shard timing. One cell measured under different provenance (another
// commit, machine or FISH_* knob) is refused: merging would silently drop one measurement.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"

namespace fish {

struct MergeSummary {
  size_t n_inputs = 0;
  size_t n_rows_read = 0;
  size_t n_rows_written = 0;
  size_t n_replaced = 0;  // rows superseded by a later row of their cell (equal provenance)
  // Per experiment ("name (sha256 prefix)"): n_cells from its context lines and the cell indices
  // in [0, n_cells) that no row covers.
  struct Experiment {
    int64_t n_cells = 0;
    std::vector<int64_t> missing;
  };
  std::map<std::string, Experiment> experiments;
  std::vector<std::string> warnings;  // ResultSet::warnings of the inputs
};

// Reads `inputs` (each validated by read_results_file), merges them and writes `out` atomically
// (a temporary file in the same directory, fsync'd, renamed; `out` may be one of the inputs).
// Errors: any input error; no inputs; inputs of different experiment_sha256 unless `force`;
// contexts of one experiment that disagree on n_cells; a cell with current rows of different
// provenance (naming both rows and what differs); an unwritable output.
Result<MergeSummary> merge_results(const std::vector<std::string>& inputs, const std::string& out,
                                   bool force);

}  // namespace fish
