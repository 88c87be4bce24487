#!/usr/bin/env bash
# Integer-dot decode on the GPU machine (H200), one call of <= 5 minutes (docs/gpu.md, issue 14
# item 1):
#   1. the matvec / span tests on the real GPU: the idot suite (VulkanMatvecIdot.*: every
#      matvec_idot_<type> vs the f32 and the q8_1-rounded CPU references, groups, parts, the span
#      decoding with idot vs per-matmul vs CPU) with the matmul / span suites under
#      FISH_VK_MATVEC=idot, then the same suites under FISH_VK_MATVEC=fast;
#   2. fish_vulkan_bench: BM_VulkanDeviceCopy / BM_VulkanShaderCopy, then BM_VulkanMatvec (fast vs
#      idot vs generic at the 8B shapes, q6_k 128256 x 4096 head), weight GB/s and % of the copy;
#   3. fish run experiments/gpu_decode.json (synthetic Llama-1B / 8B Q4_K_M, tg128) in the
#      configs of DECODE_MODES (default "idot idot-wg128"), one after another: idot
#      (FISH_VK_MATVEC=idot, the output head + argmax in the span, FISH_VK_IDOT_WG's rule),
#      idot-wg128 (the same with 128 threads a workgroup everywhere, the size before the rule),
#      idot-head0 (FISH_VK_HEAD=0: x comes back, the head runs outside; issue 14 item 3's A/B)
#      and fast (FISH_VK_MATVEC=fast);
#   4. fish generate 8B and 1B with FISH_GPU_PROFILE=2 in those configs (the span's stage times
#      and steps: an idot span shows q8_1 with 0 steps, the q8_1 inputs fused into the ops).
# The synthetic models are written in the background (12 threads) while the tests run. Steps
# past the budget (FISH_DECODE_BUDGET_S, default 280 s) are skipped and listed in skipped.txt.
# Optional, so one call can carry the other decode-side checks of a session (FAST_TESTS=0 skips
# the FISH_VK_MATVEC=fast tests of step 1):
#   EXTRA_TESTS   gtest patterns added to step 1's idot filter (e.g. 'Speculative*:VulkanCoopmat.*')
#   DECODE_TESTS  step 1's whole gtest filter instead
#   BENCH_FILTER  step 2's --benchmark_filter (default 'Copy|Matvec'; BM_VulkanVerify reads the
#                 8B from FISH_VERIFY_8B, set here to the synthetic 8B once it is written)
#   VERIFY_BENCH=1  BM_VulkanVerify (speculative verify of 1..8 tokens, 1B and 8B) in its own
#                 bench invocation after step 2, into vulkan_verify_bench.json
#   HOST_TESTS=1  the CPU kernel tests on the host (fish_test_kernels Kx16* / VecDot* / Registry*,
#                 fish_test_engine KquantRepack*; pack them into .devcarry/bin) while step 1 runs
#   RUN_S         seconds a config's fish run may take (default 120; 80 cut the 8B cell once)
#   PREFILL_BENCH a --benchmark_filter run last, while the budget lasts (BM_VulkanCoopmatPeak /
#                 BM_VulkanPrefillMatmul tiles), into vulkan_prefill_bench.json
#
# Here (the dev machine), after building BUILD (Release, FISH_BUILD_TESTS=ON FISH_BUILD_BENCH=ON):
#   bash scripts/device/gpu_decode.sh pack BUILD
# (gpu_prefill.sh's pack: .devcarry/{bin,lib,commit}). On the device, with carry
# [".devcarry", ".gl"] (.gl: the libvulkan1 + glvnd .debs, /work/.library/device/README.md):
#   bash scripts/device/gpu_decode.sh
# Output: ONE $OUT/gpu-decode.tar.gz of gpu-decode/{context.txt, gpu.txt, tests-{idot,fast}.txt,
# vulkan_bench.{json,log}, run-gpu_decode-CONFIG.log, runs-CONFIG/gpu_decode.*,
# gen-llama-{1b,8b}-CONFIG.txt, skipped.txt, summary.txt}; summary.txt is printed last.
set -uo pipefail

if [ "${1:-}" = pack ]; then
  exec bash "$(dirname "$0")/gpu_prefill.sh" pack "${2:?usage: gpu_decode.sh pack BUILD_DIR}"
fi

