#!/usr/bin/env python3
"""How sensitive is an int8-activation forward pass to float-level noise? (issue 3, acceptance 1)

Runs scripts/reference_forward.py's numpy model (independent of FISH) on the committed reference
prompts 0-2 and compares, by top-1 agreement and mean KL, the float64 int8-activation pass with:
  int8/float32   the same int8 rounding, arithmetic in float32 instead of float64;
  int8/eps=1e-6  float64, every matmul input multiplied by (1 + 1e-6 N(0,1)) before rounding;
  f32            no activation rounding at all.
If the first two are as far from the int8 run as the f32 run is, activation rounding amplifies
float-level differences (a quantum flipped by 1e-6 perturbs the next layer by a quantum), and
two int8 engines that differ only in arithmetic order cannot agree better than int8 agrees with
f32. Usage: int8_sensitivity.py MODEL.gguf REFERENCE_DIR (tests/data/reference/<model>/)
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as rf  # noqa: E402


def run(path, prompts, dtype, act, eps=0.0):
    m = rf.Model(path, dtype=dtype, act=act)
    if eps:
        plain = m.mm
        rng = np.random.default_rng(0)
        m.mm = lambda x, name: plain(x * (1 + eps * rng.standard_normal(x.shape)), name)
    return [rf.logits(m, t) for t in prompts]


def compare(a, b):
    agree = n = 0
    kls = []
    for x, y in zip(a, b):
        agree += int((x.argmax(-1) == y.argmax(-1)).sum())
        n += len(x)
        lx = x - rf.logsumexp_rows(x)[:, None]
        ly = y - rf.logsumexp_rows(y)[:, None]
        kls.append((np.exp(lx) * (lx - ly)).sum(-1))
    return agree, n, float(np.concatenate(kls).mean())


def main():
    path, ref_dir = sys.argv[1], sys.argv[2]
    prompts = [json.load(open(f"{ref_dir}/prompt_{i}.json"))["tokens"] for i in range(3)]
    base = run(path, prompts, np.float64, "int8")
    print(f"# {os.path.basename(path)}: int8-activation float64 pass vs")
    print("| variant | top-1 | positions | mean KL |\n|---|---|---|---|")
    for label, dtype, act, eps in [("int8, float32 arithmetic", np.float32, "int8", 0.0),
                                   ("int8, inputs x (1 + 1e-6 N)", np.float64, "int8", 1e-6),
                                   ("f32 activations", np.float64, "f32", 0.0)]:
        agree, n, kl = compare(base, run(path, prompts, dtype, act, eps))
        print(f"| {label} | {agree / n:.4f} ({agree}/{n}) | {n} | {kl:.2e} |", flush=True)


if __name__ == "__main__":
    main()
