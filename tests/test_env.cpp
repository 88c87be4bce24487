#include "test_env.h"

#include <cstdlib>
#include <filesystem>

namespace fish::test {
namespace {
std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
}  // namespace

std::string source_dir() {
  return env_or("FISH_SOURCE_DIR", ".");
}
std::string binary_dir() {
  return env_or("FISH_BINARY_DIR", "build");
}
std::string testdata_dir() {
  return env_or("FISH_TESTDATA", "tests/data");
}
std::string python() {
  return env_or("FISH_PYTHON", "python3");
}

std::string model_path(const std::string& file_name) {
  std::filesystem::path p = std::filesystem::path(env_or("FISH_MODELS_DIR", "models")) / file_name;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

}  // namespace fish::test
