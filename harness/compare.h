// `fish compare BASE HEAD`: rows of two results sets joined on their parameters (model file name,
// config, workload, path — not cell_id, which also hashes the harness version and the model's
// sha256, so a rebuilt synthetic model or a new harness still joins), and per speed metric the
// ratio of medians head/base with its distribution-free interval (a 95% CI where the sample
// sizes allow one, else the range of the pairwise ratios; harness/stats.h) and the two-sided
// Mann-Whitney p-value from the raw samples; per scalar metric (quality, GB/s, memory) base, head
// and the difference.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "harness/results_reader.h"
#include "harness/stats.h"

namespace fish {

struct JoinedRow {
  const ResultRow* base = nullptr;
  const ResultRow* head = nullptr;
  std::map<std::string, nlohmann::json> params;  // model, config and workload fields, path
};

struct RowJoin {
  std::vector<JoinedRow> both;              // in head's report order
  std::vector<const ResultRow*> only_base;  // rows HEAD lacks
  std::vector<const ResultRow*> only_head;
  std::vector<std::string> varying;  // parameter names whose values differ across `both`
};

// A row's parameters: model (file name), config and workload fields, path.
std::map<std::string, nlohmann::json> row_params(const ResultRow& r);

// Which rows a join takes and which parameters it ignores: FISH rows against peer rows of the
// same files (`fish compare R.jsonl R.jsonl --base-where engine=llama.cpp --head-where
// engine=fish --ignore engine,llama_bench`). A where-rule KEY=VALUE keeps the rows whose
// parameter KEY reads VALUE (as the tables print it; "-" for absent).
struct JoinOptions {
  std::vector<std::pair<std::string, std::string>> base_where, head_where;
  std::set<std::string> ignore;
};
// "a=b,c=d" -> {{"a","b"},{"c","d"}}. Errors: an item without '='.
Result<std::vector<std::pair<std::string, std::string>>> parse_where(const std::string& text);

// Joins the latest rows of each set (results_reader.h) on canonical parameters. Errors: two
// current rows of one side with the same parameters (the same cell measured under different
// provenance, or with another model file, harness version or quality spec): the message names
// both rows and what differs.
Result<RowJoin> join_rows(const ResultSet& base, const ResultSet& head,
                          const JoinOptions& options = {});

struct SpeedComparison {
  std::string metric;
  double base_median = 0, head_median = 0;
  size_t n_base = 0, n_head = 0;  // samples
  RatioEstimate ratio;            // head / base
  MannWhitney test;               // head samples vs base samples
};

// The speed metric `metric` of a joined pair; nullopt when either side has no samples or a base
// sample is <= 0 (no ratio).
std::optional<SpeedComparison> compare_speed(const JoinedRow& j, const std::string& metric);

// Markdown for `fish compare`: a table per joined row and metric, then the unmatched rows.
std::string render_comparison(const RowJoin& join);

// The same comparison for programs (`fish compare --json`, schema "fish-compare/1"):
//   {"schema", "joined": [{"params": {...}, "base": ROW, "head": ROW,
//     "speed": [{"metric", "base_median", "head_median", "n_base", "n_head", "ratio",
//                "interval": [lo, hi], "interval_kind": "ci95"|"min_max", "p", "p_exact"}],
//     "scalar": [{"metric", "base", "head", "difference"}]}],   (null where a side lacks it)
//    "only_base": [ROW], "only_head": [ROW]}
// with ROW = {"label": "FILE:LINE (cell N, PATH)", "cell_id", "status"}. A pair whose status is not
// ok on both sides has empty "speed" and "scalar".
nlohmann::json comparison_json(const RowJoin& join);

// "a.jsonl,b.jsonl" -> {"a.jsonl", "b.jsonl"} (BASE/HEAD arguments may name several files).
std::vector<std::string> split_paths(const std::string& list);

// "model X, n_threads 4, path cpu" for the varying parameters of a joined row.
std::string params_text(const JoinedRow& j, const std::vector<std::string>& names);

}  // namespace fish
