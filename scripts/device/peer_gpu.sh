#!/usr/bin/env bash
# FISH vs llama.cpp (Vulkan and CUDA, the pinned source) on the GPU machine: experiments/peer_gpu.json.
# The GPU machine has no network, so the pinned llama.cpp source and the Vulkan build tools
# travel in .devcarry/peer, packed here; llama.cpp is built there (vulkan and cuda, in the
# background, setsid: the builds outlive the call while the machine is held).
#
#   PHASE=pack  (on the dev machine, repo root) writes .devcarry/peer/:
#                 llama-src.tar.xz   CMakeLists.txt cmake ggml src include common tools vendor app
#                                    of the pinned sdist (scripts/peer/build_llama_cpp.sh --pack-source)
#                 vktools.tar.xz     trixie's glslc 2025.2 with the libraries it runs on, trixie's
#                                    Vulkan 1.4 headers, Debian's SPIRV-Headers
#               needs scripts/vulkan_toolchain.sh compiler (run first) and the sdist (fetched
#               once by build_llama_cpp.sh); prints the sizes (well under the 64 MiB a call carries).
#   PHASE=build (device) unpacks them into /tmp/peer and starts both builds with setsid, 16
#               cores split between them; returns at once. Logs: /tmp/peer/build-{vulkan,cuda}.log.
#   PHASE=wait  (device) waits (at most WAIT_S, default 540 s) until both builds have ended,
#               then copies their logs and build-info.txt to $OUT/peer-build.
#   PHASE=run   (device) waits for the builds as PHASE=wait does (WAIT_S, default 120 s), then
#               `fish run experiments/peer_gpu.json` (llama_bench vulkan / cuda resolve to the
#               builds through FISH_CACHE=/tmp/peer/cache) into /tmp/peer/runs-<hash of the
#               FISH_VK_* / FISH_GPU_* knobs> (--resume: a second PHASE=run under the same knobs
#               finishes a cut sweep), copied to $OUT/peer-gpu/runs, with the context and
#               `llama-bench --list-devices` of each build; wait + run stay within CALL_S (default
#               570 s) of the call. EXPERIMENT names another experiment of the same engines
#               (experiments/peer_gpu_depth.json: the long-context rows); its rows go to the same
#               folder beside peer_gpu's, in $OUT/peer-gpu-depth.tar.gz.
#
# Carry: .devcarry (bin/fish + lib/ of the FISH Vulkan build made here, as for h200_session.sh,
# and peer/ from PHASE=pack) and .gl (the Vulkan loader .debs, device README). Run from the repo
# root there: PHASE=build bash scripts/device/peer_gpu.sh, then PHASE=wait, then PHASE=run, each
# within the 30 s the machine stays warm. Results: $OUT/peer-build.tar.gz, $OUT/peer-gpu.tar.gz
# (peer-gpu-depth.tar.gz for EXPERIMENT=experiments/peer_gpu_depth.json).
set -uo pipefail
PHASE=${PHASE:-run}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
D=$root/.devcarry
P=/tmp/peer
say() { echo "peer_gpu: $*"; }

