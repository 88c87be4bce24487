#!/usr/bin/env bash
# Two back-to-back calls on the GPU machine (H200) that check and measure one merged build, so
# every issue's numbers share one binary, one machine and the same peers:
#   STEP=1  starts the llama.cpp CPU, Vulkan and CUDA builds (scripts/device/peer_gpu.sh
#           PHASE=build, PEERS="cpu vulkan cuda", background), writes the synthetic Llama-1B / 8B
#           Q4_K_M files, and while they build runs the correctness suites: fish_test_vulkan on
#           the NVIDIA device with the defaults (cooperative-matrix prefill, integer-dot decode),
#           the decode suites again with FISH_VK_MATVEC=fast and the prefill suites with
#           FISH_VK_COOPMAT=0, and the x16 K-quant / repack tests on the Sapphire Rapids host
#           (AVX-512 VNNI kernels); then waits for the builds (PHASE=wait).
#   STEP=2  with nothing else running: experiments/peer_gpu.json (FISH span vs llama.cpp Vulkan
#           vs CUDA: pp512 / tg128 at depth 0 and 512; GPU_S seconds, default 330), then
#           experiments/peer_cpu_host16.json (FISH x16 vs per-row vs llama.cpp's CPU build, 16
#           threads) with what is left, then, while time is left,
#           fish_vulkan_bench's matvec and prefill benchmarks with the same run's copy bandwidth.
# Carry [".devcarry", ".gl"]: .devcarry/{bin,lib,commit} from scripts/device/gpu_prefill.sh pack
# plus bin/{fish_test_kernels,fish_test_engine} (pack_merged below), .devcarry/peer from
# scripts/device/peer_gpu.sh PHASE=pack. Each step leaves one $OUT/h200-stepN.tar.gz and prints
# its summary last (the step packs $OUT itself: append nothing that writes $OUT/h200-stepN.tar.gz).
# Here (the dev machine), after building BUILD:
#   bash scripts/device/h200_merged.sh pack BUILD
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

if [ "${1:-}" = pack ]; then
  build=${2:?usage: h200_merged.sh pack BUILD_DIR}
  bash scripts/device/gpu_prefill.sh pack "$build" || exit 1
  for b in fish_test_kernels fish_test_engine; do
    strip -o .devcarry/bin/$b "$build/tests/$b" || exit 1
  done
  PHASE=pack bash scripts/device/peer_gpu.sh || exit 1
  du -sh .devcarry
  exit 0
fi

STEP=${STEP:?STEP=1 or STEP=2}
. "$root/scripts/device/gpu_env.sh"  # loader, ICD, .devcarry on the paths
export PEERS="cpu vulkan cuda"
W=$OUT/h200-step$STEP
mkdir -p $W
t0=$(date +%s)
budget=${CALL_S:-560}
elapsed() { echo $(( $(date +%s) - t0 )); }
stamp() { echo "== $1 (t=$(elapsed) s)" | tee -a $W/steps.txt; }
left() {  # left NEED_S WHAT: true when NEED_S seconds remain in the call's budget
  [ $(( budget - $(elapsed) )) -ge "$1" ] && return 0
  echo "== skipped: $2 ($(elapsed) s of $budget)" | tee -a $W/steps.txt
  return 1
}
gtest_summary() {  # gtest_summary FILE...: pass / fail counts and the failed tests
  for f in "$@"; do
    echo "$(basename $f): $(grep -c '^\[       OK \]' $f) ok, $(grep -c '^\[  FAILED  \] [A-Za-z].*(' $f) failed; $(tail -n 1 $f)"
    grep '^\[  FAILED  \] [A-Za-z].*(' $f | head -5
    # The first failure's own lines: the summary is often all that comes back.
    grep -m1 -B12 '^\[  FAILED  \] [A-Za-z].*(' $f | grep -v '^\[       OK \]' | cut -c1-240
  done
}
scripts/context.sh > $W/context.txt 2>&1

