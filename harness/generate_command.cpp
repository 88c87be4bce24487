// `fish generate -m MODEL -p PROMPT -n N [--threads T] [--n-ctx C] [--seed S --temp X ...]
// [--chat] [--requant N] [--gpu-requant N] [--draft MODEL | --lookup] [--draft-n N]` Streams the
// continuation to stdout, then one stats line on stderr (docs/speculative.md for the drafts).
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
#include "engine/gpu_placement.h"
#include "engine/model.h"
#include "engine/requant.h"
#include "engine/sampling.h"
#include "engine/session.h"
#include "engine/speculative.h"
#include "engine/tokenizer.h"
#include "harness/cli_fields.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "kernels/cpu_features.h"
#if FISH_HAVE_VULKAN
#include "engine/vulkan/vulkan_backend.h"
#endif

namespace fish {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string gpu_status_now() {
#if FISH_HAVE_VULKAN
  return gpu::vulkan_status();
#else
  return "no GPU backend";
#endif
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
    Config cfg;          // the Config fields generate takes (threads, batch, act, weight path...)
    GenerateFields gen;  // tokens to generate, context, sampling
    bool chat = false;
    bool ignore_eos = false;
    bool lookup = false;  // speculative decoding with prompt-lookup drafts
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate text from a prompt: streams the continuation, then one stats line (prompt "
      "tokens, prefill and decode tok/s, weight GB/s, KV MB, threads, kernel ISA, GPU placement) "
      "on "
      "stderr. With a GPU backend (fish gpu) the output projection and the last layers' "
      "projections run on the GPU, as many as fit (FISH_GPU_LAYERS=N caps the layers), as one "
      "layer span per forward unless FISH_GPU_SPAN=0; FISH_GPU_PROFILE=2 prints its per-stage GPU "
      "time. Every flag's range is the experiment format's (fish run --help-fields).");
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
  static constexpr FieldFlag kConfigFlags[] = {
      {"--threads", "n_threads", "Threads (0: FISH_THREADS or all hardware threads)"},
      {"--n-batch", "n_batch", "Prefill batch (tokens per matrix x matrix pass)"},
      {"--swa-kv", "swa_kv",
       "Sliding-window layers' KV (Gemma 3): ring (window + n-batch rows) or full (n-ctx rows)"},
      {"--act", "act", "Activations: int8 (quantised, fast) or f32 (reference)"},
      {"--requant", "requant",
       "Re-quantise the matmul weights in memory at load: 0 off, 1 every quantised weight -> "
       "fq3, 2 q6_k -> q4_k, 3 q4_k -> fq3 and q6_k -> q4_k (CPU and GPU copies)"},
      {"--kquant-repack", "kquant_repack",
       "Q4_K/Q5_K/Q6_K/Q8_0 matrices repacked at load into the x16 interleaved layout: auto (on "
       "where the kernel ISA is avx2 or avx512; at avx512 Q8_0 stays GGUF), on, off, keep (on, "
       "GGUF pages kept resident)"},
      {"--gpu-requant", "gpu_requant",
       "The GPU gets a re-quantised copy of the weights it holds (more layers fit; the CPU copy "
       "is untouched): 0 off, 1 every quantised weight -> fq3, 2 q6_k -> q4_k, 3 q4_k -> fq3 and "
       "q6_k -> q4_k; -1: FISH_GPU_REQUANT (default 0)"},
      {"--weight-path", "weight_path",
       "CPU weight path: auto (fish_i4 files: w4a8 with AMX, else w4a16; other files: gguf), "
       "gguf, w4a8, w4a16, ref (f32)"},
      {"--group-size", "group_size", "w4a8/w4a16 repacking: int4 group size 32|64|128"},
      {"--zero-point", "zero_point",
       "w4a8/w4a16 repacking: sym, asym or fp (float offset per group: q4_0/q4_1/q4_k weights "
       "repack exactly at --group-size 32)"},
      {"--quantize-head", "quantize_head",
       "w4a8/w4a16: int4 output head (false keeps it on the gguf path)"},
      {"--quantize-embedding", "quantize_embedding",
       "w4a8/w4a16: embedding rows from an int4 copy"},
      {"--prefill-dequant", "prefill_dequant",
       "w4a16: batches above --dequant-threshold dequantise + GEMM (false: decode kernel)"},
      {"--direct-dequant", "direct_dequant",
       "w4a16: dequantise from the packed layout (false: keep a row-major duplicate)"},
      {"--dequant-threshold", "dequant_threshold",
       "w4a16: tokens per batch above which prefill dequantises"},
      {"--draft", "draft_model",
       "Greedy speculative decoding with this draft model (same vocabulary; on the CPU)"},
      {"--draft-n", "draft_n", "Speculative decoding: tokens drafted per verify"},
  };
  add_field_options(cmd, &a->gen, generate_fields(), kGenerateFlags);
  add_field_options(cmd, &a->cfg, config_fields(), kConfigFlags);
  cmd->add_flag("--chat", a->chat, "Wrap the prompt in the model's chat format");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "Do not stop at end-of-generation tokens");
  cmd->add_flag("--lookup", a->lookup,
                "Greedy speculative decoding with prompt-lookup drafts (n-grams of the context)");
  cmd->callback([a, exit_code] {
    *exit_code = kExitUsage;
    auto fail = [](const Error& e) {
      std::fprintf(stderr, "fish generate: %s\n", e.message.c_str());
    };
    if (Status st = check_env_knobs(/*with_gpu=*/true); !st.ok()) return fail(st.error());
    auto load_r = model_load_options(a->cfg);
    if (!load_r.ok()) return fail(load_r.error());
    auto opt_r = session_options(a->cfg);  // isa, weight path, int4 format as a fish run cell
    if (!opt_r.ok()) return fail(opt_r.error());
    auto model_r = Model::load(a->model, load_r.value());
    if (!model_r.ok()) return fail(model_r.error());
    std::shared_ptr<const Model> model = model_r.value();
    if (const RequantResult* rq = model->requant())
      std::fprintf(stderr, "fish generate: requant %d: %s in %.2f s (%.1f ns/weight, %d threads)\n",
                   int(a->cfg.requant), rq->describe().c_str(), rq->seconds, rq->ns_per_weight(),
                   rq->n_threads);
    if (const KquantRepackStats& kr = model->kquant_repack(); kr.matrices > 0)
      std::fprintf(stderr, "fish generate: kquant_repack %s: %s\n", a->cfg.kquant_repack.c_str(),
                   kr.describe().c_str());
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
    SessionOptions opt = opt_r.value();
    const int64_t need = int64_t(prompt.size()) + a->gen.n_predict;
    opt.n_ctx = a->gen.n_ctx > 0 ? a->gen.n_ctx : std::min(need, p.n_ctx_train);
    if (need > opt.n_ctx)
      return fail(make_error("prompt ({} tokens) + n ({}) exceed n_ctx {} (hint: --n-ctx)",
                             prompt.size(), a->gen.n_predict, opt.n_ctx));
    // Stage 1 GPU offload when a backend is registered (FISH_GPU, FISH_GPU_LAYERS; docs/gpu.md).
    std::string gpu_detail = "off";
#if FISH_HAVE_VULKAN
    gpu_detail = gpu::vulkan_status();
#endif
    const int gpu_requant = int(a->cfg.gpu_requant);
    if (gpu_requant >= 0 && !gpu_backend())
      return fail(make_error("--gpu-requant {}: no GPU backend ({})", gpu_requant, gpu_detail));
    if (ComputeBackend* b = gpu_backend()) {
      auto cap = gpu_layers_from_env();
      if (!cap.ok()) return fail(cap.error());
#if FISH_HAVE_VULKAN
      if (auto* vb = dynamic_cast<vk::VulkanBackend*>(b))
        vb->set_requant_threads(int(a->cfg.n_threads));
      if (gpu_requant >= 0) {
        auto* vb = dynamic_cast<vk::VulkanBackend*>(b);
        if (!vb) return fail(make_error("--gpu-requant needs the Vulkan backend"));
        if (Status st = vb->set_run_requant(gpu_requant); !st.ok()) return fail(st.error());
      }
#endif
      // Stage 2 span over the placed layers unless FISH_GPU_SPAN=0.
      std::shared_ptr<GpuPlacement> pl = GpuPlacement::place_layers(
          *model, *b, cap.value(), span_request_from_env(opt.n_ctx, opt.n_batch));
      gpu_detail = pl->summary();
      if (pl->bytes() > 0) opt.gpu = pl;
#if FISH_HAVE_VULKAN
      if (pl->bytes() > 0) gpu_detail += "; " + gpu::vulkan_describe();
#endif
    }
    auto sess_r = Session::create(model, opt);
    if (!sess_r.ok()) return fail(sess_r.error());
    Session& s = *sess_r.value();
    Sampler sampler(sampling_params(a->gen));
    if (a->lookup && !a->cfg.draft_model.empty())
      return fail(make_error("--lookup and --draft: one drafter at a time"));
    const bool spec = a->lookup || !a->cfg.draft_model.empty();
    if (spec && sampler.params().temperature > 0.0f)
      return fail(make_error("speculative decoding is greedy (hint: --temp 0)"));
    auto drafter_r = make_drafter(a->lookup ? "lookup"
                                  : spec    ? "draft"
                                            : "off",
                                  a->cfg.draft_model, *model, opt.n_ctx, int(a->cfg.n_threads));
    if (!drafter_r.ok()) return fail(drafter_r.error());
    Drafter* drafter = drafter_r.value().drafter.get();
    Streamer out(tok);

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
      auto st = speculative_decode(s, *drafter, prompt, next, a->gen.n_predict, a->cfg.draft_n,
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
          drafter->describe(), a->cfg.draft_n, ss.verifies, ss.accepted_per_verify(), ss.accepted,
          ss.drafted);
    }
    for (int64_t i = 0; drafter == nullptr && i < a->gen.n_predict; ++i) {
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
                 s.weight_path() == WeightPath::ref ? "f32" : a->cfg.act.c_str(), path.c_str(),
                 gpu_detail.c_str(), spec_detail.c_str());
    if (s.gpu_fallbacks() > 0)  // why: the backend's status names the failed call
      std::fprintf(stderr, "fish generate: GPU calls failed %lld time(s) and ran on the CPU (%s)\n",
                   (long long)s.gpu_fallbacks(), gpu_status_now().c_str());
    // FISH_GPU_PROFILE=2: per-stage GPU time of the span (timestamp queries).
    if (opt.gpu && opt.gpu->span() && !opt.gpu->span()->profile().empty())
      std::fprintf(stderr, "fish generate: %s\n", opt.gpu->span()->profile().c_str());
    *exit_code = kExitOk;
  });
}

}  // namespace fish
