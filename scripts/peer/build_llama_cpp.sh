#!/usr/bin/env bash
# The llama.cpp peer, built from the pinned source (scripts/peer/llama_cpp.pin: the vendor/llama.cpp
# of the llama-cpp-python sdist on PyPI, sha256-checked) into
#   $FISH_CACHE/peer/<commit_short>-<backend>/bin/{llama-bench,llama-perplexity} + build-info.txt
# Idempotent: a build whose stamp (source, backend, cmake arguments, compiler, host CPU for cpu)
# matches is kept, and the script only prints its directory.
#
#   scripts/peer/build_llama_cpp.sh {cpu|vulkan|cuda} [--src FILE] [--jobs N] [--print-dir]
#   scripts/peer/build_llama_cpp.sh --pack-source OUT.tar.xz      (the subset for an offline machine)
#
#   --src FILE     the source tarball: the pinned sdist (its sha256 is checked) or a subset written
#                  by --pack-source (its FISH_PEER_SOURCE names the sdist it came from). Default:
#                  $FISH_PEER_SRC, else $FISH_CACHE/peer/src/<sdist_file>, downloaded from PyPI
#                  (the PEP 503 index pip uses, else the PyPI JSON API) when missing. Offline: give --src.
#   --jobs N       parallel compile jobs (default $FISH_JOBS, else nproc)
#   --print-dir    print the build directory and exit 0 if a matching build exists, 1 if not
#
# Backends: cpu (GGML_NATIVE: the peer is built for the host, as a user would), vulkan (needs
# Vulkan headers >= 1.4 and, for cooperative matrices and integer dot, trixie's glslc: both from
# scripts/vulkan_toolchain.sh compiler, or FISH_VULKAN_INCLUDE / FISH_GLSLC; SPIRV-Headers from
# the system, FISH_SPIRV_HEADERS, or Debian's spirv-headers .deb unpacked into the cache), cuda
# (nvcc on PATH or CUDACXX; CUDA architectures $FISH_CUDA_ARCH, default 90 = H100/H200).
# build-info.txt (KEY=VALUE) records commit, backend, source, cmake arguments, compiler and, for
# vulkan, the shader features glslc supports as the configure step found them.
# Environment: FISH_CACHE (default ~/.cache/fish), FISH_JOBS, FISH_PEER_SRC, FISH_CUDA_ARCH,
# FISH_PEER_AMX=1 (cpu: keep ggml's AMX backend on an AMX host; off by default, see below);
# vulkan: FISH_VULKAN_INCLUDE, FISH_GLSLC, FISH_SPIRV_HEADERS (a prefix holding usr/),
# FISH_VULKAN_LIBRARY (the loader to link, where no libvulkan.so is installed).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${FISH_CACHE:-$HOME/.cache/fish}
say() { printf '\033[1mbuild_llama_cpp:\033[0m %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

pin_get() { # KEY: value from the pin file
  local v
  v=$(sed -n "s/^$1=//p" "$here/llama_cpp.pin")
  [ -n "$v" ] || die "$here/llama_cpp.pin: no '$1='"
  printf '%s' "$v"
}
sdist_name=$(pin_get sdist_name)
sdist_version=$(pin_get sdist_version)
sdist_file=$(pin_get sdist_file)
sdist_sha=$(pin_get sdist_sha256)
commit=$(pin_get commit)
commit_short=$(pin_get commit_short)
subset_dirs=(CMakeLists.txt cmake ggml src include common tools vendor app)

backend="" src=${FISH_PEER_SRC:-} jobs=${FISH_JOBS:-$(nproc)} print_dir=0 pack_out=""
while [ $# -gt 0 ]; do
  case "$1" in
    cpu|vulkan|cuda) backend=$1 ;;
    --src) [ $# -ge 2 ] || die "--src needs a file"; src=$2; shift ;;
    --jobs) [ $# -ge 2 ] || die "--jobs needs a number"; jobs=$2; shift ;;
    --print-dir) print_dir=1 ;;
    --pack-source) [ $# -ge 2 ] || die "--pack-source needs an output file"; pack_out=$2; shift ;;
    -h|--help) sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (try cpu, vulkan, cuda, --src FILE, --jobs N, --pack-source OUT)" ;;
  esac
  shift
