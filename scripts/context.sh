#!/usr/bin/env bash
# Prints the measurement context as key=value lines: commit (+dirty), build type and flags,
# compiler, CPU model and SIMD features, GPU and driver (Vulkan), OS. Used by run_bench.sh and
# recorded with every committed result.
#   scripts/context.sh [BUILD_DIR]
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
# FISH_COMMIT / FISH_BUILD_DESC override what cannot be read where the binaries were carried to
# (the GPU machine gets a copy of the tree without .git and a build made elsewhere).
if [ -n "${FISH_COMMIT:-}" ]; then
  commit=$FISH_COMMIT
else
  commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ] && commit="$commit-dirty"
fi
cache=$build/CMakeCache.txt
cget() { sed -n "s/^$1:[A-Z]*=//p" "$cache" 2>/dev/null | head -1; }
build_type=$(cget CMAKE_BUILD_TYPE)
opts=""
for o in FISH_NATIVE FISH_SCALAR_ONLY FISH_SANITIZE FISH_VULKAN; do
  [ "$(cget $o)" = "ON" ] && opts="$opts $o"
done
compiler="$(cget CMAKE_CXX_COMPILER) $("$(cget CMAKE_CXX_COMPILER)" -dumpfullversion 2>/dev/null)"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
ncpu=$(nproc)
feats=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|fma|f16c|avx512f|avx512bw|avx512_vnni|avx_vnni|avx512_bf16|amx_tile|amx_int8|amx_bf16' | tr '\n' ' ')
gpu=none
if command -v vulkaninfo >/dev/null 2>&1; then
  g=$(vulkaninfo --summary 2>/dev/null | sed -n 's/^[[:space:]]*deviceName[[:space:]]*= //p' | head -1)
  d=$(vulkaninfo --summary 2>/dev/null | sed -n 's/^[[:space:]]*driverInfo[[:space:]]*= //p' | head -1)
  a=$(vulkaninfo --summary 2>/dev/null | sed -n 's/^[[:space:]]*apiVersion[[:space:]]*= //p' | head -1)
  [ -n "$g" ] && gpu="$g (driver $d, Vulkan $a)"
fi
# Without vulkaninfo (the GPU machine carries only the loader): what FISH itself opened.
fish_bin=${FISH_BIN:-$build/fish}
if [ "$gpu" = none ] && [ -x "$fish_bin" ]; then
  g=$("$fish_bin" gpu 2>/dev/null | sed -n 's/^status: vulkan: //p' | head -1)
  case "$g" in "" | off:* | "not opened"*) ;; *) gpu="$g" ;; esac
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  g=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
  if [ -n "$g" ] && [ "$gpu" = none ]; then
    gpu="${g%%,*} (driver${g#*,}; no Vulkan device opened)"
  elif [ -n "$g" ]; then
    gpu="$gpu; driver${g#*,}"
  fi
fi
os=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") 
echo "commit=$commit"
if [ -n "${FISH_BUILD_DESC:-}" ]; then
  echo "build=$FISH_BUILD_DESC"
else
  echo "build=${build_type:-unknown}${opts}"
  echo "compiler=$compiler"
fi
echo "cpu=$cpu x$ncpu [${feats% }]"
echo "gpu=$gpu"
echo "os=$os $(uname -r)"
