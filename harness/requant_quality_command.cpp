// `fish requant-quality -m MODEL [--text FILE] [-n N] [--modes 0,1,2,3] [--aware]`: output
// quality of each re-quantisation mode against the mode-0 CPU run of the same model (issue 5
// acceptance): every variant is teacher-forced over the first N+1 tokens of a text in lockstep
// with the reference, and each position's distribution is compared: top-1 agreement, KL(P_ref ||
// P_x) mean / p99 / max, and perplexity of the text, with the weight bytes of each variant.
// --aware adds modes 1 and 3 with the activation-aware fq3 fit: each input column weighted by
// its mean squared activation, collected by running a calibration text (another file than the
// scored one) through the mode-0 engine.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/env_knobs.h"
#include "base/path_checks.h"
#include "engine/model.h"
#include "engine/requant.h"
#include "engine/session.h"
#include "engine/tokenizer.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "kernels/cpu_features.h"

namespace fish {
namespace {

Result<std::string> read_text(const std::string& path) {
  return read_regular_file(path, kMaxTextFileBytes, "a text file");
}

// log-softmax of n logits, in double.
void log_softmax(const float* x, int64_t n, std::vector<double>& out) {
  out.resize(size_t(n));
  double mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, double(x[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - lse;
}

int64_t argmax(const float* x, int64_t n) {
  return std::max_element(x, x + n) - x;
}

struct Variant {
  std::string label;
  int mode = 0;
  bool aware = false;
  std::shared_ptr<const Model> model;
  std::unique_ptr<Session> session;
  int64_t top1 = 0;
  double nll = 0;
  std::vector<double> kl;
};

// Mean squared activation per input column of every matrix, over `tokens` run through `model`.
Result<RequantImportance> collect_importance(std::shared_ptr<const Model> model,
                                             const std::vector<int32_t>& tokens, int threads) {
  std::map<std::string, std::pair<std::vector<double>, int64_t>> acc;  // name -> (sum x^2, rows)
  SessionOptions opt;
  opt.n_ctx = int64_t(tokens.size());
  opt.n_threads = threads;
  opt.observe_matmul_input = [&](const MatrixView& w, const float* x, int64_t n_tok) {
    auto& [sum, rows] = acc[w.name];
    sum.resize(size_t(w.n_in), 0.0);
    for (int64_t t = 0; t < n_tok; ++t)
      for (int64_t i = 0; i < w.n_in; ++i)
        sum[size_t(i)] += double(x[t * w.n_in + i]) * x[t * w.n_in + i];
    rows += n_tok;
  };
  FISH_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::create(model, opt));
  FISH_TRY(s->teacher_force(tokens, [](int64_t, std::span<const float>) {}));
  RequantImportance imp;
  for (auto& [name, v] : acc) {
    std::vector<float> cols(v.first.size());
    for (size_t i = 0; i < cols.size(); ++i) cols[i] = float(v.first[i] / double(v.second));
    imp.columns.emplace_back(name, std::move(cols));
  }
  return imp;
}

}  // namespace

void add_requant_quality_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string model;
    std::string text = "/usr/share/common-licenses/GPL-3";
    std::string calib = "/usr/share/common-licenses/Apache-2.0";
    int n_tokens = 256;
    int calib_tokens = 512;
    int threads = 0;
    std::vector<int> modes = {0, 1, 2, 3};
    bool aware = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "requant-quality",
      "Quality of re-quantisation modes against the mode-0 CPU run: top-1 agreement, KL "
      "(mean/p99/max), perplexity and weight bytes, teacher-forced over a text.");
  cmd->add_option("-m,--model", a->model, "GGUF model")->required();
  cmd->add_option("--text", a->text, "Text to teacher-force")->capture_default_str();
  cmd->add_option("-n,--n-tokens", a->n_tokens, "Positions scored (the text's first n+1 tokens)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--modes", a->modes, "Modes to compare (0 is the reference)")
      ->check(CLI::Range(0, 3))
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_flag("--aware", a->aware, "Add modes 1 and 3 with the activation-aware fq3 fit");
  cmd->add_option("--calib", a->calib, "Calibration text for --aware")->capture_default_str();
  cmd->add_option("--calib-tokens", a->calib_tokens, "Calibration tokens for --aware")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "Threads (0: FISH_THREADS or all hardware threads)")
      ->capture_default_str();
  cmd->callback([a, exit_code] {
    *exit_code = kExitUsage;
    auto fail = [](const Error& e) {
      std::fprintf(stderr, "fish requant-quality: %s\n", e.message.c_str());
    };
    if (Status st = check_env_knobs(/*with_gpu=*/false); !st.ok()) return fail(st.error());
    auto ref_r = Model::load(a->model);
    if (!ref_r.ok()) return fail(ref_r.error());
    std::shared_ptr<const Model> ref = ref_r.value();
    auto tok_r = Tokenizer::from_gguf(ref->gguf());
    if (!tok_r.ok()) return fail(tok_r.error());
    auto encode_file = [&](const std::string& path, int n) -> Result<std::vector<int32_t>> {
      FISH_ASSIGN_OR_RETURN(std::string text, read_text(path));
      std::vector<int32_t> t = tok_r.value().encode(text, true, false);
      if (int64_t(t.size()) < n)
        return make_error("{} encodes to {} tokens, fewer than the {} asked for", path, t.size(),
                          n);
      t.resize(size_t(n));
      return t;
    };
    auto toks_r = encode_file(a->text, a->n_tokens + 1);
    if (!toks_r.ok()) return fail(toks_r.error());
    const std::vector<int32_t>& toks = toks_r.value();

    RequantImportance importance;
    if (a->aware) {
      auto calib_r = encode_file(a->calib, a->calib_tokens);
      if (!calib_r.ok()) return fail(calib_r.error());
      auto imp_r = collect_importance(ref, calib_r.value(), a->threads);
      if (!imp_r.ok()) return fail(imp_r.error());
      importance = std::move(imp_r.value());
    }

    std::vector<Variant> vs;
    auto add = [&](int mode, bool aware) -> Status {
      Variant v;
      v.label = fmt::format("{}{}", mode, aware ? "+act" : "");
      v.mode = mode;
      v.aware = aware;
      if (mode == 0) {
        v.model = ref;
      } else {
        FISH_ASSIGN_OR_RETURN(
            v.model, Model::load(a->model, ModelLoadOptions{mode, a->threads,
                                                            aware ? &importance : nullptr}));
      }
      SessionOptions opt;
      opt.n_ctx = int64_t(toks.size());
      opt.n_threads = a->threads;
      FISH_ASSIGN_OR_RETURN(v.session, Session::create(v.model, opt));
      vs.push_back(std::move(v));
      return Status::success();
    };
    if (Status st = add(0, false); !st.ok()) return fail(st.error());
    for (int mode : a->modes)
      if (mode != 0)
        if (Status st = add(mode, false); !st.ok()) return fail(st.error());
    if (a->aware)
      for (int mode : {1, 3})
        if (Status st = add(mode, true); !st.ok()) return fail(st.error());

    // Lockstep over chunks: the reference's distributions for a chunk, then every variant's.
    const int64_t n_vocab = ref->params().n_vocab;
    const int64_t n_pos = int64_t(toks.size()) - 1;
    const int64_t chunk = 64;
    std::vector<float> ref_logits;
    std::vector<double> lp_ref, lp_x;
    for (int64_t p0 = 0; p0 < n_pos; p0 += chunk) {
      const int64_t n = std::min(chunk, n_pos - p0);
      const std::span<const int32_t> in(toks.data() + p0, size_t(n));
      for (size_t vi = 0; vi < vs.size(); ++vi) {
        Variant& v = vs[vi];
        auto lg = v.session->forward(in, p0, LogitsMode::all);
        if (!lg.ok()) return fail(lg.error());
        if (vi == 0) ref_logits.assign(lg.value().begin(), lg.value().end());
        for (int64_t t = 0; t < n; ++t) {
          const float* r = ref_logits.data() + t * n_vocab;
          const float* x = lg.value().data() + t * n_vocab;
          log_softmax(r, n_vocab, lp_ref);
          log_softmax(x, n_vocab, lp_x);
          double kl = 0;
          for (int64_t i = 0; i < n_vocab; ++i)
            kl += std::exp(lp_ref[size_t(i)]) * (lp_ref[size_t(i)] - lp_x[size_t(i)]);
          v.kl.push_back(std::max(kl, 0.0));
          v.top1 += argmax(r, n_vocab) == argmax(x, n_vocab);
          v.nll -= lp_x[size_t(toks[size_t(p0 + t + 1)])];
        }
      }
    }

    std::printf(
        "model %s | text %s: %lld positions teacher-forced | threads %d | isa %s | act int8\n",
        a->model.c_str(), a->text.c_str(), static_cast<long long>(n_pos),
        vs[0].session->n_threads(), std::string(isa_name(vs[0].session->kernel_isa())).c_str());
    if (a->aware)
      std::printf("activation-aware fit: calibration %s, %d tokens, %zu matrices\n",
                  a->calib.c_str(), a->calib_tokens, importance.columns.size());
    std::printf("%-6s %10s %10s %7s %10s %10s %10s %8s  %s\n", "mode", "weight_MB", "MB/token",
                "top1%", "KL_mean", "KL_p99", "KL_max", "PPL", "re-quantised");
    for (Variant& v : vs) {
      std::vector<double> kl = v.kl;
      std::sort(kl.begin(), kl.end());
      double mean = 0;
      for (double k : kl) mean += k;
      mean /= double(kl.size());
      const double p99 =
          kl[std::min(kl.size() - 1, size_t(std::ceil(0.99 * double(kl.size()))) - 1)];
      const RequantResult* rq = v.model->requant();
      std::printf("%-6s %10.2f %10.2f %7.2f %10.3e %10.3e %10.3e %8.3f  %s\n", v.label.c_str(),
                  double(v.model->total_weight_bytes()) / 1e6,
                  double(v.model->weight_bytes_per_token()) / 1e6,
                  100.0 * double(v.top1) / double(n_pos), mean, p99, kl.back(),
                  std::exp(v.nll / double(n_pos)), rq ? rq->describe().c_str() : "-");
    }
    *exit_code = kExitOk;
  });
}

}  // namespace fish