done

# fetch_sdist: the pinned sdist into $cache/peer/src, from the package index pip uses (PEP 503
# simple API: $PIP_INDEX_URL, default https://pypi.org/simple; the link whose file name is the
# pin's), else PyPI's JSON API. Not `pip download`: for an sdist it prepares metadata, which needs
# the package's build backend (scikit-build-core) and deletes the download when that is missing.
fetch_sdist() {
  local dir=$cache/peer/src f
  f=$dir/$sdist_file
  mkdir -p "$dir"
  if [ ! -f "$f" ]; then
    say "downloading $sdist_name $sdist_version (sdist) from PyPI"
    local py=${FISH_PYTHON:-$cache/venv/bin/python}
    [ -x "$py" ] || py=python3
    local index=${PIP_INDEX_URL:-https://pypi.org/simple}
    local url
    url=$(curl -fsSL "${index%/}/$sdist_name/" | "$py" -c '
import html, re, sys, urllib.parse
base, want = sys.argv[1], sys.argv[2]
for href in re.findall(r"href=\"([^\"]+)\"", sys.stdin.read()):
    href = html.unescape(href)
    if urllib.parse.urlsplit(href).path.rsplit("/", 1)[-1] == want:
        print(urllib.parse.urljoin(base, href.split("#")[0])); break
' "${index%/}/$sdist_name/" "$sdist_file") || url=""
    if [ -z "$url" ]; then
      url=$(curl -fsSL "https://pypi.org/pypi/$sdist_name/$sdist_version/json" |
            "$py" -c 'import json,sys; d=json.load(sys.stdin); print(next(u["url"] for u in d["urls"] if u["packagetype"]=="sdist"))') ||
        die "cannot reach PyPI for $sdist_name $sdist_version (offline? pass --src FILE or FISH_PEER_SRC)"
    fi
    mkdir -p "$dir.tmp" && curl -fsSL "$url" -o "$dir.tmp/$sdist_file" || die "download of $url failed"
    mv "$dir.tmp/$sdist_file" "$f" && rm -rf "$dir.tmp"
  fi
  printf '%s' "$f"
}

# One caller at a time per backend (a test, a helper, a second shell): the download, the work
# directory and the output directory are shared, and two builds in one work tree fail each other.
# The second caller waits, then finds the first one's build up to date below.
if [ "$print_dir" = 0 ] && [ -z "$pack_out" ]; then
  mkdir -p "$cache/peer"
  exec 9>"$cache/peer/.lock-$commit_short-$backend"
  flock 9 || die "cannot lock $cache/peer/.lock-$commit_short-$backend"
fi

[ -n "$src" ] || src=$(fetch_sdist)
[ -f "$src" ] || die "source tarball '$src' does not exist"

# The source: the sdist (checked against the pin) or a subset with its FISH_PEER_SOURCE.
src_kind=""
case "$src" in
  *.tar.gz) src_sha=$(sha256sum "$src" | cut -d' ' -f1)
            [ "$src_sha" = "$sdist_sha" ] ||
              die "$src: sha256 $src_sha, the pin ($here/llama_cpp.pin) says $sdist_sha"
            src_kind=sdist ;;
  *.tar.xz) src_kind=subset ;;
  *) die "$src: expected the sdist (.tar.gz) or a --pack-source subset (.tar.xz)" ;;
esac
source_desc="$sdist_name $sdist_version sdist sha256 $sdist_sha"

