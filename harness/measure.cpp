// The measurement protocol; see measure.h.
#include "harness/measure.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "base/path_checks.h"
#include "engine/sampling.h"
#include "harness/stats.h"
#include "kernels/stream_bandwidth.h"

namespace fish {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

int64_t workload_ctx_need(const Workload& w, int64_t depth) {
  return depth < 0 ? w.n_prompt + w.n_gen : depth + std::max(w.n_prompt, w.n_gen);
}

Result<RepSample> run_repetition(Session& s, std::span<const int32_t> prompt, int64_t n_gen,
                                 int64_t depth, const SpecDecode* spec) {
  const int64_t n_prompt = int64_t(prompt.size());
  const int64_t need = depth < 0 ? n_prompt + n_gen : depth + std::max(n_prompt, n_gen);
  if (need > s.n_ctx())
    return make_error("{} = {} exceed n_ctx {} (hint: raise n_ctx)",
                      depth < 0 ? "n_prompt + n_gen" : "depth + max(n_prompt, n_gen)", need,
                      s.n_ctx());
  // depth >= 0: the cache is first filled with `depth` positions (the prompt tokens, repeated),
  // untimed; the timed phases start there (llama-bench -d).
  std::vector<int32_t> prefix;
  for (int64_t i = 0; i < depth; ++i) prefix.push_back(prompt[size_t(i % n_prompt)]);
  auto fill = [&]() -> Result<int32_t> {
    s.reset();
    if (prefix.empty()) return prompt[0];
    return s.forward_greedy(prefix, 0);
  };
  if (depth >= 0) {
    auto filled = fill();
    if (!filled.ok()) return filled.take_error();
  } else {
    s.reset();
  }
  const int64_t pos0 = std::max<int64_t>(depth, 0);
  const auto t0 = Clock::now();
  // Greedy steps (forward_greedy): a GPU span with the output head returns only the token id.
  auto first_tok = s.forward_greedy(prompt, pos0);
  if (!first_tok.ok()) return first_tok.take_error();
  const double t_prefill = seconds_since(t0);
  int32_t next = first_tok.value();
  if (depth >= 0) {
    auto first = fill();
    if (!first.ok()) return first.take_error();
    next = first.value();
  }
  const int32_t first = next;
  std::vector<int32_t> plain;  // the tokens, for the speculative comparison
  const auto t1 = Clock::now();
  // Session::decode_greedy: pipelined on a whole-model GPU span (FISH_GPU_PIPELINE), else one
  // append_greedy a step.
  FISH_TRY(s.decode_greedy(next, n_gen, [&](int32_t id) {
    if (spec) plain.push_back(id);
    return true;
  }));
  const double t_decode = seconds_since(t1);
  RepSample r{double(n_prompt) / t_prefill, double(n_gen) / t_decode};
  if (spec == nullptr) return r;
  // The same start again (untimed), then the speculative decode of the same n_gen tokens.
  std::vector<int32_t> ctx(prompt.begin(), prompt.end());
  if (depth >= 0) {
    FISH_TRY(fill());
    ctx = prefix;
  } else {
    s.reset();
    FISH_TRY(s.forward_greedy(prompt, 0));
  }
  std::vector<int32_t> got;
  FISH_ASSIGN_OR_RETURN(
      const SpeculativeStats st,
      speculative_decode(s, *spec->drafter, ctx, first, n_gen + 1, spec->draft_n, [&](int32_t t) {
        got.push_back(t);
        return true;
      }));
  r.plain_decode_tok_s = r.decode_tok_s;
  r.decode_tok_s = st.tok_per_s();
  r.accepted_per_verify = st.accepted_per_verify();
  r.spec_tokens_differ =
      got.size() != plain.size() + 1 || !std::equal(plain.begin(), plain.end(), got.begin() + 1);
  return r;
}

std::vector<PathSamples> measure_paths(
    const MeasureSpec& spec, std::span<const std::function<Result<RepSample>()>> rep_fns) {
  std::vector<PathSamples> out(rep_fns.size());
  auto one = [&](size_t p, int64_t rep) {
    if (out[p].error) return;
    Result<RepSample> r = rep_fns[p]();
    if (!r.ok()) {
      out[p].error = r.take_error();
      return;
    }
    if (rep < spec.warmup) return;
    out[p].prefill_tok_s.push_back(r->prefill_tok_s);
    out[p].decode_tok_s.push_back(r->decode_tok_s);
    if (r->plain_decode_tok_s > 0) {  // a speculative repetition
      out[p].plain_decode_tok_s.push_back(r->plain_decode_tok_s);
      out[p].accepted_per_verify.push_back(r->accepted_per_verify);
      out[p].spec_tokens_differ += r->spec_tokens_differ ? 1 : 0;
    }
  };
  const int64_t total = spec.warmup + spec.repetitions;
  if (spec.interleave) {
    for (int64_t rep = 0; rep < total; ++rep)
      for (size_t p = 0; p < rep_fns.size(); ++p) one(p, rep);
  } else {
    for (size_t p = 0; p < rep_fns.size(); ++p)
      for (int64_t rep = 0; rep < total; ++rep) one(p, rep);
  }
  return out;
}

nlohmann::json sample_summary_json(std::span<const double> samples) {
  if (samples.empty()) return nullptr;
  const Interval in = median_interval(samples);
  return nlohmann::json{
      {"median", median(samples)}, {interval_key(in.kind), {in.lo, in.hi}}, {"n", samples.size()}};
}

nlohmann::json speed_metric_json(std::span<const double> samples) {
  nlohmann::json j = sample_summary_json(samples);
  if (j.is_null()) return j;
  j["cv"] = coefficient_of_variation(samples);
  j["samples"] = std::vector<double>(samples.begin(), samples.end());
  return j;
}

std::vector<std::string> validity_flags(const PathSamples& p, double max_cv) {
  std::vector<std::string> v;
  // The fewer of the two (an imported llama-bench test has one of them only).
  size_t n = std::min(p.prefill_tok_s.size(), p.decode_tok_s.size());
  if (p.prefill_tok_s.empty() || p.decode_tok_s.empty())
    n = std::max(p.prefill_tok_s.size(), p.decode_tok_s.size());
  if (n < 6) v.push_back("few_repetitions");
  if ((!p.prefill_tok_s.empty() && coefficient_of_variation(p.prefill_tok_s) > max_cv) ||
      (!p.decode_tok_s.empty() && coefficient_of_variation(p.decode_tok_s) > max_cv))
    v.push_back("noisy");
  if (p.spec_tokens_differ > 0) v.push_back("spec_tokens_differ");
  return v;
}

std::vector<std::string> gpu_validity_flags(uint64_t gpu_fallbacks, const GpuPlacement* placement) {
  std::vector<std::string> v;
  if (gpu_fallbacks > 0) v.push_back("cpu_fallback");
  if (!placement || (placement->n_gpu_layers() == 0 && !placement->output_on_gpu()))
    v.push_back("nothing_on_gpu");
  return v;
}

std::vector<double> paired_ratios(std::span<const double> a, std::span<const double> b,
                                  double scale) {
  std::vector<double> out;
  if (a.empty() || a.size() != b.size()) return out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (b[i] == 0) return {};
    out.push_back(scale * a[i] / b[i]);
  }
  return out;
}

