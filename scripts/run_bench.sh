#!/usr/bin/env bash
# Runs one google-benchmark executable with repetitions and writes its JSON, the measurement
# context (scripts/context.sh: machine; the executable itself: commit and build) embedded, to
# results/bench/<name>-<host>.json.
#   scripts/run_bench.sh NAME [BUILD_DIR] [-- extra benchmark args]   e.g. run_bench.sh dequant_bench
# Environment: FISH_BENCH_REPS (default 5), FISH_RESULTS (default results/bench).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
name=$1; shift
build=$root/build
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build=$1; shift; fi
[ "${1:-}" = "--" ] && shift
exe=$build/bench/fish_$name
[ -x "$exe" ] || { echo "run_bench.sh: $exe not built (ninja -C $build fish_$name)" >&2; exit 1; }
out_dir=${FISH_RESULTS:-$root/results/bench}
mkdir -p "$out_dir"
# One --benchmark_context=k=v,k=v flag (only the last such flag counts); values lose their commas.
# commit, build and compiler are left out: the executable records its own (bench/bench_context.cpp).
ctx=""
while IFS= read -r kv; do
  case "$kv" in commit=* | build=* | compiler=*) continue ;; esac
  ctx="$ctx${ctx:+,}${kv//,/;}"
done < <("$root/scripts/context.sh" "$build")
host=$(hostname -s)
out=$out_dir/$name-$host.json
"$exe" --benchmark_repetitions="${FISH_BENCH_REPS:-5}" --benchmark_report_aggregates_only=false \
  --benchmark_out="$out.tmp" --benchmark_out_format=json "--benchmark_context=$ctx" "$@"
mv "$out.tmp" "$out"
echo "run_bench.sh: wrote $out" >&2
