#include "base/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace fish {
namespace {

TEST(Sha256, MatchesFipsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, StreamingEqualsOneShotAtEverySplit) {
  std::string s;
  for (int i = 0; i < 300; ++i) s += char('a' + i % 26);
  const std::string whole = sha256_hex(s);
  for (size_t split = 0; split <= s.size(); split += 7) {
    Sha256 h;
    h.update(s.data(), split);
    h.update(s.data() + split, s.size() - split);
    EXPECT_EQ(h.finish_hex(), whole) << "split at " << split;
  }
}

TEST(Sha256, MissingFileIsAnErrorNamingThePath) {
  auto r = sha256_file_hex("/nonexistent/fish/model.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/nonexistent/fish/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace fish
