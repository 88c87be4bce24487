// `fish report`: renders results into one Markdown document (BENCHMARKS.md) plus SVG plots.
//
// Inputs by kind: *.jsonl fish-results/1 files (one section per experiment), *.json
// google-benchmark files, and folders of captured command runs (report_gbench.h). Output is a
// pure function of the inputs' contents and names: experiments in name order, rows by
// (cell_index, path), benchmark files and run folders in path order. So `--check` can tell a
// stale BENCHMARKS.md by re-rendering and comparing bytes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "harness/results_reader.h"

namespace fish {

struct ReportOptions {
  // Where plots are written, relative to the current directory, and how the markdown links them
  // (relative to the markdown file). Empty plots_dir: no plots.
  std::string plots_dir;
  std::string plots_link;
};

struct ReportFiles {
  std::string markdown;
  std::vector<std::pair<std::string, std::string>> plots;  // (path under plots_dir, SVG text)
  std::vector<std::string> warnings;                       // ResultSet::warnings
};

// Renders every input. Errors: an input that is neither a readable results file, a
// google-benchmark JSON file nor a folder (the message names it and the problem, with file:line
// for results files).
Result<ReportFiles> render_report(const std::vector<std::string>& inputs,
                                  const ReportOptions& options);

// One experiment's section ("### NAME" under "## Experiments": experiment file, contexts, fixed
// parameters, a table whose key columns are only the parameters that vary, metric columns only
// where some row has a value, "median [lo, hi]" for speeds with a legend naming the interval
// (harness/interval_label.h), failed rows listed, plots), with the command that reproduces each
// run (the knobs that change results as recorded, `fish run FILE`, the file's sha256 and the
// commit). `rows` are that experiment's latest rows in report order. Plots are appended to
// `plots`. version_sha: the rows are those of one version of the experiment file (of several):
// the heading, the contexts and the plot names are that version's.
std::string render_experiment_section(const ResultSet& set,
                                      const std::vector<const ResultRow*>& rows,
                                      const ReportOptions& options,
                                      std::vector<std::pair<std::string, std::string>>* plots,
                                      const std::string& version_sha = "");

// Writes the markdown to `markdown_path` (empty: plots only) and the plots (or checks them): with
// check = true nothing is written and the result lists every file that differs from what would be
// written (markdown, plots, and stray *.svg in plots_dir); empty means fresh. Errors: an unwritable
// file.
Result<std::vector<std::string>> write_report(const ReportFiles& files,
                                              const std::string& markdown_path,
                                              const ReportOptions& options, bool check);

}  // namespace fish
