#!/usr/bin/env python3
"""Independent reference for FISH's quant/ formats, from the `gguf` package (gguf.quants).

Used by tests/quant/*_test.cpp; every file is raw little-endian bytes.

  quant_reference.py batch JOBS     run one job per line of JOBS (one Python start-up for many):
      dequant TYPE IN OUT           IN: packed blocks of TYPE -> OUT: float32 values
      quant TYPE IN OUT             IN: float32 values -> OUT: packed blocks (gguf's quantiser)
      tensors GGUF OUT              OUT: JSON {"key": cache key, "tensors": [...]}, one object
                                    per tensor of GGUF: name, type (GGML id), offset (absolute,
                                    bytes), n_bytes, n_elements, sha256 of the dequantised
                                    float32 values, first 8 values. OUT is reused when it was
                                    made from the same file (size, mtime), gguf and script.
      dump GGUF NAME OUT            OUT: float32 dequantised values of tensor NAME
      sizes OUT                     OUT: JSON {GGML id: [block elems, block bytes]} of gguf
  quant_reference.py can-quant TYPE   exit 0 when gguf has a quantiser for TYPE, else 1
TYPE is a lowercase GGML type name ("q4_k").
"""
import hashlib
import importlib.metadata
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize


def qtype(name: str) -> T:
    return T[name.upper()]


def dequant(type_name: str, src: str, dst: str) -> None:
    t = qtype(type_name)
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[t]
    raw = np.fromfile(src, dtype=np.uint8)
    assert raw.size % block_bytes == 0, f"{src}: {raw.size} bytes is not whole {type_name} blocks"
    # dequantize() wants rows of whole blocks; one row is enough.
    rows = raw.reshape(1, -1)
    values = dequantize(rows, t).astype(np.float32, copy=False)
    values.reshape(-1).tofile(dst)


def quant(type_name: str, src: str, dst: str) -> None:
    t = qtype(type_name)
    values = np.fromfile(src, dtype=np.float32).reshape(1, -1)
    packed = quantize(values, t)
    np.ascontiguousarray(packed).view(np.uint8).reshape(-1).tofile(dst)


def tensor_values(t) -> np.ndarray:
    return np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1)


def cache_key(path: str) -> dict:
    # The reference of a model depends on its bytes, the gguf package and this script only.
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "gguf": gguf_version(),
            "script_mtime_ns": os.stat(__file__).st_mtime_ns}


def gguf_version() -> str:
    try:
        return importlib.metadata.version("gguf")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def tensors(path: str, dst: str) -> None:
    # Dequantising a whole model takes Python tens of seconds: reuse DST when it was made from the
    # same file (size, mtime), package version and script.
    key = cache_key(path)
    try:
        with open(dst) as f:
            if json.load(f)["key"] == key:
                return
    except (OSError, ValueError, KeyError, TypeError):
        pass
    reader = gguf.GGUFReader(path)
    out = []
    for t in reader.tensors:
        values = tensor_values(t)
        out.append({
            "name": t.name,
            "type": int(t.tensor_type),
            "offset": int(t.data_offset),
            "n_bytes": int(t.n_bytes),
            "n_elements": int(t.n_elements),
            "sha256": hashlib.sha256(values.tobytes()).hexdigest(),
            "first": [float(v) for v in values[:8]],
        })
    tmp = dst + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"key": key, "tensors": out}, f)
    os.replace(tmp, dst)  # atomic: a concurrent test never reads half a file


def dump(path: str, name: str, dst: str) -> None:
    reader = gguf.GGUFReader(path)
    for t in reader.tensors:
        if t.name == name:
            tensor_values(t).tofile(dst)
            return
    raise SystemExit(f"{path}: no tensor {name}")


def sizes(dst: str) -> None:
    with open(dst, "w") as f:
        json.dump({str(int(t)): list(v) for t, v in gguf.GGML_QUANT_SIZES.items()}, f)


def can_quant(type_name: str) -> bool:
    t = qtype(type_name)
    block_elems, _ = gguf.GGML_QUANT_SIZES[t]
    try:
        quantize(np.zeros((1, block_elems), dtype=np.float32), t)
        return True
    except NotImplementedError:
        return False


JOBS = {"dequant": dequant, "quant": quant, "tensors": tensors, "dump": dump, "sizes": sizes}


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "can-quant":
        return 0 if can_quant(argv[2]) else 1
    if len(argv) == 3 and argv[1] == "batch":
        with open(argv[2]) as f:
            for line_no, line in enumerate(f, 1):
                words = line.split()
                if not words:
                    continue
                if words[0] not in JOBS:
                    raise SystemExit(f"{argv[2]}:{line_no}: unknown job {words[0]!r}")
                JOBS[words[0]](*words[1:])
        return 0
    if len(argv) >= 2 and argv[1] in JOBS:
        JOBS[argv[1]](*argv[2:])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
