#include "test_env.h"

#include <unistd.h>
#include <cstdlib>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

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

namespace {
// mkdtemp: a directory that did not exist before, whatever earlier processes left behind.
std::filesystem::path make_unique_dir(const std::filesystem::path& parent, const char* prefix) {
  std::string templ = (parent / (std::string(prefix) + "XXXXXX")).string();
  if (!::mkdtemp(templ.data())) {
    std::fprintf(stderr, "cannot create a temporary directory %s\n", templ.c_str());
    std::abort();
  }
  return templ;
}
}  // namespace

std::filesystem::path temp_dir() {
  // Leaked on purpose: the atexit hook below runs after static destructors registered later.
  static const std::filesystem::path* dir = [] {
    auto* d = new std::filesystem::path(
        make_unique_dir(std::filesystem::temp_directory_path(), "fish-test-"));
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*dir, ec);
    });
    return d;
  }();
  return *dir;
}

TempDir::TempDir() : path_(make_unique_dir(temp_dir(), "dir-")) {}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

size_t TempDir::n_entries() const {
  return size_t(std::distance(std::filesystem::directory_iterator(path_),
                              std::filesystem::directory_iterator()));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string model_path(const std::string& file_name) {
  std::filesystem::path p = std::filesystem::path(env_or("FISH_MODELS_DIR", "models")) / file_name;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

}  // namespace fish::test
