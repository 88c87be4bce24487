#include "engine/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <cassert>

#include "engine/unicode.h"

namespace fish {
namespace {

// ---- byte <-> printable code point (GPT-2 bytes_to_unicode) ----

struct ByteTables {
  std::array<uint32_t, 256> to_cp;
  std::array<int16_t, 0x144> from_cp;  // stand-ins are all below U+0144
};

const ByteTables& byte_tables() {
  static const ByteTables t = [] {
    ByteTables bt;
    bt.from_cp.fill(-1);
    const auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      bt.to_cp[size_t(b)] = printable(b) ? uint32_t(b) : next++;
      bt.from_cp[bt.to_cp[size_t(b)]] = int16_t(b);
    }
    assert(next == 0x144);
    return bt;
  }();
  return t;
}

// ---- pre-tokenizer rules ----
// Each rule maps the current pieces (lengths in code points, covering `cps` in order) to finer
// pieces. `Span` gives one piece's code points with out-of-piece reads as "absent", the way the
// regexes see a piece: (?!\S) at the end of a piece succeeds.

class Span {
 public:
  Span(const std::vector<uint32_t>& cps, size_t begin, size_t end)
      : cps_(cps), begin_(begin), end_(end) {}
  bool has(size_t i) const { return i >= begin_ && i < end_; }
  uint32_t cp(size_t i) const { return cps_[i]; }
  uint8_t flags(size_t i) const { return has(i) ? code_point_flags(cps_[i]) : 0; }
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }

 private:
  const std::vector<uint32_t>& cps_;
  size_t begin_, end_;
};

// Emits piece lengths as cut points advance through one input piece.
class Cutter {
 public:
  Cutter(std::vector<size_t>& out, size_t begin) : out_(out), last_(begin) {}
  void cut(size_t at) {
    assert(at >= last_);
    if (at > last_) out_.push_back(at - last_);
    last_ = at;
  }

 private:
  std::vector<size_t>& out_;
  size_t last_;
};

template <typename SplitPiece>
std::vector<size_t> apply_rule(const std::vector<uint32_t>& cps, const std::vector<size_t>& pieces,
                               SplitPiece split_piece) {
  std::vector<size_t> out;
  out.reserve(pieces.size() * 2);
  size_t begin = 0;
  for (size_t len : pieces) {
    Span s(cps, begin, begin + len);
    Cutter c(out, begin);
    split_piece(s, c);
    c.cut(begin + len);
    begin += len;
  }
  return out;
}

constexpr uint8_t kLNW = kCpLetter | kCpNumber | kCpWhitespace;

bool is_cr_or_lf(uint32_t cp) {
  return cp == '\r' || cp == '\n';
}

// End of the whitespace alternatives' match at pos: \s*[\r\n]+ (newline_runs: up to the run's last
// CR/LF), else \s+(?!\S) (a run followed by a word leaves its last whitespace to prefix it), else
// \s+. A code point no alternative matched is a piece alone.
size_t whitespace_end(const Span& s, size_t pos, bool newline_runs) {
  size_t n_ws = 0, last_nl = 0;
  while (s.flags(pos + n_ws) & kCpWhitespace) {
    if (newline_runs && is_cr_or_lf(s.cp(pos + n_ws))) last_nl = n_ws + 1;
    ++n_ws;
  }
  if (last_nl > 0) return pos + last_nl;
  if (n_ws > 1 && s.has(pos + n_ws)) return pos + n_ws - 1;
  if (n_ws > 0) return pos + n_ws;
  return pos + 1;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(const Span& s, Cutter& c) {
  size_t pos = s.begin();
  while (pos < s.end()) {
    const uint32_t cp = s.cp(pos);
    if (cp == '\'' && s.has(pos + 1)) {
      const uint32_t n1 = s.cp(pos + 1);
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        c.cut(pos += 2);
        continue;
      }
      if (s.has(pos + 2)) {
        const uint32_t n2 = s.cp(pos + 2);
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          c.cut(pos += 3);
          continue;
        }
      }
    }
    // An optional leading space joins a following letter / number / other-symbol run.
    const size_t q = cp == ' ' ? pos + 1 : pos;
    const uint8_t f = s.flags(q);
    if (f & kCpLetter) {
      pos = q;
      while (s.flags(pos) & kCpLetter) ++pos;
      c.cut(pos);
      continue;
    }
    if (f & kCpNumber) {
      pos = q;
      while (s.flags(pos) & kCpNumber) ++pos;
      c.cut(pos);
      continue;
    }
    if (s.has(q) && !(f & kLNW)) {
      pos = q;
      while (s.has(pos) && !(s.flags(pos) & kLNW)) ++pos;
      c.cut(pos);
      continue;
    }
    c.cut(pos = whitespace_end(s, pos, /*newline_runs=*/false));
  }
}

