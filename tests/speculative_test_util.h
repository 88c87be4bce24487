// Helpers of the speculative decoding suites (tests/engine, tests/vulkan): plain greedy decoding
// as the independent reference, a speculative run collecting its tokens, and a drafter that is
// wrong at known places.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "engine/session.h"
#include "engine/speculative.h"

namespace fish::test {

// Plain greedy decoding: the prompt, then one token per forward; n tokens.
inline std::vector<int32_t> plain_greedy(Session& s, const std::vector<int32_t>& prompt,
                                         int64_t n) {
  std::vector<int32_t> out;
  auto t = s.forward_greedy(prompt, 0);
  EXPECT_TRUE(t.ok()) << t.error().message;
  if (!t.ok()) return out;
  out.push_back(t.value());
  while (int64_t(out.size()) < n) {
    t = s.append_greedy(std::span<const int32_t>(&out.back(), 1));
    EXPECT_TRUE(t.ok()) << t.error().message;
    if (!t.ok()) break;
    out.push_back(t.value());
  }
  return out;
}

struct SpecRun {
  std::vector<int32_t> tokens;
  SpeculativeStats stats;
};

// Prefills `prompt` on `s` (forward_greedy) and decodes n tokens speculatively.
inline SpecRun speculative(Session& s, Drafter& d, const std::vector<int32_t>& prompt, int64_t n,
                           int64_t draft_n) {
  SpecRun r;
  auto first = s.forward_greedy(prompt, 0);
  EXPECT_TRUE(first.ok()) << first.error().message;
  if (!first.ok()) return r;
  auto st = speculative_decode(s, d, prompt, first.value(), n, draft_n, [&](int32_t t) {
    r.tokens.push_back(t);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.error().message;
  if (st.ok()) r.stats = st.value();
  return r;
}

// Drafts the known continuation `full` (prompt + greedy tokens) with draft index c % (n + 1)
// wrong on call c: a rejection at every index of a draft in turn, and a whole draft kept every
// (n + 1)th call.
class CorruptingDrafter : public Drafter {
 public:
  CorruptingDrafter(std::vector<int32_t> full, int32_t n_vocab)
      : full_(std::move(full)), n_vocab_(n_vocab) {}
  Result<std::vector<int32_t>> draft(std::span<const int32_t> ctx, int64_t n) override {
    std::vector<int32_t> out;
    const int64_t bad = calls_++ % (n + 1);
    for (size_t p = ctx.size(); p < ctx.size() + size_t(n) && p < full_.size(); ++p)
      out.push_back(int64_t(out.size()) == bad ? (full_[p] + 1) % n_vocab_ : full_[p]);
    return out;
  }
  std::string describe() const override { return "corrupting"; }

 private:
  std::vector<int32_t> full_;
  int32_t n_vocab_;
  int64_t calls_ = 0;
};

}  // namespace fish::test
