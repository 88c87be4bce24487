#!/usr/bin/env bash
# Cooperative-matrix prefill on the GPU machine (H200), one call of <= 5 minutes
# (docs/gpu-prefill.md):
#   1. the coopmat tests on the real GPU (every type x every tile of coopmat.h vs the CPU f32
#      reference, token counts 1..600 (the rule, b, r), parts and groups, span end to end vs the
#      f32 tiled span (the rule, r))
#      with the matmul / span suites, then the same matmul / span suites with FISH_VK_COOPMAT=0
#      (the fallback path);
#   2. fish run gpu_prefill_pp512 with cooperative matrices (the default: the rule's tiles),
#      with FISH_VK_COOPMAT_TILE=T for each T of FISH_PREFILL_TILES (default "s r x z": the
#      previous fastest and the local-accumulator tiles) and with FISH_VK_COOPMAT=0 (unless
#      FISH_PREFILL_F32=0);
#   3. fish_vulkan_bench: BM_VulkanCoopmatPeak and BM_VulkanPrefillMatmul (each type at 8B shapes,
#      tiled f32 vs coopmat: the rule, s, r, u, v for every type, every tile for q4_k and q6_k),
#      TFLOP/s and % of the peak, and BM_VulkanPrefillAttention (one-pass vs flash attention);
#      FISH_PREFILL_BENCH replaces the --benchmark_filter regex (FISH_PREFILL_TESTS step 1's
#      gtest filter, and then the FISH_VK_COOPMAT=0 run is skipped);
#   4. fish run gpu_prefill_pp2048 on and off (off unless FISH_PREFILL_F32=0);
#   5. fish generate 8B with FISH_GPU_PROFILE=2, coopmat and f32.
# The synthetic Llama-1B / 8B Q4_K_M files are written at the start in the background (16
# threads) while the tests run, and waited for before step 2. Steps past the budget
# (FISH_PREFILL_BUDGET_S, default 270 s) are skipped and listed in skipped.txt. Everything goes
# into ONE archive, $OUT/gpu-prefill.tar.gz (unpacks to gpu-prefill/), and stdout ends with a
# summary (tests, pp512 / pp2048 tok/s, peak, each shape's fastest tile and the rule's).
#
# Here (the dev machine), after building BUILD (Release, FISH_BUILD_TESTS=ON FISH_BUILD_BENCH=ON):
#   bash scripts/device/gpu_prefill.sh pack BUILD
# writes .devcarry/{bin,lib,commit} (fish, fish_test_vulkan, fish_vulkan_bench stripped, their
# non-system libraries, the build's commit and its copy of this script) and adds /.devcarry/ to
# .git/info/exclude. Then on the device, with carry [".devcarry", ".gl"] (.gl: the libvulkan1 +
# glvnd .debs, /work/.library/device/README.md "Headless rendering"):
#   bash .devcarry/gpu_prefill.sh        (or scripts/device/gpu_prefill.sh of the same tree)
# Archive contents: gpu-prefill/{context.txt, gpu.txt, tests-coopmat.txt, tests-f32.txt,
# run-gpu_prefill_pp{512,2048}-{coopmat,tile-T,f32}.log, runs-{coopmat,tile-T,f32}/gpu_prefill_pp*.{jsonl,csv,md},
# vulkan_bench.json, vulkan_bench.log, gen-llama-8b-{coopmat,f32}.txt, skipped.txt, summary.txt}.
set -uo pipefail

