#!/usr/bin/env bash
# One call on the GPU machine that carries every GPU issue's checks and the host CPU peer rows in
# about 8 minutes, for a session whose device time is short (the steps of gpu_prefill.sh,
# gpu_decode.sh and h200_merged.sh, cut to what a decision needs):
#   1. starts the llama.cpp CPU build (peer_gpu.sh PHASE=build PEERS=cpu) and writes the synthetic
#      Llama-1B / 8B Q4_K_M files, both in the background;
#   2. fish_test_vulkan with TESTS (default: the cooperative-matrix and coopmat2 kernels against
#      the CPU reference, the fused decode attention and RoPE + KV store, the integer-dot
#      variants, the span end to end);
#   3. fish_vulkan_bench with BENCH (default: the coopmat peak and its diagnostics, the q4_k
#      prefill tiles and the integer-dot variants at the 8B shapes);
#   4. experiments/peer_cpu_host16.json (FISH x16 vs llama.cpp's CPU build, 16 threads, at most
#      HOST_S seconds, ~265 s), the GPU idle; HOST=0 skips it and the CPU peer build;
#   5. fish run gpu_prefill_pp512 with the rule and with each tile of TILES forced (default n),
#      PP_S seconds each (default 80);
#   6. fish generate 8B with FISH_GPU_PROFILE=2 in each config of GEN (default: the defaults and
#      FISH_VK_ATTN_DECODE=1; GEN="" none): decode tok/s and the span's stage times.
# Each step is skipped once the call's BUDGET_S (default 560) would be passed; skipped.txt lists
# them. Carry [".devcarry", ".gl"]: .devcarry from `gpu_prefill.sh pack BUILD` then
# `PHASE=pack peer_gpu.sh` (in that order: the first pack empties .devcarry). Output: ONE
# $OUT/mixed.tar.gz (mixed/...), and summary.txt printed last.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
. "$root/scripts/device/gpu_env.sh"  # loader, ICD, .devcarry on the paths
W=$OUT/mixed
mkdir -p $W
: > $W/skipped.txt
t0=$(date +%s)
budget=${BUDGET_S:-560}
elapsed() { echo $(( $(date +%s) - t0 )); }
stamp() { echo "== $1 (t=$(elapsed) s)" | tee -a $W/steps.txt; }
left() {  # left NEED_S WHAT: true when NEED_S seconds remain of the budget, else records the skip
  [ $(( budget - $(elapsed) )) -ge "$1" ] && return 0
  echo "skipped: $2 ($(elapsed) s of $budget)" | tee -a $W/skipped.txt
  return 1
}

stamp "CPU peer build and synthetic models (background)"
host=${HOST:-1}  # 0: no CPU peer build, no peer_cpu_host16
[ $host = 1 ] &&
  CPU_JOBS=${CPU_JOBS:-8} PEERS=cpu PHASE=build bash scripts/device/peer_gpu.sh > $W/peer-build-start.txt 2>&1
pids=()
for s in llama-1b llama-8b; do
  f=$FISH_SYNTHETIC_DIR/$s-q4_k_m-s1.gguf
  [ -f $f ] || { $B/fish make-model --shape $s --type q4_k_m --seed 1 --threads 8 --out $f \
                   > $W/make-$s.log 2>&1 & pids+=($!); }
done
scripts/context.sh > $W/context.txt 2>&1
FISH_GPU_VERBOSE=1 $B/fish gpu > $W/gpu.txt 2>&1

stamp "vulkan tests"
tests=${TESTS:-'CoopmatTiles.*:VulkanCoopmat.Coopmat2*:VulkanCoopmat.EveryTile*:VulkanCoopmat.SpanMatchesTiledPathGqa:VulkanSpanOps.*Rope*:VulkanSpanOps.DecodeAttention*:VulkanSpan.SplitK*:VulkanMatvecIdot.EveryVariant*:VulkanMatvecIdot.Span*'}
FISH_SOURCE_DIR=$root FISH_TESTDATA=$root/tests/data timeout ${TESTS_S:-90} $B/fish_test_vulkan \
  --gtest_filter="$tests" > $W/tests.txt 2>&1
echo "rc=$?" >> $W/tests.txt

