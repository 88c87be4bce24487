// What a binary was built from, baked in at build time (cmake/fish_build_info.cmake runs at every
// build, so a new commit or an edited tree reaches the next binary): the git commit, whether
// tracked files differed from it and a digest of that diff, the build type and flags, the
// compiler. Results contexts and `fish --version` read it here, never from the working
// directory the binary runs in.
#pragma once

#include <string>
#include <string_view>

namespace fish {

struct BuildInfo {
  std::string_view version;      // the project version (CMake PROJECT_VERSION)
  std::string_view commit;       // 40 hex digits of HEAD at build time; "unknown" outside git
  int dirty = -1;                // 1: tracked files differed from HEAD, 0: clean, -1: unknown
  std::string_view diff_sha256;  // sha256 of `git diff HEAD --binary` when dirty, else empty
  std::string_view build_type;   // CMAKE_BUILD_TYPE
  std::string_view build_flags;  // compile flags of the build type and FISH_* options in effect
  std::string_view compiler;     // e.g. "g++ 12.2.0"
};

const BuildInfo& build_info();

// The commit as context lines name it: 12 hex digits, "-dirty.DIGEST" (8 hex of the diff's
// sha256) for a dirty build, "-dirty?" when unknown; "unknown" outside git.
std::string commit_label();

// "fish 0.1.0" then one line each for the commit (with "dirty, diff sha256 ..." or "clean"), the
// build and the compiler: what `fish --version` prints.
std::string build_info_text();

}  // namespace fish
