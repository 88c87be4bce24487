// `fish inspect`: what a GGUF file holds — architecture and hyper-parameters, tokenizer, tensor
// table, totals per type and bits per weight — as text for people or JSON for machines.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "engine/gguf.h"

namespace fish {

// JSON schema (stable; tests/python/test_inspect.py checks it against the gguf package):
// { "file", "version", "alignment", "data_offset", "architecture", "tokenizer": {model, pre,
//   vocab_size}, "metadata": {key: value | {"type": elem type, "count": n, "head": [...]}},
//   "tensors": [{name, type, dims, n_elems, n_bytes, offset, file_offset}],
//   "totals": {type: {n_tensors, n_elems, n_bytes}}, "n_elems", "n_bytes", "bits_per_weight" }
// Arrays longer than `max_array_items` are summarised by type, count and their first items.
nlohmann::ordered_json inspect_json(const GgufFile& file, size_t max_array_items = 16);
std::string inspect_text(const GgufFile& file);
// Serialises JSON, replacing invalid UTF-8 (GGUF strings are arbitrary bytes) instead of throwing.
std::string json_text(const nlohmann::ordered_json& j, int indent = -1);

}  // namespace fish
