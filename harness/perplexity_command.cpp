// `fish perplexity -m MODEL -f TEXT [-c N] [--chunks N] [--reference-model REF]
// [--reference-logits FILE] [--json] [Config flags]`: llama-perplexity's chunked perplexity and,
// against a reference model, its KL divergence / Δp / same-top statistics (perplexity.h,
// docs/perplexity.md). The reference's log-probabilities are saved once (reference_logits.h) and
// reused by every later run on the same text and chunking.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/env_knobs.h"
#include "base/path_checks.h"
#include "base/sha256.h"
#include "engine/config.h"
#include "engine/model.h"
#include "engine/sampling.h"
#include "engine/session.h"
#include "engine/tokenizer.h"
#include "harness/cli_fields.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "harness/perplexity.h"
#include "harness/reference_logits.h"

namespace fish {
namespace {

struct Loaded {
  std::shared_ptr<const Model> model;
  std::unique_ptr<Session> session;
};

Result<Loaded> load(const std::string& path, const Config& c, int64_t n_ctx) {
  FISH_ASSIGN_OR_RETURN(ModelLoadOptions lo, model_load_options(c));
  FISH_ASSIGN_OR_RETURN(SessionOptions so, session_options(c));
  Loaded l;
  FISH_ASSIGN_OR_RETURN(l.model, Model::load(path, lo));
  so.n_ctx = n_ctx;
  FISH_ASSIGN_OR_RETURN(l.session, Session::create(l.model, so));
  return l;
}

// The reference's identity for the cache key and the file's header: path, size and mtime (not
// the file's sha256: hashing an 8B model on every run would cost seconds; a rewritten file gets a
// new mtime).
Result<nlohmann::json> file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return make_error("{}: cannot stat", path);
  std::error_code ec;
  const std::string abs = std::filesystem::weakly_canonical(path, ec).string();
  return nlohmann::json{{"path", ec ? path : abs},
                        {"bytes", int64_t(st.st_size)},
                        {"mtime_ns", int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec}};
}

// Scores one chunk's positions: fn(k, lp, top) for k in [0, n_scored).
Status score_chunk(Session& s, const TextChunks& tc, int64_t c, int64_t n_batch,
                   const std::function<void(int64_t, std::span<const float>, int32_t)>& fn) {
  std::vector<float> lp;
  return s.teacher_force(
      tc.chunk(c),
      [&](int64_t t, std::span<const float> logits) {
        if (t < tc.first || t >= tc.n_ctx - 1) return;
        lp.resize(logits.size());
        const int32_t top = log_softmax(logits, lp.data());
        fn(t - tc.first, lp, top);
      },
      n_batch);
}

}  // namespace

