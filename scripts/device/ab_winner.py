#!/usr/bin/env python3
"""The A/B config a later step of the same device call should run with.

Reads mixed_call.sh's ab.tsv (round, model, config, decode tok/s[, ...]) and prints the config
whose median decode tok/s is highest on every model, provided that on every model its lowest
round beats the best round of `default` (the rounds do not overlap); otherwise prints `default`.
A config is `default` or VAR=VALUE[,VAR=VALUE...], as mixed_call.sh writes it. The reason goes
to stderr, so a call's log says why its peer rows ran under that config.

Usage: ab_winner.py AB_TSV
"""
import statistics
import sys
from collections import defaultdict


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    try:
        with open(sys.argv[1]) as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                if len(cols) < 4:
                    continue
                try:
                    runs[(cols[1], cols[2])].append(float(cols[3]))
                except ValueError:  # "error": a failed run counts against its config
                    runs[(cols[1], cols[2])].append(0.0)
    except OSError as e:
        print(f"ab_winner: {e}: default", file=sys.stderr)
        print("default")
        return 0
    models = sorted({m for m, _ in runs})
    configs = sorted({c for _, c in runs if c != "default"})
    best, best_gain = "default", 0.0
    for c in configs:
        gains = []
        for m in models:
            base, new = runs.get((m, "default")), runs.get((m, c))
            if not base or not new or min(new) <= max(base):
                gains = []
                break
            gains.append(statistics.median(new) / statistics.median(base))
        if gains:
            print(f"ab_winner: {c}: median gain {', '.join(f'{g:.3f}' for g in gains)} "
                  f"over default on {', '.join(models)} (no round overlaps)", file=sys.stderr)
            if min(gains) > best_gain:
                best, best_gain = c, min(gains)
        else:
            print(f"ab_winner: {c}: not ahead of default on every model", file=sys.stderr)
    print(best)
    return 0


if __name__ == "__main__":
    sys.exit(main())
