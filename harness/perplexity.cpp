// Chunked perplexity and KL statistics; see perplexity.h.
#include "harness/perplexity.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include <fmt/format.h>

namespace fish {
namespace {

// Mean and standard error of the mean (sqrt(var / (n - 1)), var the population variance).
std::pair<double, double> mean_se(std::span<const double> v) {
  double s = 0, s2 = 0;
  for (double x : v) {
    s += x;
    s2 += x * x;
  }
  const double n = double(v.size());
  const double m = s / n;
  const double var = std::max(0.0, s2 / n - m * m);
  return {m, v.size() > 1 ? std::sqrt(var / (n - 1)) : 0.0};
}

double quantile_sorted(std::span<const double> sorted, double fraction) {
  const double at = double(sorted.size() - 1) * fraction;
  const size_t lo = size_t(std::floor(at));
  const size_t hi = std::min(sorted.size() - 1, lo + 1);
  return sorted[lo] + (at - double(lo)) * (sorted[hi] - sorted[lo]);
}

ValueSummary summary(std::vector<double> v, std::span<const double> fractions) {
  ValueSummary s;
  std::tie(s.mean, s.se) = mean_se(v);
  std::sort(v.begin(), v.end());
  for (double f : fractions) s.quantiles.emplace_back(f, quantile_sorted(v, f));
  return s;
}

constexpr double kKldFractions[] = {1.0, 0.999, 0.99, 0.5, 0.1, 0.05, 0.01, 0.001, 0.0};
constexpr double kDpFractions[] = {1.0,  0.999, 0.99, 0.95, 0.9,   0.75, 0.5,
                                   0.25, 0.1,   0.05, 0.01, 0.001, 0.0};

std::string quantile_name(double f) {
  if (f == 1.0) return "Maximum";
  if (f == 0.0) return "Minimum";
  if (f == 0.5) return "Median ";
  return fmt::format("{:>4.1f}%  ", 100.0 * f);
}

}  // namespace

Result<TextChunks> chunk_text(const Tokenizer& tok, const std::string& text, int64_t n_ctx,
                              int64_t n_chunks) {
  if (n_ctx < 4) return make_error("chunk size {} is too small (at least 4 tokens)", n_ctx);
  std::vector<int32_t> t = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  TextChunks c;
  c.n_ctx = n_ctx;
  c.first = n_ctx / 2;
  c.text_tokens = int64_t(t.size());
  const int64_t fits = c.text_tokens / n_ctx;
  if (fits < 1)
    return make_error("the text has {} tokens, one chunk of {} needs {} (hint: a smaller -c)",
                      c.text_tokens, n_ctx, n_ctx);
  if (n_chunks > fits)
    return make_error("{} chunks of {} tokens asked, the text ({} tokens) fills {}", n_chunks,
                      n_ctx, c.text_tokens, fits);
  c.n_chunks = n_chunks > 0 ? n_chunks : fits;
  c.tokens.assign(t.begin(), t.begin() + c.n_chunks * n_ctx);
  if (tok.add_bos() && tok.bos() >= 0)
    for (int64_t k = 0; k < c.n_chunks; ++k) c.tokens[size_t(k * n_ctx)] = tok.bos();
  return c;
}

PositionScore score_position(std::span<const float> lp, int32_t top, std::span<const float> lp_ref,
                             int32_t top_ref, int32_t next) {
  PositionScore s;
  s.nll = -double(lp[size_t(next)]);
  if (lp_ref.empty()) return s;
  assert(lp_ref.size() == lp.size());
  double kld = 0;
  for (size_t i = 0; i < lp.size(); ++i) {
    const double r = lp_ref[i];
    kld += std::exp(r) * (r - double(lp[i]));
  }
  s.kld = std::max(0.0, kld);  // rounding can leave -1e-9 where the distributions agree
  s.nll_ref = -double(lp_ref[size_t(next)]);
  s.p = std::exp(-s.nll);
  s.p_ref = std::exp(-s.nll_ref);
  s.same_top = top == top_ref;
  return s;
}

PerplexityStats summarize(std::span<const PositionScore> scores, bool has_reference) {
  assert(!scores.empty());
  PerplexityStats s;
  s.n = int64_t(scores.size());
  std::vector<double> nll, nll_ref, kld, dp, dp2, same, lnr;
  for (const PositionScore& p : scores) nll.push_back(p.nll);
  auto [m, se] = mean_se(nll);
  s.ppl = std::exp(m);
  s.ppl_se = s.ppl * se;
  s.has_reference = has_reference;
  if (!has_reference) return s;
  for (const PositionScore& p : scores) {
    nll_ref.push_back(p.nll_ref);
    kld.push_back(p.kld);
    dp.push_back(100.0 * (p.p - p.p_ref));
    dp2.push_back(dp.back() * dp.back());
    same.push_back(p.same_top ? 100.0 : 0.0);
    lnr.push_back(p.nll - p.nll_ref);
  }
  auto [mr, ser] = mean_se(nll_ref);
  s.ppl_ref = std::exp(mr);
  s.ppl_ref_se = s.ppl_ref * ser;
  // Pearson correlation of the per-position nll (llama-perplexity's Cor(ln(PPL(Q)), ...)).
  double cov = 0, vq = 0, vr = 0;
  for (size_t i = 0; i < nll.size(); ++i) {
    cov += (nll[i] - m) * (nll_ref[i] - mr);
    vq += (nll[i] - m) * (nll[i] - m);
    vr += (nll_ref[i] - mr) * (nll_ref[i] - mr);
  }
  s.cor_ln_ppl = vq > 0 && vr > 0 ? cov / std::sqrt(vq * vr) : 1.0;
  std::tie(s.ln_ratio, s.ln_ratio_se) = mean_se(lnr);
  s.ratio = std::exp(s.ln_ratio);
  s.ratio_se = s.ratio * s.ln_ratio_se;
  // PPL - PPL(ref) by error propagation with the covariance of the two means.
  const double n = double(s.n);
  const double cov_means = n > 1 ? cov / (n * (n - 1)) : 0.0;
  s.diff = s.ppl - s.ppl_ref;
  s.diff_se = std::sqrt(std::max(0.0, s.ppl_se * s.ppl_se + s.ppl_ref_se * s.ppl_ref_se -
                                          2.0 * cov_means * s.ppl * s.ppl_ref));
  s.kld = summary(kld, kKldFractions);
  s.dp = summary(dp, kDpFractions);
  auto [msq, sesq] = mean_se(dp2);
  s.rms_dp = std::sqrt(msq);
  s.rms_dp_se = s.rms_dp > 0 ? sesq / (2.0 * s.rms_dp) : 0.0;  // d sqrt(x) = dx / (2 sqrt(x))
  std::tie(s.same_top, s.same_top_se) = mean_se(same);
  return s;
}

std::string stats_text(const PerplexityStats& s) {
  if (!s.has_reference)
    return fmt::format("Final estimate: PPL = {:.4f} +/- {:.5f}\n", s.ppl, s.ppl_se);
  std::string o;
  o += "====== Perplexity statistics ======\n";
  o += fmt::format("Mean PPL(Q)                   : {:10.6f} ± {:10.6f}\n", s.ppl, s.ppl_se);
  o +=
      fmt::format("Mean PPL(base)                : {:10.6f} ± {:10.6f}\n", s.ppl_ref, s.ppl_ref_se);
  o += fmt::format("Cor(ln(PPL(Q)), ln(PPL(base))): {:6.2f}%\n", 100.0 * s.cor_ln_ppl);
  o += fmt::format("Mean ln(PPL(Q)/PPL(base))     : {:10.6f} ± {:10.6f}\n", s.ln_ratio,
                   s.ln_ratio_se);
  o += fmt::format("Mean PPL(Q)/PPL(base)         : {:10.6f} ± {:10.6f}\n", s.ratio, s.ratio_se);
  o += fmt::format("Mean PPL(Q)-PPL(base)         : {:10.6f} ± {:10.6f}\n", s.diff, s.diff_se);
  o += "\n====== KL divergence statistics ======\n";
  o += fmt::format("Mean    KLD: {:10.6f} ± {:10.6f}\n", s.kld.mean, s.kld.se);
  for (const auto& [f, v] : s.kld.quantiles)
    o += fmt::format("{} KLD: {:10.6f}\n", quantile_name(f), v);
  o += "\n====== Token probability statistics ======\n";
  o += fmt::format("Mean    Δp: {:6.3f} ± {:5.3f} %\n", s.dp.mean, s.dp.se);
  for (const auto& [f, v] : s.dp.quantiles)
    o += fmt::format("{} Δp: {:6.3f}%\n", quantile_name(f), v);
  o += fmt::format("RMS Δp    : {:6.3f} ± {:5.3f} %\n", s.rms_dp, s.rms_dp_se);
  o += fmt::format("Same top p: {:6.3f} ± {:5.3f} %\n", s.same_top, s.same_top_se);
  return o;
}

nlohmann::json stats_json(const PerplexityStats& s) {
  nlohmann::json j = {{"n_scored", s.n}, {"ppl", s.ppl}, {"ppl_se", s.ppl_se}};
  if (!s.has_reference) return j;
  auto quantiles = [](const ValueSummary& v) {
    nlohmann::json q = nlohmann::json::object();
    for (const auto& [f, x] : v.quantiles) {
      const std::string key = f == 1.0   ? "max"
                              : f == 0.0 ? "min"
                              : f == 0.5 ? "median"
                                         : fmt::format("p{:g}", 100.0 * f);
      q[key] = x;
    }
    return q;
  };
  j["ppl_base"] = s.ppl_ref;
  j["ppl_base_se"] = s.ppl_ref_se;
  j["cor_ln_ppl"] = s.cor_ln_ppl;
  j["ln_ppl_ratio"] = s.ln_ratio;
  j["ln_ppl_ratio_se"] = s.ln_ratio_se;
  j["ppl_ratio"] = s.ratio;
  j["ppl_ratio_se"] = s.ratio_se;
  j["ppl_diff"] = s.diff;
  j["ppl_diff_se"] = s.diff_se;
  j["kld"] = {{"mean", s.kld.mean}, {"se", s.kld.se}, {"quantiles", quantiles(s.kld)}};
  j["delta_p_pct"] = {{"mean", s.dp.mean}, {"se", s.dp.se}, {"quantiles", quantiles(s.dp)}};
  j["rms_delta_p_pct"] = s.rms_dp;
  j["rms_delta_p_pct_se"] = s.rms_dp_se;
  j["same_top_p_pct"] = s.same_top;
  j["same_top_p_pct_se"] = s.same_top_se;
  return j;
}

}  // namespace fish
