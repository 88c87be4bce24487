// Quality metrics against a reference configuration; see quality.h.
#include "harness/quality.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <fstream>
#include <sstream>

#include "base/path_checks.h"
#include "engine/sampling.h"
#include "engine/session.h"
#include "harness/metrics.h"

namespace fish {
namespace {

Result<std::string> read_text(const std::string& path, const char* key) {
  auto text = read_regular_file(path, kMaxTextFileBytes, "a text file");
  if (!text.ok()) return make_error("quality.{}: {}", key, text.error().message);
  return text;
}

// Session for quality runs: the configuration's options, n_ctx enough for `need` positions,
// the gpu path's placement when given.
Result<std::unique_ptr<Session>> quality_session(
    std::shared_ptr<const Model> model, const Config& c, int64_t need,
    std::shared_ptr<const GpuPlacement> gpu = nullptr) {
  FISH_ASSIGN_OR_RETURN(SessionOptions opt, session_options(c));
  opt.n_ctx = need;
  opt.gpu = std::move(gpu);
  return Session::create(std::move(model), opt);
}

// The prompt goes in chunks of `chunk` tokens (QualitySpec::chunk), then one token per step.
Result<std::vector<int32_t>> greedy_continuation(Session& s, const std::vector<int32_t>& prompt,
                                                 int64_t n, int64_t chunk) {
  s.reset();
  Result<std::span<const float>> lg = make_error("greedy: empty prompt");
  for (size_t b = 0; b < prompt.size(); b += size_t(chunk)) {
    lg = s.append(
        std::span<const int32_t>(prompt).subspan(b, std::min(size_t(chunk), prompt.size() - b)));
    if (!lg.ok()) return lg.take_error();
  }
  if (!lg.ok()) return lg.take_error();
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(greedy_token(lg.value()));
    if (i + 1 == n) break;
    lg = s.append(std::span<const int32_t>(&out.back(), 1));
    if (!lg.ok()) return lg.take_error();
  }
  return out;
}

int64_t context_needed(const QualityReference& ref, const QualitySpec& q) {
  int64_t need = int64_t(ref.text_tokens.size());
  for (const auto& p : ref.prompts) need = std::max(need, int64_t(p.size()) + q.greedy_tokens);
  return std::max<int64_t>(need, 1);
}

}  // namespace

Result<QualityReference> build_quality_reference(std::shared_ptr<const Model> model,
                                                 const Tokenizer& tok, const QualitySpec& q) {
  QualityReference ref;
  const int64_t n_vocab = model->params().n_vocab;
  const bool scores_tokens = q.wants("top1") || q.wants("kl") || q.wants("ppl");
  std::vector<int32_t> greedy_prompt;  // source greedy: what the reference continues
  if (scores_tokens && q.source == "greedy") {
    FISH_ASSIGN_OR_RETURN(std::string text, read_text(q.prompt_file, "prompt_file"));
    std::istringstream lines(text);
    std::string line;
    while (greedy_prompt.empty() && std::getline(lines, line))
      if (!line.empty())
        greedy_prompt = tok.encode(line, /*add_special=*/true, /*parse_special=*/false);
    if (greedy_prompt.empty())
      return make_error("quality.prompt_file: {}: no prompt for source greedy (one per line)",
                        q.prompt_file);
  } else if (scores_tokens) {
    FISH_ASSIGN_OR_RETURN(std::string text, read_text(q.text, "text"));
    std::vector<int32_t> t = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
    if (int64_t(t.size()) < q.n_tokens)
      return make_error("quality.text: {}: {} tokens, n_tokens asks for {}", q.text, t.size(),
                        q.n_tokens);
    t.resize(size_t(q.n_tokens));
    ref.text_tokens = std::move(t);
  }
  if (q.wants("greedy_exact")) {
    FISH_ASSIGN_OR_RETURN(std::string text, read_text(q.prompt_file, "prompt_file"));
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      ref.prompts.push_back(tok.encode(line, /*add_special=*/true, /*parse_special=*/false));
    }
    if (ref.prompts.empty())
      return make_error("quality.prompt_file: {}: no prompts (one per line)", q.prompt_file);
  }
  const int64_t need = std::max(context_needed(ref, q), int64_t(greedy_prompt.size()) + q.n_tokens);
  FISH_ASSIGN_OR_RETURN(auto sess, quality_session(model, q.reference, need));
  if (!greedy_prompt.empty()) {
    FISH_ASSIGN_OR_RETURN(auto gen, greedy_continuation(*sess, greedy_prompt, q.n_tokens, q.chunk));
    ref.first_scored = int64_t(greedy_prompt.size()) - 1;
    ref.text_tokens = std::move(greedy_prompt);
    ref.text_tokens.insert(ref.text_tokens.end(), gen.begin(), gen.end());
  }
  if (!ref.text_tokens.empty()) {
    const size_t first = size_t(ref.first_scored);
    const size_t n_pos = ref.text_tokens.size() - 1 - first;
    ref.logprobs.resize(n_pos * size_t(n_vocab));
    ref.top1.resize(n_pos);
    Status st = sess->teacher_force(
        ref.text_tokens,
        [&](int64_t t, std::span<const float> lg) {
          if (size_t(t) < first || size_t(t) - first >= n_pos) return;
          const size_t i = size_t(t) - first;
          ref.top1[i] = log_softmax(lg, ref.logprobs.data() + i * size_t(n_vocab));
        },
        q.chunk);
    FISH_TRY(st);
  }
  for (const auto& p : ref.prompts) {
    FISH_ASSIGN_OR_RETURN(auto g, greedy_continuation(*sess, p, q.greedy_tokens, q.chunk));
    ref.greedy.push_back(std::move(g));
  }
  return ref;
}