# unpack DIR: the llama.cpp tree (the subset folders) into DIR/llama.cpp.
unpack() {
  local dir=$1
  rm -rf "$dir" && mkdir -p "$dir"
  if [ "$src_kind" = sdist ]; then
    local p=${sdist_file%.tar.gz}/vendor/llama.cpp
    tar -xzf "$src" -C "$dir" --strip-components=2 "${subset_dirs[@]/#/$p/}"
    echo "$source_desc" > "$dir/llama.cpp/FISH_PEER_SOURCE"
  else
    tar -xJf "$src" -C "$dir"
    [ -f "$dir/llama.cpp/FISH_PEER_SOURCE" ] || die "$src: no llama.cpp/FISH_PEER_SOURCE (not a --pack-source subset)"
    grep -qx "$source_desc" "$dir/llama.cpp/FISH_PEER_SOURCE" ||
      die "$src: made from '$(cat "$dir/llama.cpp/FISH_PEER_SOURCE")', the pin says '$source_desc'"
  fi
}

if [ -n "$pack_out" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  unpack "$tmp/t"
  tar -cJf "$pack_out" -C "$tmp/t" llama.cpp
  say "wrote $pack_out ($(du -h "$pack_out" | cut -f1)): ${subset_dirs[*]} of $source_desc"
  exit 0
fi
[ -n "$backend" ] || die "which backend? cpu, vulkan or cuda"

# --- cmake arguments per backend ------------------------------------------------------------------
args=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON
      -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
      -DLLAMA_BUILD_COMMIT="$commit_short" -DLLAMA_BUILD_NUMBER=0)
