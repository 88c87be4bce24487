#!/usr/bin/env python3
"""Every measured number a document states must be in a committed result.

A measured number is a figure with a measurement unit (tok/s, GB/s, TB/s, GFLOP/s, TFLOP/s, ms,
us, x or ×, %) in the prose of a Markdown file (code blocks and inline code are skipped: they
show commands, not results). Each must occur, as written or with its thousands separators
dropped, in some file under results/ (result rows, contexts, committed run logs) as a whole
number (not inside a longer one). It catches a number that is in no result, not one quoted from
the wrong result: a reader follows BENCHMARKS.md for which run said it. Prints every
number it cannot find with its line, and exits 1 when there is one.

    scripts/check_doc_numbers.py [FILE.md ...]     (default: README.md)
"""
import os
import re
import sys

UNITS = r"(?:tok/s|t/s|GB/s|TB/s|GFLOP/s|TFLOP/s|GOP/s|ms\b|us\b|µs\b|x\b|×|%)"
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s*" + UNITS)


def prose_lines(text):
    """(line number, text without inline code) of the lines outside fenced code blocks."""
    fenced = False
    for i, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield i, re.sub(r"`[^`]*`", "", line)


def measured_numbers(text):
    for i, line in prose_lines(text):
        for m in NUMBER.finditer(line):
            yield i, m.group(1) + (m.group(2) or ""), m.group(0)


def results_corpus(root):
    chunks = []
    for d, _, files in os.walk(os.path.join(root, "results")):
        for f in files:
            try:
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    chunks.append(fh.read())
            except OSError:
                pass
    return "\n".join(chunks)


def missing(doc_text, corpus):
    out = []
    for line, number, shown in measured_numbers(doc_text):
        plain = number.replace(",", "")
        if any(re.search(r"(?<![\d.])" + re.escape(n) + r"(?!\d)", corpus)
               for n in {number, plain}):
            continue
        out.append((line, shown))
    return out


def main(argv):
    root = os.environ.get("FISH_SOURCE_DIR") or os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    docs = argv[1:] or [os.path.join(root, "README.md")]
    corpus = results_corpus(root)
    bad = 0
    for doc in docs:
        with open(doc, encoding="utf-8") as fh:
            for line, shown in missing(fh.read(), corpus):
                print(f"{doc}:{line}: '{shown}' is in no file under results/")
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
