#!/usr/bin/env bash
# Carried to the GPU machine with the binaries in .devcarry/{bin,lib} (built here) and
# .devcarry/commit; run from the repo root there: bash scripts/device/<this file>. Writes to $OUT.
# Vulkan backend, stage 1: fish gpu, the kernel bench (device copy bandwidth + matvec/prefill
# GB/s at Llama-8B shapes), then generate on synthetic 1B/8B Q4_K_M: per-matmul GPU offload vs
# CPU-only (FISH_GPU_LAYERS=0) vs the 8B under a 4 GB card's budget, back to back.
set -uo pipefail
D=$PWD/.devcarry  # bin/ (fish, benches), lib/ (libfmt, libbenchmark), commit
export LD_LIBRARY_PATH=$D/lib
export FISH_COMMIT=$(cat $D/commit) FISH_BUILD_DESC="Release g++ 12.2 (Debian 12) built on the dev machine"
B=$D/bin
scripts/context.sh > $OUT/context.txt 2>&1
FISH_GPU_VERBOSE=1 $B/fish gpu > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
mkdir -p build/bench && cp $B/fish_vulkan_bench build/bench/
FISH_RESULTS=$OUT FISH_BENCH_REPS=3 timeout 240 scripts/run_bench.sh vulkan_bench build \
  -- --benchmark_filter='Copy|/12/|/14/' > $OUT/vulkan_bench.log 2>&1; tail -n 30 $OUT/vulkan_bench.log
P="The quick brown fox jumps over the lazy dog and then"
for s in llama-1b llama-8b; do
  [ -f /tmp/$s.gguf ] || $B/fish make-model --shape $s --type q4_k_m --threads 16 --out /tmp/$s.gguf > /dev/null 2>&1
  $B/fish generate -m /tmp/$s.gguf -p "$P" -n 64 --threads 16 --ignore-eos > $OUT/gen-$s-gpu.txt 2>&1
  FISH_GPU_LAYERS=0 $B/fish generate -m /tmp/$s.gguf -p "$P" -n 64 --threads 16 --ignore-eos > $OUT/gen-$s-cpu.txt 2>&1
  tail -n 1 $OUT/gen-$s-gpu.txt $OUT/gen-$s-cpu.txt
done
FISH_VRAM_BUDGET_MB=2800 $B/fish generate -m /tmp/llama-8b.gguf -p "$P" -n 32 --threads 16 --ignore-eos > $OUT/gen-llama-8b-4gb.txt 2>&1
tail -n 1 $OUT/gen-llama-8b-4gb.txt
ls -la $OUT
