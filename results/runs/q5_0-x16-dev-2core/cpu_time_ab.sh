#!/bin/bash
# Decode cost in user-mode cycles per token (immune to time-slicing by other processes):
# (cycles of -n N2 - cycles of -n N1) / (N2 - N1), fish generate, 1 thread, base vs new alternating.
cd /work/wt/cpuk3
O=/tmp/cpuk3_cycles; mkdir -p $O
run() {  # arm model n tag
  local B=build/fish; [ $1 = base ] && B=/tmp/cpuk3_base/fish
  perf stat -x, -e task-clock -o $O/$4.perf -- $B generate -m $2 -p "The quick brown fox" -n $3 --threads 1 --ignore-eos > $O/$4.out 2>&1
  awk -F, '/task-clock/ {print $1}' $O/$4.perf
}
for i in 4 5 6 7 8; do
  for arm in base new; do
    a=$(run $arm models/gemma-3-270m-q4_k_m.gguf 16 gemma-$arm-$i-16); b=$(run $arm models/gemma-3-270m-q4_k_m.gguf 144 gemma-$arm-$i-144)
    echo "gemma $arm $i ms CPU/token $(echo "($b - $a) / 128 " | bc -l | cut -c1-6)"
  done
done
M=$HOME/.cache/fish/synthetic/llama-1b-q4_k_m-s1.gguf
for i in 3 4 5; do
  for arm in base new; do
    a=$(run $arm $M 8 l1b-$arm-$i-8); b=$(run $arm $M 40 l1b-$arm-$i-40)
    echo "llama1b $arm $i ms CPU/token $(echo "($b - $a) / 32 " | bc -l | cut -c1-6)"
  done
done
echo done
