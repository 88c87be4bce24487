#!/usr/bin/env bash
# One call on the GPU machine (H200): checks and measures what landed, back to back.
#   PHASE=gpu (default): Vulkan tests on the real GPU (synthetic tensors; the real models do not
#     travel: 64 MiB per call), fish_vulkan_bench (vkCmdCopyBuffer and shader copy bandwidth,
#     matvec_<type> vs matvec1_<type> at Llama-8B shapes, tiled prefill), fish generate on
#     synthetic Llama-1B/8B Q4_K_M: span, span with the generic matvec (FISH_VK_MATVEC=1),
#     stage 1 (FISH_GPU_SPAN=0) and CPU, with FISH_GPU_PROFILE=2; the 8B under a 4 GB card;
#     the GPU experiment files gpu_n_ctx, gpu_requant and gpu_placement_budget.
#   PHASE=span: the span op tests on the real GPU, fish generate span vs stage 1 with the
#     profile, and the gpu_span_vs_matmul experiment (span vs per-matmul vs CPU, pp512 + tg64).
#   PHASE=host: the 16-thread CPU experiments w4_host16 and w4_prefill_host16.
#   PHASE=s4: Vulkan tests, decode attention (one-pass vs split-K) and q4_k / fq3 matvec benches,
#     fish generate with and without split-K, gpu_requant.
#   PHASE=s4b: the same tests and benches, then gpu_long_ctx with the split rule and with
#     FISH_VK_ATTN_SPLIT=0 (decode after 2048 positions).
#   PHASE=budget: the placement experiments again (gpu_n_ctx, gpu_requant, gpu_placement_budget)
#     and the 8B under a 4 GB card, without the tests and benches of PHASE=gpu.
# Carried: .devcarry/{bin,lib,commit} built on the dev machine, .gl (libvulkan1 + glvnd .debs).
# Run from the repo root there: PHASE=... bash scripts/device/h200_session.sh. Results go to
# $OUT/h200-$PHASE.tar.gz.
set -uo pipefail
PHASE=${PHASE:-gpu}
. "$PWD/scripts/device/gpu_env.sh"  # loader, ICD, .devcarry on the paths
W=$OUT/h200-$PHASE
mkdir -p $W
scripts/context.sh > $W/context.txt 2>&1
t0=$(date +%s)
stamp() { echo "== $1 (t=$(( $(date +%s) - t0 )) s)"; }
syn() {  # syn SHAPE: the synthetic Q4_K_M file fish run would write (same name, seed 1)
  local f=$FISH_SYNTHETIC_DIR/$1-q4_k_m-s1.gguf
  [ -f $f ] || $B/fish make-model --shape $1 --type q4_k_m --seed 1 --threads 16 --out $f > /dev/null
  echo $f
}
P="The quick brown fox jumps over the lazy dog and then"
gen() {  # gen SHAPE NAME [VAR=VALUE...]: fish generate (64 tokens) into $W/gen-SHAPE-NAME.txt
  local s=$1 v=$2 m
  shift 2
  m=$(syn $s)
  stamp "generate $s $v"
  env "$@" timeout 90 $B/fish generate -m $m -p "$P" -n 64 --threads 16 --ignore-eos \
    > $W/gen-$s-$v.txt 2>&1
  grep -h "^fish generate:" $W/gen-$s-$v.txt | cut -c1-330
}
run_exp() {  # run_exp NAME TIMEOUT: a fish run experiment into $W/runs
  stamp "fish run $1"
  timeout $2 $B/fish run experiments/$1.json --out $W/runs > $W/run-$1.log 2>&1
  echo "rc=$?" >> $W/run-$1.log
  tail -n 3 $W/run-$1.log
}

vk_tests() {  # vk_tests GTEST_FILTER: the Vulkan tests on the GPU into $W/vulkan_tests.txt
  stamp "vulkan tests on the GPU"
  FISH_SOURCE_DIR=$PWD FISH_TESTDATA=$PWD/tests/data timeout 150 $B/fish_test_vulkan \
    --gtest_filter="$1" > $W/vulkan_tests.txt 2>&1
  echo "rc=$?" >> $W/vulkan_tests.txt
  grep -E "^\[  (PASSED|FAILED) |FAILED|rc=" $W/vulkan_tests.txt | head -20
}
vk_bench() {  # vk_bench BENCHMARK_FILTER: fish_vulkan_bench into $W (JSON + log)
  stamp "vulkan_bench"
  mkdir -p build/bench && cp $B/fish_*_bench build/bench/
  FISH_RESULTS=$W FISH_BENCH_REPS=3 timeout 200 scripts/run_bench.sh vulkan_bench build \
    -- --benchmark_filter="$1" > $W/vulkan_bench.log 2>&1
  echo "rc=$?" >> $W/vulkan_bench.log
  grep -E "_median|rc=" $W/vulkan_bench.log | sed 's/  */ /g' | cut -c1-200 | head -90
}

