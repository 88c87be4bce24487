#!/usr/bin/env bash
# One call on the GPU machine that carries every GPU issue's checks and the host CPU peer rows in
# about 8 minutes, for a session whose device time is short (the steps of gpu_prefill.sh,
# gpu_decode.sh and h200_merged.sh, cut to what a decision needs):
#   1. starts the llama.cpp builds of PEERS (default "cpu" with HOST=1, none with HOST=0; add
#      vulkan / cuda for a later `PHASE=run peer_gpu.sh` call on the same held machine) and writes
#      the synthetic Llama-1B / 8B Q4_K_M files, both in the background. The builds take the
#      host's cores: on an H200 (0c452b0) a 17 s test ran past 150 s and a 28 s pp512 past 70 s
#      beside them, so a call that builds peers should carry GPU-bound steps (benches) only;
#   2. fish_test_vulkan with TESTS (default: the cooperative-matrix and coopmat2 kernels against
#      the CPU reference, the fused and streamed decode attention and RoPE + KV store, the
#      integer-dot variants and fused epilogues, the span end to end, the polled fence wait;
#      TESTS="" none; TESTS_FIRST=1 runs them before step 1's builds start);
#   3. fish_vulkan_bench with BENCH (default: the coopmat peak and its diagnostics, the q4_k
#      prefill tiles and the integer-dot variants at the 8B shapes; BENCH="" none);
#   3b. fish_test_vulkan with TESTS2 (none unless set; FISH_GPU_VERBOSE=1, TESTS2_S seconds);
#   4. experiments/peer_cpu_host16.json (FISH x16 vs llama.cpp's CPU build, 16 threads, at most
#      HOST_S seconds, ~265 s), the GPU idle; HOST=0 skips it;
#   5. fish run gpu_prefill_pp512 with each of TILES (default "rule": the tile rule; a tile name
#      forces that tile; TILES="" none), PP_S seconds each (default 150: 6 interleaved rounds
#      load each model 6 times);
#   5b. fish run each FILE@CONFIG of EXPS (CONFIG default or VAR=VALUE; EXP_S seconds each);
#   5c. decode A/B: AB_ROUNDS rounds (default 3) of `fish run experiments/gpu_decode_ab.json`
#      (tg128, a warm-up and 4 repetitions in one process; the round's value is their median)
#      on each of AB_MODELS (default llama-1b llama-8b) in each config of AB (none unless
#      set), interleaved (config inside model inside round), decode tok/s into ab.tsv and a
#      median [min, max] table in the summary. A config with FISH_GPU_PROFILE=1, or AB_TOOL=generate,
#      times one `fish generate -n 128` instead and adds the step's GPU run against its
#      submit-to-done to ab.tsv (a cold 8B generate decoded 20-25% below the warm run);
#   6. fish generate with FISH_GPU_PROFILE=2 on each of GEN_MODELS (default llama-8b) in each
#      config of GEN (default: the defaults and FISH_VK_ATTN_DECODE=1; GEN="" none): decode tok/s,
#      the span's stage times and its matvec groups (GEN_WORDS=N: behind a prompt of ~N words;
#      GEN_N decode steps, default 128: GEN_N=1 with GEN_WORDS profiles the prefill alone, in
#      chunks of --n-batch 512);
# A config (AB, GEN) is `default` or VAR=VALUE[,VAR=VALUE...].
#   Every fish generate here runs GEN_WARMUP (default 1) untimed rounds first (--warmup): a
#   cold process's first forwards ran at idle clocks (a prefill profile 5.4x the warm pp512 on an
#   H100), so profiles and generate timings are of a warm GPU.
#   5c'. (before the A/B: two short runs) the prefill alone profiled: fish generate -n 1
#      --n-batch 512 with FISH_GPU_PROFILE=2 behind a prompt of PRE_WORDS words (default 260,
#      ~490 tokens: one 512-token chunk) on each of PRE_MODELS (none unless set), into
#      pre-<model>.txt: the prefill's stage times and its
#      matmul groups (the AB / GEN prompt stays as GEN_WORDS sets it);
#   6b. VERIFY (none unless set): BM_VulkanVerify under each of its configs (see the step);
#       KQ_PREFETCH (none unless set): the host's x16 decode kernels at those prefetch distances;
#   7. with WAIT=1, waits for the PEERS builds for what is left of the budget (peer_gpu.sh
#      PHASE=wait), so the next call finds them built.
# Each step is skipped once the call's BUDGET_S (default 560) would be passed; skipped.txt lists
# them. Carry [".devcarry", ".gl"]: .devcarry from `gpu_prefill.sh pack BUILD` then
# `PHASE=pack peer_gpu.sh` (in that order: the first pack empties .devcarry). Output: ONE
# $OUT/mixed.tar.gz (mixed/...), and summary.txt printed last. The work folder is outside $OUT
# and the archive is rewritten at every step, so a call cut by the device's limit still brings
# back what ran before the cut (one file: the device returns a few files only).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
. "$root/scripts/device/gpu_env.sh"  # loader, ICD, .devcarry on the paths
W=/tmp/mixed-call/mixed
rm -rf $W
mkdir -p $W
: > $W/skipped.txt
t0=$(date +%s)
budget=${BUDGET_S:-560}
elapsed() { echo $(( $(date +%s) - t0 )); }
snapshot() { tar -C ${W%/mixed} -czf $OUT/mixed.tar.gz mixed 2>/dev/null; }
stamp() {
  echo "== $1 (t=$(elapsed) s)" | tee -a $W/steps.txt
  snapshot
}
left() {  # left NEED_S WHAT: true when NEED_S seconds remain of the budget, else records the skip
  [ $(( budget - $(elapsed) )) -ge "$1" ] && return 0
  echo "skipped: $2 ($(elapsed) s of $budget)" | tee -a $W/skipped.txt
  return 1
}

