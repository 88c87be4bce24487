// The metrics table (harness/metrics.h) is the one list: every entry, given a value in a row,
// is written by the results writer, accepted and read back by the reader, rejected by it when
// mistyped, and appears in the CSV header and row, fish run's Markdown table and fish report's
// table; the row template and the quality metrics walk the same table.
#include "harness/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "harness/cli_test_util.h"
#include "harness/quality.h"
#include "harness/report.h"
#include "harness/results_fixture.h"
#include "harness/results_reader.h"
#include "harness/results_writer.h"
#include "test_env.h"

namespace fish {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// A value of the metric's kind, distinct per metric (index k) so a mixed-up column shows.
json value_for(const MetricField& f, size_t k) {
  const double x = 10.0 + double(k) + 0.25;
  switch (f.kind) {
    case MetricKind::speed:
    case MetricKind::ratio:
      return test::speed_metric({x, x + 1, x + 2, x + 3, x + 4, x + 5});
    case MetricKind::scalar:
      return x;
    case MetricKind::count:
      return json{{"n", int64_t(k)}, {"of", int64_t(k) + 7}};
  }
  return nullptr;
}

std::string csv_header(const std::string& csv) {
  return csv.substr(0, csv.find('\n'));
}

class MetricTable : public ::testing::Test {
 protected:
  // A results file whose one row carries every metric of the table, written by ResultsWriter.
  std::string write_all_metrics() {
    const std::string path = dir_.file("m.jsonl");
    auto w = ResultsWriter::open(path, false);
    EXPECT_TRUE(w.ok()) << w.error().message;
    json metrics = json::object();
    size_t k = 0;
    for (const MetricField& f : metric_fields()) metrics[std::string(f.name)] = value_for(f, k++);
    EXPECT_TRUE(w.value()->append(test::make_context("r1", "metrics", 1)).ok());
    EXPECT_TRUE(
        w.value()->append(test::make_row("r1", 0, "cpu", {{"n_threads", 1}}, metrics)).ok());
    return path;
  }
  test::TempDir dir_;
};

TEST_F(MetricTable, EveryMetricRoundTripsThroughWriterReaderCsvMarkdownAndReport) {
  const std::string path = write_all_metrics();
  ResultSet set;
  Status st = read_results_file(path, &set);
  ASSERT_TRUE(st.ok()) << st.error().message;
  ASSERT_EQ(set.rows.size(), 1u);
  const ResultRow& row = set.rows[0];
  auto csv = render_csv(path);
  ASSERT_TRUE(csv.ok()) << csv.error().message;
  auto md = render_markdown(path);
  ASSERT_TRUE(md.ok()) << md.error().message;
  auto report = render_report({path}, ReportOptions{});
  ASSERT_TRUE(report.ok()) << report.error().message;
  const std::string header = "," + csv_header(csv.value()) + ",";
  size_t k = 0;
  for (const MetricField& f : metric_fields()) {
    const std::string name(f.name);
    const json expect = value_for(f, k++);
    SCOPED_TRACE(name);
    if (f.samples()) {
      const std::optional<SpeedMetric> m = row.speed(name);
      ASSERT_TRUE(m.has_value());
      EXPECT_EQ(m->samples, expect["samples"].get<std::vector<double>>());
      for (const char* part : {"", "_lo", "_hi", "_interval", "_cv", "_n"})
        EXPECT_THAT(header, HasSubstr("," + name + part + ",")) << part;
      EXPECT_THAT(csv.value(), HasSubstr(fmt::format(",{},", expect["median"].get<double>())));
    } else if (f.kind == MetricKind::count) {
      ASSERT_TRUE(row.number(name).has_value());
      EXPECT_DOUBLE_EQ(*row.number(name), expect["n"].get<double>() / expect["of"].get<double>());
      EXPECT_THAT(header, HasSubstr("," + name + ","));
      const std::string n_of =
          fmt::format("{}/{}", expect["n"].get<int64_t>(), expect["of"].get<int64_t>());
      EXPECT_THAT(csv.value(), HasSubstr("," + n_of + ","));
    } else {
      ASSERT_TRUE(row.number(name).has_value());
      EXPECT_DOUBLE_EQ(*row.number(name), expect.get<double>());
      EXPECT_THAT(header, HasSubstr("," + name + ","));
      EXPECT_THAT(csv.value(), HasSubstr(fmt::format(",{},", expect.get<double>())));
    }
    if (f.report) {
      EXPECT_THAT(md.value(), HasSubstr("| " + std::string(f.title) + " "));
      EXPECT_THAT(report.value().markdown, HasSubstr("| " + std::string(f.title) + " "));
    }
  }
}

TEST_F(MetricTable, TheReaderRejectsEveryMetricOfTheWrongType) {
  for (const MetricField& f : metric_fields()) {
    SCOPED_TRACE(f.name);
    const std::string path = dir_.file("bad.jsonl");
    json bad = f.samples() ? json("fast") : json::array({1, 2});
    test::write_jsonl(
        path, {test::make_context("r1", "metrics", 1),
               test::make_row("r1", 0, "cpu", {{"n_threads", 1}}, {{std::string(f.name), bad}})});
    ResultSet set;
    Status st = read_results_file(path, &set);
    ASSERT_FALSE(st.ok());
    EXPECT_THAT(st.error().message, HasSubstr("metrics." + std::string(f.name)));
  }
}

TEST(MetricTableUse, TheRowTemplateHasEveryMetricAndNothingElse) {
  const json m = empty_metrics_json();
  EXPECT_EQ(m.size(), metric_fields().size());
  for (const MetricField& f : metric_fields()) {
    ASSERT_TRUE(m.contains(std::string(f.name))) << f.name;
    EXPECT_TRUE(m[std::string(f.name)].is_null());
  }
}

TEST(MetricTableUse, QualityWritesExactlyTheTablesQualityMetrics) {
  QualityMetrics q;
  q.top1 = 0.5;
  q.kl_mean = 0.1;
  q.kl_p99 = 0.2;
  q.kl_max = 0.3;
  q.ppl = 9.0;
  q.greedy_n = 3;
  q.greedy_of = 4;
  json m = json::object();
  quality_metrics_json(q, m);
  size_t n_quality = 0;
  for (const MetricField& f : metric_fields()) {
    if (f.source != MetricSource::quality) continue;
    ++n_quality;
    ASSERT_TRUE(m.contains(std::string(f.name))) << f.name;
    EXPECT_FALSE(m[std::string(f.name)].is_null()) << f.name;
  }
  EXPECT_EQ(m.size(), n_quality);
}

TEST(MetricTableUse, NamesAreUniqueAndSpeedAndScalarListsCoverTheTable) {
  std::set<std::string> names;
  for (const MetricField& f : metric_fields())
    EXPECT_TRUE(names.insert(std::string(f.name)).second);
  EXPECT_EQ(speed_metric_names().size() + scalar_metric_names().size(), metric_fields().size());
  for (const std::string& s : speed_metric_names()) EXPECT_TRUE(find_metric(s)->samples()) << s;
  for (const std::string& s : scalar_metric_names()) EXPECT_FALSE(find_metric(s)->samples()) << s;
}

TEST(MetricTableUse, DocsResultsListsTheGeneratedTable) {
  const std::optional<std::string> section =
      test::doc_section("docs/results.md", "<!-- metric_fields -->", "<!-- end metric_fields -->");
  ASSERT_TRUE(section.has_value()) << "docs/results.md: the metric_fields markers are missing";
  EXPECT_EQ(*section, metric_fields_help())
      << "regenerate the docs/results.md metrics table: fish report --help-metrics";
}

}  // namespace
}  // namespace fish
