#include "harness/report_svg.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace fish {
namespace {

constexpr double kPlotWidth = 400, kHeight = 400;      // px; the width grows with the legend
constexpr double kLeft = 70, kTop = 36, kBottom = 50;  // margins; the legend is at the right
constexpr double kCharWidth = 7;  // px per legend character at font-size 12 (generous)
constexpr double kTickGap = 6;    // px kept free between two x tick labels
// Colour-blind-safe palette (Okabe & Ito 2008), cycled per series.
constexpr const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000", "#F0E442"};

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Ticks at multiples of 1, 2 or 5 x 10^k, about 5 steps, the outer ones enclosing [lo, hi].
std::vector<double> nice_ticks(double lo, double hi) {
  if (hi <= lo) hi = lo + 1;
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;  // from the step at or below lo to the step at or above hi
  const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
  for (double k = first; k <= last; k += 1) t.push_back(k == 0 ? 0.0 : k * step);
  return t;
}

std::string num(double v) {
  return fmt::format("{:.1f}", v);
}  // SVG coordinates, 0.1 px

}  // namespace

std::string short_number(double x) {
  if (x == 0) return "0";
  if (std::fabs(x) >= 1000) return fmt::format("{:.0f}", x);
  return fmt::format("{:.4g}", x);
}

std::string json_value_text(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return short_number(v.get<double>());
  return v.dump();
}