tests=${TESTS-'CoopmatTiles.*:VulkanCoopmat.Coopmat2*:VulkanCoopmat.EveryTile*:VulkanCoopmat.SpanMatchesTiledPathGqa:VulkanSpanOps.*Rope*:VulkanSpanOps.DecodeAttention*:VulkanSpanOps.Stream*:VulkanSpan.SplitK*:VulkanMatvecIdot.EveryVariant*:VulkanMatvecIdot.Span*:VkContext.PolledFence*'}
run_tests() {
  [ -n "$tests" ] || return 0
  stamp "vulkan tests"
  FISH_SOURCE_DIR=$root FISH_TESTDATA=$root/tests/data timeout ${TESTS_S:-90} $B/fish_test_vulkan \
    --gtest_filter="$tests" > $W/tests.txt 2>&1
  echo "rc=$?" >> $W/tests.txt
}
# TESTS_FIRST=1: the tests before the peer builds start, so no build shares the host's cores with
# the driver's pipeline compiles (fb1c142's call: the coopmat2 token-count test, 80 s alone on an
# H200, was cut at 150 s beside the Vulkan and CUDA builds, and the tests after it never ran).
[ "${TESTS_FIRST:-0}" = 1 ] && run_tests

stamp "peer builds and synthetic models (background)"
host=${HOST:-1}  # 0: no peer_cpu_host16 (and, unless PEERS says otherwise, no CPU peer build)
peers=${PEERS-$([ $host = 1 ] && echo cpu)}
[ -n "$peers" ] &&
  CPU_JOBS=${CPU_JOBS:-8} PEERS="$peers" PHASE=build bash scripts/device/peer_gpu.sh > $W/peer-build-start.txt 2>&1
synthetic_models 8 $W  # gpu_env.sh
scripts/context.sh > $W/context.txt 2>&1
# A real model carried in pieces (scripts/device/real_model.sh): stash this call's piece; once
# whole, FISH_MODELS_DIR finds it by name (EXPS=experiments/gpu_real_smollm2.json@default ...).
PHASE=stash bash scripts/device/real_model.sh > $W/real-model.txt 2>&1
export FISH_MODELS_DIR=/tmp/real
FISH_GPU_VERBOSE=1 $B/fish gpu > $W/gpu.txt 2>&1

