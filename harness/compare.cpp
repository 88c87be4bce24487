#include "harness/compare.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>

#include "engine/config.h"
#include "harness/interval_label.h"
#include "harness/report_svg.h"
#include "harness/row_provenance.h"

namespace fish {
namespace {

using nlohmann::json;

}  // namespace

std::map<std::string, json> row_params(const ResultRow& r) {
  std::map<std::string, json> p;
  for (auto& [k, v] : r.params()) p[k] = std::move(v);
  // A Config field a row does not carry was added after the row was written: the row ran with
  // what is now its default (fields are only ever added with the old behaviour as the default,
  // and cell ids hash them only away from it). So a baseline from before a field joins the same
  // cell measured now.
  const Config defaults;
  for (const auto& f : config_fields())
    if (!p.count(std::string(f.name))) p[std::string(f.name)] = field_get(defaults, f);
  return p;
}

namespace {

std::string row_label(const ResultRow& r) {
  return fmt::format("{}:{} (cell {}, {})", r.file, r.line, r.cell_index, r.path);
}

}  // namespace

std::vector<std::string> split_paths(const std::string& list) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= list.size()) {
    const size_t e = std::min(list.find(',', b), list.size());
    if (e > b) out.push_back(list.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

std::string params_text(const JoinedRow& j, const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    auto it = j.params.find(n);
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n,
                       it == j.params.end() ? "-" : json_value_text(it->second));
  }
  return out;
}

