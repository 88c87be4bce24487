// Tokenizer built from a GGUF vocabulary (tokenizer.ggml.*): GPT-2 byte-level BPE ("gpt2") or
// SentencePiece-style merging by score ("llama"), with special/control tokens matched in text.
//
// Behaviour follows llama.cpp's llama-vocab.cpp, which produced the test vectors in
// tests/data/vocab: encode(text, add_special=false, parse_special=false) reproduces its
// tokenize() token for token. Deliberate differences:
//   - decode() does not "clean up" spaces before punctuation (llama.cpp does for GPT-2 style
//     vocabularies), so decode(encode(x)) == x for valid UTF-8;
//   - with add_space_prefix (SPM), decode() removes the encoder's space after every special
//     token, not only at the start;
//   - "</s>" is not an end-of-generation text (Gemma 3 uses it as an HTML tag);
//   - a special-token id key outside the vocabulary is an error, not a warning; a gpt2
//     vocabulary without bos/eos keys has none (llama.cpp assumes id 11);
//   - pre-tokenizers other than the GPT-2 / SmolLM / default families are errors.
//
// Keys read (errors name the file, the key and expected vs found type):
//   tokenizer.ggml.model       string    "gpt2" | "llama"                     required
//   tokenizer.ggml.pre         string    "gpt-2", "smollm", "default", ...    gpt2; absent: default
//   tokenizer.ggml.tokens      [string]                                       required
//   tokenizer.ggml.scores      [f32]     merge priority (llama)               absent: 0
//   tokenizer.ggml.token_type  [i32]     TokenType                            absent: normal
//   tokenizer.ggml.merges      [string]  "left right", rank = index           gpt2: required
//   tokenizer.ggml.{bos,eos,unknown,padding,eot,eom}_token_id   any integer type
//   tokenizer.ggml.{add_bos_token,add_eos_token,add_space_prefix}   bool
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"

namespace fish {

class GgufFile;
class BpeTokenizer;
class SpmTokenizer;

// tokenizer.ggml.token_type values (llama.cpp's LLAMA_TOKEN_TYPE_*).
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

// Per-token attribute bits. A bit set rather than the type because the loader adds `control`
// to end-of-generation tokens the converter left `normal` (as llama.cpp does).
enum TokenAttr : uint8_t {
  kTokNormal = 1,
  kTokUnknown = 2,
  kTokControl = 4,
  kTokUserDefined = 8,
  kTokUnused = 16,
  kTokByte = 32,
};

// The vocabulary as a GGUF stores it, before lookup structures are built. Optional fields are
// the keys a file may leave out; from_spec() applies llama.cpp's defaults for them.
struct VocabSpec {
  std::string model;  // "gpt2" or "llama"
  std::string pre;    // pre-tokenizer name, gpt2 only; empty = "default"
  std::vector<std::string> tokens;
  std::vector<float> scores;         // empty, or one per token
  std::vector<int32_t> token_types;  // empty, or one TokenType per token
  std::vector<std::string> merges;   // "left right", rank = index (gpt2)
  std::optional<int64_t> bos_id, eos_id, unknown_id, padding_id, eot_id, eom_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// Token table shared by the algorithms: text, score and attributes per id, text -> id lookup.
class Vocab {
 public:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  int32_t size() const { return int32_t(text_.size()); }
  const std::string& text(int32_t id) const { return text_[size_t(id)]; }
  float score(int32_t id) const { return score_[size_t(id)]; }
  uint8_t attr(int32_t id) const { return attr_[size_t(id)]; }
  // Id of the token whose text is exactly `s`, or -1.
  int32_t find(std::string_view s) const {
    size_t h = StringHash()(s) & slot_mask_;
    while (slots_[h] >= 0 && text_[size_t(slots_[h])] != s) h = (h + 1) & slot_mask_;
    return slots_[h];
  }

 private:
  friend class Tokenizer;
  std::vector<std::string> text_;
  std::vector<float> score_;
  std::vector<uint8_t> attr_;
  // text -> id: open addressing with linear probing over token ids (-1 = empty), at most half
  // full. One flat array instead of a node per token keeps building a 262k vocabulary fast.
  std::vector<int32_t> slots_;
  size_t slot_mask_ = 0;
};

class Tokenizer {
 public:
  enum class Kind { bpe, spm };

  // Reads the tokenizer.ggml.* keys (see the header comment).
  static Result<Tokenizer> from_gguf(const GgufFile& file);
  // `source` names the origin in error messages (a path, or "test").
  static Result<Tokenizer> from_spec(VocabSpec spec, std::string_view source);

  // add_special: BOS in front / EOS at the end as the vocabulary says (add_bos / add_eos).
  // parse_special: control tokens written in the text (e.g. "<|im_start|>", "<start_of_turn>")
  // become their ids; without it only user-defined tokens are matched (as llama.cpp does) and
  // control-token text is tokenized as ordinary text.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Concatenated pieces. render_special=false drops control and unknown tokens (BOS, EOS,
  // <|im_start|>...) from the output. For SPM with add_space_prefix, the space the encoder put
  // in front of the text (and after each special token) is removed again.
  std::string decode(std::span<const int32_t> ids, bool render_special = true) const;
  // The bytes one token stands for (control tokens: their text). Precondition: valid id.
  std::string_view token_to_piece(int32_t id) const {
    return std::string_view(pieces_).substr(
        piece_offset_[size_t(id)], piece_offset_[size_t(id) + 1] - piece_offset_[size_t(id)]);
  }

  Kind kind() const { return kind_; }
  const Vocab& vocab() const { return *vocab_; }
  int32_t vocab_size() const { return vocab_->size(); }
  // Special ids; -1 when the vocabulary has none.
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t unknown() const { return unk_; }
  int32_t padding() const { return pad_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // End of generation: EOS, EOT/EOM and the chat end markers (<|im_end|>, <end_of_turn>, ...).
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  // Control, unknown or user-defined: matched as a whole in text, never merged.
  bool is_special(int32_t id) const;

 private:
  // One piece of input: raw text (token < 0) or a special token matched in it.
  struct Fragment {
    size_t begin, end;  // byte range in the input
    int32_t token;      // -1 for text
  };
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;
  void render(int32_t id, std::string& out) const;  // appends the piece of `id`

  Kind kind_ = Kind::bpe;
  std::shared_ptr<const Vocab> vocab_;
  std::shared_ptr<const BpeTokenizer> bpe_;
  std::shared_ptr<const SpmTokenizer> spm_;
  std::string pieces_;                  // every token's piece, concatenated
  std::vector<uint32_t> piece_offset_;  // token id -> start in pieces_; one more at the end
  int32_t bos_ = -1, eos_ = -1, unk_ = -1, pad_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
  std::vector<int32_t> eog_;  // sorted

  // Special-token matcher: a byte trie over the texts of special tokens. Node 0 is the root;
  // edges are keyed (node << 8 | byte). Tokens are tried in llama.cpp's order: longest first.
  std::unordered_map<uint64_t, int32_t> trie_edges_;
  std::vector<int32_t> trie_token_;    // per node: token ending here, or -1
  std::vector<int32_t> special_rank_;  // per token id: position in the longest-first order, or -1
};

}  // namespace fish