[ "${TESTS_FIRST:-0}" = 1 ] || run_tests

bench=${BENCH-'ShaderCopy|CoopmatPeak|PrefillMatmul/(1|12)/(4096|14336)/4096/512/(1|4|18|19|20|21|22|23|24|25)/|MatvecVariant/(12|14)/(4096|14336)/'}
if [ -n "$bench" ] && left 80 "fish_vulkan_bench"; then
  stamp "fish_vulkan_bench"
  timeout ${BENCH_S:-70} $B/fish_vulkan_bench --benchmark_filter="$bench" \
    --benchmark_out=$W/vulkan_bench.json --benchmark_out_format=json > $W/vulkan_bench.log 2>&1
  echo "rc=$?" >> $W/vulkan_bench.log
fi

# TESTS2: a second test run after the benchmarks (a suite that may hang or take long, such as
# the coopmat2 kernels', kept from cutting the first), TESTS2_S seconds (default 60), stderr
# kept (a rejected pipeline is said there).
if [ -n "${TESTS2-}" ] && left $(( ${TESTS2_S:-60} + 10 )) "second tests"; then
  stamp "vulkan tests (second run)"
  FISH_SOURCE_DIR=$root FISH_TESTDATA=$root/tests/data FISH_GPU_VERBOSE=1 timeout ${TESTS2_S:-60} \
    $B/fish_test_vulkan --gtest_filter="$TESTS2" > $W/tests2.txt 2>&1
  echo "rc=$?" >> $W/tests2.txt
fi

stamp "waiting for the synthetic models"
for p in "${SYN_PIDS[@]}"; do wait $p; done
# KQ_PREFETCH: the host CPU's x16 decode kernels (fish_kquant_bench, 1 and 2 threads, the stream
# read beside them) at each of these FISH_KX16_PREFETCH distances, KQ_ROUNDS rounds (default 2)
# interleaved, into kq-<round>-<distance>.json: the L2 prefetch and its distances were measured
# on an EPYC only (docs/cpu-kernels.md).
if [ -n "${KQ_PREFETCH-}" ]; then
  for round in $(seq 1 ${KQ_ROUNDS:-2}); do
    for d in $KQ_PREFETCH; do
      left 40 "kquant bench round $round (prefetch $d)" || continue
      stamp "fish_kquant_bench round $round (FISH_KX16_PREFETCH=$d)"
      FISH_KX16_PREFETCH=$d timeout 35 $B/fish_kquant_bench \
        --benchmark_filter='stream|decode/(q4_k|q5_k|q6_k|q8_0)/(gguf|x16)/' \
        --benchmark_out=$W/kq-$round-$d.json --benchmark_out_format=json > $W/kq-$round-$d.log 2>&1
    done
  done
fi

