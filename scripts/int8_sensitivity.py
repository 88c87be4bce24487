#!/usr/bin/env python3
"""How far can any int8-activation forward pass be from the f32 one? (issue 3, acceptance 1)

Runs scripts/reference_forward.py's numpy model (independent of FISH) on the committed reference
prompts and prints two tables.

1. Chaos (prompts 0-2): the float64 int8-activation pass against
     int8/float32   the same int8 rounding, arithmetic in float32 instead of float64;
     int8/eps=1e-6  float64, every matmul input multiplied by (1 + 1e-6 N(0,1)) before rounding;
     f32            no activation rounding at all.
   If the first two are as far from the int8 run as the f32 run is, activation rounding amplifies
   float-level differences (a quantum flipped by 1e-6 perturbs the next layer by a quantum), so two
   int8 engines that differ only in arithmetic order cannot agree better than int8 agrees with f32.
2. Where the error comes from (prompts 0-3, the positions FISH's reference test scores): int8 passes
   against the float64 f32-activation pass, with
     int8                 llama.cpp's formats (q8_0 / q8_1 for 32-blocks, q8_k for k-quants);
     f32 <class>          that class of matmul inputs left in f32, every other one int8;
     32-blocks, 16-blocks every input in blocks of 32 (16) with an f32 scale, half-to-even rounding.
   No single class carries the error, and halving the block (a format llama.cpp does not have)
   still leaves top-1 below 99%: the gap is the precision of int8 activations on these models.

Usage: int8_sensitivity.py MODEL.gguf REFERENCE_DIR (tests/data/reference/<model>/)
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as rf  # noqa: E402

_LLAMA_CPP_ROUNDTRIP = rf.quantize_roundtrip


def matmul_class(name: str) -> str:
    if name in ("output.weight", "token_embd.weight"):
        return "head"
    for cls in ("attn_q", "attn_k", "attn_v"):
        if f".{cls}." in name:
            return "qkv"
    for cls in ("attn_output", "ffn_down"):
        if f".{cls}." in name:
            return cls
    return "gate_up"


def block_roundtrip(x: np.ndarray, bs: int) -> np.ndarray:
    """x through int8 blocks of bs values with an f32 absmax scale, rounded half to even."""
    x32 = np.asarray(x, dtype=np.float32)
    b = x32.reshape(-1, bs)
    d = (np.abs(b).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), np.float32(0)).astype(np.float32)
    return (d * np.rint(b * inv)).reshape(x32.shape)


def run(path, prompts, dtype, act, eps=0.0, keep_f32=None, block=0):
    rf.quantize_roundtrip = (lambda x, fmt: block_roundtrip(x, block)) if block else _LLAMA_CPP_ROUNDTRIP
    m = rf.Model(path, dtype=dtype, act=act)
    if keep_f32:
        fmt = m.act_format
        m.act_format = lambda name: None if matmul_class(name) == keep_f32 else fmt(name)
    if eps:
        plain = m.mm
        rng = np.random.default_rng(0)
        m.mm = lambda x, name: plain(x * (1 + eps * rng.standard_normal(x.shape)), name)
    try:
        return [rf.logits(m, t) for t in prompts]
    finally:
        rf.quantize_roundtrip = _LLAMA_CPP_ROUNDTRIP


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


def table(title, base, variants):
    print(f"{title}\n| variant | top-1 | positions | mean KL |\n|---|---|---|---|")
    for label, other in variants:
        agree, n, kl = compare(base, other())
        print(f"| {label} | {agree / n:.4f} ({agree}/{n}) | {n} | {kl:.2e} |", flush=True)
    print()


def main():
    path, ref_dir = sys.argv[1], sys.argv[2]
    prompts = [json.load(open(f"{ref_dir}/prompt_{i}.json"))["tokens"] for i in range(4)]
    name = os.path.basename(path)
    f64 = np.float64
    chaos = prompts[:3]
    table(f"# {name}: int8-activation float64 pass (prompts 0-2) vs", run(path, chaos, f64, "int8"), [
        ("int8, float32 arithmetic", lambda: run(path, chaos, np.float32, "int8")),
        ("int8, inputs x (1 + 1e-6 N)", lambda: run(path, chaos, f64, "int8", eps=1e-6)),
        ("f32 activations", lambda: run(path, chaos, f64, "f32")),
    ])
    variants = [("int8 (llama.cpp formats)", lambda: run(path, prompts, f64, "int8"))]
    for cls in ("qkv", "attn_output", "gate_up", "ffn_down", "head"):
        variants.append((f"int8, {cls} inputs f32", lambda c=cls: run(path, prompts, f64, "int8", keep_f32=c)))
    for bs in (32, 16):
        variants.append((f"int8, {bs}-blocks f32 scale", lambda b=bs: run(path, prompts, f64, "int8", block=b)))
    table(f"# {name}: f32-activation float64 pass (prompts 0-3) vs", run(path, prompts, f64, "f32"), variants)


if __name__ == "__main__":
    main()
