#!/usr/bin/env bash
# The README's main job: set everything up (scripts/setup.sh), then run the quickstart experiment
# (experiments/quickstart.json: SmolLM2 on the CPU, and on the GPU where a Vulkan backend exists)
# with `fish run`, print its table and say where the results are. A second run resumes the same
# results file: finished cells are skipped, so it only re-renders the table.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${FISH_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh" --build-dir "$build_dir"
out=$build_dir/quickstart
cd "$root"  # the experiment names the model and prompt files relative to the checkout
rc=0
"$build_dir/fish" run experiments/quickstart.json --out "$out" --resume || rc=$?
if [ -f "$out/quickstart.md" ]; then
  echo
  cat "$out/quickstart.md"
  echo
fi
echo "quickstart: table $out/quickstart.md (also .csv); every row with its samples and context in $out/quickstart.jsonl" >&2
exit $rc
