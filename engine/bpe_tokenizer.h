// GPT-2 byte-level BPE (tokenizer.ggml.model "gpt2").
//
// Encoding one text fragment: decode UTF-8 (malformed bytes -> U+FFFD), split it into words with
// the pre-tokenizer the vocabulary names, map every byte of a word to its printable stand-in
// (GPT-2's bytes_to_unicode: '!'..'~', '¡'..'¬', '®'..'ÿ' map to themselves, the other 68 bytes
// to U+0100..U+0143 in order), then merge adjacent symbols, lowest merge rank first (ties: the
// leftmost pair), until no ranked pair is left. A final symbol that is not a token falls back to
// its single-character tokens (llama.cpp behaviour; GPT-2 vocabularies hold all 256 byte
// characters, so this does not occur with them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "engine/tokenizer.h"

namespace fish {

// Word splitting rules, named after tokenizer.ggml.pre (llama.cpp's LLAMA_VOCAB_PRE_TYPE_*).
//   gpt2:     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   smollm:   \p{N} (every digit alone), then gpt2 on the pieces (SmolLM, StarCoder, Refact, ...)
//   llama3:   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//             | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (Llama 3, DeepSeek-R1-Distill-
//             Llama, Falcon 3, ...; a word that is a token as a whole skips the merges)
//   qwen2:    as llama3 with \p{N} (every digit alone) and the merges always applied
//   default:  [\p{P}\$\+<=>\^~\|]+, then gpt2, then \p{N}+, then [0-9][0-9][0-9]
// Each rule splits every piece the previous rule left: matches and the gaps between them both
// become pieces.
enum class PreTokenizer { gpt2, smollm, llama3, qwen2, default_rules };

// Maps a tokenizer.ggml.pre value to its rules; an error for names not implemented here.
Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name);

// The words of `text` (UTF-8, malformed bytes replaced by U+FFFD) under `pre`, in order;
// concatenated they give the (repaired) text back.
std::vector<std::string> pre_tokenize(std::string_view text, PreTokenizer pre);

// GPT-2's byte <-> printable code point table.
uint32_t byte_to_code_point(uint8_t b);
int byte_from_code_point(uint32_t cp);  // -1 when cp stands for no byte

class BpeTokenizer {
 public:
  // merges[i] is "left right" with rank i; a repeated pair keeps its first rank. Errors: a merge
  // without a space separator (message names `source` and the merge index).
  static Result<std::shared_ptr<BpeTokenizer>> build(std::shared_ptr<const Vocab> vocab,
                                                     std::span<const std::string> merges,
                                                     PreTokenizer pre, std::string_view source);

  // Appends the tokens of one fragment of plain text (no special tokens in it).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  // The bytes a normal token's text stands for (inverse byte mapping). Code points outside the
  // table are kept as UTF-8 (llama.cpp writes "[UNK_BYTE_0x..]" there).
  static std::string decode_token_text(std::string_view token_text);

  PreTokenizer pre() const { return pre_; }
  size_t merge_count() const { return merge_rank_.size(); }

 private:
  BpeTokenizer() = default;
  struct Scratch;  // buffers reused across the words of one encode() call
  void encode_word(std::string_view word, Scratch& scratch, std::vector<int32_t>& out) const;
  int32_t intern(std::string_view s);

  std::shared_ptr<const Vocab> vocab_;
  PreTokenizer pre_ = PreTokenizer::gpt2;
  // Symbols are named by "piece ids": the vocabulary's token ids, then ids >= vocab size for
  // merge operands that are not tokens themselves.
  std::unordered_map<std::string, int32_t, Vocab::StringHash, std::equal_to<>> extra_pieces_;
  int32_t next_piece_id_ = 0;
  int32_t byte_piece_[256];  // piece id of each byte's printable stand-in, -1 if none
  struct Merge {
    uint32_t rank;
    int32_t result;  // piece id of left+right
  };
  std::unordered_map<uint64_t, Merge> merge_rank_;  // key: left piece << 32 | right piece
};

}  // namespace fish