if [ "$PHASE" = gpu ]; then
  FISH_GPU_VERBOSE=1 $B/fish gpu > $W/gpu.txt 2>&1
  head -12 $W/gpu.txt
  vk_tests 'VulkanMatmul.*:VulkanBackend.*:VramBudget.*:VulkanOptions.*:VulkanSpanOps.*:VulkanSpan.*:GpuRequant.Env*:GpuRequant.*Synthetic*:GpuRequant.*Q3*:GpuPlacement.OutputFirst*:GpuPlacement.FishGpuLayers*:GpuPlacement.SmallCard*:-*SmolLm2*:*Gemma3*:*Lavapipe*:*CpuImplementation*'
  vk_bench 'Copy|Matvec|Matmul.*/(12|14)/4096/4096/'
  for s in llama-1b llama-8b; do
    gen $s span FISH_GPU_PROFILE=2
    gen $s span-matvec1 FISH_GPU_PROFILE=2 FISH_VK_MATVEC=1
    gen $s stage1 FISH_GPU_SPAN=0
    gen $s cpu FISH_GPU_LAYERS=0
  done
  FISH_VRAM_BUDGET_MB=2800 timeout 90 $B/fish generate -m $(syn llama-8b) -p "$P" -n 32 --threads 16 --ignore-eos > $W/gen-llama-8b-4gb.txt 2>&1
  grep -h "^fish generate:" $W/gen-llama-8b-4gb.txt | cut -c1-300
  run_exp gpu_n_ctx 90
  run_exp gpu_requant 110
  run_exp gpu_placement_budget 120
elif [ "$PHASE" = budget ]; then
  FISH_VRAM_BUDGET_MB=2800 timeout 90 $B/fish generate -m $(syn llama-8b) -p "$P" -n 32 --threads 16 --ignore-eos > $W/gen-llama-8b-4gb.txt 2>&1
  grep -h "^fish generate:" $W/gen-llama-8b-4gb.txt | cut -c1-300
  run_exp gpu_n_ctx 90
  run_exp gpu_requant 110
  run_exp gpu_placement_budget 120
elif [ "$PHASE" = s4 ]; then
  # Session 4: split-K decode attention and the fq3 fast matvec on the real GPU.
  vk_tests 'VulkanMatmul.*:VulkanBackend.*:VulkanOptions.*:VulkanSpanOps.*:VulkanSpan.*:GpuRequant.*Synthetic*:-*SmolLm2*:*Gemma3*:*Lavapipe*:*CpuImplementation*'
  vk_bench 'Copy|Matvec/(12|1179189249)/|DecodeAttention'
  for s in llama-1b llama-8b; do
    gen $s span FISH_GPU_PROFILE=2
    gen $s span-nosplit FISH_GPU_PROFILE=2 FISH_VK_ATTN_SPLIT=0
  done
  run_exp gpu_requant 110
elif [ "$PHASE" = s4b ]; then
  # Session 4, second call: split-K attention, decode after 2048 positions (gpu_long_ctx with
  # the split rule, then with FISH_VK_ATTN_SPLIT=0).
  vk_tests 'VulkanMatmul.*:VulkanBackend.*:VulkanOptions.*:VulkanSpanOps.*:VulkanSpan.*:GpuRequant.*Synthetic*:-*SmolLm2*:*Gemma3*:*Lavapipe*:*CpuImplementation*'
  vk_bench 'Copy|Matvec/(12|1179189249)/|DecodeAttention'
  for s in llama-1b llama-8b; do gen $s span FISH_GPU_PROFILE=2; done
  run_exp gpu_long_ctx 150
  mv $W/runs/gpu_long_ctx.jsonl $W/runs/gpu_long_ctx_split.jsonl
  for f in csv md; do mv $W/runs/gpu_long_ctx.$f $W/runs/gpu_long_ctx_split.$f; done
  export FISH_VK_ATTN_SPLIT=0
  run_exp gpu_long_ctx 150
  unset FISH_VK_ATTN_SPLIT
elif [ "$PHASE" = span ]; then
  vk_tests 'VulkanSpanOps.*:VulkanSpan.*:PrebuiltShaders*:-*SmolLm2*:*Gemma3*'
  for s in llama-1b llama-8b; do
    gen $s span FISH_GPU_PROFILE=2
    gen $s stage1 FISH_GPU_SPAN=0
  done
  run_exp gpu_span_vs_matmul 280
else
  run_exp w4_host16 200
  run_exp w4_prefill_host16 200
fi
stamp done
tar -C $OUT -czf $OUT/h200-$PHASE.tar.gz h200-$PHASE && rm -rf $W
ls -la $OUT
