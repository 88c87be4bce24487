// `fish generate -m MODEL -p PROMPT -n N [--n-ctx C] [--seed S --temp X ...] [--chat]
// [--lookup] [--<config field> V ...]` Streams the continuation to stdout, then one stats line on
// stderr (docs/speculative.md for the drafts). Its Config flags come from the field table
// (generate_config_flags: --draft, --draft-n, --gpu-layers, ...), and the run is planned
// (plan_session) and placed (CellPlacement) as a fish run cell is.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/env_knobs.h"
#include "engine/compute_backend.h"
#include "engine/config.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/requant.h"
#include "engine/sampling.h"
#include "engine/session.h"
#include "engine/speculative.h"
#include "engine/tokenizer.h"
#include "harness/cli_fields.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "harness/gpu_cell.h"
#include "kernels/cpu_features.h"

namespace fish {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Wraps a user message in the model's chat format, recognised from the markers in
// tokenizer.chat_template or, when the file has no template (the Gemma 3 GGUF), in the vocabulary
// (no Jinja interpreter): ChatML (SmolLM2, Qwen), Gemma turns, Llama 3 headers.
Result<std::string> chat_prompt(const GgufFile& f, const Tokenizer& tok, const std::string& user) {
  const GgufValue* v = f.find("tokenizer.chat_template");
  const std::string* tmpl = v ? v->as_string() : nullptr;
  auto has = [&](const char* marker) {
    return tmpl ? tmpl->find(marker) != std::string::npos : tok.vocab().find(marker) >= 0;
  };
  if (has("<|im_start|>"))
    return "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
  if (has("<start_of_turn>"))
    return "<start_of_turn>user\n" + user + "<end_of_turn>\n<start_of_turn>model\n";
  if (has("<|start_header_id|>"))
    return "<|start_header_id|>user<|end_header_id|>\n\n" + user +
           "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  return make_error("{}: no chat format FISH knows (ChatML, Gemma, Llama 3) in {}", f.path(),
                    tmpl ? "tokenizer.chat_template" : "the vocabulary (no chat template)");
}

