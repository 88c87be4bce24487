#!/usr/bin/env python3
"""Renders BENCHMARKS.md from the committed results (never edit BENCHMARKS.md by hand).

    scripts/render_benchmarks.py            rewrite BENCHMARKS.md and BENCHMARKS_plots/
    scripts/render_benchmarks.py --check    exit 1 when either is stale

The one generator is `fish report` (harness/report.cpp); this script only lists its inputs, so
the document and its --check are the same code path:
  results/**/*.jsonl      experiment results (fish-results/1: `fish run`, `fish merge`), except
                          results/ci/ (the CI gate's baseline: a test input, not a benchmark)
  results/bench/*.json    google-benchmark JSON written by scripts/run_bench.sh
  results/runs/*/         captured command runs (context.txt + outputs)
Paths are passed relative to the checkout, so the output does not depend on where it lives.
The `fish` binary: $FISH_BIN, else build/fish (scripts/setup.sh builds it)."""
import argparse
import glob
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def inputs():
    rel = lambda p: os.path.relpath(p, ROOT)
    results = sorted(rel(p) for p in glob.glob(os.path.join(ROOT, "results", "**", "*.jsonl"),
                                               recursive=True)
                     if not rel(p).startswith(os.path.join("results", "ci") + os.sep))
    bench = sorted(rel(p) for p in glob.glob(os.path.join(ROOT, "results", "bench", "*.json")))
    runs = sorted(rel(d) for d in glob.glob(os.path.join(ROOT, "results", "runs", "*"))
                  if os.path.isdir(d))
    return results + bench + runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail when BENCHMARKS.md is stale")
    ap.add_argument("--out", default="BENCHMARKS.md", help="relative to the checkout")
    args = ap.parse_args()
    fish = os.environ.get("FISH_BIN") or os.path.join(ROOT, "build", "fish")
    if not os.access(fish, os.X_OK):
        print(f"render_benchmarks.py: no fish binary at {fish} (build it: scripts/setup.sh, or set "
              "FISH_BIN)", file=sys.stderr)
        return 1
    files = inputs()
    if not files:
        print("render_benchmarks.py: nothing under results/ to render", file=sys.stderr)
        return 1
    cmd = [fish, "report", *files, "-o", args.out] + (["--check"] if args.check else [])
    return subprocess.run(cmd, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
