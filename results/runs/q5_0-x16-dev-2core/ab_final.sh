#!/bin/bash
# Final A/B on this machine: base = main 237114a (/tmp/cpuk3_base/fish), new = cpuk3 HEAD
# (build/fish), nopf = new with FISH_KX16_PREFETCH=0 (1B decode only); 3 interleaved rounds.
cd /work/wt/cpuk3
O=/tmp/cpuk3_final
mkdir -p $O
G=models/gemma-3-270m-q4_k_m.gguf
for i in 1 2 3; do
  for arm in base new nopf; do
    B=build/fish; E=""
    [ $arm = base ] && B=/tmp/cpuk3_base/fish
    [ $arm = nopf ] && E="FISH_KX16_PREFETCH=0"
    if [ $arm != nopf ]; then
      $B bench -m $G -p 128 -n 0 -t 1,2 -r 6 -o md --out $O/gemma-pp128-$arm-$i > $O/gemma-pp128-$arm-$i.md 2>&1
      echo "gemma pp128 $arm $i load$(uptime | sed 's/.*average://') $(grep pp128 $O/gemma-pp128-$arm-$i.md | tr '\n' ' ')"
      $B bench -m $G -p 0 -n 64 -t 1,2 -r 6 -o md --out $O/gemma-tg64-$arm-$i > $O/gemma-tg64-$arm-$i.md 2>&1
      echo "gemma tg64 $arm $i load$(uptime | sed 's/.*average://') $(grep tg64 $O/gemma-tg64-$arm-$i.md | tr '\n' ' ')"
    fi
    env $E $B bench -m synthetic:llama-1b:q4_k_m -p 0 -n 64 -t 1 -r 6 -o md --out $O/llama1b-tg64-$arm-$i > $O/llama1b-tg64-$arm-$i.md 2>&1
    echo "llama1b tg64 $arm $i load$(uptime | sed 's/.*average://') $(grep tg64 $O/llama1b-tg64-$arm-$i.md | tr '\n' ' ')"
  done
done
echo done
