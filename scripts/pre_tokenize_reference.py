#!/usr/bin/env python3
"""Expected word splits for FISH's regex pre-tokenizers, from HF `tokenizers` (independent code).

FISH hand-codes each pre-tokenizer regex (engine/bpe_tokenizer.cpp). This script runs the same
regexes through HF tokenizers' Split(Regex(...), behavior="isolated"), the pre-tokenizer that
Llama 3's and Qwen 2's tokenizer.json files use, and writes the splits that
tests/engine/tokenizer_test.cpp compares against:
  tests/data/pretokenize/<name>.json = {"format", "regex", "generator", "cases": [{text, words}]}
Texts: every test line of ../shared-style vocab vectors in tests/data/vocab/*.inp, plus cases
aimed at each alternative of the regexes (contractions in any case, a symbol or tab leading a
word, digit runs, newline runs inside whitespace, trailing spaces, non-Latin scripts).

Install (offline, no torch): pip install -r scripts/requirements-tokenizer.txt
Usage: pre_tokenize_reference.py OUT_DIR
"""
import json
import os
import sys

import tokenizers
from tokenizers import Regex, pre_tokenizers

# The patterns as llama.cpp (llama-vocab.cpp) and the models' tokenizer.json state them.
PATTERNS = {
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}

EXTRA = [
    "I'M you'RE they'Ve it'S we'LL he'D don'T",
    "'hello 'S x'",
    "!hello ?World \tTabbed ~tilde",
    "12345 1234567 12 1 a1b22c333d4444",
    "x\n\ny  \n  z\r\n\r\nw \n",
    "a   b\t\t c  ",
    "...\n\nnext!!!\r\nline",
    "  leading and trailing  ",
    "Привет, мир! 你好，世界。 مرحبا بالعالم ٣٤٥٦",
    "emoji 😀😀 and 🦙.cpp ½ ²³",
    "tab\tafter\t\tdouble",
    "\n",
    " ",
    "",
]


def corpus(vocab_dir):
    texts = []
    for name in sorted(os.listdir(vocab_dir)):
        if name.endswith(".inp"):
            with open(os.path.join(vocab_dir, name), encoding="utf-8") as f:
                for t in f.read().split("\n__ggml_vocab_test__\n"):
                    if t not in texts:
                        texts.append(t)
    for t in EXTRA:
        if t not in texts:
            texts.append(t)
    return texts


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    out_dir = argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    texts = corpus(os.path.join(here, "..", "tests", "data", "vocab"))
    os.makedirs(out_dir, exist_ok=True)
    for name, pattern in PATTERNS.items():
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)
        cases = [{"text": t, "words": [w for w, _ in split.pre_tokenize_str(t)]} for t in texts]
        for c in cases:
            assert "".join(c["words"]) == c["text"], c
        rec = {
            "format": "fish-pretokenize/1",
            "name": name,
            "regex": pattern,
            "generator": {"script": "scripts/pre_tokenize_reference.py", "tokenizers": tokenizers.__version__},
            "cases": cases,
        }
        with open(os.path.join(out_dir, f"{name}.json"), "w", encoding="utf-8") as f:
            json.dump(rec, f, ensure_ascii=False, indent=0)
            f.write("\n")
        print(f"{name}: {len(cases)} texts", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
