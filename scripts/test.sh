#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh: packages, venv, models, Release build with tests), runs
# the forced-scalar leg (a FISH_SCALAR_ONLY build of the kernel and quant suites: every kernel
# then runs its scalar reference), then the whole suite with ctest. The README's test command;
# .ci/run calls it. ctest's summary is the last thing printed.
#
#   scripts/test.sh [ctest args...]      e.g. scripts/test.sh -R gguf
#
# Environment: FISH_BUILD_DIR (default build), FISH_JOBS, FISH_SKIP_SCALAR=1 skips the scalar
# leg, FISH_SLOW_TESTS (default 1: includes the ~1 min Gemma 3 writer round trip).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${FISH_BUILD_DIR:-$root/build}
jobs=${FISH_JOBS:-$(nproc)}
export FISH_SLOW_TESTS=${FISH_SLOW_TESTS:-1}
"$root/scripts/setup.sh" --build-dir "$build_dir" -- -DFISH_BUILD_TESTS=ON -DFISH_BUILD_BENCH=ON

if [ "${FISH_SKIP_SCALAR:-0}" != 1 ]; then
  scalar_dir=$build_dir-scalar
  echo "test.sh: forced-scalar leg in $scalar_dir" >&2
  cmake -S "$root" -B "$scalar_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFISH_SCALAR_ONLY=ON \
    -DFISH_BUILD_BENCH=OFF -DFISH_PYTHON="${FISH_CACHE:-$HOME/.cache/fish}/venv/bin/python" \
    > "$scalar_dir.configure.log" 2>&1 || { cat "$scalar_dir.configure.log" >&2; exit 1; }
  ninja -C "$scalar_dir" -j "$jobs" fish_test_kernels fish_test_quant
  (cd "$scalar_dir" && ctest --output-on-failure -j "$jobs" -L '^(kernels|quant)$' > ctest.log 2>&1) \
    || { cat "$scalar_dir/ctest.log" >&2; echo "test.sh: forced-scalar leg failed" >&2; exit 1; }
  grep -E 'tests passed|tests failed' "$scalar_dir/ctest.log" | sed 's/^/test.sh: forced-scalar leg: /' >&2
fi

cd "$build_dir"
exec ctest --output-on-failure --timeout 1500 -j "$jobs" "$@"