void add_perplexity_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string model, text, reference_model, reference_logits;
    Config cfg;
    std::string reference_act = "f32";
    int64_t n_ctx = 512;
    int64_t n_chunks = 0;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity",
      "Perplexity of a model over a text in llama-perplexity's chunks (n_ctx tokens from an "
      "empty cache, the second half of each scored) and, against a reference model (e.g. a "
      "q8_0 or f16 file of the same model), its KL-divergence statistics: mean +/- standard "
      "error, quantiles, delta-p and same-top-p, named as llama-perplexity names them. The "
      "reference's log-probabilities are computed once and saved (--reference-logits, default "
      "$FISH_CACHE/logits/); later runs against the same text and chunking reuse them.\n\n"
      "Example:\n"
      "  fish perplexity -m models/gemma-3-270m-q4_k_m.gguf -f text.txt -c 256 \\\n"
      "      --reference-model gemma-3-270m-q8_0.gguf");
  cmd->add_option("-m,--model", a->model, "GGUF model to score")->required();
  cmd->add_option("-f,--file", a->text, "Text file (UTF-8)")->required();
  cmd->add_option("-c,--ctx-size", a->n_ctx, "Tokens per chunk (llama-perplexity's -c)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(4), int64_t(1) << 20));
  cmd->add_option("--chunks", a->n_chunks, "Chunks to score (0: as many as the text fills)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--reference-model", a->reference_model,
                  "Reference GGUF (same vocabulary): KL statistics against it");
  cmd->add_option("--reference-logits", a->reference_logits,
                  "Saved reference log-probabilities: read when it exists (and matches), written "
                  "there from --reference-model when it does not");
  cmd->add_option("--reference-act", a->reference_act,
                  "Activations of the reference run: f32 (default, the reference path) or int8")
      ->check(CLI::IsMember({"f32", "int8"}));
  cmd->add_flag("--json", a->json, "Print the statistics as one JSON object on stdout");
  static constexpr FieldFlag kConfigFlags[] = {
      {"-t,--threads", "n_threads", "Threads (0: FISH_THREADS or all hardware threads)"},
      {"-b,--n-batch", "n_batch", "Tokens per forward pass within a chunk"},
      {"--act", "act", "Activations of the scored model: int8 (quantised) or f32 (reference)"},
      {"--requant", "requant", "Re-quantise the scored model's matmul weights at load (0..3)"},
      {"--kquant-repack", "kquant_repack", "x16 layout for K-quant matrices (auto, on, off, keep)"},
      {"--weight-path", "weight_path", "CPU weight path (auto, gguf, w4a8, w4a16, ref)"},
      {"--isa", "isa", "Kernel ISA cap (auto, scalar, avx2, avx512)"},
  };
  add_field_options(cmd, &a->cfg, config_fields(), kConfigFlags);
  cmd->callback([a, exit_code] {
    *exit_code = kExitUsage;
    auto fail = [](const Error& e) {
      std::fprintf(stderr, "fish perplexity: %s\n", e.message.c_str());
    };
    if (Status st = check_env_knobs(/*with_gpu=*/false); !st.ok()) return fail(st.error());
    if (!a->reference_logits.empty() && a->reference_model.empty() &&
        !std::filesystem::exists(a->reference_logits))
      return fail(
          make_error("--reference-logits {}: no such file (give --reference-model to "
                     "make it)",
                     a->reference_logits));
    auto text = read_regular_file(a->text, kMaxTextFileBytes, "a text file");
    if (!text.ok()) return fail(text.error());
    auto lm = load(a->model, a->cfg, a->n_ctx);
    if (!lm.ok()) return fail(lm.error());
    auto tok = Tokenizer::from_gguf(lm.value().model->gguf());
    if (!tok.ok()) return fail(tok.error());
    auto chunks = chunk_text(tok.value(), text.value(), a->n_ctx, a->n_chunks);
    if (!chunks.ok()) return fail(make_error("{}: {}", a->text, chunks.error().message));
    const TextChunks& tc = chunks.value();
    const int64_t n_vocab = lm.value().model->params().n_vocab;
    LogitsLayout layout{n_vocab, tc.n_ctx, tc.first, tc.n_chunks, tokens_sha256(tc.tokens)};
    std::fprintf(stderr,
                 "fish perplexity: %s: %lld tokens, %lld chunks of %lld (scoring %lld per chunk)\n",
                 a->text.c_str(), (long long)tc.text_tokens, (long long)tc.n_chunks,
                 (long long)tc.n_ctx, (long long)tc.n_scored());

    // The reference: a matching saved file, else a run of the reference model saved as it goes.
    const bool with_ref = !a->reference_model.empty() || !a->reference_logits.empty();
    std::optional<ReferenceLogits> saved;
    Loaded ref;
    std::unique_ptr<ReferenceLogitsWriter> writer;
    Config ref_cfg;
    ref_cfg.n_threads = a->cfg.n_threads;
    ref_cfg.n_batch = a->cfg.n_batch;
    ref_cfg.act = a->reference_act;
    if (with_ref) {
      nlohmann::json prov = {{"text", {{"path", a->text}, {"sha256", sha256_hex(text.value())}}},
                             {"config", fields_to_json(ref_cfg, config_fields())}};
      std::string path = a->reference_logits;
      if (!a->reference_model.empty()) {
        auto id = file_identity(a->reference_model);
        if (!id.ok()) return fail(id.error());
        prov["model"] = id.value();
        if (path.empty()) {
          const std::string key = sha256_hex(nlohmann::json{
              {"model", id.value()},
              {"prov", prov},
              {"tokens", layout.tokens_sha256},
              {"n_ctx", tc.n_ctx},
              {"n_chunks", tc.n_chunks}}.dump());
          path = fish_cache_dir() + "/logits/" + key.substr(0, 24) + ".fishlgp";
        }
      }
      if (std::filesystem::exists(path)) {
        auto r = ReferenceLogits::open(path);
        if (!r.ok()) return fail(r.error());
        if (Status st = r.value().check_matches(layout); !st.ok()) return fail(st.error());
        saved = std::move(r.value());
        std::fprintf(stderr, "fish perplexity: reference log-probabilities from %s\n",
                     path.c_str());
      } else {
        auto r = load(a->reference_model, ref_cfg, tc.n_ctx);
        if (!r.ok()) return fail(r.error());
        ref = std::move(r.value());
        if (ref.model->params().n_vocab != n_vocab)
          return fail(make_error("--reference-model {}: a vocabulary of {}, {} has {}",
                                 a->reference_model, ref.model->params().n_vocab, a->model,
                                 n_vocab));
        auto rtok = Tokenizer::from_gguf(ref.model->gguf());
        if (!rtok.ok()) return fail(rtok.error());
        auto rchunks = chunk_text(rtok.value(), text.value(), a->n_ctx, tc.n_chunks);
        if (!rchunks.ok() || rchunks.value().tokens != tc.tokens)
          return fail(
              make_error("--reference-model {}: its tokenizer cuts {} into other tokens "
                         "than {}'s (KL needs one token sequence)",
                         a->reference_model, a->text, a->model));
        auto w = ReferenceLogitsWriter::create(path, layout, prov);
        if (!w.ok()) return fail(w.error());
        writer = std::move(w.value());
        std::fprintf(stderr, "fish perplexity: reference %s (act %s), saving to %s\n",
                     a->reference_model.c_str(), a->reference_act.c_str(), path.c_str());
      }
    }

    std::vector<PositionScore> scores;
    scores.reserve(size_t(tc.n_chunks * tc.n_scored()));
    std::vector<float> ref_lp(with_ref ? size_t(tc.n_scored()) * size_t(n_vocab) : 0);
    std::vector<int32_t> ref_top(with_ref ? size_t(tc.n_scored()) : 0);
    const int64_t n_batch = a->cfg.n_batch;
    for (int64_t c = 0; c < tc.n_chunks; ++c) {
      if (with_ref) {
        if (saved) {
          for (int64_t k = 0; k < tc.n_scored(); ++k) {
            float* out = ref_lp.data() + size_t(k) * size_t(n_vocab);
            saved->read(c, k, out);
            ref_top[size_t(k)] = greedy_token(std::span<const float>(out, size_t(n_vocab)));
          }
        } else {
          Status st = score_chunk(*ref.session, tc, c, n_batch,
                                  [&](int64_t k, std::span<const float> lp, int32_t top) {
                                    std::copy(lp.begin(), lp.end(), ref_lp.begin() + k * n_vocab);
                                    ref_top[size_t(k)] = top;
                                  });
          if (!st.ok()) return fail(st.error());
          for (int64_t k = 0; k < tc.n_scored(); ++k) {
            Status w = writer->append(std::span<const float>(
                ref_lp.data() + size_t(k) * size_t(n_vocab), size_t(n_vocab)));
            if (!w.ok()) return fail(w.error());
          }
        }
      }
      const std::span<const int32_t> toks = tc.chunk(c);
      Status st = score_chunk(
          *lm.value().session, tc, c, n_batch,
          [&](int64_t k, std::span<const float> lp, int32_t top) {
            const int32_t next = toks[size_t(tc.first + k + 1)];
            std::span<const float> r;
            if (with_ref)
              r = std::span<const float>(ref_lp.data() + size_t(k) * size_t(n_vocab),
                                         size_t(n_vocab));
            scores.push_back(score_position(lp, top, r, with_ref ? ref_top[size_t(k)] : 0, next));
          });
      if (!st.ok()) return fail(st.error());
      // Running perplexity after each chunk, as llama-perplexity prints it.
      std::fprintf(stderr, "[%lld]%.4f,", (long long)(c + 1), summarize(scores, false).ppl);
    }
    std::fputc('\n', stderr);
    if (writer) {
      if (Status st = writer->finish(); !st.ok()) return fail(st.error());
    }
    const PerplexityStats s = summarize(scores, with_ref);
    if (a->json) {
      nlohmann::json j = stats_json(s);
      j["model"] = a->model;
      j["text"] = a->text;
      j["n_ctx"] = tc.n_ctx;
      j["n_chunks"] = tc.n_chunks;
      if (with_ref)
        j["reference"] = !a->reference_model.empty() ? a->reference_model : a->reference_logits;
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::fputs(stats_text(s).c_str(), stdout);
    }
    *exit_code = kExitOk;
  });
}

}  // namespace fish