# VERIFY: BM_VulkanVerify (a speculative verify of 1..8 tokens against one decode step, 1B and
# 8B: ratio_to_1) under each config (default or VAR=VALUE[,...]), VERIFY_ROUNDS rounds (default
# 1) interleaved, VERIFY_S seconds each (default 90), into verify-<round>-<config>.json / .log.
if [ -n "${VERIFY-}" ]; then
  export FISH_VERIFY_8B=$FISH_SYNTHETIC_DIR/llama-8b-q4_k_m-s1.gguf
  for round in $(seq 1 ${VERIFY_ROUNDS:-1}); do
    for cfg in $VERIFY; do
      left $(( ${VERIFY_S:-90} + 10 )) "verify bench round $round ($cfg)" || continue
      stamp "BM_VulkanVerify round $round ($cfg)"
      extra=()
      [ "$cfg" != default ] && extra=(${cfg//,/ })
      tag=$round-${cfg//[=,]/_}
      env "${extra[@]}" timeout ${VERIFY_S:-90} $B/fish_vulkan_bench --benchmark_filter=VulkanVerify \
        --benchmark_out=$W/verify-$tag.json --benchmark_out_format=json > $W/verify-$tag.log 2>&1
      echo "rc=$? config: $cfg" >> $W/verify-$tag.log
    done
  done
fi
if [ $host = 1 ] && left 230 "peer_cpu_host16"; then
  stamp "CPU peer build wait"
  PEERS=cpu PHASE=wait WAIT_S=90 bash scripts/device/peer_gpu.sh > $W/peer-wait.txt 2>&1
  mv $OUT/peer-build.tar.gz $W/ 2>/dev/null
  stamp "fish run peer_cpu_host16"
  FISH_CACHE=/tmp/peer/cache timeout ${HOST_S:-280} $B/fish run experiments/peer_cpu_host16.json \
    --out $W/host16 > $W/host16.log 2>&1
  echo "rc=$?" >> $W/host16.log
fi
for t in ${TILES-rule}; do
  left 90 "pp512 tile $t" || continue
  stamp "fish run gpu_prefill_pp512 ($t)"
  extra=()
  [ $t != rule ] && extra=(FISH_VK_COOPMAT_TILE=$t)
  env "${extra[@]}" timeout ${PP_S:-150} $B/fish run experiments/gpu_prefill_pp512.json --out $W/pp512-$t \
    > $W/pp512-$t.log 2>&1
  echo "rc=$?" >> $W/pp512-$t.log
done

# EXPS: "FILE@CONFIG ..." (CONFIG default or VAR=VALUE): fish run FILE under CONFIG, EXP_S
# seconds each (default 120), into exp-<n>/ (FISH-against-FISH A/B runs of any experiment; the
# llama.cpp builds of this held machine as llama_bench cpu / vulkan / cuda; the real model of
# real_model.sh through FISH_MODELS_DIR).
j=0
for x in ${EXPS-}; do
  j=$((j + 1))
  f=${x%@*} g=${x#*@}
  left 60 "fish run $f ($g)" || continue
  stamp "fish run $f ($g)"
  extra=()
  [ "$g" != default ] && extra=(${g//,/ })
  # An empty folder each time: files of another session's runs once turned up in exp-<n>/ on a
  # held machine (results/runs/h100-session-5ecfa33), where nothing here had written them.
  rm -rf $W/exp-$j
  env "${extra[@]}" FISH_CACHE=/tmp/peer/cache timeout ${EXP_S:-120} $B/fish run $f --out $W/exp-$j \
    > $W/exp-$j.log 2>&1
  echo "rc=$? config: $g" >> $W/exp-$j.log
done
if [ -n "${PRE_MODELS-}" ]; then
  PP=$(python3 -c "import sys; w='alpha beta gamma delta fox dog river stone'.split(); print(' '.join(w[i % 8] for i in range(int(sys.argv[1]))))" "${PRE_WORDS:-260}")
  for m in $PRE_MODELS; do
    left 25 "prefill profile $m" || continue
    stamp "prefill profile $m"
    FISH_GPU_PROFILE=2 timeout 30 $B/fish generate -m $FISH_SYNTHETIC_DIR/$m-q4_k_m-s1.gguf \
      -p "$PP" -n 1 --n-batch 512 --threads 16 --warmup ${GEN_WARMUP:-1} > $W/pre-$m.txt 2>&1
    echo "config: prefill $m" >> $W/pre-$m.txt
  done
fi

P="The quick brown fox jumps over the lazy dog and then"
# GEN_WORDS=N: the generate runs (AB, GEN) get a prompt of about N words instead, so a profiled
# decode (FISH_GPU_PROFILE=2) runs behind that many positions: its "attention+RoPE+KV" stage is
# the decode attention alone (the prompt's chunks count as "attention").
if [ -n "${GEN_WORDS-}" ]; then
  P=$(python3 -c "import sys; w='alpha beta gamma delta fox dog river stone'.split(); print(' '.join(w[i % 8] for i in range(int(sys.argv[1]))))" "$GEN_WORDS")
fi
if [ -n "${AB-}" ]; then
  : > $W/ab.tsv
  for r in $(seq 1 ${AB_ROUNDS:-3}); do
    for m in ${AB_MODELS:-llama-1b llama-8b}; do
      for g in $AB; do
        left 20 "A/B round $r $m ($g)" || continue
        [ $r = 1 ] && stamp "A/B $m ($g)"
        extra=()
        [ $g != default ] && extra=(${g//,/ })
        gw=""
        if [ "${AB_TOOL:-run}" = generate ] || [[ $g == *FISH_GPU_PROFILE* ]]; then
          out=$(env "${extra[@]}" timeout 30 $B/fish generate \
            -m $FISH_SYNTHETIC_DIR/$m-q4_k_m-s1.gguf -p "$P" -n 128 --threads 16 --ignore-eos \
            --warmup ${GEN_WARMUP:-1} 2>&1 |
            tee -a $W/ab.log)
          tok=$(grep -oE 'decode [0-9.]+ tok/s' <<< "$out" | grep -oE '[0-9.]+')
          # With FISH_GPU_PROFILE=1 in the config: a decode step's GPU run and submit-to-done (us).
          gw=$(grep -oE 'one-token forwards: [0-9.]+ us GPU, [0-9.]+ us submit' <<< "$out" |
            grep -oE '[0-9.]+ us' | grep -oE '[0-9.]+' | tr '\n' '\t')
        else  # fish run of experiments/gpu_decode_ab.json on this model: warm-up + 4 repetitions
          d=$W/ab-runs/$r-$m-${g//[=,]/_}
          mkdir -p $d
          python3 - experiments/gpu_decode_ab.json $m $d/ab.json <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
e["model"] = ["synthetic:%s:q4_k_m" % sys.argv[2]]
json.dump(e, open(sys.argv[3], "w"), indent=1)
PY
          out=$(env "${extra[@]}" timeout 60 $B/fish run $d/ab.json --out $d 2>&1 | tee -a $W/ab.log)
          tok=$(python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1])]
r=[x for x in r if x.get("kind")=="row" and x.get("status")=="ok"]
print("%.2f" % r[-1]["metrics"]["decode_tok_s"]["median"] if r else "")' \
            $d/gpu_decode_ab.jsonl 2>/dev/null)
        fi
        printf '%s\t%s\t%s\t%s\t%s\n' $r $m $g "${tok:-error}" "${gw%$'\t'}" >> $W/ab.tsv
      done
    done
  done
fi
i=0
for m in ${GEN_MODELS:-llama-8b}; do
  for g in ${GEN-default FISH_VK_ATTN_DECODE=1}; do  # GEN="" runs none
    i=$((i + 1))
    left 25 "generate $m ($g)" || continue
    stamp "generate $m ($g)"
    extra=()
    [ $g != default ] && extra=(${g//,/ })
    env "${extra[@]}" FISH_GPU_PROFILE=2 timeout 30 $B/fish generate \
      -m $FISH_SYNTHETIC_DIR/$m-q4_k_m-s1.gguf -p "$P" -n ${GEN_N:-128} --n-batch 512 \
      --threads 16 --ignore-eos --warmup ${GEN_WARMUP:-1} > $W/gen-$i.txt 2>&1
    echo "config: $m $g" >> $W/gen-$i.txt
  done
done

if [ "${WAIT:-0}" = 1 ] && [ -n "$peers" ]; then
  w=$(( budget - $(elapsed) - 10 ))
  if [ $w -gt 0 ]; then
    stamp "waiting for the peer builds ($peers, at most $w s)"
    PEERS="$peers" PHASE=wait WAIT_S=$w bash scripts/device/peer_gpu.sh > $W/peer-wait-all.txt 2>&1
    mv $OUT/peer-build.tar.gz $W/peer-build-all.tar.gz 2>/dev/null
  fi
fi
stamp done

{
  echo "== summary ($(cat $D/commit 2>/dev/null | cut -c1-12), $(elapsed) s)"
  grep -m2 "^features\|^selected" $W/gpu.txt
  cat $W/real-model.txt
  [ -f $W/tests.txt ] && {
    echo "tests: $(grep -cE '^\[       OK \]' $W/tests.txt) ok, $(grep -cE '^\[  FAILED  \] [A-Za-z].*\(' $W/tests.txt) failed, $(grep -cE '^\[  SKIPPED \] [A-Za-z]' $W/tests.txt) skipped; $(tail -n 1 $W/tests.txt)"
    grep -E '^\[  FAILED  \] [A-Za-z].*\(' $W/tests.txt | head -8
    grep -m1 -B10 '^\[  FAILED  \] [A-Za-z].*(' $W/tests.txt | grep -v '^\[       OK \]' | cut -c1-220
    grep -h "coopmat span vs\|coopmat2" $W/tests.txt | cut -c1-200 | head -6
  }
  for f in $W/verify-*.log; do
    [ -f "$f" ] || continue
    echo "$(basename $f .log): $(tail -n 1 $f)"
    grep -E "^BM_VulkanVerify" $f | sed 's/  */ /g' | cut -c1-200
  done
  [ -f $W/tests2.txt ] && { echo "tests2: $(grep -cE '^\[       OK \]' $W/tests2.txt) ok, $(grep -cE '^\[  FAILED  \] [A-Za-z].*\(' $W/tests2.txt) failed; $(tail -n 1 $W/tests2.txt)"; grep -h "rejected\|FAILED\|coopmat2" $W/tests2.txt | cut -c1-300 | head -8; }
  grep -E "^BM_|rc=" $W/vulkan_bench.log 2>/dev/null | sed 's/  */ /g' | cut -c1-190
  for f in $W/pp512-*.log; do [ -f $f ] && echo "$(basename $f .log): $(grep -oE 'ok: prefill [0-9.]+ tok/s' $f | tr '\n' ' ') $(grep rc= $f)"; done
  for f in $W/exp-*.log; do [ -f $f ] && { tail -n 1 $f; cat ${f%.log}/*.md 2>/dev/null | grep -E '^\| [0-9]'; }; done
  [ -s $W/ab.tsv ] && python3 - $W/ab.tsv <<'PY'
import sys, statistics
rows, gaps = {}, {}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    r, m, g, tok = f[:4]
    if tok != "error":
        rows.setdefault((m, g), []).append(float(tok))
    if len(f) >= 6 and f[4] and f[5]:  # FISH_GPU_PROFILE=1: GPU us, submit-to-done us a step
        gaps.setdefault((m, g), []).append((float(f[4]), float(f[5])))
print("decode A/B (tg128: gpu_decode_ab.json's median of 4 a round, or fish generate -n 128; tok/s: median [min, max] over rounds)")
for (m, g), v in rows.items():
    print(f"  {m} {g}: {statistics.median(v):.1f} [{min(v):.1f}, {max(v):.1f}] n={len(v)}")
    if (m, g) in gaps:
        gp = gaps[(m, g)]
        d = [w - u for u, w in gp]
        print(f"    a step: GPU {statistics.median([u for u, _ in gp]):.1f} us, submit to done "
              f"{statistics.median([w for _, w in gp]):.1f} us, outside the GPU's run "
              f"{statistics.median(d):.1f} [{min(d):.1f}, {max(d):.1f}] us")
PY
  for f in $W/gen-*.txt $W/pre-*.txt; do [ -f $f ] && { tail -n 1 $f; grep -h "^fish generate: prompt\|span profile" $f | cut -c1-2000; }; done
  tail -n 3 $W/peer-wait.txt 2>/dev/null
  grep "rc=" $W/peer-wait-all.txt 2>/dev/null
  cat $W/host16/*.md 2>/dev/null
  cat $W/skipped.txt
} > $W/summary.txt 2>&1
snapshot && rm -rf $W
tar -xzOf $OUT/mixed.tar.gz mixed/summary.txt
