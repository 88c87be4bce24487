#!/usr/bin/env bash
# One device call for a session with little device time: a FISH-against-FISH decode A/B and the
# same-run peer rows, with the peer rows under the A/B's winner.
#   1. scripts/device/mixed_call.sh with the caller's knobs (PEERS defaults to "vulkan cuda",
#      HOST to 0, WAIT to 1) in MIX_S seconds (default 330): the peer builds start first and
#      the A/B (AB, AB_MODELS, AB_ROUNDS), tests and profiles run beside them;
#   2. scripts/device/ab_winner.py on its ab.tsv: the AB config ahead of `default` on every model
#      with no round overlapping (else `default`), into $OUT/winner.txt with its reason;
#   3. scripts/device/peer_gpu.sh PHASE=run (EXPERIMENT, default experiments/peer_gpu.json) with
#      that config in the environment (fish run records the knob in every FISH row), the builds
#      waited for and the sweep within PEER_S seconds (default 250; --resume finishes a cut sweep
#      in a next call on the same held machine).
# Carry [".devcarry", ".gl"] (gpu_prefill.sh pack BUILD, then PHASE=pack peer_gpu.sh). Output:
# $OUT/mixed.tar.gz, $OUT/winner.txt, $OUT/peer-gpu.tar.gz.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
PEERS=${PEERS-vulkan cuda} HOST=${HOST:-0} WAIT=${WAIT:-1} BUDGET_S=${MIX_S:-330} \
  bash scripts/device/mixed_call.sh | tail -n 40
# mixed_call.sh removes its work folder when it ends: its ab.tsv is read back from the archive.
tar -xzOf $OUT/mixed.tar.gz mixed/ab.tsv > /tmp/ab-peer-call.tsv 2>/dev/null || rm -f /tmp/ab-peer-call.tsv
g=$(python3 scripts/device/ab_winner.py /tmp/ab-peer-call.tsv 2> $OUT/winner.txt)
echo "peer rows under: $g" | tee -a $OUT/winner.txt
extra=()
[ "$g" != default ] && extra=(${g//,/ })
env "${extra[@]}" PHASE=run PEERS="${PEERS-vulkan cuda}" WAIT_S=${PEER_WAIT_S:-60} \
  CALL_S=${PEER_S:-250} bash scripts/device/peer_gpu.sh 2>&1 | tail -n 30
