#!/usr/bin/env bash
# The README's main job: set everything up (scripts/setup.sh), then run FISH on the real SmolLM2
# model on the CPU — what the file holds, and greedy generation with int8 and with f32
# activations, each with its throughput line — and say where the output is.
# (The experiment harness, `fish run experiments/quickstart.json` with paired GPU/CPU rows, is
# not built yet; see README "Status".)
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
sed -n '1,16p' "$out/smollm2-inspect.txt"
for act in int8 f32; do
  echo "--- fish generate --act $act" >&2
  "$fish" generate -m "$model" -p "The capital of France is" -n 32 --act "$act" \
    2> >(tee "$out/smollm2-generate-$act.stats" >&2) | tee "$out/smollm2-generate-$act.txt"
  echo
done
echo "quickstart: outputs in $out (inspect table, generated text, stats lines)" >&2
