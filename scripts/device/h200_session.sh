#!/usr/bin/env bash
# One call on the GPU machine (H200) that checks and measures what landed, back to back:
#   1. the Vulkan kernel tests on the real GPU (synthetic tensors; the real models do not travel),
#   2. fish_vulkan_bench (copy-engine and shader copy bandwidth + matvec / matvec1 GB/s at
#      Llama-8B shapes),
#   3. stage 1 offload vs CPU-only on synthetic Llama-1B / 8B Q4_K_M (+ the 8B under a 4 GB card),
#   4. the int4 kernels (W4A8 with AMX, W4A16) and re-quantisation speed on the 16-thread host.
# Carried: .devcarry/{bin,lib,commit} built on the dev machine, .gl (libvulkan1 .deb).
# Run from the repo root there: bash scripts/device/h200_session.sh. Everything goes to $OUT.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
# The NVIDIA ICD sits outside the loader's default search path on the GPU machine.
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=$icd
D=$PWD/.devcarry
export LD_LIBRARY_PATH=$D/lib
export FISH_COMMIT=$(cat $D/commit) FISH_BUILD_DESC="Release g++ 12.2 (Debian 12) built on the dev machine"
B=$D/bin
export FISH_BIN=$B/fish  # context.sh asks it which GPU it opens (no vulkaninfo there)
W=$OUT/h200
mkdir -p $W
scripts/context.sh > $W/context.txt 2>&1
(ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/nvidia/share/vulkan/icd.d; echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}") > $W/icd.txt 2>&1
VK_LOADER_DEBUG=error,warn FISH_GPU_VERBOSE=1 $B/fish gpu > $W/gpu.txt 2>&1
cat $W/gpu.txt | head -20

echo "== vulkan tests on the GPU"
FISH_SOURCE_DIR=$PWD FISH_TESTDATA=$PWD/tests/data timeout 300 $B/fish_test_vulkan \
  --gtest_filter='VulkanMatmul.*:VulkanBackend.*:VramBudget.*:VulkanOptions.*:GpuPlacement.OutputFirst*:GpuPlacement.FishGpuLayers*:GpuPlacement.SmallCard*:-*SmolLm2*:*Gemma3*:*Lavapipe*:*CpuImplementation*' \
  > $W/vulkan_tests.txt 2>&1
echo "rc=$?" >> $W/vulkan_tests.txt
grep -E "^\[  (PASSED|FAILED) |FAILED|rc=" $W/vulkan_tests.txt | head -20

echo "== benches"
mkdir -p build/bench && cp $B/fish_*_bench build/bench/
FISH_RESULTS=$W FISH_BENCH_REPS=3 timeout 200 scripts/run_bench.sh vulkan_bench build \
  -- --benchmark_filter='Copy|Matvec' > $W/vulkan_bench.log 2>&1
grep -E "_median|ERROR" $W/vulkan_bench.log | cut -c1-220 | head -60
[ -n "${SKIP_CPU_BENCH:-}" ] || FISH_RESULTS=$W FISH_BENCH_REPS=3 timeout 150 scripts/run_bench.sh int4_bench build \
  -- --benchmark_filter='threads:(1|16)/|decode_isa' > $W/int4_bench.log 2>&1
tail -n 20 $W/int4_bench.log
[ -n "${SKIP_CPU_BENCH:-}" ] || FISH_RESULTS=$W FISH_BENCH_REPS=3 timeout 90 scripts/run_bench.sh requant_bench build \
  -- --benchmark_filter='threads:(8|16)' > $W/requant_bench.log 2>&1
tail -n 12 $W/requant_bench.log

echo "== stage 1 generate"
P="The quick brown fox jumps over the lazy dog and then"
for s in llama-1b llama-8b; do
  [ -f /tmp/$s.gguf ] || $B/fish make-model --shape $s --type q4_k_m --threads 16 --out /tmp/$s.gguf > /dev/null 2>&1
  $B/fish generate -m /tmp/$s.gguf -p "$P" -n 64 --threads 16 --ignore-eos > $W/gen-$s-gpu.txt 2>&1
  FISH_GPU_LAYERS=0 $B/fish generate -m /tmp/$s.gguf -p "$P" -n 64 --threads 16 --ignore-eos > $W/gen-$s-cpu.txt 2>&1
  tail -n 1 $W/gen-$s-gpu.txt $W/gen-$s-cpu.txt
done
FISH_VRAM_BUDGET_MB=2800 $B/fish generate -m /tmp/llama-8b.gguf -p "$P" -n 32 --threads 16 --ignore-eos > $W/gen-llama-8b-4gb.txt 2>&1
tail -n 1 $W/gen-llama-8b-4gb.txt
tar -C $OUT -czf $OUT/h200.tar.gz h200 && rm -rf $W
ls -la $OUT