if [ "${1:-}" = pack ]; then
  build=${2:?usage: gpu_prefill.sh pack BUILD_DIR}
  # The rows' context takes the commit from the binary (`fish --version`, baked in at build time):
  # a binary built before the last commit, or from a dirty tree, would put another commit on
  # every result. Refuse it (PACK_ANY=1 packs it anyway, for a deliberate dirty run).
  baked=$("$build/fish" --version 2>/dev/null | sed -n 's/^commit //p')
  src0=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
  head=$(git -C "${src0:-.}" rev-parse HEAD)
  if [ "${PACK_ANY:-0}" != 1 ] && [ "$baked" != "$head (clean)" ]; then
    echo "gpu_prefill.sh: $build/fish says 'commit $baked', HEAD is $head: commit, then" \
      "ninja -C $build, then pack (PACK_ANY=1 packs it anyway)" >&2
    exit 1
  fi
  D=.devcarry
  rm -rf $D && mkdir -p $D/bin $D/lib
  for b in fish tests/fish_test_vulkan bench/fish_vulkan_bench bench/fish_kquant_bench; do
    [ -x "$build/$b" ] || { echo "gpu_prefill.sh: $build/$b not built" >&2; exit 1; }
    strip -o $D/bin/$(basename $b) "$build/$b"
  done
  # Libraries outside glibc / libstdc++ / libgcc (the GPU machine has newer ones of those).
  for b in $D/bin/*; do ldd $b; done | awk '/=> \// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    while read -r l; do cp -L "$l" $D/lib/; done
  # The commit of the build's source tree (it may be another worktree than this one), and this
  # script with it: `bash .devcarry/gpu_prefill.sh` then runs the build's own version.
  src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
  src=${src:-.}
  echo "$(git -C "$src" rev-parse HEAD)$(git -C "$src" status --porcelain -uno | grep -q . &&
    echo ' (dirty)')" > $D/commit
  cp "$src/scripts/device/gpu_prefill.sh" $D/gpu_prefill.sh
  # The binaries travel xz-compressed (17 MB -> ~3 MB of the 64 MiB a call carries, with the
  # tracked tree's ~19 MB): gpu_env.sh unpacks them on the GPU machine.
  tar -C $D -cJf $D/bin.tar.xz bin && rm -rf $D/bin
  ex=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$ex")"
  grep -qx '/.devcarry/' "$ex" 2>/dev/null || echo /.devcarry/ >> "$ex"
  du -sh $D
  exit 0
fi

. "$PWD/scripts/device/gpu_env.sh"  # loader, ICD, .devcarry on the paths
W=$OUT/gpu-prefill
mkdir -p $W
budget=${FISH_PREFILL_BUDGET_S:-270}
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
stamp() { echo "== $1 (t=$(elapsed) s)"; }
# left NEED_S WHAT: true when NEED_S seconds are left of the budget, else records the skip.
left() {
  if [ $(( budget - $(elapsed) )) -ge "$1" ]; then return 0; fi
  echo "== skipped: $2 (budget of $budget s: $(elapsed) s spent)" | tee -a $W/skipped.txt
  return 1
}
: > $W/skipped.txt

# Synthetic models first, in the background (CPU) while the GPU tests run.
synthetic_models 12 $W  # gpu_env.sh

scripts/context.sh > $W/context.txt 2>&1
FISH_GPU_VERBOSE=1 $B/fish gpu > $W/gpu.txt 2>&1
head -14 $W/gpu.txt

tests() {  # tests FILE TIMEOUT FILTER [VAR=VALUE...]
  local out=$1 to=$2 filter=$3
  shift 3
  stamp "vulkan tests -> $out $*"
  env "$@" FISH_SOURCE_DIR=$PWD FISH_TESTDATA=$PWD/tests/data timeout $to $B/fish_test_vulkan \
    --gtest_filter="$filter" > $W/$out 2>&1
  echo "rc=$?" >> $W/$out
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|coopmat span vs|rc=" $W/$out | head -20
}
suites='VulkanMatmul.*:VulkanSpanOps.*:VulkanSpan.ChunkedPrefill*:VulkanSpan.SplitK*:VulkanSpan.Truncate*'
# FISH_PREFILL_TESTS replaces the filter (a call that shares its time with other work).
tests tests-coopmat.txt 120 "${FISH_PREFILL_TESTS:-CoopmatTiles.*:VulkanCoopmat.*:$suites:-*SmolLm2*:*Gemma3*}"
[ -z "${FISH_PREFILL_TESTS:-}" ] && left 60 "tests with FISH_VK_COOPMAT=0" &&
  tests tests-f32.txt 60 "$suites:-*SmolLm2*:*Gemma3*" FISH_VK_COOPMAT=0

stamp "waiting for the synthetic models"
for p in "${SYN_PIDS[@]}"; do wait $p; done
ls -la $FISH_SYNTHETIC_DIR

run_exp() {  # run_exp NAME TAG TIMEOUT [VAR=VALUE...]: fish run into $W/runs-TAG
  local name=$1 tag=$2 to=$3
  shift 3
  stamp "fish run $name ($tag)"
  env "$@" timeout $to $B/fish run experiments/$name.json --out $W/runs-$tag \
    > $W/run-$name-$tag.log 2>&1
  echo "rc=$?" >> $W/run-$name-$tag.log
  grep -hE "ok: prefill|rc=" $W/run-$name-$tag.log | cut -c1-160
}
left 40 "fish run gpu_prefill_pp512 (coopmat)" && run_exp gpu_prefill_pp512 coopmat 60
f32=${FISH_PREFILL_F32:-1}
for t in ${FISH_PREFILL_TILES:-s r x z}; do
  left 40 "fish run gpu_prefill_pp512 (tile $t)" &&
    run_exp gpu_prefill_pp512 tile-$t 60 FISH_VK_COOPMAT_TILE=$t
done
[ "$f32" = 0 ] ||
  { left 50 "fish run gpu_prefill_pp512 (f32)" && run_exp gpu_prefill_pp512 f32 80 FISH_VK_COOPMAT=0; }

if left 60 "fish_vulkan_bench"; then
  stamp "fish_vulkan_bench CoopmatPeak|PrefillMatmul|PrefillAttention"
  bto=$(( budget - $(elapsed) + 20 ))  # the budget's rest (+20 s), at most 150 s
  [ $bto -gt 150 ] && bto=150
  timeout $bto $B/fish_vulkan_bench \
    --benchmark_filter="${FISH_PREFILL_BENCH:-CoopmatPeak|PrefillMatmul|PrefillAttention}" \
    --benchmark_out=$W/vulkan_bench.json --benchmark_out_format=json > $W/vulkan_bench.log 2>&1
  echo "rc=$?" >> $W/vulkan_bench.log
  grep -E "Peak|PrefillAttention|rc=" $W/vulkan_bench.log | sed 's/  */ /g' | cut -c1-170 | head -20
