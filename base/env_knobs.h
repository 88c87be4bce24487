// Every FISH_* environment variable FISH reads, in one table (name, what a bad value breaks, the
// values it takes, one line of doc), and the one parser every reader goes through.
//
// A value outside the table is an error naming the variable and its allowed values, never a
// silent default: "FISH_GPU_SPAN='maybe': expected one of 0, off, false, no, 1, on, true, yes".
// Words match case-insensitively; an empty value counts as unset. Commands call
// check_env_knobs() before they start (fish generate, fish requant, ...); fish run turns its
// errors into error rows of the paths a knob affects (EnvScope), and the sweep goes on.
// Adding a knob is one row in env_knobs.cpp plus its reader.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace fish {

// What a bad value of the knob breaks.
enum class EnvScope {
  all,      // every compute path (threads, ISA, host memory, fault injection)
  gpu,      // the GPU path only (FISH_GPU*, FISH_VK_*, FISH_VRAM_BUDGET_MB)
  harness,  // paths and labels the harness reads as text (never rejected)
};

struct EnvKnob {
  std::string_view name;
  EnvScope scope;
  std::vector<std::string_view> words;  // allowed words, lower case (empty: none)
  int64_t min = 0, max = -1;            // allowed integers, inclusive (min > max: none)
  std::string_view doc;                 // one line, for docs/reliability.md and messages
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

// A Markdown table of the knobs: variable, allowed values, what a bad value breaks, doc.
std::string env_knobs_help();

}  // namespace fish
