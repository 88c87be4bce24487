#!/usr/bin/env bash
# The README's main job: set everything up (scripts/setup.sh), then run FISH on the real
# SmolLM2 model and say where the output is.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${FISH_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh" --build-dir "$build_dir"
fish=$build_dir/fish
model=$root/models/SmolLM2-135M-Instruct.Q4_1.gguf
out=$build_dir/quickstart
mkdir -p "$out"
"$fish" inspect "$model" > "$out/smollm2-inspect.txt"
"$fish" inspect --json "$model" > "$out/smollm2-inspect.json"
head -n 20 "$out/smollm2-inspect.txt"
echo "quickstart: full table in $out/smollm2-inspect.txt (JSON: $out/smollm2-inspect.json)" >&2
