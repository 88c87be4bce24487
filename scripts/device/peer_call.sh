#!/usr/bin/env bash
# The peer call that follows a mixed_call.sh call with PEERS="cpu vulkan cuda" WAIT=1 on the same
# held machine (the builds done): every same-run ratio against llama.cpp in one call of <= 570 s.
#   1. experiments/peer_gpu_depth.json (8B decode after 2048 / 8192 positions, FISH / Vulkan /
#      CUDA), at most DEPTH_S seconds (default 150);
#   2. experiments/peer_gpu.json (pp512 + tg128 at depth 0 and 512, 1B and 8B), PEER_S (140);
#   3. experiments/peer_cpu_host16.json (FISH x16 vs llama.cpp's CPU build on the host's 16
#      threads, the GPU idle), HOST_S (250; a host with a 77 GB/s stream read needed more: the
#      run resumes in a next call); HOST=0 skips it.
# Each through peer_gpu.sh PHASE=run (--resume into /tmp/peer/runs-<knobs>: a cut sweep goes on in a
# next call). Carry as mixed_call.sh. Output: $OUT/peer-gpu-depth.tar.gz, $OUT/peer-gpu.tar.gz,
# $OUT/host16/ (fish run's rows, table and log).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
PHASE=run PEERS="vulkan cuda" WAIT_S=${PEER_WAIT_S:-30} CALL_S=${DEPTH_S:-150} \
  EXPERIMENT=experiments/peer_gpu_depth.json bash scripts/device/peer_gpu.sh 2>&1 | tail -n 25
PHASE=run PEERS="vulkan cuda" WAIT_S=30 CALL_S=${PEER_S:-140} bash scripts/device/peer_gpu.sh 2>&1 |
  tail -n 30
if [ "${HOST:-1}" = 1 ]; then
  . "$root/scripts/device/gpu_env.sh"
  # Into /tmp/peer/runs/host16 with --resume, as the GPU sweeps: a cut run goes on in a next call
  # on the same held machine (a slower host needs more than one HOST_S); $OUT/host16 gets a copy.
  H=/tmp/peer/runs/host16
  mkdir -p $H $OUT/host16
  FISH_CACHE=/tmp/peer/cache timeout ${HOST_S:-250} $B/fish run experiments/peer_cpu_host16.json \
    --resume --out $H >> $H/run.log 2>&1
  echo "rc=$?" >> $H/run.log
  cp $H/* $OUT/host16/ 2>/dev/null
  tail -n 5 $H/run.log
  cat $H/*.md 2>/dev/null | grep -A30 "FISH / peer" | head -20
fi