// Writes token pieces to stdout, holding back an incomplete UTF-8 sequence at the end.
class Streamer {
 public:
  explicit Streamer(const Tokenizer& tok) : tok_(tok) {}
  void push(int32_t id) {
    if (tok_.vocab().attr(id) & (kTokControl | kTokUnknown)) return;
    pending_ += tok_.token_to_piece(id);
    size_t keep = 0;  // trailing bytes of an unfinished sequence
    for (size_t i = pending_.size(); i > 0 && pending_.size() - i < 4; --i) {
      const auto c = uint8_t(pending_[i - 1]);
      if ((c & 0xC0) == 0x80) continue;  // continuation byte
      const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
      if (pending_.size() - (i - 1) < len) keep = pending_.size() - (i - 1);
      break;
    }
    std::fwrite(pending_.data(), 1, pending_.size() - keep, stdout);
    std::fflush(stdout);
    pending_.erase(0, pending_.size() - keep);
  }
  void finish() {
    std::fwrite(pending_.data(), 1, pending_.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }

 private:
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string model, prompt;
    Config cfg;  // every Config field but n_ctx and the measurement's (generate_config_flags)
    GenerateFields gen;  // tokens to generate, context, sampling
    bool chat = false;
    bool ignore_eos = false;
    bool lookup = false;  // speculative decoding with prompt-lookup drafts
    int64_t warmup = 0;   // untimed rounds before the timed one (--warmup)
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate text from a prompt: streams the continuation, then one stats line (prompt "
      "tokens, prefill and decode tok/s, weight GB/s, KV MB, threads, kernel ISA, GPU placement) "
      "on stderr. Its speeds are one run, by default cold (on an H100 the 8B decoded 20-25% below "
      "fish run's warmed median; --warmup N runs N untimed rounds first): fish run measures. With "
      "a GPU backend (fish gpu) the output projection and the last layers' projections run on "
      "the GPU, as many as fit (--gpu-layers / FISH_GPU_LAYERS cap the layers, --vram-budget-mb "
      "the device memory), as one layer span per forward unless "
      "--gpu-span false or FISH_GPU_SPAN=0; FISH_GPU_PROFILE=2 prints its per-stage GPU time. "
      "Every flag's range is the experiment format's (fish run --help-fields).");
  cmd->add_option("-m,--model", a->model, "GGUF model")->required();
  cmd->add_option("-p,--prompt", a->prompt, "Prompt text")->required();
  // Flags with a field-table row: range, allowed values and default from the row.
  static constexpr FieldFlag kGenerateFlags[] = {
      {"-n,--n-predict", "n_predict", "Tokens to generate"},
      {"--n-ctx", "n_ctx", "Context size (0: prompt + n, at most the training size)"},
      {"--seed", "seed", "Sampling seed"},
      {"--temp", "temp", "Temperature (0: greedy)"},
      {"--top-k", "top_k", "Top-k cut (0: none)"},
      {"--top-p", "top_p", "Top-p (nucleus) cut (1: none)"},
  };
  add_field_options(cmd, &a->gen, generate_fields(), kGenerateFlags);
  add_generate_config_flags(cmd, &a->cfg);
  cmd->add_flag("--chat", a->chat, "Wrap the prompt in the model's chat format");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "Do not stop at end-of-generation tokens");
  cmd->add_flag("--lookup", a->lookup,
                "Greedy speculative decoding with prompt-lookup drafts (n-grams of the context)");
  cmd->add_option("--warmup", a->warmup,
                  "Untimed rounds before the timed run: each prefills the prompt and decodes up "
                  "to 16 greedy tokens, then empties the cache; FISH_GPU_PROFILE then counts the "
                  "timed forwards alone")
      ->check(CLI::Range(int64_t(0), int64_t(100)));
  cmd->callback([a, exit_code] {
    *exit_code = kExitUsage;
    auto fail = [](const Error& e) {
      std::fprintf(stderr, "fish generate: %s\n", e.message.c_str());
    };
    if (Status st = check_env_knobs(/*with_gpu=*/true); !st.ok()) return fail(st.error());
    // The gpu path where a backend is usable (docs/gpu.md); else its status, and the CPU runs.
    std::string gpu_detail = gpu_path_unavailable();
    const bool gpu = gpu_detail.empty();
    const Config& cfg = a->cfg;
    if (!gpu && (cfg.gpu_layers > 0 || cfg.vram_budget_mb > 0 || cfg.gpu_requant >= 0))
      return fail(make_error("--gpu-layers / --vram-budget-mb / --gpu-requant: no GPU backend ({})",
                             gpu_detail));
    auto plan_r = plan_session(cfg, gpu);  // as a fish run cell of this Config
    if (!plan_r.ok()) return fail(plan_r.error());
    SessionPlan& plan = plan_r.value();
    auto model_r = Model::load(a->model, plan.load);
    if (!model_r.ok()) return fail(model_r.error());
    std::shared_ptr<const Model> model = model_r.value();
    if (const RequantResult* rq = model->requant())
      std::fprintf(stderr, "fish generate: requant %d: %s in %.2f s (%.1f ns/weight, %d threads)\n",
                   int(cfg.requant), rq->describe().c_str(), rq->seconds, rq->ns_per_weight(),
                   rq->n_threads);
    auto tok_r = Tokenizer::from_gguf(model->gguf());
    if (!tok_r.ok()) return fail(tok_r.error());
    const Tokenizer& tok = tok_r.value();

    std::string text = a->prompt;
    if (a->chat) {
      auto c = chat_prompt(model->gguf(), tok, a->prompt);
      if (!c.ok()) return fail(c.error());
      text = c.value();
    }
    // BOS as the vocabulary says (Gemma: yes, SmolLM2: no); chat markers parsed as tokens.
    std::vector<int32_t> prompt = tok.encode(text, /*add_special=*/true, /*parse_special=*/a->chat);
    if (prompt.empty()) return fail(make_error("the prompt encodes to no tokens"));

    const ModelParams& p = model->params();
    const int64_t need = int64_t(prompt.size()) + a->gen.n_predict;
    plan.set_n_ctx(a->gen.n_ctx > 0 ? a->gen.n_ctx : std::min(need, p.n_ctx_train));
    SessionOptions& opt = plan.session;
    if (need > opt.n_ctx)
      return fail(make_error("prompt ({} tokens) + n ({}) exceed n_ctx {} (hint: --n-ctx)",
                             prompt.size(), a->gen.n_predict, opt.n_ctx));
    // The placement outlives the session (declared first). A placement that fits nothing
    // leaves the whole run to the CPU, and the stats line says why.
    std::unique_ptr<CellPlacement> placed;
    if (plan.gpu) {
      auto pl = CellPlacement::place(*model, *plan.gpu);
      if (pl.ok()) {
        placed = std::move(pl).value();
        opt.gpu = placed->placement();
        gpu_detail = placed->detail();
      } else {
        gpu_detail = pl.error().message;
      }
    }
    auto sess_r = Session::create(model, opt);
    if (!sess_r.ok()) return fail(sess_r.error());
    Session& s = *sess_r.value();
    // After the session: with a GPU placement only the CPU's matrices are packed (defer_x16).
    if (const KquantRepackStats& kr = model->kquant_repack(); kr.matrices + kr.deferred > 0)
      std::fprintf(stderr, "fish generate: kquant_repack %s: %s\n", cfg.kquant_repack.c_str(),
                   kr.describe().c_str());
    Sampler sampler(sampling_params(a->gen));
    // The drafter: --lookup or --speculative lookup; --draft MODEL or --speculative draft.
    const bool lookup = a->lookup || cfg.speculative == "lookup";
    const bool draft = !cfg.draft_model.empty() || cfg.speculative == "draft";
    if (lookup && draft) return fail(make_error("--lookup and --draft: one drafter at a time"));
    if ((lookup || draft) && sampler.params().temperature > 0.0f)
      return fail(make_error("speculative decoding is greedy (hint: --temp 0)"));
    auto drafter_r = make_drafter(lookup  ? "lookup"
                                  : draft ? "draft"
                                          : "off",
                                  cfg.draft_model, *model, opt.n_ctx, int(cfg.n_threads));
    if (!drafter_r.ok()) return fail(drafter_r.error());
    Drafter* drafter = drafter_r.value().drafter.get();
    Streamer out(tok);

    // --warmup: the driver's pipelines, the GPU's clocks and the caches warm before the timer.
    for (int64_t w = 0; w < a->warmup; ++w) {
      auto f = s.append_greedy(prompt);
      if (!f.ok()) return fail(f.error());
      const int64_t n = std::min<int64_t>(a->gen.n_predict - 1, 16);
      if (n > 0) {
        auto d = s.decode_greedy(f.value(), n, [](int32_t) { return true; });
        if (!d.ok()) return fail(d.error());
      }
      s.reset();
    }
    if (a->warmup > 0) s.reset_profile();

    const auto t0 = Clock::now();
    // Greedy (temperature <= 0): the session's greedy step, which a GPU span with the output
    // head answers with the token id alone; sampling needs the logits.
    const bool greedy = sampler.params().temperature <= 0.0f;
    auto step = [&](std::span<const int32_t> toks) -> Result<int32_t> {
      if (greedy) return s.append_greedy(toks);
      auto lg = s.append(toks);
      if (!lg.ok()) return lg.take_error();
      return sampler.sample(lg.value());
    };
    auto first = step(prompt);
    if (!first.ok()) return fail(first.error());
    const double t_prefill = seconds_since(t0);
    int32_t next = first.value();

    int64_t n_decoded = 0;
    const auto t1 = Clock::now();
    std::string spec_detail;
    if (drafter != nullptr) {  // the same tokens as the loop below, fewer target forwards
      auto st = speculative_decode(s, *drafter, prompt, next, a->gen.n_predict, cfg.draft_n,
                                   [&](int32_t id) {
                                     if (!a->ignore_eos && tok.is_eog(id)) return false;
                                     out.push(id);
                                     return true;
                                   });
      if (!st.ok()) return fail(st.error());
      const SpeculativeStats& ss = st.value();
      n_decoded = ss.generated - 1;
      spec_detail = fmt::format(
          " | speculative {}, draft_n {}: {} verifies, {:.2f} accepted per verify ({}/{} "
          "drafted)",
          drafter->describe(), cfg.draft_n, ss.verifies, ss.accepted_per_verify(), ss.accepted,
          ss.drafted);
    }
    // Greedy without a drafter: Session::decode_greedy (pipelined on a whole-model GPU span,
    // FISH_GPU_PIPELINE), the same tokens and steps as the loop below.
    if (drafter == nullptr && greedy && a->gen.n_predict > 0 &&
        (a->ignore_eos || !tok.is_eog(next))) {
      out.push(next);
      auto got = s.decode_greedy(next, a->gen.n_predict - 1, [&](int32_t id) {
        ++n_decoded;
        if (!a->ignore_eos && tok.is_eog(id)) return false;
        out.push(id);
        return true;
      });
      if (!got.ok()) return fail(got.error());
    }
    for (int64_t i = 0; drafter == nullptr && !greedy && i < a->gen.n_predict; ++i) {
      if (!a->ignore_eos && tok.is_eog(next)) break;
      out.push(next);
      if (i + 1 == a->gen.n_predict) break;
      auto got = step(std::span<const int32_t>(&next, 1));
      if (!got.ok()) return fail(got.error());
      ++n_decoded;
      next = got.value();
    }
    const double t_decode = seconds_since(t1);
    out.finish();

    const double prefill_tps = double(prompt.size()) / t_prefill;
    const double decode_tps = n_decoded > 0 ? double(n_decoded) / t_decode : 0.0;
    const Int4Weights* int4 = s.int4_weights();
    const double bytes_per_token =
        int4 != nullptr ? double(int4->bytes_per_token()) : double(model->weight_bytes_per_token());
    const std::string path =
        int4 != nullptr ? int4->describe() : std::string(weight_path_name(s.weight_path()));
    std::fprintf(stderr,
                 "fish generate: prompt %zu tokens | prefill %.1f tok/s | decode %.2f tok/s (%lld "
                 "tokens) | weights %.1f GB/s (%.1f MB/token) | host kv %.1f MB (n_ctx %lld%s) | "
                 "threads %d | isa %s | act %s | weight path %s | gpu %s%s\n",
                 prompt.size(), prefill_tps, decode_tps, (long long)n_decoded,
                 bytes_per_token * decode_tps / 1e9, bytes_per_token / 1e6,
                 double(s.kv_bytes()) / 1e6, (long long)s.n_ctx(),
                 // The ring choice only exists for models with sliding-window layers.
                 model->params().sliding_window > 0
                     ? (", swa " + std::string(swa_kv_name(s.options().swa_kv))).c_str()
                     : "",
                 s.n_threads(), std::string(isa_name(s.kernel_isa())).c_str(),
                 s.weight_path() == WeightPath::ref ? "f32" : cfg.act.c_str(), path.c_str(),
                 gpu_detail.c_str(), spec_detail.c_str());
    if (s.gpu_fallbacks() > 0)  // why: the backend's status names the failed call
      std::fprintf(stderr, "fish generate: GPU calls failed %lld time(s) and ran on the CPU (%s)\n",
                   (long long)s.gpu_fallbacks(), gpu_backend_status().c_str());
    // FISH_GPU_PROFILE=2: per-stage GPU time of the span (timestamp queries).
    if (opt.gpu && opt.gpu->span() && !opt.gpu->span()->profile().empty())
      std::fprintf(stderr, "fish generate: %s\n", opt.gpu->span()->profile().c_str());
    *exit_code = kExitOk;
  });
}

}  // namespace fish
