#!/usr/bin/env bash
# The x16 K-quant kernels (kernels/kquant_x16.h; docs/cpu-kernels.md) on the H200's 16-thread
# Sapphire Rapids host: the tests there, then old-vs-new benches and fish run A/Bs.
# Carried (built on the dev machine, as for cpu_benches.sh): .devcarry/bin/{fish,
# fish_test_kernels,fish_test_engine,fish_kquant_bench}, .devcarry/lib (libfmt, libbenchmark, any
# shared gtest), .devcarry/commit. Run from the repo root there:
#   PART=tests|bench|run|amx|all bash scripts/device/cpu_kquant.sh          (default all)
# Writes to $OUT/cpu-kquant/: machine.txt, context.txt, tests-kernels.txt (Kx16*, VecDot*,
# Registry*: the AMX kernels' bitwise test runs where the host grants tile data), tests-engine.txt
# (KquantRepack*), TESTS_PASSED or TESTS_FAILED, bench/kquant_bench-<host>.json (stream,
# decode gguf vs x16, prefill gguf vs x16 vs amx at 8/12/16/64 tokens, per type, 1/2/16 threads),
# runs/ (fish run of experiments/cpu_kquant_repack_host16.json: synthetic 1B and 8B Q4_K_M,
# pp512/tg128, 16 threads, kquant_repack off vs on: on = x16 VNNI decode + AMX prefill) and
# run.log; PART=amx (not in all): the same experiment with FISH_AMX=0 into runs-noamx/, the
# AMX-off leg of the prefill A/B. PART=all needs ~10 min (the 8B is made first: ~1 min).
set -uo pipefail
PART=${PART:-all}
D=$PWD/.devcarry
[ -f $D/bin.tar.xz ] && [ ! -d $D/bin ] && tar -C $D -xJf $D/bin.tar.xz  # a gpu_prefill.sh pack
export LD_LIBRARY_PATH=$D/lib
B=$D/bin
W=$OUT/cpu-kquant
mkdir -p $W/bench
export FISH_SYNTHETIC_DIR=/tmp/syn
mkdir -p $FISH_SYNTHETIC_DIR
{ nproc; lscpu | grep -E "Model name|Flags" | cut -c1-600; free -g | head -2; } > $W/machine.txt
FISH_BIN=$B/fish scripts/context.sh > $W/context.txt 2>&1
t0=$(date +%s)
stamp() { echo "== $1 (t=$(( $(date +%s) - t0 )) s)"; }
if [ $PART = tests ] || [ $PART = all ]; then
  stamp tests
  ok=1
  timeout 200 $B/fish_test_kernels --gtest_filter='Kx16*:VecDot*:Registry*' > $W/tests-kernels.txt 2>&1 || ok=0
  FISH_SYNTHETIC_DIR=/tmp/syn timeout 120 $B/fish_test_engine --gtest_filter='KquantRepack*' > $W/tests-engine.txt 2>&1 || ok=0
  tail -n 3 $W/tests-kernels.txt $W/tests-engine.txt
  if [ $ok = 1 ]; then touch $W/TESTS_PASSED; else touch $W/TESTS_FAILED; fi
fi
if [ $PART = bench ] || [ $PART = all ]; then
  stamp bench
  mkdir -p build/bench && cp $B/fish_kquant_bench build/bench/
  FISH_RESULTS=$W/bench FISH_BENCH_REPS=3 timeout 480 scripts/run_bench.sh kquant_bench build \
    -- --benchmark_enable_random_interleaving=true > $W/bench.log 2>&1
  tail -n 2 $W/bench.log
fi
if [ $PART = run ] || [ $PART = amx ] || [ $PART = all ]; then
  for s in llama-1b llama-8b; do  # the files fish run would make (seed 1), made at 16 threads
    f=$FISH_SYNTHETIC_DIR/$s-q4_k_m-s1.gguf
    [ -f $f ] || { stamp "make-model $s"; $B/fish make-model --shape $s --type q4_k_m --seed 1 --threads 16 --out $f > /dev/null; }
  done
  if [ $PART = amx ]; then
    stamp "fish run cpu_kquant_repack_host16, FISH_AMX=0"
    FISH_AMX=0 timeout 420 $B/fish run experiments/cpu_kquant_repack_host16.json \
      --out $W/runs-noamx > $W/run-noamx.log 2>&1
    tail -n 20 $W/run-noamx.log
  else
    stamp "fish run cpu_kquant_repack_host16"
    timeout 420 $B/fish run experiments/cpu_kquant_repack_host16.json --out $W/runs > $W/run.log 2>&1
    tail -n 20 $W/run.log
  fi
fi
stamp done
ls -la $W $W/bench $W/runs $W/runs-noamx 2>/dev/null
