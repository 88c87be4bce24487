// What a results row's numbers depend on beyond its cell id: the binary that measured it, the
// machine it ran on and the behaviour knobs in effect. Two rows of one cell (same experiment,
// cell_id and path) with equal provenance are a re-measurement, the later one current; with
// different provenance they are different measurements, and report shows them side by side while
// compare, gate and merge refuse to pick one (results_reader.h latest_rows, compare.h, merge.h).
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace fish {

// A context line's provenance as (field, value text), e.g. {"commit": "0123456789ab", "build":
// "Release -O3 FISH_VULKAN", "compiler": ..., "cpu": "... (2 CPUs)", "gpu": ...,
// "FISH_ISA": "avx2"}:
//   commit      12 hex digits, "-dirty.DIGEST" (8 hex of the diff's sha256) for a dirty build
//   build       build_type and build_flags;  compiler
//   cpu         model and CPU count;  gpu  device, driver, Vulkan version ("none")
//   FISH_*      every knob of "env" that affects measurement (base/env_knobs.h)
// A context written before knobs were recorded (no "env") has "knobs": "unrecorded (FILE)"
// instead, so rows of two such files are never taken for the same measurement.
// `file` is the results file the context was read from.
std::map<std::string, std::string> provenance_fields(const nlohmann::json& context,
                                                     const std::string& file);

// Canonical text of provenance_fields: equal keys, equal provenance.
std::string provenance_key(const std::map<std::string, std::string>& fields);

// What differs between two provenances, e.g. "FISH_VK_ATTN_SPLIT 0 vs unset, commit
// 0123456789ab vs 89abcdef0123"; empty when they are equal.
std::string provenance_difference(const std::map<std::string, std::string>& a,
                                  const std::map<std::string, std::string>& b);

}  // namespace fish
