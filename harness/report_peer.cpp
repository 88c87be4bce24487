// The FISH / peer table; see report_peer.h.
#include "harness/report_peer.h"

#include <algorithm>
#include <map>
#include <set>

#include "harness/compare.h"
#include "harness/interval_label.h"
#include "harness/report_svg.h"
#include "harness/stats.h"

namespace fish {
namespace {
// The fields that say which engine measured a row: llama_backend is what the first peer run
// (results/runs/h200-peer-gpu-a35d38e) called the binary choice.
constexpr const char* kPeerKeys[] = {"engine", "llama_bench", "llama_backend"};
}  // namespace

std::string render_peer_ratios(const std::vector<const ResultRow*>& rows) {
  using nlohmann::json;
  // Parameters without engine / llama_bench: the key a FISH row and its peers share.
  auto key_of = [](const ResultRow& r) {
    std::map<std::string, json> p = row_params(r);
    for (const char* k : kPeerKeys) p.erase(k);
    p["run_id"] = r.run_id;  // "same run": a FISH row pairs only with peers it alternated with
    return json(p).dump();
  };
  auto engine_of = [](const ResultRow& r) {
    return r.config().value("engine", std::string("fish"));
  };
  std::map<std::string, const ResultRow*> fish_by_key;
  for (const ResultRow* r : rows)
    if (r->status == "ok" && engine_of(*r) == "fish") fish_by_key.emplace(key_of(*r), r);
  std::vector<std::pair<const ResultRow*, const ResultRow*>> pairs;  // (fish, peer)
  for (const ResultRow* r : rows)
    if (r->status == "ok" && engine_of(*r) == "llama.cpp")
      if (auto it = fish_by_key.find(key_of(*r)); it != fish_by_key.end())
        pairs.emplace_back(it->second, r);
  if (pairs.empty()) return "";
  // Columns: the parameters that vary across the pairs (engine / llama_bench excluded).
  std::set<std::string> varying;
  std::map<std::string, std::set<std::string>> values;
  for (const auto& [f, p] : pairs)
    for (const auto& [k, v] : row_params(*f)) values[k].insert(v.dump());
  for (const auto& [k, vs] : values)
    if (vs.size() > 1 && std::find(std::begin(kPeerKeys), std::end(kPeerKeys), k) == std::end(kPeerKeys))
      varying.insert(k);
  struct Line {
    std::string prefix, metric;
    double fish, peer;
    RatioEstimate ratio;
    size_t n;
  };
  std::vector<Line> lines;
  IntervalMix mix;
  for (const auto& [f, p] : pairs) {
    const std::map<std::string, json> params = row_params(*f);
    std::string prefix = "| ";
    for (const std::string& k : varying) {
      auto it = params.find(k);
      prefix += (it == params.end() ? "-" : json_value_text(it->second)) + " | ";
    }
    const json& peer = p->json.value("peer", json::object());
    std::string bin = p->config().value("llama_bench", std::string());
    if (bin.empty()) bin = p->config().value("llama_backend", std::string());
    prefix += fmt::format("llama.cpp {} ({}, {}) | ", bin.empty() ? "" : bin,
                          peer.value("backends", std::string("?")),
                          peer.value("build_commit", std::string("?")));
    for (const std::string& m : speed_metric_names()) {
      const std::optional<SpeedMetric> a = f->speed(m), b = p->speed(m);
      if (!a || !b || a->samples.empty() || b->samples.empty()) continue;
      if (*std::min_element(b->samples.begin(), b->samples.end()) <= 0) continue;
      Line l{prefix, m, median(a->samples), median(b->samples),
             ratio_of_medians(a->samples, b->samples), std::min(a->samples.size(), b->samples.size())};
      mix.add(l.ratio.interval.kind, int64_t(l.n));
      lines.push_back(l);
    }
  }
  if (lines.empty()) return "";
  std::string md = "FISH / peer (each llama.cpp row beside the FISH row of the same cell, same run):\n\n";
  for (const std::string& k : varying) md += "| " + k + " ";
  md += "| peer | metric | FISH | peer | FISH / peer [interval] |\n|";
  for (size_t i = 0; i < varying.size() + 5; ++i) md += "---|";
  md += "\n";
  for (const Line& l : lines)
    md += l.prefix + fmt::format("{} | {} | {} | {} |\n", l.metric, short_number(l.fish),
                                 short_number(l.peer),
                                 interval_cell(fmt::format("{:.3f}", l.ratio.ratio),
                                               fmt::format("{:.3f}", l.ratio.interval.lo),
                                               fmt::format("{:.3f}", l.ratio.interval.hi),
                                               l.ratio.interval.kind, mix));
  md += "\n" + ratio_legend(mix) + "\n\n";
  return md;
}

}  // namespace fish
