#!/usr/bin/env python3
"""Dumps a GGUF file as JSON using the independent `gguf` package's GGUFReader.

Used by tests/engine/gguf_writer_test.cpp to cross-check FISH's reader and writer:
  $FISH_PYTHON scripts/gguf_dump.py FILE
prints {"version", "alignment", "data_offset", "kvs": [{"key", "type", "value"}],
"tensors": [{"name", "type", "dims", "offset", "n_bytes", "sha256"}]}.
Values keep their GGUF type: "type" is the FISH spelling (u8 ... f64, bool, string, array);
an array value is {"elem_type", "items"} and may nest. Tensor dims are in file order
(dims[0] innermost); offset is relative to the data section.
GGUFReader flattens nested arrays, so the value tree is rebuilt from the field's raw parts.
"""
import hashlib
import json
import sys

from gguf import GGUFReader, GGUFValueType

TYPE_NAMES = {
    GGUFValueType.UINT8: "u8", GGUFValueType.INT8: "i8", GGUFValueType.UINT16: "u16",
    GGUFValueType.INT16: "i16", GGUFValueType.UINT32: "u32", GGUFValueType.INT32: "i32",
    GGUFValueType.FLOAT32: "f32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "string",
    GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "u64", GGUFValueType.INT64: "i64",
    GGUFValueType.FLOAT64: "f64",
}


def rebuild(parts, i, vtype):
    """Returns (value, next part index) for a value of vtype whose parts start at parts[i]."""
    if vtype == GGUFValueType.STRING:
        return bytes(parts[i + 1]).decode("utf-8"), i + 2
    if vtype == GGUFValueType.ARRAY:
        elem = GGUFValueType(int(parts[i][0]))
        count = int(parts[i + 1][0])
        i += 2
        items = []
        for _ in range(count):
            v, i = rebuild(parts, i, elem)
            items.append(v)
        return {"elem_type": TYPE_NAMES[elem], "items": items}, i
    x = parts[i][0]
    if vtype == GGUFValueType.BOOL:
        return bool(x), i + 1
    if vtype in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
        return float(x), i + 1
    return int(x), i + 1


def main():
    r = GGUFReader(sys.argv[1])
    out = {"alignment": int(r.alignment), "data_offset": int(r.data_offset), "kvs": [],
           "tensors": []}
    for name, field in r.fields.items():
        if name.startswith("GGUF."):
            if name == "GGUF.version":
                out["version"] = int(field.parts[0][0])
            continue
        # parts: key length, key bytes, value type, then the value's parts.
        vtype = GGUFValueType(int(field.parts[2][0]))
        value, end = rebuild(field.parts, 3, vtype)
        assert end == len(field.parts), (name, end, len(field.parts))
        out["kvs"].append({"key": name, "type": TYPE_NAMES[vtype], "value": value})
    for t in r.tensors:
        raw = bytes(r.data[t.data_offset:t.data_offset + t.n_bytes])
        out["tensors"].append({
            "name": t.name, "type": int(t.tensor_type), "dims": [int(d) for d in t.shape],
            "offset": int(t.data_offset) - int(r.data_offset), "n_bytes": int(t.n_bytes),
            "sha256": hashlib.sha256(raw).hexdigest(),
        })
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
