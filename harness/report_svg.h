// Small deterministic SVG line/scatter plots for `fish report` (no plotting dependency: a chart is
// a few dozen elements, and byte-identical output is what `fish report --check` compares).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fish {

struct PlotPoint {
  double x = 0, y = 0;
  double y_lo = 0, y_hi = 0;  // error bar (the 95% CI); equal to y for none
  std::string label;          // drawn next to the point when non-empty (scatter plots)
};

struct PlotSeries {
  std::string name;  // legend entry
  std::vector<PlotPoint> points;
};

struct Plot {
  std::string title, x_label, y_label;
  std::vector<PlotSeries> series;
  bool lines = true;            // connect points of a series (false: scatter)
  bool y_from_zero = true;      // the y axis starts at 0 (rates); false: fits the data
  bool x_log2 = false;          // log2 x axis (thread counts, context sizes spanning >= 8x)
  bool x_ticks_at_data = true;  // x ticks at the distinct data x values (else evenly spaced)
  // A categorical x axis: point x values are indices into it, ticks are these labels (staggered
  // in two rows where neighbours would overlap). Empty: a numeric axis, whose tick labels skip
  // a tick where the label would overlap the one before.
  std::vector<std::string> x_categories;
};

// Renders `plot` as a standalone SVG document (400 px high; 640 px wide, more when a legend entry
// needs it). Precondition: at least one point.
std::string render_svg(const Plot& plot);

// A short number for tables and ticks: 4 significant digits, thousands without exponent
// (28629 -> "28629", 1234.56 -> "1235", 12.345 -> "12.35", 0.0021 -> "0.0021", 3.1e-05 ->
// "3.1e-05").
std::string short_number(double x);

// A JSON value in a table cell: strings bare, floats by short_number, null as "-".
std::string json_value_text(const nlohmann::json& v);

}  // namespace fish
