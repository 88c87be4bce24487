#!/usr/bin/env bash
# The CI gate (issue 7): runs experiments/ci_gate.json (both real models, cpu and gpu paths; the
# gpu path on lavapipe via FISH_GPU=cpu where no GPU is present) and gates it against the
# committed results/ci/baseline.jsonl with experiments/gate_rules.json (speed only as ratios
# measured within the run, quality on absolute tolerances). ctest runs it as harness.ci_gate.
#
#   scripts/ci_gate.sh [--refresh] [FISH_BIN]
#
# --refresh: after an intended change, write the new run over results/ci/baseline.jsonl (commit
# it with the change). FISH_BIN defaults to build/fish. Exit code: fish gate's (3: regression).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
refresh=0
if [ "${1:-}" = --refresh ]; then
  refresh=1
  shift
fi
fish=${1:-${FISH_BIN:-$root/build/fish}}
out=$(mktemp -d "${TMPDIR:-/tmp}/fish_ci_gate.XXXXXX")
trap 'rm -rf "$out"' EXIT
cd "$root"
export FISH_GPU=${FISH_GPU:-cpu}
run_rc=0
"$fish" run experiments/ci_gate.json --out "$out" || run_rc=$?
if [ "$refresh" = 1 ]; then
  [ "$run_rc" = 0 ] || { echo "ci_gate.sh: the run had error rows; baseline not written" >&2; exit 1; }
  mkdir -p results/ci
  cp "$out/ci_gate.jsonl" results/ci/baseline.jsonl
  cp "$out/ci_gate.md" results/ci/baseline.md
  echo "ci_gate.sh: wrote results/ci/baseline.jsonl (commit it with the change)" >&2
  exit 0
fi
# The gate prints every check; a failed cell shows up there as a lost row.
"$fish" gate results/ci/baseline.jsonl "$out/ci_gate.jsonl" --rules experiments/gate_rules.json