std::string render_svg(const Plot& plot) {
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  std::set<double> xs;
  for (const PlotSeries& s : plot.series)
    for (const PlotPoint& p : s.points) {
      x_min = std::min(x_min, p.x);
      x_max = std::max(x_max, p.x);
      y_min = std::min({y_min, p.y, p.y_lo});
      y_max = std::max({y_max, p.y, p.y_hi});
      xs.insert(p.x);
    }
  assert(!xs.empty());
  const std::vector<std::string>& cats = plot.x_categories;
  const bool log_x = cats.empty() && plot.x_log2 && x_min > 0;
  auto tx = [&](double x) { return log_x ? std::log2(x) : x; };
  double ax_lo = tx(x_min), ax_hi = tx(x_max);
  if (!cats.empty()) {  // every category has its slot, points or not
    ax_lo = -0.5;
    ax_hi = double(cats.size()) - 0.5;
  } else {
    if (ax_hi == ax_lo) {
      ax_lo -= 1;
      ax_hi += 1;
    }
    const double pad_x = (ax_hi - ax_lo) * 0.05;
    ax_lo -= pad_x;
    ax_hi += pad_x;
  }
  // Category labels wider than their slot go in two staggered rows, which the bottom margin
  // makes room for.
  bool stagger = false;
  for (const std::string& c : cats)
    stagger =
        stagger || kCharWidth * double(c.size()) + kTickGap > kPlotWidth / double(cats.size());
  const double bottom = stagger ? kBottom + 13 : kBottom;
  if (plot.y_from_zero) y_min = std::min(0.0, y_min);
  std::vector<double> y_ticks = nice_ticks(y_min, y_max);
  const double ay_lo = std::min(y_ticks.front(), y_min), ay_hi = std::max(y_ticks.back(), y_max);
  size_t longest_name = 0;
  for (const PlotSeries& ser : plot.series) longest_name = std::max(longest_name, ser.name.size());
  const double right = std::max(170.0, 50 + kCharWidth * static_cast<double>(longest_name));
  const double width = kLeft + kPlotWidth + right;
  const double pw = kPlotWidth, ph = kHeight - kTop - bottom;
  auto px = [&](double x) { return kLeft + (tx(x) - ax_lo) / (ax_hi - ax_lo) * pw; };
  auto py = [&](double y) {
    return kTop + ph - (ay_hi == ay_lo ? 0.5 : (y - ay_lo) / (ay_hi - ay_lo)) * ph;
  };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">{3}</text>\n",
      width, kHeight, num(kLeft + pw / 2), escape_xml(plot.title));
  // Axes, grid and ticks.
  s += fmt::format("<g stroke=\"#ccc\" stroke-width=\"1\">\n");
  for (double y : y_ticks)
    s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", num(kLeft), num(py(y)),
                     num(kLeft + pw), num(py(y)));
  s += "</g>\n";
  s += fmt::format("<path d=\"M{} {}V{}H{}\" fill=\"none\" stroke=\"black\"/>\n", num(kLeft),
                   num(kTop), num(kTop + ph), num(kLeft + pw));
  for (double y : y_ticks)
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", num(kLeft - 6),
                     num(py(y) + 4), short_number(y));
  std::vector<double> x_ticks;
  if (!cats.empty()) {
    for (size_t i = 0; i < cats.size(); ++i) x_ticks.push_back(double(i));
  } else if (plot.x_ticks_at_data && xs.size() <= 12) {
    x_ticks.assign(xs.begin(), xs.end());
  } else if (log_x) {
    for (double v = std::exp2(std::floor(std::log2(x_min))); v <= x_max * 1.0001; v *= 2)
      x_ticks.push_back(v);
  } else {
    x_ticks = nice_ticks(x_min, x_max);
  }
  double last_right = -INFINITY;  // right edge of the last numeric tick label drawn
  for (size_t k = 0; k < x_ticks.size(); ++k) {
    const double x = x_ticks[k];
    if (tx(x) < ax_lo || tx(x) > ax_hi) continue;
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n",
                     num(px(x)), num(kTop + ph), num(kTop + ph + 5));
    const std::string label = cats.empty() ? short_number(x) : cats[k];
    const double half = kCharWidth * double(label.size()) / 2;
    if (cats.empty()) {  // a label that would overlap the previous one is left out
      if (px(x) - half < last_right + kTickGap) continue;
      last_right = px(x) + half;
    }
    const double row = stagger && k % 2 == 1 ? 31 : 18;
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(px(x)),
                     num(kTop + ph + row), escape_xml(label));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}{}</text>\n",
                   num(kLeft + pw / 2), num(kHeight - 10), escape_xml(plot.x_label),
                   log_x ? " (log scale)" : "");
  s += fmt::format(
      "<text x=\"16\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0})\">{1}"
      "</text>\n",
      num(kTop + ph / 2), escape_xml(plot.y_label));

  // Point labels: right of the point, or left of it in the right part of the plot (the legend
  // is there); above it, or below near the top edge (the title is there); then moved down a line
  // at a time while they overlap a label placed before them.
  struct LabelBox {
    double x, y, lo, hi;  // text position; horizontal extent
    bool end;             // anchored at its end
  };
  std::vector<LabelBox> placed;
  std::vector<std::vector<LabelBox>> boxes(plot.series.size());
  for (size_t i = 0; i < plot.series.size(); ++i)
    for (const PlotPoint& p : plot.series[i].points) {
      const bool end = px(p.x) > kLeft + 0.6 * pw;
      const double w = kCharWidth * 0.85 * double(p.label.size());
      LabelBox b{px(p.x) + (end ? -6 : 6), py(p.y) - 6 < kTop + 12 ? py(p.y) + 16 : py(p.y) - 6, 0,
                 0, end};
      b.lo = end ? b.x - w : b.x;
      b.hi = end ? b.x : b.x + w;
      auto overlaps = [&](const LabelBox& o) {
        return b.lo < o.hi && o.lo < b.hi && std::fabs(b.y - o.y) < 13;
      };
      if (!p.label.empty()) {
        for (int tries = 0; tries < 8 && std::any_of(placed.begin(), placed.end(), overlaps);
             ++tries)
          b.y += 13;
        placed.push_back(b);
      }
      boxes[i].push_back(b);
    }

  // Series: error bars, line, markers, labels; legend entry.
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const PlotSeries& ser = plot.series[i];
    const char* colour = kColours[i % std::size(kColours)];
    s += fmt::format("<g stroke=\"{0}\" fill=\"{0}\">\n", colour);
    for (const PlotPoint& p : ser.points)
      if (p.y_hi > p.y_lo)
        s += fmt::format("<path d=\"M{0} {1}V{2}M{3} {1}H{4}M{3} {2}H{4}\" fill=\"none\"/>\n",
                         num(px(p.x)), num(py(p.y_lo)), num(py(p.y_hi)), num(px(p.x) - 3),
                         num(px(p.x) + 3));
    if (plot.lines && ser.points.size() > 1) {
      std::string d;
      for (const PlotPoint& p : ser.points)
        d += fmt::format("{}{} {}", d.empty() ? "M" : "L", num(px(p.x)), num(py(p.y)));
      s += fmt::format("<path d=\"{}\" fill=\"none\" stroke-width=\"2\"/>\n", d);
    }
    for (size_t k = 0; k < ser.points.size(); ++k) {
      const PlotPoint& p = ser.points[k];
      const LabelBox& b = boxes[i][k];
      s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3.5\"/>\n", num(px(p.x)), num(py(p.y)));
      if (!p.label.empty())
        s += fmt::format("<text x=\"{}\" y=\"{}\" stroke=\"none\"{}>{}</text>\n", num(b.x),
                         num(b.y), b.end ? " text-anchor=\"end\"" : "", escape_xml(p.label));
    }
    const double ly = kTop + 10 + 18 * static_cast<double>(i);
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke-width=\"2\"/>"
        "<text x=\"{3}\" y=\"{4}\" stroke=\"none\" fill=\"black\">{5}</text>\n",
        num(width - right + 12), num(ly), num(width - right + 32), num(width - right + 38),
        num(ly + 4), escape_xml(ser.name));
    s += "</g>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace fish
