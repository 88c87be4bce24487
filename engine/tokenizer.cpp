#include "engine/tokenizer.h"

#include <algorithm>
#include <array>
#include <cassert>

#include "engine/bpe_tokenizer.h"
#include "engine/gguf.h"
#include "engine/spm_tokenizer.h"

namespace fish {
namespace {

uint8_t attr_from_type(int32_t type) {
  switch (TokenType(type)) {
    case TokenType::normal:
      return kTokNormal;
    case TokenType::unknown:
      return kTokUnknown;
    case TokenType::control:
      return kTokControl;
    case TokenType::user_defined:
      return kTokUserDefined;
    case TokenType::unused:
      return kTokUnused;
    case TokenType::byte:
      return kTokByte;
    case TokenType::undefined:
      break;
  }
  return 0;
}

constexpr uint8_t kSpecialAttrs = kTokControl | kTokUnknown | kTokUserDefined;

// Token texts that end generation (llama.cpp's list, minus models FISH does not run). Not
// "</s>": Gemma 3 has it as an ordinary user-defined token (HTML strike-through end tag), and
// where "</s>" really is EOS (Llama) the eos id names it anyway.
constexpr std::array<std::string_view, 11> kEogTexts = {
    "<|eot_id|>",        "<|im_end|>", "<|end|>", "<end_of_turn>",   "<|endoftext|>",
    "<|eom_id|>",        "<EOT>",      "_<EOT>",  "<|end_of_text|>", "<eos>",
    "<end_of_utterance>"};

// Reads an optional key into `out` with the typed getter; absent keys leave it empty.
template <typename T, typename Getter>
Status read_optional(const GgufFile& f, std::string_view key, std::optional<T>& out, Getter get) {
  if (f.find(key) == nullptr) return Status::success();
  auto r = (f.*get)(key);
  if (!r.ok()) return r.take_error();
  out = T(std::move(r).value());
  return Status::success();
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  VocabSpec spec;
  FISH_ASSIGN_OR_RETURN(spec.model, f.get_string("tokenizer.ggml.model"));
  if (f.find("tokenizer.ggml.pre") != nullptr) {
    FISH_ASSIGN_OR_RETURN(spec.pre, f.get_string("tokenizer.ggml.pre"));
  }
  FISH_ASSIGN_OR_RETURN(spec.tokens, f.get_string_array("tokenizer.ggml.tokens"));
  if (f.find("tokenizer.ggml.scores") != nullptr) {
    FISH_ASSIGN_OR_RETURN(spec.scores, f.get_f32_array("tokenizer.ggml.scores"));
  }
  if (f.find("tokenizer.ggml.token_type") != nullptr) {
    FISH_ASSIGN_OR_RETURN(auto types, f.get_int_array("tokenizer.ggml.token_type"));
    spec.token_types.assign(types.begin(), types.end());
  }
  if (spec.model == "gpt2") {
    FISH_ASSIGN_OR_RETURN(spec.merges, f.get_string_array("tokenizer.ggml.merges"));
  }
  const std::pair<std::string_view, std::optional<int64_t>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &spec.bos_id},
      {"tokenizer.ggml.eos_token_id", &spec.eos_id},
      {"tokenizer.ggml.unknown_token_id", &spec.unknown_id},
      {"tokenizer.ggml.padding_token_id", &spec.padding_id},
      {"tokenizer.ggml.eot_token_id", &spec.eot_id},
      {"tokenizer.ggml.eom_token_id", &spec.eom_id},
  };
  for (const auto& [key, dst] : ids) FISH_TRY(read_optional(f, key, *dst, &GgufFile::get_int));
  FISH_TRY(read_optional(f, "tokenizer.ggml.add_bos_token", spec.add_bos, &GgufFile::get_bool));
  FISH_TRY(read_optional(f, "tokenizer.ggml.add_eos_token", spec.add_eos, &GgufFile::get_bool));
  FISH_TRY(read_optional(f, "tokenizer.ggml.add_space_prefix", spec.add_space_prefix,
                         &GgufFile::get_bool));
  return from_spec(std::move(spec), f.path());
}

