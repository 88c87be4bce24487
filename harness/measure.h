// The measurement protocol: warm-up, repetitions, interleaving of a cell's paths, the statistics
// of the samples, validity verdicts, host memory peaks and the stream bandwidth GB/s are scaled
// against.
//
// One repetition on a path = reset the KV cache, prefill the n_prompt prompt tokens as one
// forward (timed: prefill tok/s = n_prompt / t), then n_gen greedy single-token steps (timed:
// decode tok/s = n_gen / t). Warm-up repetitions run first and are dropped. With interleave, the
// paths of a cell take turns within every repetition (gpu, cpu, gpu, cpu, ...), so slow drifts
// (thermal, a noisy neighbour) hit both paths alike; otherwise each path runs all its repetitions
// in turn.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/gpu_placement.h"
#include "engine/session.h"
#include "engine/speculative.h"
#include "engine/tokenizer.h"
#include "harness/experiment.h"

namespace fish {

struct RepSample {
  double prefill_tok_s = 0;
  double decode_tok_s = 0;  // speculative: the speculative loop's
  // Speculative repetitions only (spec_decode set; else 0): plain greedy decode of the same n_gen
  // tokens, draft tokens kept per verify, and whether the speculative tokens differed from the
  // plain ones.
  double plain_decode_tok_s = 0;
  double accepted_per_verify = 0;
  bool spec_tokens_differ = false;
};

// Speculative decode phase of a repetition: the drafter and tokens per draft.
struct SpecDecode {
  Drafter* drafter = nullptr;
  int64_t draft_n = 4;
};

// One repetition on `s` (see the header comment; depth >= 0: Config::depth, llama-bench's -d).
// With `spec`, the plain decode is followed by the same prefill again (untimed) and a timed
// speculative decode of n_gen tokens (engine/speculative.h); decode_tok_s is then the
// speculative one and plain_decode_tok_s the plain one of the same repetition.
// Errors: the engine's (e.g. n_prompt + n_gen beyond n_ctx).
Result<RepSample> run_repetition(Session& s, std::span<const int32_t> prompt, int64_t n_gen,
                                 int64_t depth = -1, const SpecDecode* spec = nullptr);
// The KV positions a repetition needs (n_prompt + n_gen; with a depth, depth +
// max(n_prompt, n_gen)).
int64_t workload_ctx_need(const Workload& w, int64_t depth);

// The samples of one path.
struct PathSamples {
  std::vector<double> prefill_tok_s, decode_tok_s;
  // Speculative cells (empty otherwise): per repetition as RepSample's, and how many
  // repetitions' speculative tokens differed from plain greedy decoding's.
  std::vector<double> plain_decode_tok_s, accepted_per_verify;
  int64_t spec_tokens_differ = 0;
  std::optional<Error> error;  // the first failed repetition; the path stops there
};

// Runs spec.warmup + spec.repetitions repetitions of every path (rep_fns[i] runs one repetition
// of path i), interleaved or not per spec.interleave. A failing path stops; the others go on.
std::vector<PathSamples> measure_paths(const MeasureSpec& spec,
                                       std::span<const std::function<Result<RepSample>()>> rep_fns);

// {"median", K: [lo, hi], "n"}: the median and its interval (harness/stats.h median_interval)
// under the key that names it, K = "ci95" for a 95% CI (n >= 6) or "min_max" for the range of
// fewer samples. The context's stream and GPU copy bandwidths. null when there are no samples.
nlohmann::json sample_summary_json(std::span<const double> samples);

// sample_summary_json plus "cv" (coefficient of variation) and "samples" (the raw values): a
// speed metric of a row. null when there are no samples.
nlohmann::json speed_metric_json(std::span<const double> samples);

// Validity flags of a row: "few_repetitions" (fewer than 6 samples: no order-statistic pair of
// the median reaches 95% coverage), "noisy" (a speed metric's CV above max_cv),
// "spec_tokens_differ" (a speculative repetition emitted other tokens than plain greedy
// decoding: a batch's argmax differed from a one-token forward's).
std::vector<std::string> validity_flags(const PathSamples& p, double max_cv);

// Validity flags of a gpu-path row: "cpu_fallback" when GPU calls of the cell's sessions failed
// and ran on the CPU (gpu_fallbacks > 0: Session::gpu_fallbacks() summed over the speed and
// quality sessions), "nothing_on_gpu" when the placement is null or holds no layer and not the
// output (the row then measured the CPU).
std::vector<std::string> gpu_validity_flags(uint64_t gpu_fallbacks, const GpuPlacement* placement);

// Per-repetition ratios scale * a[i] / b[i] of two paths' samples of the same repetitions (the
// within-run speed ratios: a gpu row's speed over its cell's cpu row, a path's weight GB/s over
// the run's stream bandwidth). Empty when the counts differ, a side is empty or a b[i] is 0.
std::vector<double> paired_ratios(std::span<const double> a, std::span<const double> b,
                                  double scale = 1.0);

// The prompt a workload measures with: random ids in [0, n_vocab) from the seed (splitmix64), or
// the first n_prompt tokens of the text file (BOS as the vocabulary says; the tokens repeat when
// the text is shorter). Errors: unreadable or empty text.
Result<std::vector<int32_t>> workload_prompt(const Workload& w, const Tokenizer* tok,
                                             int64_t n_vocab);

// Resets the kernel's peak-RSS counter (/proc/self/clear_refs); false when it cannot.
bool reset_peak_rss();
// VmHWM of /proc/self/status in MB (1e6 bytes): the peak since the last reset, or since start.
std::optional<double> peak_rss_MB();

// Stream-read bandwidth samples in GB/s (1e9 bytes/s): `passes` timed passes over a buffer of
// `bytes` with `threads` threads (0: the default thread count), after one untimed pass.
std::vector<double> measure_stream_GBps(size_t bytes, int passes, int threads);

}  // namespace fish
