// Paths the test suites need, from the environment ctest sets (tests/CMakeLists.txt).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace fish::test {

std::string source_dir();    // FISH_SOURCE_DIR
std::string binary_dir();    // FISH_BINARY_DIR
std::string testdata_dir();  // FISH_TESTDATA (tests/data)
std::string python();        // FISH_PYTHON (venv with numpy + gguf)
// A directory private to this test process (ctest runs test cases as parallel processes, so
// fixed names under /tmp would race), created on first use and removed at exit.
std::filesystem::path temp_dir();
// Path of a real model in FISH_MODELS_DIR; empty when it is not there (setup.sh fetches it).
std::string model_path(const std::string& file_name);
// The whole file as bytes; empty when it cannot be read.
std::string read_file(const std::string& path);
inline const char* kSmolLm2 = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline const char* kGemma3 = "gemma-3-270m-q4_k_m.gguf";

// A fresh, empty directory (mkdtemp under temp_dir(), so its name was never used before, even
// by an earlier process with the same pid), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  size_t n_entries() const;

 private:
  std::filesystem::path path_;
};

// Sets an environment variable for one scope (nullptr unsets it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace fish::test