uint32_t ascii_lower(uint32_t cp) {
  return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp;
}

// Llama 3 (max_digits 3) and Qwen 2 (max_digits 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Alternatives are tried in order at each position (the first that matches wins, as in PCRE).
void split_llama3(const Span& s, Cutter& c, int max_digits) {
  size_t pos = s.begin();
  while (pos < s.end()) {
    const uint32_t cp = s.cp(pos);
    if (cp == '\'' && s.has(pos + 1)) {
      const uint32_t n1 = ascii_lower(s.cp(pos + 1));
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        c.cut(pos += 2);
        continue;
      }
      if (s.has(pos + 2)) {
        const uint32_t n2 = ascii_lower(s.cp(pos + 2));
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          c.cut(pos += 3);
          continue;
        }
      }
    }
    const uint8_t f = s.flags(pos);
    // [^\r\n\p{L}\p{N}]?\p{L}+ : any one other code point (space, tab, symbol) may lead.
    const bool leads = !(f & (kCpLetter | kCpNumber)) && !is_cr_or_lf(cp);
    if ((f & kCpLetter) || (leads && (s.flags(pos + 1) & kCpLetter))) {
      pos += (f & kCpLetter) ? 0 : 1;
      while (s.flags(pos) & kCpLetter) ++pos;
      c.cut(pos);
      continue;
    }
    if (f & kCpNumber) {
      for (int i = 0; i < max_digits && (s.flags(pos) & kCpNumber); ++i) ++pos;
      c.cut(pos);
      continue;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    const size_t q = cp == ' ' ? pos + 1 : pos;
    if (s.has(q) && !(s.flags(q) & kLNW)) {
      pos = q;
      while (s.has(pos) && !(s.flags(pos) & kLNW)) ++pos;
      while (s.has(pos) && is_cr_or_lf(s.cp(pos))) ++pos;
      c.cut(pos);
      continue;
    }
    c.cut(pos = whitespace_end(s, pos, /*newline_runs=*/true));
  }
}

// Matches of a one-code-point class, each run of `min_len`.. cut out: used for \p{N} (every
// digit alone), [class]+ runs and [0-9]{3}.
template <typename InClass>
void split_runs(const Span& s, Cutter& c, InClass in_class, bool single) {
  size_t pos = s.begin();
  while (pos < s.end()) {
    if (!in_class(s.cp(pos))) {
      ++pos;
      continue;
    }
    c.cut(pos);
    if (single) {
      ++pos;
    } else {
      while (pos < s.end() && in_class(s.cp(pos))) ++pos;
    }
    c.cut(pos);
  }
}

bool is_ascii_digit(uint32_t cp) {
  return cp >= '0' && cp <= '9';
}

// [\p{P}\$\+<=>\^~\|]: llama.cpp runs this regex on text where every non-ASCII code point is
// replaced by its category, so below 128 the class is exactly ASCII punctuation plus $+<=>^~|.
bool is_default_punct(uint32_t cp) {
  if (cp < 128) {
    return (code_point_flags(cp) & kCpPunctuation) || cp == '$' || cp == '+' || cp == '<' ||
           cp == '=' || cp == '>' || cp == '^' || cp == '~' || cp == '|';
  }
  return code_point_flags(cp) & kCpPunctuation;
}

// [0-9][0-9][0-9]: leftmost non-overlapping ASCII digit triples.
void split_digit_triples(const Span& s, Cutter& c) {
  size_t pos = s.begin();
  while (pos + 3 <= s.end()) {
    if (is_ascii_digit(s.cp(pos)) && is_ascii_digit(s.cp(pos + 1)) &&
        is_ascii_digit(s.cp(pos + 2))) {
      c.cut(pos);
      c.cut(pos += 3);
    } else {
      ++pos;
    }
  }
}

std::vector<size_t> split_words(const std::vector<uint32_t>& cps, PreTokenizer pre) {
  std::vector<size_t> pieces;
  if (cps.empty()) return pieces;
  pieces.push_back(cps.size());
  const auto digits_alone = [](const Span& s, Cutter& c) {
    split_runs(
        s, c, [](uint32_t cp) { return is_number(cp); }, /*single=*/true);
  };
  switch (pre) {
    case PreTokenizer::gpt2:
      return apply_rule(cps, pieces, split_gpt2);
    case PreTokenizer::smollm:
      pieces = apply_rule(cps, pieces, digits_alone);
      return apply_rule(cps, pieces, split_gpt2);
    case PreTokenizer::llama3:
      return apply_rule(cps, pieces, [](const Span& sp, Cutter& c) { split_llama3(sp, c, 3); });
    case PreTokenizer::qwen2:
      return apply_rule(cps, pieces, [](const Span& sp, Cutter& c) { split_llama3(sp, c, 1); });
    case PreTokenizer::default_rules:
      pieces = apply_rule(cps, pieces, [](const Span& s, Cutter& c) {
        split_runs(s, c, is_default_punct, /*single=*/false);
      });
      pieces = apply_rule(cps, pieces, split_gpt2);
      pieces = apply_rule(cps, pieces, [](const Span& s, Cutter& c) {
        split_runs(
            s, c, [](uint32_t cp) { return is_number(cp); }, /*single=*/false);
      });
      return apply_rule(cps, pieces, split_digit_triples);
  }
  return pieces;
}