Result<Tokenizer> Tokenizer::from_spec(VocabSpec spec, std::string_view source) {
  Tokenizer t;
  if (spec.model == "gpt2") {
    t.kind_ = Kind::bpe;
  } else if (spec.model == "llama") {
    t.kind_ = Kind::spm;
  } else {
    return make_error(
        "tokenizer: {}: tokenizer.ggml.model: expected \"gpt2\" or \"llama\", found '{}'", source,
        spec.model);
  }
  const size_t n = spec.tokens.size();
  if (n == 0 || n > size_t(INT32_MAX)) {
    return make_error("tokenizer: {}: tokenizer.ggml.tokens: expected 1..2^31-1 tokens, found {}",
                      source, n);
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return make_error(
        "tokenizer: {}: tokenizer.ggml.scores: expected {} entries (one per token), found {}",
        source, n, spec.scores.size());
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return make_error(
        "tokenizer: {}: tokenizer.ggml.token_type: expected {} entries (one per token), found {}",
        source, n, spec.token_types.size());
  }

  auto vocab = std::make_shared<Vocab>();
  vocab->text_ = std::move(spec.tokens);
  vocab->score_ = spec.scores.empty() ? std::vector<float>(n, 0.0f) : std::move(spec.scores);
  vocab->attr_.resize(n, kTokNormal);
  size_t n_slots = 16;
  while (n_slots < 2 * n) n_slots *= 2;
  vocab->slots_.assign(n_slots, -1);
  vocab->slot_mask_ = n_slots - 1;
  for (size_t i = 0; i < n; ++i) {
    if (!spec.token_types.empty()) vocab->attr_[i] = attr_from_type(spec.token_types[i]);
    // llama.cpp names empty tokens so that they can neither match text nor collide.
    if (vocab->text_[i].empty()) vocab->text_[i] = "[EMPTY_" + std::to_string(i) + "]";
    const std::string& s = vocab->text_[i];
    size_t h = Vocab::StringHash()(s) & vocab->slot_mask_;
    for (; vocab->slots_[h] >= 0; h = (h + 1) & vocab->slot_mask_) {
      if (vocab->text_[size_t(vocab->slots_[h])] == s) {
        return make_error(
            "tokenizer: {}: tokenizer.ggml.tokens: duplicate token '{}' at ids {} and {}", source,
            s, vocab->slots_[h], i);
      }
    }
    vocab->slots_[h] = int32_t(i);
  }

  // Special ids: the keys, else llama.cpp's defaults (SPM: <unk>=0, <s>=1, </s>=2).
  const bool spm = t.kind_ == Kind::spm;
  struct IdKey {
    const char* key;
    const std::optional<int64_t>& value;
    int32_t fallback;
    int32_t* dst;
  };
  int32_t eot = -1, eom = -1;
  const IdKey id_keys[] = {
      {"tokenizer.ggml.bos_token_id", spec.bos_id, spm ? 1 : -1, &t.bos_},
      {"tokenizer.ggml.eos_token_id", spec.eos_id, spm ? 2 : -1, &t.eos_},
      {"tokenizer.ggml.unknown_token_id", spec.unknown_id, spm ? 0 : -1, &t.unk_},
      {"tokenizer.ggml.padding_token_id", spec.padding_id, -1, &t.pad_},
      {"tokenizer.ggml.eot_token_id", spec.eot_id, -1, &eot},
      {"tokenizer.ggml.eom_token_id", spec.eom_id, -1, &eom},
  };
  for (const IdKey& k : id_keys) {
    if (k.value.has_value()) {
      if (*k.value < 0 || *k.value >= int64_t(n)) {
        return make_error("tokenizer: {}: {}: expected a token id below {}, found {}", source,
                          k.key, n, *k.value);
      }
      *k.dst = int32_t(*k.value);
    } else {
      *k.dst = k.fallback < int32_t(n) ? k.fallback : -1;
    }
  }
  t.add_bos_ = spec.add_bos.value_or(spm);
  t.add_eos_ = spec.add_eos.value_or(false);
  t.add_space_prefix_ = spm && spec.add_space_prefix.value_or(true);
  if (t.add_bos_ && t.bos_ < 0) {
    return make_error(
        "tokenizer: {}: tokenizer.ggml.add_bos_token is true but there is no bos_token_id", source);
  }
  if (t.add_eos_ && t.eos_ < 0) {
    return make_error(
        "tokenizer: {}: tokenizer.ggml.add_eos_token is true but there is no eos_token_id", source);
  }

  // End-of-generation tokens; like llama.cpp, make them control tokens if the converter did not.
  for (std::string_view s : kEogTexts) {
    if (int32_t id = vocab->find(s); id >= 0) {
      t.eog_.push_back(id);
      vocab->attr_[size_t(id)] |= kTokControl;
    }
  }
  for (int32_t id : {t.eos_, eot, eom}) {
    if (id >= 0) t.eog_.push_back(id);
  }
  std::sort(t.eog_.begin(), t.eog_.end());
  t.eog_.erase(std::unique(t.eog_.begin(), t.eog_.end()), t.eog_.end());

  // Special-token matcher, longest text first (ties by id) as llama.cpp's partition tries them.
  std::vector<int32_t> specials;
  for (size_t i = 0; i < n; ++i) {
    if (vocab->attr_[i] & kSpecialAttrs) specials.push_back(int32_t(i));
  }
  std::sort(specials.begin(), specials.end(), [&](int32_t a, int32_t b) {
    const size_t la = vocab->text_[size_t(a)].size(), lb = vocab->text_[size_t(b)].size();
    return la != lb ? la > lb : a < b;
  });
  t.special_rank_.assign(n, -1);
  t.trie_token_.assign(1, -1);
  for (size_t r = 0; r < specials.size(); ++r) {
    const int32_t id = specials[r];
    t.special_rank_[size_t(id)] = int32_t(r);
    int32_t node = 0;
    for (char ch : vocab->text_[size_t(id)]) {
      const uint64_t key = (uint64_t(node) << 8) | uint8_t(ch);
      auto [it, inserted] = t.trie_edges_.emplace(key, int32_t(t.trie_token_.size()));
      if (inserted) t.trie_token_.push_back(-1);
      node = it->second;
    }
    t.trie_token_[size_t(node)] = id;
  }

  t.vocab_ = vocab;
  if (spm) {
    t.spm_ = std::make_shared<SpmTokenizer>(vocab, t.unk_);
  } else {
    auto pre = pre_tokenizer_from_name(spec.pre);
    if (!pre.ok()) {
      return make_error("tokenizer: {}: tokenizer.ggml.pre: {}", source, pre.error().message);
    }
    FISH_ASSIGN_OR_RETURN(t.bpe_, BpeTokenizer::build(vocab, spec.merges, *pre, source));
  }

  t.piece_offset_.resize(n + 1);
  t.pieces_.reserve(n * 8);
  for (size_t i = 0; i < n; ++i) {
    t.piece_offset_[i] = uint32_t(t.pieces_.size());
    t.render(int32_t(i), t.pieces_);
  }
  t.piece_offset_[n] = uint32_t(t.pieces_.size());
  return t;
}

