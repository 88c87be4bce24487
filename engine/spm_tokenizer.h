// SentencePiece-style BPE by score (tokenizer.ggml.model "llama": Llama 1/2, Gemma 3).
//
// llama.cpp's SPM algorithm, not SentencePiece's own: spaces become U+2581 '▁' (and one is put
// in front when the vocabulary says add_space_prefix; Gemma 3 does not), the text is split into
// UTF-8 characters, and the adjacent pair whose concatenation is a token with the highest score
// is merged first (ties: the leftmost), until no pair forms a token. A final symbol that is not a
// token is written as byte tokens <0xXX> (byte fallback), or as the one-character token when the
// vocabulary has no <0xXX>, or as <unk>. Malformed UTF-8 is kept byte for byte, except that a
// lead byte right before a space takes in the first bytes of that space's '▁' (llama.cpp too).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/tokenizer.h"

namespace fish {

class SpmTokenizer {
 public:
  explicit SpmTokenizer(std::shared_ptr<const Vocab> vocab, int32_t unknown_id);

  // Appends the tokens of one fragment of plain text. prefix_space: put a space in front first
  // (the caller decides: add_space_prefix and the fragment starts the text or follows a special
  // token).
  void encode(std::string_view text, bool prefix_space, std::vector<int32_t>& out) const;

  // The token for a raw byte (see the header comment), or -1 when there is none.
  int32_t byte_token(uint8_t b) const { return byte_token_[b]; }

 private:
  std::shared_ptr<const Vocab> vocab_;
  int32_t byte_token_[256];
};

}  // namespace fish