// The repaired text as UTF-8 plus the byte offset of every code point (and one past the end).
struct Utf8Text {
  std::string bytes;
  std::vector<uint32_t> offset;
};

Utf8Text reencode(const std::vector<uint32_t>& cps) {
  Utf8Text t;
  t.bytes.reserve(cps.size() + 8);
  t.offset.reserve(cps.size() + 1);
  for (uint32_t cp : cps) {
    t.offset.push_back(uint32_t(t.bytes.size()));
    append_utf8(t.bytes, cp);
  }
  t.offset.push_back(uint32_t(t.bytes.size()));
  return t;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t b) {
  return byte_tables().to_cp[b];
}

int byte_from_code_point(uint32_t cp) {
  return cp < byte_tables().from_cp.size() ? byte_tables().from_cp[cp] : -1;
}

Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
  // Names llama.cpp maps to the same rules (llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_*).
  if (name == "gpt-2" || name == "phi-2" || name == "jina-es" || name == "jina-de" ||
      name == "gigachat" || name == "jina-v2-es" || name == "jina-v2-de" || name == "mpt" ||
      name == "olmo" || name == "jais" || name == "exaone4") {
    return PreTokenizer::gpt2;
  }
  if (name == "smollm" || name == "starcoder" || name == "refact" || name == "codeshell" ||
      name == "exaone" || name == "minerva-7b" || name == "command-r" || name == "mellum2") {
    return PreTokenizer::smollm;
  }
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe" || name == "falcon3" ||
      name == "falcon-h1" || name == "pixtral" || name == "midm-2.0" || name == "lfm2") {
    return PreTokenizer::llama3;
  }
  if (name == "qwen2" || name == "deepseek-r1-qwen" || name == "kormo" || name == "megrez") {
    return PreTokenizer::qwen2;
  }
  if (name.empty() || name == "default") return PreTokenizer::default_rules;
  return make_error(
      "pre-tokenizer '{}' is not implemented (known: gpt-2, smollm, llama-bpe, qwen2, default and "
      "their aliases)",
      name);
}

std::vector<std::string> pre_tokenize(std::string_view text, PreTokenizer pre) {
  const std::vector<uint32_t> cps = utf8_to_code_points(text);
  const Utf8Text t = reencode(cps);
  std::vector<std::string> words;
  size_t begin = 0;
  for (size_t len : split_words(cps, pre)) {
    words.emplace_back(t.bytes.substr(t.offset[begin], t.offset[begin + len] - t.offset[begin]));
    begin += len;
  }
  return words;
}

int32_t BpeTokenizer::intern(std::string_view s) {
  if (int32_t id = vocab_->find(s); id >= 0) return id;
  auto it = extra_pieces_.find(s);
  if (it != extra_pieces_.end()) return it->second;
  extra_pieces_.emplace(std::string(s), next_piece_id_);
  return next_piece_id_++;
}

Result<std::shared_ptr<BpeTokenizer>> BpeTokenizer::build(std::shared_ptr<const Vocab> vocab,
                                                          std::span<const std::string> merges,
                                                          PreTokenizer pre,
                                                          std::string_view source) {
  std::shared_ptr<BpeTokenizer> t(new BpeTokenizer());
  t->vocab_ = std::move(vocab);
  t->pre_ = pre;
  t->next_piece_id_ = t->vocab_->size();
  t->merge_rank_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos) {
      return make_error(
          "tokenizer: {}: tokenizer.ggml.merges[{}]: expected \"left right\", found '{}'", source,
          rank, m);
    }
    const std::string_view left = std::string_view(m).substr(0, space);
    const std::string_view right = std::string_view(m).substr(space + 1);
    const int32_t l = t->intern(left);
    const int32_t r = t->intern(right);
    joined.assign(left);
    joined.append(right);
    const int32_t result = t->intern(joined);
    const uint64_t key = (uint64_t(uint32_t(l)) << 32) | uint32_t(r);
    t->merge_rank_.emplace(key, Merge{uint32_t(rank), result});  // first rank wins
  }
  for (int b = 0; b < 256; ++b) {
    const std::string stand_in = code_point_to_utf8(byte_to_code_point(uint8_t(b)));
    int32_t id = t->vocab_->find(stand_in);
    if (id < 0) {
      auto it = t->extra_pieces_.find(stand_in);
      id = it == t->extra_pieces_.end() ? -1 : it->second;
    }
    t->byte_piece_[b] = id;
  }
  return t;
}

