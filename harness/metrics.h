// The metrics of a results row: one table (name, kind, unit, title, column order) that the row
// template (harness/cell_runner.cpp), the reader's validation (harness/results_reader.cpp), the
// CSV and Markdown renderings (harness/results_writer.cpp), `fish report` and the quality
// metrics (harness/quality.cpp) all walk. Adding a metric is one entry here; docs/results.md
// lists the table (generated: ResultsDocs.MetricTableIsTheGeneratedOne).
//
// A row's "metrics" object has every name of the table as a key: null when the row has no value.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace fish {

enum class MetricKind {
  speed,   // {"median", ci95|min_max, "n", "cv", "samples"} of tok/s per repetition
  ratio,   // the same summary of a per-repetition ratio (% of stream bandwidth, gpu / cpu)
  scalar,  // a number
  count,   // {"n", "of"}: how many of how many (greedy_exact)
};
const char* metric_kind_name(MetricKind k);

// Where a metric comes from: the timed repetitions, the weights the session reads, the quality
// runs against the reference, or the process's memory.
enum class MetricSource { repetitions, weights, quality, memory };

struct MetricField {
  std::string_view name;  // the key in "metrics", the CSV column
  MetricKind kind;
  std::string_view unit;   // "tok/s", "%", "x", "GB/s", "bits", "nats", "MB", "" (none)
  std::string_view title;  // column title in Markdown tables and fish report
  MetricSource source;
  bool report;        // a column of fish report and fish run's Markdown (where any row has it)
  bool plot_vs_bits;  // fish report plots it against bits per weight
  std::string_view doc;
  bool samples() const { return kind == MetricKind::speed || kind == MetricKind::ratio; }
};

// Every metric, in column order.
std::span<const MetricField> metric_fields();
// nullptr when `name` is no metric.
const MetricField* find_metric(std::string_view name);

// A row's "metrics" before anything is measured: every name of the table, null.
nlohmann::json empty_metrics_json();

// Markdown table of metric_fields() (docs/results.md).
std::string metric_fields_help();

}  // namespace fish