Result<QualityMetrics> measure_quality(std::shared_ptr<const Model> model, const Config& config,
                                       const QualityReference& ref, const QualitySpec& q,
                                       std::shared_ptr<const GpuPlacement> gpu) {
  QualityMetrics m;
  const size_t n_vocab = size_t(model->params().n_vocab);
  FISH_ASSIGN_OR_RETURN(auto sess,
                        quality_session(model, config, context_needed(ref, q), std::move(gpu)));
  if (!ref.text_tokens.empty()) {
    const size_t first = size_t(ref.first_scored);
    const size_t n_pos = ref.text_tokens.size() - 1 - first;
    std::vector<float> lp(n_vocab);
    std::vector<double> kl(n_pos);
    int64_t same = 0;
    double nll = 0;
    Status st = sess->teacher_force(
        ref.text_tokens,
        [&](int64_t t, std::span<const float> lg) {
          if (size_t(t) < first || size_t(t) - first >= n_pos) return;
          const size_t k = size_t(t) - first;
          const int32_t top = log_softmax(lg, lp.data());
          same += top == ref.top1[k];
          nll -= lp[size_t(ref.text_tokens[size_t(t) + 1])];
          const float* r = ref.logprobs.data() + k * n_vocab;
          double d = 0;
          for (size_t i = 0; i < n_vocab; ++i) d += std::exp(double(r[i])) * double(r[i] - lp[i]);
          kl[k] = std::max(d, 0.0);  // rounding can leave a tiny negative
        },
        q.chunk);
    FISH_TRY(st);
    if (q.wants("top1")) m.top1 = double(same) / double(n_pos);
    if (q.wants("ppl")) m.ppl = std::exp(nll / double(n_pos));
    if (q.wants("kl")) {
      double sum = 0;
      for (double d : kl) sum += d;
      std::vector<double> sorted = kl;
      std::sort(sorted.begin(), sorted.end());
      const size_t rank = size_t(std::ceil(0.99 * double(n_pos)));  // nearest rank, 1-based
      m.kl_mean = sum / double(n_pos);
      m.kl_p99 = sorted[std::max<size_t>(rank, 1) - 1];
      m.kl_max = sorted.back();
    }
  }
  if (q.wants("greedy_exact")) {
    int64_t n = 0;
    for (size_t i = 0; i < ref.prompts.size(); ++i) {
      FISH_ASSIGN_OR_RETURN(auto g,
                            greedy_continuation(*sess, ref.prompts[i], q.greedy_tokens, q.chunk));
      n += g == ref.greedy[i];
    }
    m.greedy_n = n;
    m.greedy_of = int64_t(ref.prompts.size());
  }
  m.gpu_fallbacks = sess->gpu_fallbacks();
  return m;
}

namespace {

// The value of one quality metric of the table (harness/metrics.h) in `m`; null when not measured.
nlohmann::json quality_value(const QualityMetrics& m, std::string_view name) {
  auto num = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  if (name == "top1") return num(m.top1);
  if (name == "kl_mean") return num(m.kl_mean);
  if (name == "kl_p99") return num(m.kl_p99);
  if (name == "kl_max") return num(m.kl_max);
  if (name == "ppl") return num(m.ppl);
  if (name == "greedy_exact")
    return m.greedy_n ? nlohmann::json{{"n", *m.greedy_n}, {"of", *m.greedy_of}} : nlohmann::json();
  assert(false && "a quality metric of metric_fields() that QualityMetrics does not measure");
  return nullptr;
}

}  // namespace

void quality_metrics_json(const QualityMetrics& m, nlohmann::json& metrics) {
  for (const MetricField& f : metric_fields())
    if (f.source == MetricSource::quality) metrics[std::string(f.name)] = quality_value(m, f.name);
}

}  // namespace fish