namespace {

// One side's latest rows by canonical parameters. Two rows with the same parameters are
// different measurements of one cell (other provenance, model bytes, harness version or quality
// spec): an error naming both and what differs, never a silent pick.
std::map<std::string, json> join_params(const ResultRow& r, const JoinOptions& o) {
  std::map<std::string, json> p = row_params(r);
  for (const std::string& k : o.ignore) p.erase(k);
  return p;
}

bool row_matches(const ResultRow& r,
                 const std::vector<std::pair<std::string, std::string>>& where) {
  if (where.empty()) return true;
  const std::map<std::string, json> p = row_params(r);
  for (const auto& [k, v] : where) {
    auto it = p.find(k);
    if ((it == p.end() ? std::string("-") : json_value_text(it->second)) != v) return false;
  }
  return true;
}

std::vector<const ResultRow*> selected_rows(
    const ResultSet& set, const std::vector<std::pair<std::string, std::string>>& where) {
  std::vector<const ResultRow*> out;
  for (const ResultRow* r : set.latest_rows())
    if (row_matches(*r, where)) out.push_back(r);
  return out;
}

Result<std::map<std::string, const ResultRow*>> rows_by_params(
    const ResultSet& set, const char* side, const JoinOptions& o,
    const std::vector<std::pair<std::string, std::string>>& where) {
  std::map<std::string, const ResultRow*> by_key;
  for (const ResultRow* r : selected_rows(set, where)) {
    auto [it, fresh] = by_key.try_emplace(json(join_params(*r, o)).dump(), r);
    if (fresh) continue;
    // In read order (rows live in one vector): the earlier row first.
    const auto [a, b] = std::minmax(it->second, r, std::less<const ResultRow*>());
    std::string why =
        provenance_difference(set.context_of(*a).provenance, set.context_of(*b).provenance);
    if (why.empty())
      why = fmt::format("cell_id {} vs {}: the model file, harness version or quality spec",
                        a->cell_id, b->cell_id);
    return make_error(
        "{}: {} and {} hold the same cell (same model, config, workload and path) measured "
        "differently ({}); compare one of them at a time (pass the files separately)",
        side, row_label(*a), row_label(*b), why);
  }
  return by_key;
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> parse_where(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& item : split_paths(text)) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return make_error("\"{}\": expected KEY=VALUE (e.g. engine=llama.cpp)", item);
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return out;
}

Result<RowJoin> join_rows(const ResultSet& base, const ResultSet& head, const JoinOptions& o) {
  FISH_ASSIGN_OR_RETURN(const auto base_by_key, rows_by_params(base, "BASE", o, o.base_where));
  FISH_ASSIGN_OR_RETURN(const auto head_by_key, rows_by_params(head, "HEAD", o, o.head_where));
  RowJoin join;
  std::set<std::string> matched;
  for (const ResultRow* r : selected_rows(head, o.head_where)) {  // report order
    const std::map<std::string, json> p = join_params(*r, o);
    const std::string key = json(p).dump();
    auto b = base_by_key.find(key);
    if (b == base_by_key.end()) {
      join.only_head.push_back(r);
      continue;
    }
    matched.insert(key);
    join.both.push_back({b->second, r, p});
  }
  for (const ResultRow* r : selected_rows(base, o.base_where))
    if (!matched.count(json(join_params(*r, o)).dump())) join.only_base.push_back(r);
  std::set<std::string> names;
  for (const JoinedRow& j : join.both)
    for (const auto& [k, v] : j.params) names.insert(k);
  for (const std::string& n : names) {
    std::set<std::string> values;
    for (const JoinedRow& j : join.both) {
      auto it = j.params.find(n);
      values.insert(it == j.params.end() ? "null" : it->second.dump());
    }
    if (values.size() > 1) join.varying.push_back(n);
  }
  return join;
}

std::optional<SpeedComparison> compare_speed(const JoinedRow& j, const std::string& metric) {
  const std::optional<SpeedMetric> b = j.base->speed(metric), h = j.head->speed(metric);
  if (!b || !h || b->samples.empty() || h->samples.empty()) return std::nullopt;
  SpeedComparison c;
  c.metric = metric;
  c.base_median = median(b->samples);
  c.head_median = median(h->samples);
  c.n_base = b->samples.size();
  c.n_head = h->samples.size();
  if (*std::min_element(b->samples.begin(), b->samples.end()) <= 0) return std::nullopt;
  c.ratio = ratio_of_medians(h->samples, b->samples);
  c.test = mann_whitney_u(h->samples, b->samples);
  return c;
}

namespace {

nlohmann::json row_json(const ResultRow& r) {
  return {{"label", row_label(r)}, {"cell_id", r.cell_id}, {"status", r.status}};
}

nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

}  // namespace

nlohmann::json comparison_json(const RowJoin& join) {
  using nlohmann::json;
  json out = {{"schema", "fish-compare/1"},
              {"joined", json::array()},
              {"only_base", json::array()},
              {"only_head", json::array()}};
  for (const JoinedRow& j : join.both) {
    json params = json::object();
    for (const auto& [k, v] : j.params) params[k] = v;
    json e = {{"params", params},
              {"base", row_json(*j.base)},
              {"head", row_json(*j.head)},
              {"speed", json::array()},
              {"scalar", json::array()}};
    if (j.base->status == "ok" && j.head->status == "ok") {
      for (const std::string& m : speed_metric_names()) {
        const std::optional<SpeedComparison> c = compare_speed(j, m);
        if (!c) continue;
        e["speed"].push_back({{"metric", m},
                              {"base_median", c->base_median},
                              {"head_median", c->head_median},
                              {"n_base", c->n_base},
                              {"n_head", c->n_head},
                              {"ratio", c->ratio.ratio},
                              {"interval", {c->ratio.interval.lo, c->ratio.interval.hi}},
                              {"interval_kind", interval_key(c->ratio.interval.kind)},
                              {"p", c->test.p},
                              {"p_exact", c->test.exact}});
      }
      for (const std::string& m : scalar_metric_names()) {
        const std::optional<double> b = j.base->number(m), h = j.head->number(m);
        if (!b && !h) continue;
        e["scalar"].push_back({{"metric", m},
                               {"base", optional_json(b)},
                               {"head", optional_json(h)},
                               {"difference", b && h ? json(*h - *b) : json()}});
      }
    }
    out["joined"].push_back(std::move(e));
  }
  for (const ResultRow* r : join.only_base) out["only_base"].push_back(row_json(*r));
  for (const ResultRow* r : join.only_head) out["only_head"].push_back(row_json(*r));
  return out;
}

std::string render_comparison(const RowJoin& join) {
  std::string md;
  std::vector<std::string> names = join.varying;
  if (names.empty()) names.push_back("path");
  for (const std::string& n : names) md += "| " + n + " ";
  md += "| metric | base | head | head/base [interval] | p (Mann-Whitney) |\n|";
  for (size_t i = 0; i < names.size() + 5; ++i) md += "---|";
  md += "\n";
  IntervalMix mix;  // of the ratios' intervals, for the marks and the legend
  for (const JoinedRow& j : join.both)
    if (j.base->status == "ok" && j.head->status == "ok")
      for (const std::string& m : speed_metric_names())
        if (const std::optional<SpeedComparison> c = compare_speed(j, m))
          mix.add(c->ratio.interval.kind, int64_t(std::min(c->n_base, c->n_head)));
  for (const JoinedRow& j : join.both) {
    std::string prefix = "| ";
    for (const std::string& n : names) {
      auto it = j.params.find(n);
      prefix += (it == j.params.end() ? "-" : json_value_text(it->second)) + " | ";
    }
    if (j.base->status != "ok" || j.head->status != "ok") {
      md += prefix + fmt::format("status | {} | {} | | |\n", j.base->status, j.head->status);
      continue;
    }
    for (const std::string& m : speed_metric_names()) {
      const std::optional<SpeedComparison> c = compare_speed(j, m);
      if (!c) continue;
      const Interval& in = c->ratio.interval;
      md += prefix + fmt::format("{} | {} | {} | {} | {:.3g} |\n", m, short_number(c->base_median),
                                 short_number(c->head_median),
                                 interval_cell(fmt::format("{:.3f}", c->ratio.ratio),
                                               fmt::format("{:.3f}", in.lo),
                                               fmt::format("{:.3f}", in.hi), in.kind, mix),
                                 c->test.p);
    }
    for (const std::string& m : scalar_metric_names()) {
      const std::optional<double> b = j.base->number(m), h = j.head->number(m);
      if (!b && !h) continue;
      std::string diff = b && h ? fmt::format("{:+.4g} (difference)", *h - *b) : "";
      md += prefix + fmt::format("{} | {} | {} | {} | |\n", m, b ? short_number(*b) : "-",
                                 h ? short_number(*h) : "-", diff);
    }
  }
  md += "\n";
  if (!mix.empty()) md += ratio_legend(mix) + "\n\n";
  for (const ResultRow* r : join.only_base) md += "- only in BASE: " + row_label(*r) + "\n";
  for (const ResultRow* r : join.only_head) md += "- only in HEAD: " + row_label(*r) + "\n";
  return md;
}

}  // namespace fish
