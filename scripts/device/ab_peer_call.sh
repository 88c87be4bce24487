#!/usr/bin/env bash
# A FISH-against-FISH decode A/B and the same-run peer rows under its winner, in one device call
# (PART=all, the default) or two back to back on the held machine (PART=mix, then PART=peer: a
# fresh machine's CUDA peer build takes ~400 s or more, longer than one call can wait beside the
# A/B):
#   1. (all, mix) scripts/device/mixed_call.sh with the caller's knobs (PEERS defaults to
#      "vulkan cuda", HOST to 0, WAIT to 1) in MIX_S seconds (default 330; PART=mix 560): the
#      tests run first (TESTS_FIRST=1; 0 runs them beside the builds), then the peer builds start
#      and the A/B (AB, AB_MODELS, AB_ROUNDS), benches, EXPS and profiles run beside them;
#   2. (all, mix) scripts/device/ab_winner.py on its ab.tsv: the AB config ahead of `default` on
#      every model with no round overlapping (else `default`), into $OUT/winner.txt with its
#      reason and into /tmp/ab-peer-call.winner for PART=peer;
#   3. (all, peer) scripts/device/peer_gpu.sh PHASE=run of each of EXPERIMENTS (default
#      experiments/peer_gpu.json; PART=peer: that, peer_gpu_pp2048.json and peer_gpu_depth.json)
#      with the winner in the environment (WINNER=VAR=VALUE[,...] or `default` overrides the
#      file; EXTRA=VAR=VALUE[,...] is added to it), fish run recording the knobs in every FISH
#      row; the builds are started if the machine is fresh (PHASE=build) and waited for, and
#      every sweep fits PEER_S seconds (default 250; PART=peer 540) between them (--resume
#      finishes a cut sweep in a next call on the same held machine).
# Carry [".devcarry", ".gl"] (gpu_prefill.sh pack BUILD, then PHASE=pack peer_gpu.sh). Output:
# $OUT/mixed.tar.gz and $OUT/winner.txt (mix), $OUT/<experiment>.tar.gz (peer).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
part=${PART:-all}
peers=${PEERS-vulkan cuda}
case $part in all | mix | peer) ;; *) echo "ab_peer_call: PART=$part (all, mix, peer)"; exit 1 ;; esac

if [ $part != peer ]; then
  mix_s=${MIX_S:-$([ $part = mix ] && echo 560 || echo 330)}
  PEERS="$peers" HOST=${HOST:-0} WAIT=${WAIT:-1} BUDGET_S=$mix_s TESTS_FIRST=${TESTS_FIRST:-1} \
    bash scripts/device/mixed_call.sh | tail -n 40
  # mixed_call.sh removes its work folder when it ends: its ab.tsv is read back from the archive.
  tar -xzOf $OUT/mixed.tar.gz mixed/ab.tsv > /tmp/ab-peer-call.tsv 2>/dev/null ||
    rm -f /tmp/ab-peer-call.tsv
  g=$(python3 scripts/device/ab_winner.py /tmp/ab-peer-call.tsv 2> $OUT/winner.txt)
  echo "$g" > /tmp/ab-peer-call.winner
  echo "winner: $g" | tee -a $OUT/winner.txt
  [ $part = mix ] && exit 0
fi

g=${WINNER:-$(cat /tmp/ab-peer-call.winner 2>/dev/null || echo default)}
extra=()
[ "$g" != default ] && extra=(${g//,/ })
[ -n "${EXTRA-}" ] && extra+=(${EXTRA//,/ })
echo "peer rows under: ${extra[*]:-the defaults}"
if [ $part = peer ]; then
  exps=${EXPERIMENTS:-experiments/peer_gpu.json experiments/peer_gpu_pp2048.json experiments/peer_gpu_depth.json}
  peer_s=${PEER_S:-540}
  # A fresh machine (released since PART=mix): start the builds again (ccache keeps nothing there).
  ls /tmp/peer/build-*.rc > /dev/null 2>&1 || [ -d /tmp/peer/vk ] ||
    PHASE=build PEERS="$peers" bash scripts/device/peer_gpu.sh 2>&1 | tail -n 3
else
  exps=${EXPERIMENTS:-experiments/peer_gpu.json}
  peer_s=${PEER_S:-250}
fi
t0=$(date +%s)
for e in $exps; do
  left=$(( peer_s - ($(date +%s) - t0) ))
  [ $left -lt 60 ] && { echo "ab_peer_call: no time left for $e ($left s)"; continue; }
  # The builds' wait shares the sweep's time (PART=all: at most 60 s of it, as before).
  wait_s=${PEER_WAIT_S:-$([ $part = peer ] && echo $left || echo 60)}
  env "${extra[@]}" PHASE=run PEERS="$peers" EXPERIMENT=$e WAIT_S=$wait_s CALL_S=$left \
    bash scripts/device/peer_gpu.sh 2>&1 | tail -n 30
done