void Tokenizer::render(int32_t id, std::string& out) const {
  const std::string& text = vocab_->text(id);
  const uint8_t attr = vocab_->attr(id);
  if (attr & kSpecialAttrs) {
    out += text;
    return;
  }
  if (attr & kTokByte) {
    // "<0xXX>"; anything else is kept as written.
    const auto hex = [](char c) {
      return c >= '0' && c <= '9'   ? c - '0'
             : c >= 'A' && c <= 'F' ? c - 'A' + 10
             : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                    : -1;
    };
    if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>' && hex(text[3]) >= 0 &&
        hex(text[4]) >= 0) {
      out.push_back(char(hex(text[3]) * 16 + hex(text[4])));
    } else {
      out += text;
    }
    return;
  }
  if (!(attr & kTokNormal)) return;  // unused / undefined: nothing (llama.cpp)
  if (kind_ == Kind::bpe) {
    out += BpeTokenizer::decode_token_text(text);
    return;
  }
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
      out.push_back(' ');
      i += 3;
    } else {
      out.push_back(text[i++]);
    }
  }
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(eog_.begin(), eog_.end(), id);
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_->size() && (vocab_->attr(id) & kSpecialAttrs);
}

std::vector<Tokenizer::Fragment> Tokenizer::split_special(std::string_view text,
                                                          bool parse_special) const {
  // llama.cpp takes the special tokens one at a time, longest first, and cuts every occurrence
  // out of the text that is still unclaimed (leftmost first, no overlaps). Equivalently: find
  // all occurrences with the trie, order them by (token rank, position), and accept each one
  // whose bytes are all unclaimed.
  struct Match {
    int32_t rank;
    uint32_t pos, len;
    int32_t token;
  };
  std::vector<Match> matches;
  const uint8_t skip = parse_special ? 0 : (kTokControl | kTokUnknown);
  for (size_t pos = 0; pos < text.size(); ++pos) {
    int32_t node = 0;
    for (size_t k = pos; k < text.size(); ++k) {
      auto it = trie_edges_.find((uint64_t(node) << 8) | uint8_t(text[k]));
      if (it == trie_edges_.end()) break;
      node = it->second;
      const int32_t tok = trie_token_[size_t(node)];
      if (tok >= 0 && !(vocab_->attr(tok) & skip)) {
        matches.push_back({special_rank_[size_t(tok)], uint32_t(pos), uint32_t(k + 1 - pos), tok});
      }
    }
  }
  std::vector<Fragment> frags;
  if (matches.empty()) {
    if (!text.empty()) frags.push_back({0, text.size(), -1});
    return frags;
  }
  std::sort(matches.begin(), matches.end(), [](const Match& a, const Match& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
  });
  std::vector<uint8_t> claimed(text.size(), 0);
  std::vector<Match> accepted;
  for (const Match& m : matches) {
    if (std::any_of(claimed.begin() + m.pos, claimed.begin() + m.pos + m.len,
                    [](uint8_t c) { return c != 0; })) {
      continue;
    }
    std::fill(claimed.begin() + m.pos, claimed.begin() + m.pos + m.len, 1);
    accepted.push_back(m);
  }
  std::sort(accepted.begin(), accepted.end(),
            [](const Match& a, const Match& b) { return a.pos < b.pos; });
  size_t at = 0;
  for (const Match& m : accepted) {
    if (m.pos > at) frags.push_back({at, m.pos, -1});
    frags.push_back({m.pos, size_t(m.pos) + m.len, m.token});
    at = size_t(m.pos) + m.len;
  }
  if (at < text.size()) frags.push_back({at, text.size(), -1});
  return frags;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && add_bos_) out.push_back(bos_);
  bool after_special = true;  // SPM: the text start counts as "after a special token"
  for (const Fragment& f : split_special(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    const std::string_view piece = text.substr(f.begin, f.end - f.begin);
    if (spm_) {
      spm_->encode(piece, add_space_prefix_ && after_special, out);
    } else {
      bpe_->encode(piece, out);
    }
    after_special = false;
  }
  if (add_special && add_eos_) out.push_back(eos_);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  bool strip_space = add_space_prefix_;  // the encoder's prefix space, SPM only
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_->size()) continue;
    const std::string_view piece = token_to_piece(id);
    if (vocab_->attr(id) & kSpecialAttrs) {
      if (render_special || (vocab_->attr(id) & kTokUserDefined)) out += piece;
      strip_space = add_space_prefix_;
      continue;
    }
    if (strip_space && !piece.empty() && piece[0] == ' ') {
      out.append(piece.substr(1));
    } else {
      out += piece;
    }
    if (!piece.empty()) strip_space = false;
  }
  return out;
}

}  // namespace fish