if [ "$STEP" = 1 ]; then
  stamp "peer builds ($PEERS)"
  PHASE=build bash scripts/device/peer_gpu.sh > $W/peer-build-start.txt 2>&1
  for s in llama-1b llama-8b; do
    f=$FISH_SYNTHETIC_DIR/$s-q4_k_m-s1.gguf
    [ -f $f ] || $B/fish make-model --shape $s --type q4_k_m --seed 1 --threads 4 --out $f \
      > $W/make-$s.log 2>&1 &
  done
  FISH_GPU_VERBOSE=1 $B/fish gpu > $W/gpu.txt 2>&1
  vt() {  # vt NAME TIMEOUT FILTER [VAR=VALUE...]
    local name=$1 to=$2 filter=$3
    shift 3
    stamp "vulkan tests $name"
    env "$@" FISH_SOURCE_DIR=$root FISH_TESTDATA=$root/tests/data timeout $to \
      $B/fish_test_vulkan --gtest_filter="$filter" > $W/tests-$name.txt 2>&1
    echo "rc=$?" >> $W/tests-$name.txt
  }
  vt default 240 '-*SmolLm2*:*Gemma3*'
  vt matvec-fast 90 '*Matvec*:*Span*:-*SmolLm2*:*Gemma3*:*Coopmat*' FISH_VK_MATVEC=fast
  vt coopmat-off 90 'VulkanMatmul.*:VulkanSpan*:-*SmolLm2*:*Gemma3*' FISH_VK_COOPMAT=0
  stamp "x16 kernel tests on the host"
  timeout 120 $B/fish_test_kernels --gtest_filter='Kx16*:VecDot*:Registry*' > $W/tests-host-kernels.txt 2>&1
  timeout 120 $B/fish_test_engine --gtest_filter='KquantRepack*' > $W/tests-host-engine.txt 2>&1
  wait
  stamp "waiting for the peer builds"
  PHASE=wait WAIT_S=$(( budget - $(elapsed) - 10 )) bash scripts/device/peer_gpu.sh > $W/peer-wait.txt 2>&1
  mv $OUT/peer-build.tar.gz $W/ 2>/dev/null
  stamp done
  {
    gtest_summary $W/tests-*.txt
    tail -n 4 $W/peer-wait.txt
  } > $W/summary.txt
fi

if [ "$STEP" = 2 ]; then
  export FISH_CACHE=/tmp/peer/cache  # where PHASE=build put the peers
  # The GPU rows first (they carry the GPU issues' bars), then the host's CPU rows with what is left.
  stamp "peer_gpu"
  CALL_S=$(( ${GPU_S:-330} + 20 )) WAIT_S=20 PHASE=run bash scripts/device/peer_gpu.sh > $W/peer-run.txt 2>&1
  mv $OUT/peer-gpu.tar.gz $W/ 2>/dev/null
  if left 120 "peer_cpu_host16"; then
    stamp "fish run peer_cpu_host16"
    timeout $(( budget - $(elapsed) - 80 )) $B/fish run experiments/peer_cpu_host16.json --out $W/runs-cpu \
      > $W/run-peer_cpu_host16.log 2>&1
    echo "rc=$?" >> $W/run-peer_cpu_host16.log
  fi
  if left 70 "fish_vulkan_bench"; then
    stamp "fish_vulkan_bench"
    timeout $(( budget - $(elapsed) - 10 )) $B/fish_vulkan_bench \
      --benchmark_filter='DeviceCopy|ShaderCopy|Matvec|CoopmatPeak|PrefillMatmul' \
      --benchmark_out=$W/vulkan_bench.json --benchmark_out_format=json > $W/vulkan_bench.log 2>&1
    echo "rc=$?" >> $W/vulkan_bench.log
  fi
  stamp done
  {
    grep -h "ok:\|error\|rc=" $W/run-peer_cpu_host16.log | cut -c1-200
    cat $W/runs-cpu/*.md 2>/dev/null | head -30
    tail -n 30 $W/peer-run.txt
  } > $W/summary.txt
fi
tar -C $OUT -czf $OUT/h200-step$STEP.tar.gz h200-step$STEP && rm -rf $W
ls -la $OUT
echo "======== summary (step $STEP, $(elapsed) s)"
tar -xzOf $OUT/h200-step$STEP.tar.gz h200-step$STEP/summary.txt
