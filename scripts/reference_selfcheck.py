#!/usr/bin/env python3
"""Cross-check reference_forward.py against Hugging Face transformers.

transformers loads the same GGUF (gguf_file=, offline), dequantises it to torch
float32 and runs its own PyTorch implementation of the architecture; this script
runs both on one prompt and prints the max |logit difference| and the top-1
agreement over all positions. It needs torch + transformers (see
requirements-reference.txt); it is a one-off check, not part of the data
pipeline.

  reference_selfcheck.py MODEL.gguf [--text "..." | --text-file F [--max-chars N]] [--dtype float64]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as rf  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument(
        "--text",
        default="The quick brown fox jumps over the lazy dog. Paris is the capital and largest city of France, "
        "with an estimated population of two million residents.",
    )
    ap.add_argument("--text-file", help="read the prompt from this file instead (whitespace collapsed)")
    ap.add_argument("--max-chars", type=int, default=3200, help="with --text-file: use this many characters")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    args = ap.parse_args()

    if args.text_file:
        with open(args.text_file) as fh:
            args.text = " ".join(fh.read()[: args.max_chars].split())
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d, f = os.path.split(os.path.abspath(args.model))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    ids = tok(args.text)["input_ids"]
    t0 = time.time()
    hf = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    hf.eval()
    if hasattr(hf.config, "_attn_implementation"):
        hf.config._attn_implementation = "eager"
    with torch.no_grad():
        hl = hf(torch.tensor([ids])).logits[0].double().numpy()
    t1 = time.time()
    m = rf.Model(args.model, np.float64 if args.dtype == "float64" else np.float32)
    rl = rf.logits(m, ids)
    t2 = time.time()
    diff = np.abs(hl - rl)
    top_h = hl.argmax(-1)
    top_r = rl.argmax(-1)
    lse_h = rf.logsumexp_rows(hl)
    lse_r = rf.logsumexp_rows(rl)
    ph = np.exp(hl - lse_h[:, None])
    kl = (ph * ((hl - lse_h[:, None]) - (rl - lse_r[:, None]))).sum(-1)
    print(f"model {f}: {len(ids)} positions; transformers {t1 - t0:.1f}s, numpy reference {t2 - t1:.1f}s")
    print(f"config: {type(hf).__name__} {getattr(hf.config, 'model_type', '?')}")
    print(f"max |logit diff| = {diff.max():.3e} (mean {diff.mean():.3e}; logit range {rl.min():.1f}..{rl.max():.1f})")
    print(f"top-1 agreement  = {int((top_h == top_r).sum())}/{len(ids)}")
    print(f"KL(transformers || reference): mean {kl.mean():.3e}, max {kl.max():.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
