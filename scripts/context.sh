#!/usr/bin/env bash
# Prints the measurement context as key=value lines: commit (+dirty), build type and flags,
# compiler, CPU model and SIMD features, GPU and driver (Vulkan), OS. Used by run_bench.sh and
# recorded with every committed result.
#   scripts/context.sh [BUILD_DIR]
# commit, build and compiler come from the fish binary itself (`fish --version`: baked in at build
# time), FISH_BIN or BUILD_DIR/fish, so a binary carried elsewhere still names what it was built
# from. Only without a runnable binary are they read from this checkout's git and CMakeCache.txt.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
fish_bin=${FISH_BIN:-$build/fish}
version=""
[ -x "$fish_bin" ] && version=$("$fish_bin" --version 2>/dev/null)
if [ -n "$version" ]; then
  # "commit SHA (clean)" | "commit SHA (dirty, diff sha256 DIGEST)" | "commit SHA (dirty unknown)"
  line=$(sed -n 's/^commit //p' <<<"$version")
  sha=${line%% *}
  state=${line#* }
  commit=${sha:0:12}
  [ "$sha" = unknown ] && commit=unknown
  case "$state" in
    "(dirty, diff sha256 "*) digest=${state#(dirty, diff sha256 }; commit="$commit-dirty.${digest:0:8}" ;;
    "(dirty unknown)") [ "$commit" != unknown ] && commit="$commit-dirty?" ;;
  esac
  build_desc=$(sed -n 's/^build //p' <<<"$version" | sed 's/: / /')
  compiler=$(sed -n 's/^compiler //p' <<<"$version")
else
  commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ] && commit="$commit-dirty"
  cache=$build/CMakeCache.txt
  cget() { sed -n "s/^$1:[A-Z]*=//p" "$cache" 2>/dev/null | head -1; }
  build_desc=$(cget CMAKE_BUILD_TYPE)
  for o in FISH_NATIVE FISH_SCALAR_ONLY FISH_SANITIZE FISH_VULKAN; do
    [ "$(cget $o)" = "ON" ] && build_desc="$build_desc $o"
  done
  compiler="$(cget CMAKE_CXX_COMPILER) $("$(cget CMAKE_CXX_COMPILER)" -dumpfullversion 2>/dev/null)"
fi
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
echo "build=${build_desc:-unknown}"
echo "compiler=$compiler"
echo "cpu=$cpu x$ncpu [${feats% }]"
echo "gpu=$gpu"
echo "os=$os $(uname -r)"
