#!/bin/bash
# A/B decode: base (main 237114a) vs new, and new with FISH_KX16_PREFETCH=0, interleaved.
cd /work/wt/cpuk3
for i in 1 2 3; do
  for arm in base new nopf; do
    B=build/fish; E=""
    [ $arm = base ] && B=/tmp/cpuk3_base/fish
    [ $arm = nopf ] && E="FISH_KX16_PREFETCH=0"
    env $E $B bench -m synthetic:llama-1b:q4_k_m -p 0 -n 64 -t 1 -r 6 --out /tmp/cpuk3_runs/l1b_${arm}_$i > /tmp/cpuk3_runs/l1b_${arm}_$i.md 2>&1
    echo "l1b $arm $i $(uptime | sed 's/.*average//') $(grep tg64 /tmp/cpuk3_runs/l1b_${arm}_$i.md)"
    env $E $B bench -m /work/main/models/gemma-3-270m-q4_k_m.gguf -p 0 -n 64 -t 1,2 -r 6 --out /tmp/cpuk3_runs/gtg_${arm}_$i > /tmp/cpuk3_runs/gtg_${arm}_$i.md 2>&1
    echo "gtg $arm $i $(uptime | sed 's/.*average//') $(grep tg64 /tmp/cpuk3_runs/gtg_${arm}_$i.md | tr '\n' ' ')"
  done
done