Result<std::vector<int32_t>> workload_prompt(const Workload& w, const Tokenizer* tok,
                                             int64_t n_vocab) {
  std::vector<int32_t> out;
  if (w.text.empty()) {
    uint64_t s = uint64_t(w.seed);
    for (int64_t i = 0; i < w.n_prompt; ++i)
      out.push_back(int32_t(splitmix64(s) % uint64_t(n_vocab)));
    return out;
  }
  auto text = read_regular_file(w.text, kMaxTextFileBytes, "a text file");
  if (!text.ok()) return make_error("workload.text: {}", text.error().message);
  if (!tok) return make_error("workload.text: {}: the model has no tokenizer", w.text);
  const std::vector<int32_t> t = tok->encode(text.value(), /*add_special=*/true, false);
  if (t.empty()) return make_error("workload.text: {}: encodes to no tokens", w.text);
  while (int64_t(out.size()) < w.n_prompt)
    out.insert(out.end(), t.begin(),
               t.begin() + std::min<int64_t>(int64_t(t.size()), w.n_prompt - int64_t(out.size())));
  return out;
}

bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";  // 5: reset the peak RSS (VmHWM) to the current RSS (Linux >= 4.0)
  f.flush();
  return bool(f);
}

std::optional<double> peak_rss_MB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream is(line.substr(6));
      double kb = 0;
      if (is >> kb) return kb * 1024.0 / 1e6;
    }
  }
  return std::nullopt;
}

std::vector<double> measure_stream_GBps(size_t bytes, int passes, int threads) {
  StreamBuffer buf(bytes);
  ThreadPool pool(threads);
  buf.read_pass(pool);  // untimed: first touch, warm the pool
  std::vector<double> v;
  for (int i = 0; i < passes; ++i) v.push_back(buf.read_pass(pool) / 1e9);
  return v;
}

}  // namespace fish