. "$PWD/scripts/device/gpu_env.sh"  # loader, ICD, .devcarry on the paths
W=$OUT/gpu-decode
mkdir -p $W
budget=${FISH_DECODE_BUDGET_S:-280}
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
stamp() { echo "== $1 (t=$(elapsed) s)"; }
left() {  # left NEED_S WHAT: true when NEED_S seconds are left, else records the skip
  [ $(( budget - $(elapsed) )) -ge "$1" ] && return 0
  echo "== skipped: $2 ($(elapsed) s of $budget spent)" | tee -a $W/skipped.txt
  return 1
}
: > $W/skipped.txt
: > $W/summary.txt
say() { echo "$*" | tee -a $W/summary.txt; }
finish() {
  stamp done
  tar -C $OUT -czf $OUT/gpu-decode.tar.gz gpu-decode && rm -rf $W
  echo "== $OUT/gpu-decode.tar.gz ($(du -h $OUT/gpu-decode.tar.gz | cut -f1))"
  echo "======== summary"
  tar -xzOf $OUT/gpu-decode.tar.gz gpu-decode/summary.txt
}
trap finish EXIT

synthetic_models 12 $W  # gpu_env.sh

scripts/context.sh > $W/context.txt 2>&1
FISH_GPU_VERBOSE=1 $B/fish gpu > $W/gpu.txt 2>&1
say "commit $(cat $D/commit 2>/dev/null); $(grep -m1 '^features:' $W/gpu.txt)"

tests() {  # tests MODE TIMEOUT FILTER: fish_test_vulkan under FISH_VK_MATVEC=MODE
  local mode=$1 to=$2 filter=$3 out=$W/tests-$1.txt
  stamp "vulkan tests FISH_VK_MATVEC=$mode"
  FISH_VK_MATVEC=$mode FISH_SOURCE_DIR=$PWD FISH_TESTDATA=$PWD/tests/data timeout $to \
    $B/fish_test_vulkan --gtest_filter="$filter" > $out 2>&1
  echo "rc=$?" >> $out
  say "tests $mode: $(grep -E '^\[  (PASSED|FAILED) ' $out | tr '\n' ' ') $(grep -m1 'FAILED TEST' $out) $(grep -m1 'idot span:' $out)"
  grep -E "^\[  FAILED  \] [A-Z]" $out | head -10 | tee -a $W/summary.txt
}
if [ "${HOST_TESTS:-0}" = 1 ]; then
  ( timeout 150 $B/fish_test_kernels --gtest_filter='Kx16*:VecDot*:Registry*' > $W/tests-host-kernels.txt 2>&1
    echo "rc=$?" >> $W/tests-host-kernels.txt
    timeout 100 $B/fish_test_engine --gtest_filter='KquantRepack*' > $W/tests-host-engine.txt 2>&1
    echo "rc=$?" >> $W/tests-host-engine.txt ) &
  SYN_PIDS+=($!)  # waited for with the models
fi
suites='VulkanMatmul.*:VulkanSpanOps.*:VulkanSpan.ChunkedPrefill*:VulkanSpan.SplitK*:VulkanSpan.Truncate*:VulkanSpan.OutputHead*:VulkanBackend.*'
# DECODE_TESTS replaces the filter (a call that shares its time with other work).
tests idot ${IDOT_TESTS_S:-100} "${DECODE_TESTS:-VulkanMatvecIdot.*:VulkanMatvecKnob.*:$suites${EXTRA_TESTS:+:$EXTRA_TESTS}:-*SmolLm2*:*Gemma3*}"
[ "${FAST_TESTS:-1}" = 1 ] && left 60 "tests with FISH_VK_MATVEC=fast" && tests fast 60 "$suites:-*SmolLm2*:*Gemma3*"

stamp "waiting for the synthetic models"
for p in "${SYN_PIDS[@]}"; do wait $p; done
for f in $W/tests-host-*.txt; do
  [ -f $f ] && say "$(basename $f): $(grep -E '^\[  (PASSED|FAILED) ' $f | tr '\n' ' ') $(tail -n 1 $f)"
done
export FISH_VERIFY_8B=$FISH_SYNTHETIC_DIR/llama-8b-q4_k_m-s1.gguf
if left 70 "fish_vulkan_bench"; then
  stamp "fish_vulkan_bench ${BENCH_FILTER:-Copy|Matvec}"
  timeout ${BENCH_S:-150} $B/fish_vulkan_bench --benchmark_filter="${BENCH_FILTER:-Copy|Matvec}" \
    --benchmark_out=$W/vulkan_bench.json --benchmark_out_format=json > $W/vulkan_bench.log 2>&1
  echo "rc=$?" >> $W/vulkan_bench.log
  grep -E "Copy|Matvec|rc=" $W/vulkan_bench.log | sed 's/  */ /g' | cut -c1-170 > $W/bench-short.txt
  cat $W/bench-short.txt
  # weight_GBps per label and shape: one line per benchmark
  # one line per benchmark: name (type/n_out/n_in/n_tok/mode), GB/s, % of the shader copy, label
  grep -E "^BM_Vulkan[A-Za-z]*Copy" $W/vulkan_bench.log | awk '{print "bench:", $1, $NF}' >> $W/summary.txt
  grep -E "^BM_VulkanMatvec" $W/vulkan_bench.log | awk '{g = p = label = ""; last = 0
    for (i = 1; i <= NF; i++) {
      if ($i ~ /^weight_GBps=/) g = $i
      if ($i ~ /^pct_shader_copy=/) p = $i
      if ($i ~ /=/) last = i
    }
    for (i = last + 1; i <= NF; i++) label = label " " $i
    sub(/\/min_time.*/, "", $1); print "bench:", $1, g, p, label}' >> $W/summary.txt
  grep -E "^BM_VulkanVerify" $W/vulkan_bench.log | sed 's/  */ /g' | cut -c1-200 | sed 's/^/bench: /' >> $W/summary.txt
