#!/usr/bin/env bash
# Carried to the GPU machine with the binaries in .devcarry/{bin,lib} (built here) and
# .devcarry/commit; run from the repo root there: bash scripts/device/<this file>. Writes to $OUT.
set -uo pipefail
D=$PWD/.devcarry  # bin/ (fish, benches), lib/ (libfmt, libbenchmark), commit
[ -f $D/bin.tar.xz ] && [ ! -d $D/bin ] && tar -C $D -xJf $D/bin.tar.xz  # a gpu_prefill.sh pack
export LD_LIBRARY_PATH=$D/lib
mkdir -p build/bench && cp $D/bin/fish_*_bench build/bench/
export FISH_RESULTS=$OUT FISH_BENCH_REPS=5
timeout 170 scripts/run_bench.sh dequant_bench build > $OUT/dequant.log 2>&1; tail -n 2 $OUT/dequant.log
timeout 150 scripts/run_bench.sh quantize_bench build -- --benchmark_filter='avx512|rows' > $OUT/quantize.log 2>&1; tail -n 2 $OUT/quantize.log
FISH_BENCH_REPS=3 timeout 200 scripts/run_bench.sh decode_bench build -- --benchmark_filter='stream|llama-1b' > $OUT/decode.log 2>&1; tail -n 2 $OUT/decode.log
ls -la $OUT