namespace {
// One symbol per byte of a word; merging grows a symbol and empties its right neighbour.
struct BpeSymbol {
  int32_t prev, next;
  uint32_t start, len;  // bytes of the word
  int32_t piece;        // piece id, -1 if the byte's stand-in is no piece
};
struct BpePair {
  uint32_t rank;
  int32_t left, right;                      // symbol indices
  int32_t left_piece, right_piece;          // pieces when queued; stale once either changed
  int32_t result;                           // piece of the merged symbol
  bool operator<(const BpePair& o) const {  // heap top = lowest rank, then leftmost
    return rank > o.rank || (rank == o.rank && left > o.left);
  }
};
}  // namespace

struct BpeTokenizer::Scratch {
  std::vector<BpeSymbol> sym;
  std::vector<BpePair> heap;
};

void BpeTokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
  const std::vector<uint32_t> cps = utf8_to_code_points(text);
  const Utf8Text t = reencode(cps);
  Scratch scratch;
  // Llama 3 vocabularies (llama.cpp's ignore_merges): a word that is a token as a whole is that
  // token, whatever the merges would build.
  const bool whole_words = pre_ == PreTokenizer::llama3;
  std::string mapped;
  size_t begin = 0;
  for (size_t len : split_words(cps, pre_)) {
    const uint32_t b0 = t.offset[begin], b1 = t.offset[begin + len];
    const std::string_view word = std::string_view(t.bytes).substr(b0, b1 - b0);
    begin += len;
    if (whole_words) {
      mapped.clear();
      for (char ch : word) append_utf8(mapped, byte_to_code_point(uint8_t(ch)));
      const int32_t id = vocab_->find(mapped);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    encode_word(word, scratch, out);
  }
}

void BpeTokenizer::encode_word(std::string_view word, Scratch& scratch,
                               std::vector<int32_t>& out) const {
  const int32_t n = int32_t(word.size());
  std::vector<BpeSymbol>& sym = scratch.sym;
  std::vector<BpePair>& heap = scratch.heap;
  sym.resize(size_t(n));
  heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    sym[size_t(i)] = {i - 1, i + 1 < n ? i + 1 : -1, uint32_t(i), 1,
                      byte_piece_[uint8_t(word[size_t(i)])]};
  }
  const auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const int32_t pl = sym[size_t(l)].piece, pr = sym[size_t(r)].piece;
    if (pl < 0 || pr < 0) return;
    auto it = merge_rank_.find((uint64_t(uint32_t(pl)) << 32) | uint32_t(pr));
    if (it == merge_rank_.end()) return;
    heap.push_back({it->second.rank, l, r, pl, pr, it->second.result});
    std::push_heap(heap.begin(), heap.end());
  };
  for (int32_t i = 1; i < n; ++i) try_pair(i - 1, i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const BpePair p = heap.back();
    heap.pop_back();
    BpeSymbol& l = sym[size_t(p.left)];
    BpeSymbol& r = sym[size_t(p.right)];
    if (l.len == 0 || r.len == 0 || l.piece != p.left_piece || r.piece != p.right_piece) continue;
    assert(l.next == p.right);
    l.piece = p.result;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = p.left;
    try_pair(l.prev, p.left);
    try_pair(p.left, l.next);
  }
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = sym[size_t(i)].next) {
    const BpeSymbol& s = sym[size_t(i)];
    if (s.piece >= 0 && s.piece < vocab_->size()) {
      out.push_back(s.piece);
      continue;
    }
    // Not a token: each byte of its byte-mapped text that is a one-byte token (llama.cpp).
    std::string mapped;
    for (uint32_t k = s.start; k < s.start + s.len; ++k) {
      append_utf8(mapped, byte_to_code_point(uint8_t(word[k])));
    }
    for (char ch : mapped) {
      if (int32_t id = vocab_->find(std::string_view(&ch, 1)); id >= 0) out.push_back(id);
    }
  }
}

std::string BpeTokenizer::decode_token_text(std::string_view token_text) {
  std::string out;
  out.reserve(token_text.size());
  for (size_t i = 0; i < token_text.size();) {
    const size_t start = i;
    const uint32_t cp = decode_utf8(token_text, &i);
    const int b = byte_from_code_point(cp);
    if (b >= 0) {
      out.push_back(char(b));
    } else {
      out.append(token_text.substr(start, i - start));
    }
  }
  return out;
}

}  // namespace fish