fi

left 30 "fish run gpu_prefill_pp2048 (coopmat)" && run_exp gpu_prefill_pp2048 coopmat 50
[ "$f32" = 0 ] ||
  { left 60 "fish run gpu_prefill_pp2048 (f32)" && run_exp gpu_prefill_pp2048 f32 90 FISH_VK_COOPMAT=0; }

P="The quick brown fox jumps over the lazy dog and then"
for v in coopmat $([ "$f32" = 0 ] || echo f32); do
  left 20 "fish generate llama-8b ($v)" || continue
  stamp "generate llama-8b $v"
  extra=()
  [ $v = f32 ] && extra=(FISH_VK_COOPMAT=0)
  env "${extra[@]}" FISH_GPU_PROFILE=2 timeout 40 $B/fish generate \
    -m $FISH_SYNTHETIC_DIR/llama-8b-q4_k_m-s1.gguf -p "$(for i in $(seq 100); do echo -n "$P "; done)" \
    -n 16 --threads 16 --ignore-eos --n-batch 512 --warmup 1 > $W/gen-llama-8b-$v.txt 2>&1
  grep -h "^fish generate:" $W/gen-llama-8b-$v.txt | cut -c1-260
done
stamp done
ls -la $W

# Summary (also summary.txt): tests, tok/s per run, the peak, and per bench shape the rule's
# tile, the fastest tile and the tiled f32 kernel in TFLOP/s.
{
  echo "== summary ($(cat $D/commit 2>/dev/null | cut -c1-12), $(elapsed) s)"
  for f in tests-coopmat.txt tests-f32.txt; do
    [ -f $W/$f ] || continue
    failed=$(grep -E '^\[  FAILED  \] [A-Za-z]' $W/$f | grep -v listed | sed 's/ (.*//' | sort -u)
    echo "$f: $(grep -cE '^\[       OK \]' $W/$f) ok, $(echo -n "$failed" | grep -c .) failed," \
      "$(grep -cE '^\[  SKIPPED \] [A-Za-z]' $W/$f) skipped; $(grep rc= $W/$f)"
    [ -n "$failed" ] && echo "$failed" | head -5
  done
  grep -h "coopmat span vs" $W/tests-coopmat.txt 2>/dev/null | cut -c1-200
  for f in $W/run-*.log; do
    [ -f $f ] || continue
    echo "$(basename $f .log): $(grep -oE 'prefill [0-9.]+ tok/s' $f | tr '\n' ' ')$(grep rc= $f)"
  done
  command -v python3 > /dev/null || grep -E "/512/1/" $W/vulkan_bench.log 2>/dev/null |
    sed 's/  */ /g' | cut -c1-170
  command -v python3 > /dev/null && python3 - $W/vulkan_bench.json <<'PY' 2>&1
import json, re, sys
from collections import defaultdict
d = json.load(open(sys.argv[1]))
shapes = defaultdict(dict)
for b in d["benchmarks"]:
    n, lab = b["name"], b.get("label", "")
    if "CoopmatPeak" in n:
        print(f"peak {b.get('TFLOPs', 0):.1f} TFLOP/s {lab}")
    if "PrefillMatmul" not in n or "TFLOPs" not in b:
        continue
    typ, shape, k = lab.split(" ", 2)
    k = "rule:" + k.split("tile ")[1].split(" ")[0] if "tile " in k else k.replace("coopmat:", "")
    shapes[(typ, shape)][k] = b["TFLOPs"]
for (typ, shape), ks in shapes.items():
    rule = next((k for k in ks if k.startswith("rule:")), None)
    best = max((k for k in ks if k != "tiled" and not k.startswith("rule:")), key=ks.get, default=None)
    line = f"{typ} {shape}: rule {rule[5:] if rule else '-'} {ks.get(rule, 0):.1f}"
    if best: line += f", best {best} {ks[best]:.1f}"
    line += f", tiled {ks.get('tiled', 0):.1f} TFLOP/s"
    if len(ks) > 4: line += "  [" + " ".join(f"{k}={v:.0f}" for k, v in ks.items() if not k.startswith("rule:")) + "]"
    print(line)
PY
  cat $W/skipped.txt
} > $W/summary.txt 2>&1
tar -C $OUT -czf $OUT/gpu-prefill.tar.gz gpu-prefill
ls -la $OUT/gpu-prefill.tar.gz
cat $W/summary.txt
rm -rf $W
