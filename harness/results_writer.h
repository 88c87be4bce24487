// Writing results files ("fish-results/1", see README "Results files"): append-only JSONL, one
// context line per run, then one row per (cell, path), each flushed and fsync'd as soon as it is
// written, so a killed sweep loses at most the row being written. Also the CSV and Markdown
// renderings of a file's rows.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
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
  // resume = true: the rows already there with status ok or error are finished (finished());
  // a partial last line (the process was killed while writing it) is cut off first.
  // Errors: unwritable path; without resume an existing non-empty file; with resume a line in
  // the middle that is not JSON (named by line number).
  static Result<std::unique_ptr<ResultsWriter>> open(const std::string& path, bool resume);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;

  // Whether a row for (cell_id, path) with status ok or error is in the file.
  bool finished(const std::string& cell_id, const std::string& path) const {
    return finished_.count({cell_id, path}) > 0;
  }
  size_t n_finished() const { return finished_.size(); }
  // Whether a row for (cell_id, path) with status skipped is in the file (a path this build could
  // not run; retried on resume only once the path is available).
  bool skipped(const std::string& cell_id, const std::string& path) const {
    return skipped_.count({cell_id, path}) > 0;
  }
  // Bytes of a partial last line removed by open(resume), 0 if none.
  size_t truncated_bytes() const { return truncated_bytes_; }
  const std::string& path() const { return path_; }

  // Appends `line` as one line of compact JSON, then fflush + fsync. Rows with status ok or
  // error become finished.
  Status append(const nlohmann::json& line);

 private:
  ResultsWriter() = default;
  std::string path_;
  int fd_ = -1;
  std::set<std::pair<std::string, std::string>> finished_;
  std::set<std::pair<std::string, std::string>> skipped_;
  size_t truncated_bytes_ = 0;
};

// Renderings of the rows of a results file (the latest row per (cell_id, path), in cell order):
// CSV with every column (config fields by the Config table, speed metrics with CI bounds and CV,
// every other metric), and a Markdown table showing the config fields that vary, speeds as
// "median [lo, hi]", quality columns when any row has them. Errors: the reader's.
Result<std::string> render_csv(const std::string& jsonl_path);
Result<std::string> render_markdown(const std::string& jsonl_path);

}  // namespace fish
