// Greedy speculative decoding; see speculative.h and docs/speculative.md.
#include "engine/speculative.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "engine/tokenizer.h"

namespace fish {

Result<std::vector<int32_t>> ModelDrafter::draft(std::span<const int32_t> ctx, int64_t n) {
  std::vector<int32_t> out;
  if (ctx.empty() || n < 1) return out;
  // Keep the KV of the longest shared prefix, but feed at least ctx's last token: its logits
  // give the first draft token.
  size_t keep = 0;
  while (keep < fed_.size() && keep < ctx.size() && fed_[keep] == ctx[keep]) ++keep;
  keep = std::min(keep, ctx.size() - 1);
  // A sliding-window ring may no longer hold the rows a long rollback needs (a new repetition
  // after a long generation): start over from an empty cache then.
  if (!s_.kv_truncate(int64_t(keep)).ok()) {
    s_.reset();
    keep = 0;
  }
  fed_.resize(keep);
  if (int64_t(ctx.size()) + n - 1 > s_.n_ctx()) n = s_.n_ctx() - int64_t(ctx.size()) + 1;
  if (n < 1) return out;  // the draft session's context is full: no draft
  FISH_ASSIGN_OR_RETURN(int32_t tok, s_.forward_greedy(ctx.subspan(keep), int64_t(keep)));
  fed_.assign(ctx.begin(), ctx.end());
  out.push_back(tok);
  while (int64_t(out.size()) < n) {
    FISH_ASSIGN_OR_RETURN(tok, s_.append_greedy(std::span<const int32_t>(&out.back(), 1)));
    fed_.push_back(out.back());
    out.push_back(tok);
  }
  return out;
}

std::string ModelDrafter::describe() const {
  return fmt::format("draft model {}", s_.model().gguf().path());
}

Result<std::vector<int32_t>> LookupDrafter::draft(std::span<const int32_t> ctx, int64_t n) {
  std::vector<int32_t> out;
  const int64_t len = int64_t(ctx.size());
  for (int64_t g = std::min<int64_t>(max_, len - 1); g >= min_ && out.empty(); --g) {
    const std::span<const int32_t> tail = ctx.subspan(size_t(len - g));
    // Latest start s < len - g whose g tokens equal the tail (s + g <= len - 1: a follower).
    for (int64_t s = len - g - 1; s >= 0; --s) {
      if (!std::equal(tail.begin(), tail.end(), ctx.begin() + s)) continue;
      const int64_t from = s + g, to = std::min(len, from + n);
      out.assign(ctx.begin() + from, ctx.begin() + to);
      break;
    }
  }
  return out;
}

std::string LookupDrafter::describe() const {
  return fmt::format("lookup n-gram {}..{}", min_, max_);
}

Status check_draft_vocab(const Model& target, const Model& draft) {
  const std::string& tp = target.gguf().path();
  const std::string& dp = draft.gguf().path();
  if (target.params().n_vocab != draft.params().n_vocab)
    return make_error(
        "speculative: draft {} has {} tokens, target {} has {} (hint: a draft model of the same "
        "family and tokenizer, or --lookup)",
        dp, draft.params().n_vocab, tp, target.params().n_vocab);
  FISH_ASSIGN_OR_RETURN(const Tokenizer tt, Tokenizer::from_gguf(target.gguf()));
  FISH_ASSIGN_OR_RETURN(const Tokenizer td, Tokenizer::from_gguf(draft.gguf()));
  if (tt.vocab().size() != td.vocab().size())
    return make_error("speculative: draft {} has a {}-token tokenizer, target {} a {}-token one",
                      dp, td.vocab().size(), tp, tt.vocab().size());
  for (int32_t id = 0; id < tt.vocab().size(); ++id) {
    if (tt.vocab().text(id) == td.vocab().text(id)) continue;
    return make_error(
        "speculative: token {} is \"{}\" in the draft {} but \"{}\" in the target {} (hint: a "
        "draft model with the target's tokenizer, or --lookup)",
        id, td.vocab().text(id), dp, tt.vocab().text(id), tp);
  }
  return Status::success();
}

Result<DraftSetup> make_drafter(std::string_view mode, const std::string& draft_model,
                                const Model& target, int64_t n_ctx, int n_threads) {
  DraftSetup d;
  if (mode == "off") return d;
  if (mode == "lookup") {
    d.drafter = std::make_unique<LookupDrafter>();
    return d;
  }
  if (mode != "draft")
    return make_error("speculative \"{}\" is not allowed (allowed: off, draft, lookup)", mode);
  if (draft_model.empty())
    return make_error("speculative draft: no draft model (hint: --draft MODEL or draft_model)");
  FISH_ASSIGN_OR_RETURN(d.model, Model::load(draft_model));
  FISH_TRY(check_draft_vocab(target, *d.model));
  SessionOptions opt;
  opt.n_ctx = n_ctx;
  opt.n_threads = n_threads;
  FISH_ASSIGN_OR_RETURN(d.session, Session::create(d.model, opt));
  d.drafter = std::make_unique<ModelDrafter>(*d.session);
  return d;
}

Result<SpeculativeStats> speculative_decode(Session& target, Drafter& drafter,
                                            std::span<const int32_t> ctx, int32_t first,
                                            int64_t n_predict, int64_t draft_n,
                                            const TokenSink& sink) {
  if (draft_n < 1) return make_error("speculative: draft_n {} must be >= 1", draft_n);
  if (target.n_past() != int64_t(ctx.size()))
    return make_error("speculative: the target holds {} positions, the context is {} tokens",
                      target.n_past(), ctx.size());
  SpeculativeStats st;
  const auto t0 = std::chrono::steady_clock::now();
  // seq: the prompt and every emitted token; the target's KV holds all but the last.
  std::vector<int32_t> seq(ctx.begin(), ctx.end());
  seq.push_back(first);
  bool go = n_predict > 0 && sink(first);
  st.generated = n_predict > 0 ? 1 : 0;
  std::vector<int32_t> batch;
  // Drafts a verify may hold so that its rows run the kernels of a one-token step (the GPU's
  // decode matvec, the int4 paths' decode kernels): the output then equals plain greedy's.
  const int64_t exact_drafts = target.decode_exact_tokens() - 1;
  while (go && st.generated < n_predict) {
    const int64_t k = std::min({draft_n, exact_drafts, n_predict - st.generated - 1});
    std::vector<int32_t> draft;
    if (k > 0) {
      FISH_ASSIGN_OR_RETURN(draft, drafter.draft(seq, k));
      if (int64_t(draft.size()) > k) draft.resize(size_t(k));
    }
    batch.assign(1, seq.back());
    batch.insert(batch.end(), draft.begin(), draft.end());
    const int64_t pos = int64_t(seq.size()) - 1;
    FISH_ASSIGN_OR_RETURN(const std::span<const int32_t> ids,
                          target.forward_greedy_rows(batch, pos));
    ++st.verifies;
    st.drafted += int64_t(draft.size());
    // ids[i] is the target's token after batch[0..i]; draft[i] stands iff it equals it.
    size_t a = 0;
    while (a < draft.size() && draft[a] == ids[a]) ++a;
    const int32_t next = ids[a];
    FISH_TRY(target.kv_truncate(pos + 1 + int64_t(a)));  // batch[0] and the kept drafts
    for (size_t i = 0; i <= a && go; ++i) {
      const int32_t tok = i < a ? draft[i] : next;
      seq.push_back(tok);
      ++st.generated;
      if (i < a) ++st.accepted;  // a kept draft the sink saw (it may stop before the rest)
      go = sink(tok);
    }
  }
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace fish
