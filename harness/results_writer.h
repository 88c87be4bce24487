// Writing results files ("fish-results/1", see docs/results.md): append-only JSONL, one
// context line per run, then one row per (cell, path), each flushed and fsync'd as soon as it is
// written, so a killed sweep loses at most the row being written. Also the CSV and Markdown
// renderings of a file's rows.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace fish {

// "NAME.jsonl", or "NAME.shard-I-of-N.jsonl" when N > 1 (fish merge joins the shards).
std::string results_file_name(const std::string& experiment, int shard_index, int shard_count);

class ResultsWriter {
 public:
  // Opens (creating directories) `path` for appending.
  // resume = false: the file must not exist yet, or be empty (no silent mixing of runs).
  // resume = true: the rows already there are read (status(), finished());
  // a partial last line (the process was killed while writing it) is cut off first.
  // Errors: unwritable path; without resume an existing non-empty file; with resume a line in
  // the middle that is not JSON (named by line number).
  static Result<std::unique_ptr<ResultsWriter>> open(const std::string& path, bool resume);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;

  // The status of the latest row for (cell_id, path) in the file ("ok", "error", "skipped"), or
  // "" when there is none. A later row wins, as in reports.
  std::string status(const std::string& cell_id, const std::string& path) const {
    auto it = status_.find({cell_id, path});
    return it == status_.end() ? std::string() : it->second;
  }
  // Finished: the latest row has status ok or error.
  bool finished(const std::string& cell_id, const std::string& path) const {
    const std::string s = status(cell_id, path);
    return s == "ok" || s == "error";
  }
  size_t n_finished() const;
  // experiment_sha256 of every context line in the file, in order.
  const std::vector<std::string>& experiment_shas() const { return experiment_shas_; }
  // Bytes of a partial last line removed by open(resume), 0 if none.
  size_t truncated_bytes() const { return truncated_bytes_; }
  const std::string& path() const { return path_; }

  // Appends `line` as one line of compact JSON, then fsync. A row updates status().
  Status append(const nlohmann::json& line);

 private:
  ResultsWriter() = default;
  std::string path_;
  int fd_ = -1;
  std::map<std::pair<std::string, std::string>, std::string> status_;  // latest per key
  std::vector<std::string> experiment_shas_;
  size_t truncated_bytes_ = 0;
};

// Renderings of the rows of a results file (the latest row per (cell_id, path), in cell order):
// CSV with every column (config fields by the Config table; per speed metric the median, the
// interval's _lo and _hi, _interval naming it "ci95" or "min_max", _cv and _n; every other
// metric), and a Markdown table showing the config fields that vary, speeds as "median [lo, hi]"
// with a legend line naming the interval, quality columns when any row has them. Errors: the
// reader's.
Result<std::string> render_csv(const std::string& jsonl_path);
Result<std::string> render_markdown(const std::string& jsonl_path);

}  // namespace fish
