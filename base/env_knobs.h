// Every FISH_* environment variable FISH reads, in one table (name, what a bad value breaks, what
// a set value changes, the values it takes, the file that reads it, one line of doc), and the one
// parser every reader goes through. The table is walked by the parser and check_env_knobs, by the
// results context (env_knobs_json: every knob that is set is recorded), by the collision checks
// of report/compare/gate/merge (knob_affects_measurement: rows measured under different behaviour
// knobs are never merged silently), by `fish env` and docs/measurement.md (env_knobs_markdown),
// and by a test that greps the sources so a new "FISH_..." name cannot go unrecorded.
//
// A value outside the table is an error naming the variable and its allowed values, never a
// silent default: "FISH_GPU_SPAN='maybe': expected one of 0, off, false, no, 1, on, true, yes".
// Words match case-insensitively; an empty value counts as unset. Commands call
// check_env_knobs() before they start (fish generate, fish requant, ...); fish run turns its
// errors into error rows of the paths a knob affects (EnvScope), and the sweep goes on.
// Adding a knob is one row in env_knobs.cpp plus its reader.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace fish {

// What a bad value of the knob breaks.
enum class EnvScope {
  all,      // every compute path (threads, ISA, host memory, fault injection)
  gpu,      // the GPU path only (FISH_GPU*, FISH_VK_*, FISH_VRAM_BUDGET_MB)
  harness,  // paths and labels the harness reads as text (never rejected)
};

// What a set value changes: whether two rows measured under different values may be compared.
enum class KnobEffect {
  results,          // what is computed or how fast (ISA, threads, GPU kernels, placement, faults)
  instrumentation,  // validation layers, profiling, logging: may slow a run, not change its output
  location,         // where inputs are found or which cells run (recorded, never compared)
};

struct EnvKnob {
  std::string_view name;
  EnvScope scope;
  KnobEffect effect;
  std::vector<std::string_view> words;  // allowed words, lower case (empty: none)
  int64_t min = 0, max = -1;            // allowed integers, inclusive (min > max: none)
  std::string_view read_by;             // the source file that reads it
  std::string_view doc;                 // one line, for docs/measurement.md and messages
  // Extra validation for a value with its own grammar (FISH_FAULT); null: words / range only.
  Status (*check)(std::string_view value) = nullptr;
  bool free_text() const { return words.empty() && min > max && check == nullptr; }
};

// The table, sorted by name.
std::span<const EnvKnob> env_knobs();
const EnvKnob* find_env_knob(std::string_view name);  // nullptr when not a FISH knob

// The raw value of a variable; nullopt when unset or empty.
std::optional<std::string> env_value(std::string_view name);

// Checks one value against its knob's row (words, range, own grammar). Errors:
//   "FISH_THREADS='abc': expected an integer 1 to 4096".
Status check_env_value(const EnvKnob& knob, std::string_view value);

// A knob's value as one of its words (lower-cased) or, for knobs that take integers, the digits
// as given; nullopt when unset. Errors: a value outside the row. Precondition: `name` is a row.
Result<std::optional<std::string>> env_word(std::string_view name);
// An integer knob's value; nullopt when unset or set to one of the row's words (e.g. "auto").
Result<std::optional<int64_t>> env_int(std::string_view name);
// A switch (words 0/off/false/no and 1/on/true/yes); `fallback` when unset.
Result<bool> env_switch(std::string_view name, bool fallback);
// Whether a switch value turns something off ("0", "off", "false", "no", any case).
bool is_off_word(std::string_view value);

// Every knob that is set, of scope `all` (and `gpu` when with_gpu), checked against its row; all
// problems in one message, one per line. Success when every set knob is valid.
Status check_env_knobs(bool with_gpu);

// True when a knob's value belongs to what a measurement depends on (results or
// instrumentation); an unknown name counts, as it may be a knob of another version.
bool knob_affects_measurement(std::string_view name);

// "results" | "instrumentation" | "location".
const char* knob_effect_name(KnobEffect e);

// {"FISH_X": "value", ...} for every knob of the table that `getenv` reports set (empty values
// included: set-but-empty can differ from unset). {} when none is set.
nlohmann::json env_knobs_json(const std::function<const char*(const char*)>& getenv);

// The table as Markdown (| variable | allowed | a bad value breaks | effect | read by | meaning |):
// what `fish env` prints and the generated section of docs/measurement.md (a test keeps the two
// in step).
std::string env_knobs_markdown();

}  // namespace fish