if [ "$PHASE" = pack ]; then
  set -e
  cache=${FISH_CACHE:-$HOME/.cache/fish}
  tc=$cache/toolchain
  t=$tc/trixie
  [ -x "$t/usr/bin/glslc" ] || { say "no $t/usr/bin/glslc: run scripts/vulkan_toolchain.sh compiler"; exit 1; }
  mkdir -p "$D/peer"
  grep -qx '/.devcarry/' "$root/.git/info/exclude" 2>/dev/null ||
    { [ -d "$root/.git" ] && echo '/.devcarry/' >> "$root/.git/info/exclude"; } || true
  src=${FISH_PEER_SRC:-}
  "$root/scripts/peer/build_llama_cpp.sh" --pack-source "$D/peer/llama-src.tar.xz" ${src:+--src "$src"}
  spv=${FISH_SPIRV_HEADERS:-$cache/peer/spirv-headers}
  if [ ! -f "$spv/usr/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake" ]; then
    mkdir -p "$spv.deb" && (cd "$spv.deb" && apt-get -qq download spirv-headers)
    dpkg -x "$spv.deb"/spirv-headers_*.deb "$spv"
  fi
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/vk/trixie/usr/bin" "$stage/vk/trixie/lib" "$stage/vk/include" "$stage/vk/spirv"
  cp "$t/usr/bin/glslc" "$stage/vk/trixie/usr/bin/"
  # glslc's libraries, as its own loader resolves them in the prefix.
  "$t/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$t/usr/lib/x86_64-linux-gnu" \
    --list "$t/usr/bin/glslc" | awk '/=> \//{print $3} /^\t\//{print $1}' | while read -r lib; do
      real=$(readlink -f "$lib"); cp "$real" "$stage/vk/trixie/lib/$(basename "$lib")"
    done
  cp "$(readlink -f "$t/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")" "$stage/vk/trixie/lib/ld-linux-x86-64.so.2"
  cp -r "$t/usr/include/vulkan" "$t/usr/include/vk_video" "$spv/usr/include/spirv" "$stage/vk/include/"
  cp -r "$spv/usr" "$stage/vk/spirv/"
  tar -cJf "$D/peer/vktools.tar.xz" -C "$stage" vk
  cp "$root/scripts/peer/llama_cpp.pin" "$D/peer/"
  du -h "$D/peer"/* | sed 's/^/peer_gpu: /'
  [ -x "$D/bin/fish" ] || [ -f "$D/bin.tar.xz" ] ||
    say "note: no FISH build in $D: run scripts/device/gpu_prefill.sh pack BUILD first"
  say "carry [\".devcarry\", \".gl\"]; on the device: PHASE=build, PHASE=wait, PHASE=run"
  exit 0
fi

# --- on the GPU machine ---------------------------------------------------------------------------
export PATH=$PATH:/usr/local/cuda/bin
export FISH_CACHE=$P/cache
mkdir -p $P $FISH_CACHE

# The builds run at nice 19: the tests, benchmarks and fish runs of the same call come first (at
# the default priority the three builds starved the tests' pipeline compiles and CPU references,
# and a 60 s test run ended before its second test).
start_build() {  # start_build BACKEND JOBS [VAR=VALUE...]: setsid build_llama_cpp.sh in the background
  local b=$1 j=$2
  shift 2
  rm -f $P/build-$b.rc
  setsid nice -n 19 env "$@" FISH_JOBS=$j bash -c "'$root/scripts/peer/build_llama_cpp.sh' $b --src $D/peer/llama-src.tar.xz > $P/build-$b.log 2>&1; echo \$? > $P/build-$b.rc" \
    < /dev/null > /dev/null 2>&1 &
  say "started the $b build ($j jobs): $P/build-$b.log"
}
# The peers built and waited for: PEERS (default "vulkan cuda"; add cpu for the host's CPU build,
# GGML_NATIVE on the GPU machine's CPU).
PEERS=${PEERS:-vulkan cuda}
wait_builds() {  # wait_builds SECONDS: until every build of PEERS wrote its .rc, or the time is up
  local t0=$(date +%s) b
  while :; do
    local left=0
    for b in $PEERS; do [ -f $P/build-$b.rc ] || left=1; done
    [ $left = 0 ] && break
    if [ $(( $(date +%s) - t0 )) -ge "$1" ]; then say "builds still running after $1 s"; break; fi
    sleep 5
  done
  for b in $PEERS; do
    say "$b: rc=$(cat $P/build-$b.rc 2>/dev/null || echo running); $(tail -n 1 $P/build-$b.log 2>/dev/null)"
  done
}

if [ "$PHASE" = build ]; then
  [ -f $D/peer/llama-src.tar.xz ] && [ -f $D/peer/vktools.tar.xz ] ||
    { say "no .devcarry/peer/{llama-src,vktools}.tar.xz: PHASE=pack on the dev machine, carry .devcarry"; exit 1; }
  rm -rf $P/vk && tar -xJf $D/peer/vktools.tar.xz -C $P
  cat > $P/vk/glslc <<EOF
#!/bin/sh
exec $P/vk/trixie/lib/ld-linux-x86-64.so.2 --library-path $P/vk/trixie/lib $P/vk/trixie/usr/bin/glslc "\$@"
EOF
  chmod +x $P/vk/glslc
  $P/vk/glslc --version | head -1
  for f in $root/.gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  vklib=$(ldconfig -p | awk '/libvulkan.so.1 /{print $NF; exit}')
  [ -n "$vklib" ] || say "warning: no libvulkan.so.1 after unpacking .gl (carry .gl)"
  command -v nvcc > /dev/null || say "warning: no nvcc on PATH: the cuda build will fail"
  case " $PEERS " in *" cpu "*) start_build cpu ${CPU_JOBS:-4} ;; esac  # CPU_JOBS: alone, 12-16
  case " $PEERS " in *" cuda "*) start_build cuda 8 ;; esac
  case " $PEERS " in *" vulkan "*) start_build vulkan 8 FISH_VULKAN_INCLUDE=$P/vk/include FISH_GLSLC=$P/vk/glslc \
    FISH_SPIRV_HEADERS=$P/vk/spirv FISH_VULKAN_LIBRARY=$vklib ;; esac
  exit 0
fi

if [ "$PHASE" = wait ]; then
  wait_builds "${WAIT_S:-540}"
  W=$OUT/peer-build
  mkdir -p $W
  for b in $PEERS; do
    cp $P/build-$b.log $W/ 2>/dev/null
    cp $FISH_CACHE/peer/*-$b/build-info.txt $W/build-info-$b.txt 2>/dev/null
    tail -n 30 $FISH_CACHE/peer/work/*-$b/build.log > $W/ninja-tail-$b.log 2>/dev/null
  done
  cat $W/build-info-*.txt 2>/dev/null
  tar -C $OUT -czf $OUT/peer-build.tar.gz peer-build && rm -rf $W
  exit 0
fi

if [ "$PHASE" = run ]; then
  # One call may run 600 s: the builds' wait and the sweep share CALL_S (default 570), leaving
  # time for the tar.
  t_start=$(date +%s)
  wait_builds "${WAIT_S:-120}"
  . "$root/scripts/device/gpu_env.sh"  # loader, ICD, .devcarry on the paths
  exp=${EXPERIMENT:-experiments/peer_gpu.json}
  name=$(basename "$exp" .json | tr _ -)  # peer-gpu, peer-gpu-depth
  W=$OUT/$name
  mkdir -p $W
  (cd $root && scripts/context.sh) > $W/context.txt 2>&1
  for b in $PEERS; do
    lb=$FISH_CACHE/peer/$(sed -n 's/^commit_short=//p' $root/scripts/peer/llama_cpp.pin)-$b
    cp $lb/build-info.txt $W/build-info-$b.txt 2>/dev/null
    timeout 60 $lb/bin/llama-bench --list-devices > $W/llama-devices-$b.txt 2>&1
  done
  cd $root
  run_s=$(( ${CALL_S:-570} - ($(date +%s) - t_start) - 15 ))
  say "fish run $exp (at most $run_s s; fish run --resume in a next call finishes it)"
  # The results live on the machine (/tmp/peer/runs-<knobs>) while it is held: a second PHASE=run
  # call under the same FISH_VK_* / FISH_GPU_* knobs resumes the sweep where a timeout cut it.
  # The folder is the knobs' (a knob is no cell axis: under other knobs --resume would find every
  # cell finished and run nothing).
  knobs=$(env | grep -E '^FISH_(VK|GPU)_' | sort | sha1sum | cut -c1-8)
  say "knobs: $(env | grep -E '^FISH_(VK|GPU)_' | sort | tr '\n' ' ')(runs-$knobs)"
  timeout $run_s $FISH_BIN run $exp --resume --out $P/runs-$knobs > $W/run.log 2>&1
  echo "rc=$?" >> $W/run.log
  cp -r $P/runs-$knobs $W/runs
  tail -n 30 $W/run.log
  cat $W/runs/$(basename "$exp" .json).md 2>/dev/null | head -40
  tar -C $OUT -czf $OUT/$name.tar.gz $name && rm -rf $W
  exit 0
fi
say "unknown PHASE=$PHASE (pack, build, wait, run)"
exit 1
