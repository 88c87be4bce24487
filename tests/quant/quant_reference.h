// Test helper: runs scripts/quant_reference.py (the independent `gguf` package) on files in a
// temporary directory. One Python start-up per batch of jobs; see the script for the job syntax.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_env.h"

namespace fish::test {

// A fresh directory under the system temp dir, removed with its contents on destruction.
inline std::string quant_reference_script() {
  return (std::filesystem::path(source_dir()) / "scripts" / "quant_reference.py").string();
}

// Runs the jobs (one per element, e.g. "dequant q4_k in.bin out.f32") in one Python process.
// Returns "" on success, else the command and its output, for the test's failure message.
inline std::string run_quant_reference(const TempDir& dir, const std::vector<std::string>& jobs) {
  const std::string job_file = dir.file("jobs.txt");
  const std::string log_file = dir.file("python.log");
  {
    std::ofstream out(job_file);
    for (const std::string& j : jobs) out << j << '\n';
  }
  // Built with += : GCC 12 warns falsely (-Wrestrict, PR 105329) on chained "lit" + string.
  std::string cmd = "'";
  cmd += python();
  cmd += "' '";
  cmd += quant_reference_script();
  cmd += "' batch '";
  cmd += job_file;
  cmd += "' > '";
  cmd += log_file;
  cmd += "' 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc == 0) return "";
  std::ifstream log(log_file);
  std::stringstream ss;
  ss << "command failed (status " << rc << "): " << cmd << "\n" << log.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const void* data, size_t n_bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), std::streamsize(n_bytes));
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline std::vector<float> read_floats(const std::string& path) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Index of the first value whose bit pattern differs, or -1. Sizes must match.
inline int64_t first_bit_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (float_bits(a[i]) != float_bits(b[i])) return int64_t(i);
  }
  return a.size() == b.size() ? -1 : int64_t(std::min(a.size(), b.size()));
}

}  // namespace fish::test
