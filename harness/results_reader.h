// Reads and validates results files in the "fish-results/1" format (JSONL: a context line opens
// every run, rows follow; see docs/results.md). Every problem is reported as
// "FILE:LINE: what is wrong (expected vs found)"; a file with any bad line is rejected as a whole,
// so report/compare/gate/merge never work from a silently partial table.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "harness/stats.h"

namespace fish {

inline constexpr const char* kResultsSchema = "fish-results/1";

struct ResultContext {
  std::string file;  // as given to read_results_file
  int line = 0;      // 1-based
  std::string run_id, experiment, experiment_sha256;
  int64_t n_cells = 0;
  int shard_index = 0, shard_count = 1;
  nlohmann::json json;  // the whole line
  std::string text;     // the line as read (merge writes it back byte for byte)
  // Binary, machine and behaviour knobs of the run (harness/row_provenance.h) and its canonical
  // text: rows of one cell whose contexts differ here are different measurements.
  std::map<std::string, std::string> provenance;
  std::string provenance_key;
};

// A speed metric object: {"median", "ci95" or "min_max": [lo, hi], "cv", "n", "samples": [...]}
// (harness/measure.h speed_metric_json).
struct SpeedMetric {
  double median = 0, cv = 0;
  Interval interval;  // of the median: a 95% CI, or [min, max] of fewer than 6 samples
  int64_t n = 0;
  std::vector<double> samples;
};

// The interval of a summary object {"median", "ci95" | "min_max": [lo, hi], "n"} (a speed metric,
// the context's stream_GBps). Files written before intervals were named carry "ci95" whatever n;
// below 6 samples that was always [min, max] (harness/stats.h), and it reads as min_max. nullopt
// when neither key holds two numbers.
std::optional<Interval> summary_interval(const nlohmann::json& summary);

struct ResultRow {
  std::string file;
  int line = 0;
  size_t context = 0;  // index into ResultSet::contexts of the run this row belongs to
  std::string run_id, cell_id, path, status, error, model;
  int64_t cell_index = 0;
  nlohmann::json json;  // the whole line (config, workload, placement, metrics, validity, ...)
  std::string text;     // the line as read

  std::string key() const { return cell_id + "/" + path; }  // a row's identity
  const nlohmann::json& config() const { return json.at("config"); }
  const nlohmann::json& workload() const { return json.at("workload"); }
  const nlohmann::json& metrics() const { return json.at("metrics"); }
  // The row's parameters as (name, value): model (file name), config fields, workload fields
  // ("workload.KEY" when a config field has the same name), path. What reports tabulate and
  // compare/gate join on.
  std::vector<std::pair<std::string, nlohmann::json>> params() const;
  // A speed metric (prefill_tok_s, decode_tok_s); nullopt when null or absent.
  std::optional<SpeedMetric> speed(const std::string& name) const;
  // A numeric metric (weight_GBps, top1, kl_mean, ...); greedy_exact reads as n/of.
  // nullopt when null or absent.
  std::optional<double> number(const std::string& name) const;
};

// Rows and contexts of one or more files, in file then line order.
struct ResultSet {
  std::vector<ResultContext> contexts;
  std::vector<ResultRow> rows;
  // "FILE:LINE: ..." for what was skipped without failing: only a last line that has no newline
  // and is not valid JSON (a writer killed mid-line; `fish run --resume` cuts it the same way).
  std::vector<std::string> warnings;

  const ResultContext& context_of(const ResultRow& r) const { return contexts[r.context]; }
  // The current rows, ordered by experiment name, cell_index, path, then provenance: the
  // deterministic view reports, compare, gate and merge use. Per (experiment, cell_id, path) a
  // later row replaces an earlier one of equal provenance (a resume, a re-measurement) and any
  // earlier row that is not ok (a failed or skipped attempt); rows of different provenance that
  // are both ok (or a later failure after an ok row) are all kept: different measurements of the
  // cell, never silently one of them.
  std::vector<const ResultRow*> latest_rows() const;
  // Groups of latest_rows() that share (experiment, cell_id, path): one cell measured under
  // different provenance. Empty when every cell has one current row.
  std::vector<std::vector<const ResultRow*>> cell_variants() const;
};

// Names of the speed metrics (objects with samples) and of the scalar metrics a row may carry.
const std::vector<std::string>& speed_metric_names();
const std::vector<std::string>& scalar_metric_names();

// Reads one file and appends it to `set`. Errors: unreadable file; any line (but a torn last
// one, see warnings) that is not a JSON object of a known kind with the required keys and types; a
// row before any context line or naming a run_id no context in the file declared. Up to 20 problems
// are listed in one Error.
Status read_results_file(const std::string& path, ResultSet* set);
// Reads every file in order into one set.
Result<ResultSet> read_results_files(const std::vector<std::string>& paths);

// "null", "boolean", "number", "string", "array" or "object", for expected-vs-found messages.
const char* json_type_name(const nlohmann::json& j);

// Canonical JSON text (sorted keys, no spaces): how rows are joined across files.
std::string canonical_json(const nlohmann::json& j);

}  // namespace fish