if left 80 "fish_vulkan_bench"; then
  stamp "fish_vulkan_bench"
  bench=${BENCH:-'ShaderCopy|CoopmatPeak|PrefillMatmul/(1|12)/(4096|14336)/4096/512/(1|4|18|19|20|21|22|23|24|25)/|MatvecVariant/(12|14)/(4096|14336)/'}
  timeout ${BENCH_S:-70} $B/fish_vulkan_bench --benchmark_filter="$bench" \
    --benchmark_out=$W/vulkan_bench.json --benchmark_out_format=json > $W/vulkan_bench.log 2>&1
  echo "rc=$?" >> $W/vulkan_bench.log
fi

stamp "waiting for the synthetic models"
for p in "${pids[@]}"; do wait $p; done
if [ $host = 1 ] && left 230 "peer_cpu_host16"; then
  stamp "CPU peer build wait"
  PEERS=cpu PHASE=wait WAIT_S=90 bash scripts/device/peer_gpu.sh > $W/peer-wait.txt 2>&1
  mv $OUT/peer-build.tar.gz $W/ 2>/dev/null
  stamp "fish run peer_cpu_host16"
  FISH_CACHE=/tmp/peer/cache timeout ${HOST_S:-280} $B/fish run experiments/peer_cpu_host16.json \
    --out $W/host16 > $W/host16.log 2>&1
  echo "rc=$?" >> $W/host16.log
fi
for t in rule ${TILES:-n}; do
  left 60 "pp512 tile $t" || continue
  stamp "fish run gpu_prefill_pp512 ($t)"
  extra=()
  [ $t != rule ] && extra=(FISH_VK_COOPMAT_TILE=$t)
  env "${extra[@]}" timeout ${PP_S:-80} $B/fish run experiments/gpu_prefill_pp512.json --out $W/pp512-$t \
    > $W/pp512-$t.log 2>&1
  echo "rc=$?" >> $W/pp512-$t.log
done

P="The quick brown fox jumps over the lazy dog and then"
i=0
for g in ${GEN-default FISH_VK_ATTN_DECODE=1}; do  # GEN="" runs none
  i=$((i + 1))
  left 25 "generate 8B ($g)" || continue
  stamp "generate 8B ($g)"
  extra=()
  [ $g != default ] && extra=($g)
  env "${extra[@]}" FISH_GPU_PROFILE=2 timeout 30 $B/fish generate \
    -m $FISH_SYNTHETIC_DIR/llama-8b-q4_k_m-s1.gguf -p "$P" -n 128 --threads 16 --ignore-eos \
    > $W/gen-8b-$i.txt 2>&1
  echo "config: $g" >> $W/gen-8b-$i.txt
done

stamp done

{
  echo "== summary ($(cat $D/commit 2>/dev/null | cut -c1-12), $(elapsed) s)"
  grep -m2 "^features\|^selected" $W/gpu.txt
  echo "tests: $(grep -cE '^\[       OK \]' $W/tests.txt) ok, $(grep -cE '^\[  FAILED  \] [A-Za-z].*\(' $W/tests.txt) failed, $(grep -cE '^\[  SKIPPED \] [A-Za-z]' $W/tests.txt) skipped; $(tail -n 1 $W/tests.txt)"
  grep -E '^\[  FAILED  \] [A-Za-z].*\(' $W/tests.txt | head -8
  grep -m1 -B10 '^\[  FAILED  \] [A-Za-z].*(' $W/tests.txt | grep -v '^\[       OK \]' | cut -c1-220
  grep -h "coopmat span vs\|coopmat2" $W/tests.txt | cut -c1-200 | head -6
  grep -E "^BM_|rc=" $W/vulkan_bench.log 2>/dev/null | sed 's/  */ /g' | cut -c1-190
  for f in $W/pp512-*.log; do [ -f $f ] && echo "$(basename $f .log): $(grep -oE 'ok: prefill [0-9.]+ tok/s' $f | tr '\n' ' ') $(grep rc= $f)"; done
  for f in $W/gen-8b-*.txt; do [ -f $f ] && { tail -n 1 $f; grep -h "^fish generate: prompt\|span profile" $f | cut -c1-420; }; done
  tail -n 3 $W/peer-wait.txt 2>/dev/null
  cat $W/host16/*.md 2>/dev/null
  cat $W/skipped.txt
} > $W/summary.txt 2>&1
tar -C $OUT -czf $OUT/mixed.tar.gz mixed && rm -rf $W
tar -xzOf $OUT/mixed.tar.gz mixed/summary.txt
