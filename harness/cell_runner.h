// The measuring part of `fish run` (harness/run_command.h): a planned run's visits
// (harness/run_plan.h), each measuring one unit of cells, and the rows they write.
//
// A FISH cell's visit loads the model when the current one is another (model, requant,
// kquant_repack), opens a session per path still to run (a path that cannot run writes its
// skipped or error row at the cell's first visit), runs measure.warmup unrecorded repetitions and
// the visit's recorded ones, and adds the samples to the cell's; its llama.cpp twins take turns
// with those repetitions. The last visit writes the cell's rows: speeds and their ratios from
// every visit's samples, then quality (once, with the last visit's placement). A llama.cpp cell
// that is no twin runs all its repetitions in one llama-bench call at its last visit. An
// exception inside a cell becomes an error row for each path it had left (harness/cell_guard.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/experiment.h"
#include "harness/results_writer.h"
#include "harness/run_plan.h"

namespace fish {

class GpuPlacement;
struct PathAcc;  // one path of a FISH cell across visits (cell_runner.cpp)

// A model as the run sees it: where it is, its sha256, or why it cannot be used.
struct ModelEntry {
  std::string path;  // resolved
  std::string sha256;
  std::string error;
  bool pending = false;  // a synthetic model not written yet (dry run)
};
// `given` resolved: an existing file, a file of that name in $FISH_MODELS_DIR, or a synthetic
// model spec (written to the synthetic cache unless create = false, the dry run: then pending).
ModelEntry resolve_model(const std::string& given, bool create);

// What a run measures, decided before anything runs.
struct RunPlan {
  Experiment e;
  int64_t n_cells_all = 0;                 // before sharding
  std::vector<Cell> cells;                 // this shard's, grouped by model load
  std::vector<std::string> ids;            // cell_id of cells[i]
  std::map<size_t, ModelEntry> models;     // by Cell::model_index
  std::vector<std::vector<size_t>> units;  // into cells (plan_units)
  std::vector<Visit> visits;               // plan_visits over units
  std::string results_path;
  // Model loads the visits imply (a load per change of (model, requant, kquant_repack)).
  int64_t model_loads() const;
};

// Whether (cell_id, path) still has to run: no row yet; an error row with retry_errors; a
// skipped row once the path can run.
bool path_pending(const ResultsWriter& w, const std::string& id, const std::string& path,
               bool retry_errors);

// The run's measured references: the host's stream and the device's copy bandwidth (0: none).
struct RunReferences {
  double stream_GBps = 0;
  double gpu_copy_GBps = 0;
};

// "n_batch=4 act=f32" (the cell's axes), "(defaults)" when nothing is swept.
std::string cell_axes_text(const Cell& c);
// "42 s", "3 min 05 s", "2.5 h".
std::string duration_text(double s);

class CellRunner {
 public:
  CellRunner(const RunPlan& plan, bool retry_errors, ResultsWriter& writer, std::string run_id,
             RunReferences refs);
  ~CellRunner();
  CellRunner(const CellRunner&) = delete;
  CellRunner& operator=(const CellRunner&) = delete;

  // Runs every visit of the plan. False when a row could not be written (the message is on
  // stderr): the run stops there.
  bool run();

  size_t n_ok() const { return n_ok_; }
  size_t n_error() const { return n_err_; }
  size_t n_skipped() const { return n_skip_; }

 private:
  struct CellState;
  struct Loaded;
  struct PathRun;
  bool visit(const Visit& v);
  bool visit_fish_cell(size_t i, const Visit& v);
  bool open_paths(size_t i, double t0, std::vector<PathRun>& runs);
  void plan_twins(size_t i, const std::vector<size_t>& unit, const std::vector<PathRun>& runs);
  bool finish_fish_cell(size_t i, std::vector<PathRun>& runs);
  void add_quality(size_t i, PathAcc& pa, const std::shared_ptr<const GpuPlacement>& placement);
  bool run_peer_cell(size_t i);
  bool fail_cell(size_t i, const std::string& why);
  void ensure_model(const Cell& c);
  // Appends the row of cells[i] (t_wall_s = t_s), counts it, prints progress; false when it cannot
  // be written.
  bool emit(nlohmann::json row, size_t i, double t_s);
  bool emit_error(nlohmann::json row, size_t i, const std::string& status, const std::string& why,
                  double t_s);
  nlohmann::json row_base(size_t i, const std::string& path) const;
  bool pending(size_t i, const std::string& path) const;

  const RunPlan& plan_;
  const Experiment& e_;
  bool retry_errors_;
  ResultsWriter& writer_;
  std::string run_id_;
  RunReferences refs_;
  std::vector<std::unique_ptr<CellState>> state_;  // per cell
  std::unique_ptr<Loaded> loaded_;
  std::set<std::pair<size_t, std::string>> written_;  // (cell, path) rows of this run
  size_t n_ok_ = 0, n_err_ = 0, n_skip_ = 0, n_done_ = 0, n_pending_ = 0;
  size_t visits_done_ = 0;
  double t_start_ = 0;
};

}  // namespace fish
