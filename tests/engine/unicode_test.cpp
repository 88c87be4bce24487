#include "engine/unicode.h"

#include <gtest/gtest.h>

namespace fish {
namespace {

TEST(Unicode, DecodesOneToFourByteSequences) {
  EXPECT_EQ(utf8_to_code_points("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"),
            (std::vector<uint32_t>{'a', 0xE9, 0x20AC, 0x1F600}));
}

TEST(Unicode, ReplacesEachMalformedByteWithReplacementCharacter) {
  // Stray continuation, lead without continuation, truncated 3-byte, beyond U+10FFFF.
  EXPECT_EQ(utf8_to_code_points("\x80(\xC3(\xE2\x82"),
            (std::vector<uint32_t>{0xFFFD, '(', 0xFFFD, '(', 0xFFFD, 0xFFFD}));
  EXPECT_EQ(utf8_to_code_points("\xF5\x80\x80\x80"), (std::vector<uint32_t>(4, 0xFFFD)));
  EXPECT_EQ(utf8_to_code_points("\xFF"), (std::vector<uint32_t>{0xFFFD}));
}

TEST(Unicode, EncodesEveryCodePointBackToItself) {
  std::string s;
  for (uint32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
    s.clear();
    append_utf8(s, cp);
    size_t off = 0;
    ASSERT_EQ(decode_utf8(s, &off), cp);
    ASSERT_EQ(off, s.size());
    ASSERT_EQ(utf8_sequence_length(uint8_t(s[0])), s.size());
  }
}

TEST(Unicode, ClassifiesLettersNumbersPunctuationAndWhitespace) {
  for (uint32_t cp : {uint32_t('a'), uint32_t('Z'), 0xE9u, 0x42Fu, 0x4E2Du, 0x1780u}) {
    EXPECT_EQ(code_point_flags(cp), kCpLetter) << std::hex << cp;
  }
  // ASCII digit, Arabic-Indic three, superscript two, Roman numeral twelve.
  for (uint32_t cp : {uint32_t('7'), 0x663u, 0xB2u, 0x216Bu}) {
    EXPECT_EQ(code_point_flags(cp), kCpNumber) << std::hex << cp;
  }
  for (uint32_t cp : {uint32_t('!'), uint32_t(','), uint32_t('_'), 0x3001u, 0xBFu}) {
    EXPECT_EQ(code_point_flags(cp), kCpPunctuation) << std::hex << cp;
  }
  for (uint32_t cp :
       {uint32_t(' '), uint32_t('\t'), uint32_t('\n'), 0x85u, 0xA0u, 0x2009u, 0x3000u}) {
    EXPECT_EQ(code_point_flags(cp), kCpWhitespace) << std::hex << cp;
  }
  // Symbols, controls, the information separators U+001C..1F (not White_Space) and marks.
  for (uint32_t cp :
       {uint32_t('$'), uint32_t('+'), 0x1Cu, 0x1Fu, 0x0u, 0x301u, 0x1F600u, 0x110000u}) {
    EXPECT_EQ(code_point_flags(cp), 0) << std::hex << cp;
  }
}

}  // namespace
}  // namespace fish