host_cpu=""
case "$backend" in
  cpu)
    args+=(-DGGML_NATIVE=ON)
    host_cpu="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') [$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512f|avx512_vnni|avx_vnni|avx512_bf16|avx512_fp16|amx_int8|amx_bf16)$' | tr '\n' ' ' | sed 's/ $//')]"
    # GGML_NATIVE on an AMX host compiles ggml's AMX backend, whose tile config at 0c1e570 lives
    # on the stack where GCC 12 drops half of its initialisation: ldtilecfg faults in
    # ggml_backend_amx_mul_mat at the first matmul (general protection fault, SIGSEGV; seen on
    # the dev machine's Xeon; llama.cpp issue 20824, fix proposed in PR 26954). The peer is
    # built with AVX-512 VNNI and without AMX unless FISH_PEER_AMX=1; build-info says which.
    if [[ " $host_cpu " == *" amx_int8"* ]] && [ "${FISH_PEER_AMX:-0}" != 1 ]; then
      args+=(-DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
             -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
    fi ;;
  vulkan)
    inc=${FISH_VULKAN_INCLUDE:-$cache/toolchain/vulkan-include}
    glslc=${FISH_GLSLC:-$cache/toolchain/bin/glslc}
    [ -f "$inc/vulkan/vulkan_core.h" ] ||
      die "no Vulkan 1.4 headers at $inc (run scripts/vulkan_toolchain.sh compiler, or set FISH_VULKAN_INCLUDE)"
    [ -x "$glslc" ] || die "no glslc at $glslc (run scripts/vulkan_toolchain.sh compiler, or set FISH_GLSLC)"
    spv=${FISH_SPIRV_HEADERS:-}
    if [ -z "$spv" ] && [ ! -f /usr/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake ]; then
      spv=$cache/peer/spirv-headers
      if [ ! -f "$spv/usr/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake" ]; then
        say "unpacking Debian's spirv-headers into $spv"
        mkdir -p "$spv.deb" && (cd "$spv.deb" && apt-get -qq download spirv-headers) ||
          die "no SPIRV-Headers: apt-get download spirv-headers failed (offline? set FISH_SPIRV_HEADERS to an unpacked prefix)"
        dpkg -x "$spv.deb"/spirv-headers_*.deb "$spv"
      fi
    fi
    # ggml-vulkan finds the SPIRV-Headers package but links no target of it: it includes
    # <spirv/unified1/spirv.hpp> from the include path, so a private prefix goes there too
    # (without it, another spirv.hpp without namespace spv was found on the GPU machine).
    [ -z "$spv" ] || args+=(-DSPIRV-Headers_DIR="$spv/usr/share/cmake/SPIRV-Headers"
                            -DCMAKE_PREFIX_PATH="$spv/usr"
                            -DCMAKE_CXX_FLAGS="-isystem $spv/usr/include")
    args+=(-DGGML_NATIVE=OFF -DGGML_VULKAN=ON -DVulkan_INCLUDE_DIR="$inc"
           -DVulkan_GLSLC_EXECUTABLE="$glslc")
    # A machine with the loader but no libvulkan-dev (the GPU machine): its libvulkan.so.1.
    [ -z "${FISH_VULKAN_LIBRARY:-}" ] || args+=(-DVulkan_LIBRARY="$FISH_VULKAN_LIBRARY") ;;
  cuda)
    command -v "${CUDACXX:-nvcc}" >/dev/null || die "no nvcc (put CUDA's bin on PATH or set CUDACXX)"
    args+=(-DGGML_NATIVE=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${FISH_CUDA_ARCH:-90}") ;;
esac
if command -v ccache >/dev/null; then
  args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
compiler=$(${CXX:-c++} --version 2>/dev/null | head -1)
stamp=$(printf '%s\n' "$source_desc" "$backend" "${args[@]}" "$compiler" "$host_cpu" | sha256sum | cut -c1-16)

out=$cache/peer/$commit_short-$backend
if [ -f "$out/build-info.txt" ] && grep -qx "stamp=$stamp" "$out/build-info.txt" &&
   [ -x "$out/bin/llama-bench" ] && [ -x "$out/bin/llama-perplexity" ]; then
  [ "$print_dir" = 1 ] || say "up to date: $out"
  echo "$out"
  exit 0
fi
[ "$print_dir" = 0 ] || exit 1

# --- build ------------------------------------------------------------------------------------------
work=$cache/peer/work/$commit_short-$backend
t0=$(date +%s)
say "building llama.cpp $commit_short ($backend) in $work, $jobs jobs"
unpack "$work/src"
cmake -S "$work/src/llama.cpp" -B "$work/build" -G Ninja "${args[@]}" > "$work/configure.log" 2>&1 ||
  { tail -30 "$work/configure.log" >&2; die "configure failed (log: $work/configure.log)"; }
ninja -C "$work/build" -j "$jobs" llama-bench llama-perplexity > "$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log" >&2; die "build failed (log: $work/build.log)"; }

features=""
if [ "$backend" = vulkan ]; then # what the configure step found glslc to support
  features=$(sed -n 's/^-- \(GL_[A-Za-z0-9_]*\) \(not \)\{0,1\}supported by glslc$/\1 \2/p' "$work/configure.log" |
             awk '{print $1 "=" ($2 == "not" ? "no" : "yes")}' | sort | tr '\n' ' ' | sed 's/ $//')
  [ -n "$features" ] || die "the configure log names no glslc features ($work/configure.log)"
fi
rm -rf "$out.tmp" && mkdir -p "$out.tmp/bin"
cp "$work/build/bin/llama-bench" "$work/build/bin/llama-perplexity" "$out.tmp/bin/"
{
  echo "commit=$commit"
  echo "backend=$backend"
  echo "source=$source_desc"
  echo "cmake=${args[*]}"
  echo "compiler=$compiler"
  [ -z "$host_cpu" ] || echo "host_cpu=$host_cpu"
  echo "features=$features"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(( $(date +%s) - t0 )) s this run, ccache / an earlier build dir may have helped)"
  echo "stamp=$stamp"
} > "$out.tmp/build-info.txt"
rm -rf "$out" && mv "$out.tmp" "$out"
say "built $out ($(( $(date +%s) - t0 )) s this run)${features:+; features: $features}"
echo "$out"
