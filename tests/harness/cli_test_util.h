// Test helpers for suites that run the real `fish` binary: its path, a shell command's exit code
// with its output kept in a log, a file's text, and the rows of a results file.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/results_fixture.h"
#include "test_env.h"

namespace fish::test {

inline std::string fish_bin() {
  return binary_dir() + "/fish";
}

inline std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Exit code of `cmd` run by /bin/sh, stdout and stderr into `log`; -1 when killed by a signal.
inline int shell_exit_code(const std::string& cmd, const std::string& log) {
  const int st = std::system((cmd + " >" + log + " 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The text between the lines `begin` and `end` of the source file `doc` (relative to the
// checkout): a generated section of a docs page. nullopt when the file or a marker is missing.
inline std::optional<std::string> doc_section(const std::string& doc, const std::string& begin,
                                              const std::string& end) {
  const std::string text = file_text(source_dir() + "/" + doc);
  const size_t b = text.find(begin + "\n"), e = text.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) return std::nullopt;
  return text.substr(b + begin.size() + 1, e - b - begin.size() - 1);
}

inline std::vector<nlohmann::json> result_rows(const std::string& path) {
  std::vector<nlohmann::json> rows;
  for (nlohmann::json& j : read_jsonl(path))
    if (j["kind"] == "row") rows.push_back(std::move(j));
  return rows;
}

}  // namespace fish::test
