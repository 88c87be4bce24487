#!/usr/bin/env bash
# Carried to the GPU machine with the binaries in .devcarry/{bin,lib} (built here) and
# .devcarry/commit; run from the repo root there: bash scripts/device/<this file>. Writes to $OUT.
# Device run: make-model timings, dequant/quantize/decode benches at 16 threads, generate on synthetic models.
set -uo pipefail
D=$PWD/.devcarry  # bin/ (fish, benches), lib/ (libfmt, libbenchmark), commit
[ -f $D/bin.tar.xz ] && [ ! -d $D/bin ] && tar -C $D -xJf $D/bin.tar.xz  # a gpu_prefill.sh pack
export LD_LIBRARY_PATH=$D/lib
B=$D/bin
mkdir -p $OUT/bench
{ nproc; lscpu | grep -E "Model name|Flags" | cut -c1-400; free -g | head -2; } > $OUT/machine.txt
FISH_BIN=$B/fish scripts/context.sh > $OUT/context.txt 2>&1
# make-model: 1B and 8B Q4_K_M, 16 threads, timed (the 8B is then used for generate)
for s in llama-1b llama-8b; do
  /usr/bin/time -v $B/fish make-model --shape $s --type q4_k_m --threads 16 --out /tmp/$s.gguf 2> $OUT/make-$s.txt
  tail -n 30 $OUT/make-$s.txt | grep -E "wrote|Elapsed|Maximum resident|Percent of CPU" 
done
$B/fish make-model --shape llama-8b --type q4_k_m --threads 16 --out /tmp/l8b-again.gguf 2>&1 | tail -1
cmp /tmp/llama-8b.gguf /tmp/l8b-again.gguf && echo "8b identical across runs"; rm -f /tmp/l8b-again.gguf
for t in 16 8 1; do
  $B/fish generate -m /tmp/llama-8b.gguf -p "The quick brown fox jumps over the lazy dog and then" -n 48 --threads $t --ignore-eos > $OUT/gen8b-t$t.txt 2>&1
  tail -n 2 $OUT/gen8b-t$t.txt
done
for t in 16 1; do
  $B/fish generate -m /tmp/llama-1b.gguf -p "The quick brown fox jumps over the lazy dog and then" -n 64 --threads $t --ignore-eos > $OUT/gen1b-t$t.txt 2>&1
  tail -n 2 $OUT/gen1b-t$t.txt
done
mkdir -p build/bench && cp $B/fish_*_bench build/bench/
export FISH_RESULTS=$OUT/bench FISH_BENCH_REPS=5
timeout 200 scripts/run_bench.sh dequant_bench build > $OUT/dequant.log 2>&1; tail -n 3 $OUT/dequant.log
timeout 150 scripts/run_bench.sh quantize_bench build > $OUT/quantize.log 2>&1; tail -n 3 $OUT/quantize.log
ls -la $OUT $OUT/bench
