// Strictness nlohmann::json's parser does not have, checked on the text before it is parsed:
// a key that appears twice in one object (nlohmann keeps the last value silently, so
// {"n_ctx": 512, "n_ctx": 8} would run 8) and nesting deeper than kMaxJsonDepth (printing and
// copying a value recurse once per level; real experiment files nest 3 deep).
#pragma once

#include <string_view>

#include "base/result.h"

namespace fish {

inline constexpr int kMaxJsonDepth = 64;

// Success for well-formed JSON without duplicate keys or deep nesting, and for malformed JSON
// (the parser reports that itself). Errors name `label` and the JSON path:
//   "exp.json: defaults.n_ctx: duplicate key (JSON objects take each key once; ...)"
Status check_json_strict(std::string_view text, std::string_view label);

}  // namespace fish
