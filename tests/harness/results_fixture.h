// Test helpers for fish-results/1 files: the committed fixtures in tests/data/results/ and
// small files built in a test with chosen samples (for compare and gate).
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_env.h"

namespace fish::test {

inline std::string results_fixture(const std::string& name) {
  return testdata_dir() + "/results/" + name;
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

inline void write_jsonl(const std::string& path, const std::vector<nlohmann::json>& lines) {
  std::ofstream out(path);
  for (const nlohmann::json& j : lines) out << j.dump() << "\n";
}

// A speed metric object as the format has it; median/ci95/cv are placeholders the readers of
// samples (compare, gate) must not rely on.
inline nlohmann::json speed_metric(const std::vector<double>& samples) {
  std::vector<double> s = samples;
  std::sort(s.begin(), s.end());
  const double med = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  return {{"median", med},
          {"ci95", {s.front(), s.back()}},
          {"cv", 0.0},
          {"n", samples.size()},
          {"samples", samples}};
}

// One row of `experiment` with the given config and metrics, based on the sweep fixture's row 0.
inline nlohmann::json make_row(const std::string& run_id, int cell_index, const std::string& path,
                               const nlohmann::json& config, const nlohmann::json& metrics) {
  nlohmann::json row = read_jsonl(results_fixture("sweep.jsonl"))[1];
  row["run_id"] = run_id;
  row["cell_index"] = cell_index;
  row["path"] = path;
  row["config"] = config;
  char id[17];
  std::snprintf(id, sizeof id, "%016x",
                static_cast<unsigned>(std::hash<std::string>{}(config.dump() + path)));
  row["cell_id"] = std::string(id);
  for (auto& [k, v] : row["metrics"].items()) v = nullptr;
  for (auto& [k, v] : metrics.items()) row["metrics"][k] = v;
  return row;
}

inline nlohmann::json make_context(const std::string& run_id, const std::string& experiment,
                                   int n_cells) {
  nlohmann::json c = read_jsonl(results_fixture("sweep.jsonl"))[0];
  c["run_id"] = run_id;
  c["experiment"] = experiment;
  c["n_cells"] = n_cells;
  return c;
}

}  // namespace fish::test
