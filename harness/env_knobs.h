// The FISH_* environment variables the binaries read: one table, walked by the results context
// (every knob that is set is recorded), by the collision checks of report/compare/gate/merge
// (rows of one cell measured under different behaviour knobs are never merged silently), and by
// a test that greps the sources so a new getenv("FISH_...") cannot go unrecorded.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace fish {

enum class KnobEffect {
  results,          // changes what is computed or how fast (ISA, threads, GPU kernels, placement)
  instrumentation,  // validation layers, profiling, logging: may slow a run, not change its output
  location,         // where inputs are found or which cells run (recorded, never compared)
};

struct EnvKnob {
  std::string_view name;
  KnobEffect effect;
  std::string_view read_by;  // the source file that reads it
  std::string_view doc;
};

// Every FISH_* variable a fish binary reads, sorted by name.
std::span<const EnvKnob> env_knobs();

// The knob named `name`; nullptr when the table has none.
const EnvKnob* find_env_knob(std::string_view name);

// True when a knob's value belongs to what a measurement depends on (results or
// instrumentation); an unknown name counts, as it may be a knob of another version.
bool knob_affects_measurement(std::string_view name);

// "results" | "instrumentation" | "location".
const char* knob_effect_name(KnobEffect e);

// The table as Markdown (| variable | effect | read by | meaning |), the generated section of
// docs/measurement.md (a test keeps the two in step).
std::string env_knobs_markdown();

// {"FISH_X": "value", ...} for every knob of the table that `getenv` reports set (empty values
// included: set-but-empty can differ from unset). {} when none is set.
nlohmann::json env_knobs_json(const std::function<const char*(const char*)>& getenv);

}  // namespace fish
