#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh: packages, venv, models, Release build with tests) and
# runs the whole test suite with ctest. The README's test command; .ci/run calls it.
#
#   scripts/test.sh [ctest args...]      e.g. scripts/test.sh -R gguf
#
# Environment: FISH_BUILD_DIR (default build), FISH_JOBS.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${FISH_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh" --build-dir "$build_dir" -- -DFISH_BUILD_TESTS=ON -DFISH_BUILD_BENCH=ON
jobs=${FISH_JOBS:-$(nproc)}
cd "$build_dir"
exec ctest --output-on-failure --timeout 1500 -j "$jobs" "$@"
