// The metrics table; see metrics.h.
#include "harness/metrics.h"

#include <vector>

#include <fmt/format.h>

namespace fish {

const char* metric_kind_name(MetricKind k) {
  switch (k) {
    case MetricKind::speed:
      return "speed";
    case MetricKind::ratio:
      return "ratio";
    case MetricKind::scalar:
      return "scalar";
    case MetricKind::count:
      return "count";
  }
  return "?";
}

std::span<const MetricField> metric_fields() {
  using K = MetricKind;
  using S = MetricSource;
  static const std::vector<MetricField> t = {
      {"prefill_tok_s", K::speed, "tok/s", "prefill tok/s", S::repetitions, true, false,
       "n_prompt tokens of prefill per second"},
      {"decode_tok_s", K::speed, "tok/s", "decode tok/s", S::repetitions, true, false,
       "greedy decode steps per second (n_gen of them)"},
      {"prefill_pct_stream", K::ratio, "%", "prefill % stream", S::repetitions, false, false,
       "per repetition: prefill tok/s x weight bytes per token as % of the run's stream bandwidth "
       "(above 100: a batch reads each weight once); the CI gate's machine-normalised speed"},
      {"decode_pct_stream", K::ratio, "%", "decode % stream", S::repetitions, false, false,
       "the same for decode"},
      {"prefill_vs_cpu", K::ratio, "x", "prefill gpu/cpu", S::repetitions, false, false,
       "gpu rows: prefill tok/s over the cell's cpu row, repetition by repetition"},
      {"decode_vs_cpu", K::ratio, "x", "decode gpu/cpu", S::repetitions, false, false,
       "gpu rows: the same for decode"},
      {"accepted_per_verify", K::ratio, "", "accepted/verify", S::repetitions, true, false,
       "speculative cells: draft tokens kept per verify (each verify also yields one token of "
       "the model's own)"},
      {"spec_speedup", K::ratio, "x", "spec speedup", S::repetitions, true, false,
       "speculative cells: decode tok/s over plain greedy decode's, repetition by repetition"},
      {"weight_GBps", K::scalar, "GB/s", "weight GB/s", S::weights, true, false,
       "median decode tok/s x the weight bytes a decode step reads"},
      {"weight_GBps_pct_stream", K::scalar, "%", "% stream", S::weights, true, false,
       "cpu rows: weight_GBps as % of the run's host stream bandwidth"},
      {"weight_GBps_pct_gpu_copy", K::scalar, "%", "% GPU copy", S::weights, true, false,
       "gpu rows: weight_GBps as % of the run's device copy bandwidth"},
      {"bits_per_weight", K::scalar, "bits", "bits/weight", S::weights, true, false,
       "bits per weight of the matrices a decode step reads, as the session runs them"},
      {"rel_rms", K::scalar, "", "rel RMS", S::weights, true, true,
       "relative RMS error of re-quantised weights (fish requant-quality rows)"},
      {"top1", K::scalar, "", "top-1", S::quality, true, true,
       "fraction of scored tokens whose argmax equals the reference's"},
      {"kl_mean", K::scalar, "nats", "KL mean", S::quality, true, true,
       "mean KL(reference, cell) over the scored tokens"},
      {"kl_p99", K::scalar, "nats", "KL p99", S::quality, true, false,
       "99th percentile of the per-token KL"},
      {"kl_max", K::scalar, "nats", "KL max", S::quality, true, false, "largest per-token KL"},
      {"ppl", K::scalar, "", "PPL", S::quality, true, true, "perplexity over the scored tokens"},
      {"greedy_exact", K::count, "prompts", "greedy exact", S::quality, true, false,
       "prompts whose greedy continuation equals the reference's"},
      {"rss_peak_MB", K::scalar, "MB", "RSS MB", S::memory, true, false,
       "peak resident set of the process during the cell"},
      {"vram_peak_MB", K::scalar, "MB", "VRAM MB", S::memory, true, false,
       "gpu rows: device memory resident for the cell (placement + matmul scratch)"},
  };
  return t;
}

const MetricField* find_metric(std::string_view name) {
  for (const MetricField& f : metric_fields())
    if (f.name == name) return &f;
  return nullptr;
}

nlohmann::json empty_metrics_json() {
  nlohmann::json m = nlohmann::json::object();
  for (const MetricField& f : metric_fields()) m[std::string(f.name)] = nullptr;
  return m;
}

std::string metric_fields_help() {
  std::string out = "| metric | kind | unit | title | meaning |\n|---|---|---|---|---|\n";
  for (const MetricField& f : metric_fields())
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", f.name, metric_kind_name(f.kind),
                       f.unit.empty() ? "-" : std::string(f.unit), f.title, f.doc);
  return out;
}

}  // namespace fish
