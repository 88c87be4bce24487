#!/usr/bin/env bash
# Two back-to-back calls on the GPU machine (H200) that check and measure the GPU prefill, peer
# and CPU-kernel work of one merged build, so their numbers share one binary and one machine:
#   STEP=1  starts the llama.cpp Vulkan and CUDA builds (scripts/device/peer_gpu.sh PHASE=build,
#           background, 16 cores), writes the synthetic Llama-1B / 8B Q4_K_M files, runs the
#           correctness suites while they build (cooperative-matrix matmul and span tests on the
#           NVIDIA device, then the same suites with FISH_VK_COOPMAT=0; the x16 K-quant kernel
#           tests on the Sapphire Rapids host: scripts/device/cpu_kquant.sh PART=tests), then
#           waits for the builds (PHASE=wait).
#   STEP=2  with nothing else running: fish run gpu_prefill_pp512 / pp2048 with cooperative
#           matrices and with FISH_VK_COOPMAT=0, fish_vulkan_bench CoopmatPeak + PrefillMatmul,
#           then experiments/peer_gpu.json (FISH span vs llama.cpp Vulkan vs llama.cpp CUDA).
# Carry [".devcarry", ".gl"]: .devcarry/{bin,lib,commit} as scripts/device/gpu_prefill.sh pack
# writes them plus bin/{fish_test_kernels,fish_test_engine}, and .devcarry/peer from
# scripts/device/peer_gpu.sh PHASE=pack. Each step leaves one $OUT/h200-stepN.tar.gz.
set -uo pipefail
STEP=${STEP:?STEP=1 or STEP=2}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
. "$root/scripts/device/gpu_env.sh"  # loader, ICD, .devcarry on the paths
W=$OUT/h200-step$STEP
mkdir -p $W
t0=$(date +%s)
stamp() { echo "== $1 (t=$(( $(date +%s) - t0 )) s)" | tee -a $W/steps.txt; }
scripts/context.sh > $W/context.txt 2>&1
suites='VulkanMatmul.*:VulkanSpanOps.*:VulkanSpan.ChunkedPrefill*:VulkanSpan.SplitK*:VulkanSpan.Truncate*'

if [ "$STEP" = 1 ]; then
  stamp "peer builds"
  PHASE=build bash scripts/device/peer_gpu.sh > $W/peer-build-start.txt 2>&1
  for s in llama-1b llama-8b; do
    f=$FISH_SYNTHETIC_DIR/$s-q4_k_m-s1.gguf
    [ -f $f ] || $B/fish make-model --shape $s --type q4_k_m --seed 1 --threads 4 --out $f \
      > $W/make-$s.log 2>&1 &
  done
  FISH_GPU_VERBOSE=1 $B/fish gpu > $W/gpu.txt 2>&1
  stamp "coopmat tests"
  FISH_SOURCE_DIR=$root FISH_TESTDATA=$root/tests/data timeout 200 $B/fish_test_vulkan \
    --gtest_filter="CoopmatTiles.*:VulkanCoopmat.*:$suites:-*SmolLm2*:*Gemma3*" \
    > $W/tests-coopmat.txt 2>&1; echo "rc=$?" >> $W/tests-coopmat.txt
  stamp "fallback tests (FISH_VK_COOPMAT=0)"
  FISH_VK_COOPMAT=0 FISH_SOURCE_DIR=$root FISH_TESTDATA=$root/tests/data timeout 100 \
    $B/fish_test_vulkan --gtest_filter="$suites:-*SmolLm2*:*Gemma3*" \
    > $W/tests-f32.txt 2>&1; echo "rc=$?" >> $W/tests-f32.txt
  stamp "x16 kernel tests on the host"
  PART=tests bash scripts/device/cpu_kquant.sh > $W/cpu-kquant.txt 2>&1
  cp -r $OUT/cpu-kquant $W/ 2>/dev/null && rm -rf $OUT/cpu-kquant
  wait
  stamp "waiting for the peer builds"
  PHASE=wait WAIT_S=${WAIT_S:-330} bash scripts/device/peer_gpu.sh > $W/peer-wait.txt 2>&1
  mv $OUT/peer-build.tar.gz $W/ 2>/dev/null
  stamp done
  grep -hE "^\[  (PASSED|FAILED) |^\[  FAILED|rc=" $W/tests-*.txt | head -30
  tail -n 4 $W/cpu-kquant.txt; cat $W/peer-wait.txt | tail -n 6
fi

if [ "$STEP" = 2 ]; then
  run_exp() {  # run_exp NAME TAG TIMEOUT [VAR=VALUE...]
    local name=$1 tag=$2 to=$3
    shift 3
    stamp "fish run $name ($tag)"
    env "$@" timeout $to $B/fish run experiments/$name.json --out $W/runs-$tag \
      > $W/run-$name-$tag.log 2>&1
    echo "rc=$?" >> $W/run-$name-$tag.log
  }
  run_exp gpu_prefill_pp512 coopmat 60
  run_exp gpu_prefill_pp512 f32 80 FISH_VK_COOPMAT=0
  stamp "fish_vulkan_bench"
  timeout 100 $B/fish_vulkan_bench --benchmark_filter='CoopmatPeak|PrefillMatmul' \
    --benchmark_out=$W/vulkan_bench.json --benchmark_out_format=json > $W/vulkan_bench.log 2>&1
  echo "rc=$?" >> $W/vulkan_bench.log
  run_exp gpu_prefill_pp2048 coopmat 90
  stamp "peer_gpu"
  CALL_S=${CALL_S:-300} WAIT_S=30 PHASE=run bash scripts/device/peer_gpu.sh > $W/peer-run.txt 2>&1
  mv $OUT/peer-gpu.tar.gz $W/ 2>/dev/null
  stamp done
  grep -hE "ok: prefill|rc=" $W/run-*.log | cut -c1-150
  grep -E "Peak|q4_k 4096x4096|q4_k 14336x4096|rc=" $W/vulkan_bench.log | sed 's/  */ /g' | cut -c1-160 | head -12
  tail -n 40 $W/peer-run.txt
fi
tar -C $OUT -czf $OUT/h200-step$STEP.tar.gz h200-step$STEP && rm -rf $W
ls -la $OUT
