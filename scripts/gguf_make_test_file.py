#!/usr/bin/env python3
"""Writes small GGUF files with the independent `gguf` package's GGUFWriter.

  gguf_make_test_file.py OUT [--variant NAME]   one file (default variant: full)
  gguf_make_test_file.py --all DIR              every variant, as DIR/<variant>.gguf

Used by tests/engine/gguf_writer_test.cpp (FISH reads what Python wrote) and to seed the fuzz
corpus tests/fuzz/corpus/gguf/ (each variant stays < 4 KB). Deterministic: fixed values and seeds.
"""
import argparse
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V
from gguf import GGUFWriter


def raw(rng, n_bytes):
    return rng.integers(0, 256, size=n_bytes, dtype=np.uint8)


def add_all_scalars(w):
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.15625)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "h\u00e9llo \u2713")
    w.add_uint64("test.u64", 18446744073709551615)
    w.add_int64("test.i64", -9223372036854775808)
    w.add_float64("test.f64", -1.0e300)


def add_arrays(w):
    w.add_array("test.str_array", ["a", "", "\u00fcnic\u00f6de", "tok en"])
    w.add_key_value("test.i32_array", [1, -2, 3], V.ARRAY, sub_type=V.INT32)
    w.add_key_value("test.f32_array", [0.5, -1.25, 3.0], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("test.u8_array", [0, 255, 7], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("test.bool_array", [True, False], V.ARRAY, sub_type=V.BOOL)


def add_nested(w):
    # Arrays of arrays: inner arrays may differ in length and element type.
    w.add_key_value("test.nested", [[1, 2, 3], [4]], V.ARRAY, sub_type=V.ARRAY)
    w.add_key_value("test.nested_str", [["x", "yz"], ["w"]], V.ARRAY, sub_type=V.ARRAY)
    w.add_key_value("test.nested3", [[[1.5], [2.5, 3.5]]], V.ARRAY, sub_type=V.ARRAY)


def add_tensors(w, rng):
    w.add_tensor("t.f32", rng.standard_normal((3, 5)).astype(np.float32))
    w.add_tensor("t.f16", rng.standard_normal((2, 7)).astype(np.float16))
    w.add_tensor("t.i32", np.arange(6, dtype=np.int32))
    # Quantised tensors are raw bytes; raw_shape is the byte shape in numpy order (outermost
    # first), so (2, 18) is 2 rows of one 32-value q4_0 block each.
    w.add_tensor("t.q4_0", raw(rng, 2 * 18), raw_shape=(2, 18), raw_dtype=Q.Q4_0)
    w.add_tensor("t.q8_0", raw(rng, 34), raw_shape=(1, 34), raw_dtype=Q.Q8_0)
    w.add_tensor("t.q4_k", raw(rng, 144), raw_shape=(1, 144), raw_dtype=Q.Q4_K)


VARIANTS = ["full", "kv_only", "strings", "nested", "tensors", "align64", "v2", "empty_tensor"]


def write(path, variant):
    rng = np.random.default_rng(1234)
    w = GGUFWriter(path, arch="test")
    if variant == "full":
        add_all_scalars(w)
        add_arrays(w)
        add_nested(w)
        add_tensors(w, rng)
    elif variant == "kv_only":
        add_all_scalars(w)
    elif variant == "strings":
        w.add_array("tokenizer.ggml.tokens", ["<s>", "</s>", "hello", " world", "\u2581x"])
        w.add_key_value("tokenizer.ggml.scores", [0.0, -1.0, -2.5, -3.0, -4.0], V.ARRAY,
                        sub_type=V.FLOAT32)
    elif variant == "nested":
        add_nested(w)
    elif variant == "tensors":
        add_tensors(w, rng)
    elif variant == "align64":
        w.add_custom_alignment(64)
        add_tensors(w, rng)
    elif variant == "v2":
        add_arrays(w)
        w.add_tensor("t.f32", np.ones((4,), dtype=np.float32))
    elif variant == "empty_tensor":
        w.add_tensor("t.empty", np.zeros((0, 4), dtype=np.float32))
        w.add_tensor("t.one", np.ones((1,), dtype=np.float32))
    else:
        raise SystemExit(f"unknown variant {variant}; known: {', '.join(VARIANTS)}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if variant == "v2":  # same layout as v3; only the version field differs
        with open(path, "r+b") as f:
            f.seek(4)
            f.write((2).to_bytes(4, "little"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--variant", default="full")
    ap.add_argument("--all", metavar="DIR")
    a = ap.parse_args()
    if a.all:
        os.makedirs(a.all, exist_ok=True)
        for v in VARIANTS:
            write(os.path.join(a.all, f"{v}.gguf"), v)
    elif a.out:
        write(a.out, a.variant)
    else:
        ap.error("give OUT or --all DIR")


if __name__ == "__main__":
    sys.exit(main())
