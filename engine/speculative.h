// Greedy speculative decoding (docs/speculative.md): a drafter proposes n tokens, the target
// Session verifies them in one forward of n + 1 tokens (Session::forward_greedy_rows: every row's
// argmax; on a GPU span with the output head only the ids come back), the longest prefix
// that matches the target's argmax is kept, and the target's own next token follows it. The
// emitted tokens are the target's greedy tokens, as plain greedy decoding emits them; a draft
// only changes how many positions one target forward covers.
//
// Drafters: another model of the same vocabulary (ModelDrafter, its own Session), or
// prompt-lookup (LookupDrafter: the tokens that followed the latest earlier occurrence of the
// context's last n-gram; no model).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/model.h"
#include "engine/session.h"

namespace fish {

// Proposes tokens to follow a context.
class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to n (>= 1) tokens that may follow `ctx` (the whole sequence so far, prompt first; its
  // last token is the one the target verifies first). Fewer (none) when it has no guess.
  virtual Result<std::vector<int32_t>> draft(std::span<const int32_t> ctx, int64_t n) = 0;
  virtual std::string describe() const = 0;  // "draft model X" / "lookup n-gram 1..3"
};

// Greedy continuation by a draft model's Session. The session's KV is kept across calls: each
// draft rolls it back (kv_truncate) to the longest prefix it shares with ctx and feeds the rest
// as one batch. Precondition: the session outlives the drafter; check_draft_vocab passed.
class ModelDrafter : public Drafter {
 public:
  explicit ModelDrafter(Session& s) : s_(s) {}
  Result<std::vector<int32_t>> draft(std::span<const int32_t> ctx, int64_t n) override;
  std::string describe() const override;

 private:
  Session& s_;
  std::vector<int32_t> fed_;  // the tokens at the session's positions [0, n_past())
};

// Prompt-lookup: for g = ngram_max down to ngram_min, the latest earlier occurrence of ctx's
// last g tokens; the draft is the tokens that followed it (up to n). No match: no draft.
class LookupDrafter : public Drafter {
 public:
  LookupDrafter(int ngram_min = 1, int ngram_max = 3) : min_(ngram_min), max_(ngram_max) {}
  Result<std::vector<int32_t>> draft(std::span<const int32_t> ctx, int64_t n) override;
  std::string describe() const override;

 private:
  int min_, max_;
};

// A drafter and what it owns.
struct DraftSetup {
  std::shared_ptr<const Model> model;  // mode draft: the draft model
  std::unique_ptr<Session> session;    // mode draft: its CPU session
  std::unique_ptr<Drafter> drafter;    // null for mode off
};
// The drafter of `mode` (Config::speculative: off | draft | lookup) for `target`: draft loads
// draft_model (default load options) and opens a CPU session of n_ctx positions and n_threads
// threads on it (the other modes ignore draft_model). Errors: an unknown mode; draft without a
// draft_model; the draft model's load, vocabulary (check_draft_vocab) or session errors.
Result<DraftSetup> make_drafter(std::string_view mode, const std::string& draft_model,
                                const Model& target, int64_t n_ctx, int n_threads);

// Errors when `draft` cannot draft for `target`: the vocabulary sizes differ, or a token's text
// differs (the first such id and both texts named; ids must mean the same pieces).
Status check_draft_vocab(const Model& target, const Model& draft);

struct SpeculativeStats {
  int64_t generated = 0;  // tokens handed to the sink (the first one included)
  int64_t verifies = 0;   // target forwards (each one of 1 + drafted tokens)
  int64_t drafted = 0;    // draft tokens verified
  int64_t accepted = 0;   // draft tokens that matched the target's argmax
  double seconds = 0;     // wall time of the decode loop (drafting and verifying)
  // Draft tokens kept per verify (0 when no verify ran); each verify also yields one token of
  // the target's own, so a verify advances 1 + accepted_per_verify() positions on average.
  double accepted_per_verify() const { return verifies > 0 ? double(accepted) / verifies : 0.0; }
  double acceptance() const { return drafted > 0 ? double(accepted) / drafted : 0.0; }
  // Tokens after the first (which the prefill produced) per second, as plain decode counts them.
  double tok_per_s() const { return seconds > 0 ? double(generated - 1) / seconds : 0.0; }
};

// Called with every emitted token in order; false stops generation (e.g. end of generation).
using TokenSink = std::function<bool(int32_t token)>;

// Decodes greedily after a prefill: `target` holds ctx[0, n) in its KV (n_past() == ctx.size())
// and `first` is its greedy token after ctx. Emits first, then up to n_predict - 1 more tokens,
// each verify drafting min(draft_n, target.decode_exact_tokens() - 1, tokens still to go - 1)
// tokens. The sink sees exactly the
// tokens plain greedy decoding (forward_greedy one token at a time) emits, as long as the
// target's argmax of a row does not depend on the batch it ran in (CPU: bitwise the same dot
// products; docs/speculative.md says where a GPU path may round differently).
// Errors: draft_n < 1; a forward error of either session (the position named).
Result<SpeculativeStats> speculative_decode(Session& target, Drafter& drafter,
                                            std::span<const int32_t> ctx, int32_t first,
                                            int64_t n_predict, int64_t draft_n,
                                            const TokenSink& sink);

}  // namespace fish
