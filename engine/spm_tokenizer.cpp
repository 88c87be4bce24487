#include "engine/spm_tokenizer.h"

#include <algorithm>
#include <cassert>
#include <queue>
#include <string>

#include "engine/unicode.h"

namespace fish {
namespace {
constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space
}

SpmTokenizer::SpmTokenizer(std::shared_ptr<const Vocab> vocab, int32_t unknown_id)
    : vocab_(std::move(vocab)) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    int32_t id = vocab_->find(std::string_view(name, 6));
    if (id < 0) {
      const char ch = char(b);
      id = vocab_->find(std::string_view(&ch, 1));
    }
    byte_token_[b] = id >= 0 ? id : unknown_id;
  }
}

void SpmTokenizer::encode(std::string_view raw, bool prefix_space,
                          std::vector<int32_t>& out) const {
  std::string text;
  text.reserve(raw.size() + raw.size() / 2 + 3);
  if (prefix_space) text.append(kSpaceMark);
  for (char ch : raw) {
    if (ch == ' ') {
      text.append(kSpaceMark);
    } else {
      text.push_back(ch);
    }
  }

  // One symbol per UTF-8 character (by the lead byte's length, clipped at the end).
  struct Symbol {
    int32_t prev, next;
    uint32_t start, len;  // bytes of `text`; len 0 once merged into the left neighbour
  };
  struct Pair {
    float score;
    int32_t left, right;  // symbol indices
    uint32_t len;         // bytes of left+right when queued; stale if either changed since
    bool operator<(const Pair& o) const {  // priority_queue top = highest score, then leftmost
      return score < o.score || (score == o.score && left > o.left);
    }
  };
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(utf8_sequence_length(uint8_t(text[off])), text.size() - off);
    const int32_t i = int32_t(sym.size());
    off += len;
    sym.push_back({i - 1, off == text.size() ? -1 : i + 1, uint32_t(off - len), uint32_t(len)});
  }
  std::priority_queue<Pair> queue;
  const auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Symbol& a = sym[size_t(l)];
    const uint32_t len = a.len + sym[size_t(r)].len;
    const int32_t id = vocab_->find(std::string_view(text).substr(a.start, len));
    if (id >= 0) queue.push({vocab_->score(id), l, r, len});
  };
  for (int32_t i = 1; i < int32_t(sym.size()); ++i) try_pair(i - 1, i);
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& l = sym[size_t(p.left)];
    Symbol& r = sym[size_t(p.right)];
    // A symbol only grows by taking in its right neighbour, so an unchanged total length means
    // neither side changed since the pair was queued.
    if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;
    assert(l.next == p.right);
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = p.left;
    try_pair(l.prev, p.left);
    try_pair(p.left, l.next);
  }

  // Merged symbols are tokens by construction; a leftover single character that is not one
  // goes out byte by byte (llama.cpp's resegment() reaches the same result: its merge history
  // never holds a one-character string).
  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[size_t(i)].next) {
    const Symbol& s = sym[size_t(i)];
    const std::string_view piece = std::string_view(text).substr(s.start, s.len);
    if (int32_t id = vocab_->find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char ch : piece) {
      if (int32_t id = byte_token_[uint8_t(ch)]; id >= 0) out.push_back(id);
    }
  }
}

}  // namespace fish