fi

if [ "${VERIFY_BENCH:-0}" = 1 ] && left 50 "fish_vulkan_bench Verify"; then
  stamp "fish_vulkan_bench Verify"
  timeout ${VERIFY_S:-60} $B/fish_vulkan_bench --benchmark_filter=Verify \
    --benchmark_out=$W/vulkan_verify_bench.json --benchmark_out_format=json > $W/vulkan_verify_bench.log 2>&1
  echo "rc=$?" >> $W/vulkan_verify_bench.log
  grep -E "^BM_VulkanVerify|rc=" $W/vulkan_verify_bench.log | sed 's/  */ /g' | cut -c1-200 | sed 's/^/verify: /' >> $W/summary.txt
fi

# A config's knobs: idot, idot-wg128 (FISH_VK_IDOT_WG=128), idot-head0 (FISH_VK_HEAD=0), fast,
# or MODE+VAR=VALUE[+VAR=VALUE...] (FISH_VK_MATVEC=MODE and those variables, e.g.
# idot+FISH_VK_IDOT_ROWS=4).
modes=${DECODE_MODES:-idot idot-wg128}
knobs() {
  case $1 in
    idot-head0) echo FISH_VK_MATVEC=idot FISH_VK_HEAD=0 ;;
    idot-wg128) echo FISH_VK_MATVEC=idot FISH_VK_IDOT_WG=128 ;;
    *+*) local rest=${1#*+}; echo FISH_VK_MATVEC=${1%%+*} ${rest//+/ } ;;
    *) echo FISH_VK_MATVEC=$1 ;;
  esac
}
for mode in $modes; do
  left ${RUN_S:-120} "fish run gpu_decode ($mode)" || continue
  stamp "fish run gpu_decode ($mode)"
  env $(knobs $mode) timeout ${RUN_S:-120} $B/fish run experiments/gpu_decode.json --out $W/runs-$mode \
    > $W/run-gpu_decode-$mode.log 2>&1
  echo "rc=$?" >> $W/run-gpu_decode-$mode.log
  grep -hE "^fish run: \[|rc=" $W/run-gpu_decode-$mode.log | cut -c1-200 | sed "s/^/run $mode: /" | tee -a $W/summary.txt
done

P="The quick brown fox jumps over the lazy dog and then"
for s in llama-8b llama-1b; do
  for mode in $modes; do
    left 20 "fish generate $s ($mode)" || continue
    stamp "generate $s $mode"
    env $(knobs $mode) FISH_GPU_PROFILE=2 timeout 40 $B/fish generate \
      -m $FISH_SYNTHETIC_DIR/$s-q4_k_m-s1.gguf -p "$P" -n 128 --threads 16 --ignore-eos \
      --warmup 1 > $W/gen-$s-$mode.txt 2>&1
    grep -h "^fish generate:" $W/gen-$s-$mode.txt | cut -c1-700 | sed "s/^/gen $s $mode: /" | tee -a $W/summary.txt
  done
done

if [ -n "${PREFILL_BENCH:-}" ] && left 40 "fish_vulkan_bench $PREFILL_BENCH"; then
  stamp "fish_vulkan_bench $PREFILL_BENCH"
  timeout $(( budget - $(elapsed) - 5 )) $B/fish_vulkan_bench --benchmark_filter="$PREFILL_BENCH" \
    --benchmark_out=$W/vulkan_prefill_bench.json --benchmark_out_format=json \
    > $W/vulkan_prefill_bench.log 2>&1
  echo "rc=$?" >> $W/vulkan_prefill_bench.log
  grep -E "^BM_|rc=" $W/vulkan_prefill_bench.log | sed 's/  */ /g' | cut -c1-170 | sed 's/^/prefill: /' >> $W/summary.txt
fi
