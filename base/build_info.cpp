// Build provenance; see build_info.h. FISH_GIT_* come from the generated header, the build facts
// from compile definitions set in base/CMakeLists.txt.
#include "base/build_info.h"

#include <fmt/format.h>

#include "fish_build_info_git.h"

#ifndef FISH_BUILD_VERSION
#define FISH_BUILD_VERSION "unknown"
#endif
#ifndef FISH_BUILD_TYPE
#define FISH_BUILD_TYPE "unknown"
#endif
#ifndef FISH_BUILD_FLAGS
#define FISH_BUILD_FLAGS ""
#endif

namespace fish {

const BuildInfo& build_info() {
  static const BuildInfo info {
    FISH_BUILD_VERSION, FISH_GIT_COMMIT, FISH_GIT_DIRTY, FISH_GIT_DIFF_SHA256, FISH_BUILD_TYPE,
        FISH_BUILD_FLAGS,
#if defined(__clang__)
        "clang " __clang_version__
#elif defined(__GNUC__)
        "g++ " __VERSION__
#else
        "unknown"
#endif
  };
  return info;
}

std::string commit_label() {
  const BuildInfo& b = build_info();
  if (b.commit == "unknown") return "unknown";
  const std::string sha(b.commit.substr(0, 12));
  if (b.dirty == 1) return fmt::format("{}-dirty.{}", sha, b.diff_sha256.substr(0, 8));
  return b.dirty == 0 ? sha : sha + "-dirty?";
}

std::string build_info_text() {
  const BuildInfo& b = build_info();
  std::string state = b.dirty == 1   ? fmt::format("dirty, diff sha256 {}", b.diff_sha256)
                      : b.dirty == 0 ? std::string("clean")
                                     : std::string("dirty unknown");
  return fmt::format("fish {}\ncommit {} ({})\nbuild {}: {}\ncompiler {}\n", b.version, b.commit,
                     state, b.build_type, b.build_flags, b.compiler);
}

}  // namespace fish
