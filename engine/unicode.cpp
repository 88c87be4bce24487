#include "engine/unicode.h"

#include <array>
#include <cassert>
#include <memory>

namespace fish {
namespace {

struct CodePointRange {
  uint32_t first;
  uint8_t flags;
};

constexpr CodePointRange kRanges[] = {
#include "engine/unicode_tables.inc"
};
static_assert(kRanges[0].first == 0);
static_assert(kRanges[std::size(kRanges) - 1].first == kMaxCodePoint + 1);

// One byte per code point (1.1 MB), expanded from the range table on first use: the
// pre-splitters look up every code point of the input, and a flat table is a single load.
const uint8_t* flag_table() {
  static const std::unique_ptr<uint8_t[]> table = [] {
    auto t = std::make_unique<uint8_t[]>(kMaxCodePoint + 1);
    for (size_t i = 0; i + 1 < std::size(kRanges); ++i) {
      for (uint32_t cp = kRanges[i].first; cp < kRanges[i + 1].first; ++cp) {
        t[cp] = kRanges[i].flags;
      }
    }
    return t;
  }();
  return table.get();
}

}  // namespace

uint8_t code_point_flags(uint32_t cp) {
  return cp <= kMaxCodePoint ? flag_table()[cp] : 0;
}

size_t utf8_sequence_length(uint8_t lead) {
  static constexpr std::array<uint8_t, 16> kLength = {1, 1, 1, 1, 1, 1, 1, 1,
                                                      1, 1, 1, 1, 2, 2, 3, 4};
  return kLength[lead >> 4];
}

uint32_t decode_utf8(std::string_view text, size_t* offset) {
  const size_t i = *offset;
  assert(i < text.size());
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const auto continuation = [&](size_t k) {
    return i + k < text.size() && (byte(k) & 0xC0) == 0x80;
  };
  const uint8_t b0 = byte(0);
  uint32_t cp = kReplacementCodePoint;
  size_t n = 1;
  if (b0 < 0x80) {
    cp = b0;
  } else if ((b0 & 0xE0) == 0xC0 && continuation(1)) {
    cp = (uint32_t(b0 & 0x1F) << 6) | (byte(1) & 0x3F);
    n = 2;
  } else if ((b0 & 0xF0) == 0xE0 && continuation(1) && continuation(2)) {
    cp = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    n = 3;
  } else if ((b0 & 0xF8) == 0xF0 && continuation(1) && continuation(2) && continuation(3)) {
    cp = (uint32_t(b0 & 0x07) << 18) | (uint32_t(byte(1) & 0x3F) << 12) |
         (uint32_t(byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
    n = 4;
    // F4 90.. to F7 BF..: syntactically 4 bytes but beyond Unicode; one replacement per byte.
    if (cp > kMaxCodePoint) {
      cp = kReplacementCodePoint;
      n = 1;
    }
  }
  *offset = i + n;
  return cp;
}

std::vector<uint32_t> utf8_to_code_points(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t i = 0; i < text.size();) cps.push_back(decode_utf8(text, &i));
  return cps;
}

void append_utf8(std::string& out, uint32_t cp) {
  assert(cp <= kMaxCodePoint);
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

std::string code_point_to_utf8(uint32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

}  // namespace fish
