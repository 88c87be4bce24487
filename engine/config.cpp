// Config field table and the non-template helpers of the field machinery; see config.h.
#include "engine/config.h"

#include <algorithm>

#include "kernels/cpu_features.h"

namespace fish {

std::string_view field_type_name(FieldType t) {
  switch (t) {
    case FieldType::integer:
      return "integer";
    case FieldType::number:
      return "number";
    case FieldType::boolean:
      return "boolean";
    case FieldType::string:
      return "string";
    case FieldType::string_list:
      return "list of strings";
  }
  return "?";
}

std::span<const FieldSpec<Config>> config_fields() {
  // One row per knob: name, member, doc, allowed values, range. Keep in column order.
  static const std::vector<FieldSpec<Config>> table = {
      {"n_ctx", &Config::n_ctx, "KV cache positions (must hold n_prompt + n_gen)", {}, 1, 1 << 20},
      {"n_threads",
       &Config::n_threads,
       "CPU threads (0: FISH_THREADS or all hardware threads; at most llama.cpp's 512)",
       {},
       0,
       512},
      {"act",
       &Config::act,
       "activations: int8 (quantised per row, integer dots) or f32 (dequantised weights, f32 "
       "dots; the reference)",
       {"int8", "f32"}},
      {"n_batch", &Config::n_batch, "prefill tokens per matrix x matrix pass", {}, 1, 1 << 16},
      {"isa",
       &Config::isa,
       "CPU kernel ISA: auto (best the CPU runs, capped by FISH_ISA) or a level; a level the CPU "
       "cannot run fails the cell",
       {"auto", "scalar", "avx2", "avx512"}},
      {"requant",
       &Config::requant,
       "re-quantisation at load: 0 off, 1 every quantised weight -> fq3, 2 q6_k -> q4_k, 3 q4_k "
       "-> fq3 and q6_k -> q4_k (cells with different modes load the model separately)",
       {},
       0,
       3},
      {"kquant_repack",
       &Config::kquant_repack,
       "Q4_K/Q5_K/Q6_K/Q8_0/Q5_0 matrices repacked at load into the x16 interleaved layout (16 "
       "rows per panel; kernels/kquant_x16.h), replacing the GGUF bytes in memory: auto (on where "
       "the kernel ISA is avx2 or avx512 and weight_path is auto/gguf), "
       "on, off, keep (on, GGUF pages kept)",
       {"auto", "on", "off", "keep"}},
      {"weight_path",
       &Config::weight_path,
       "CPU weights: auto (fish_i4 files: w4a8 with AMX, else w4a16; others: gguf), gguf, w4a8 "
       "(int4 x int8), w4a16 (int4 x bf16), ref (f32 weights and activations)",
       {"auto", "gguf", "w4a8", "w4a16", "ref"}},
      {"group_size",
       &Config::group_size,
       "w4a8/w4a16 repacking: int4 group size (must divide every matrix row)",
       {"32", "64", "128"}},
      {"zero_point",
       &Config::zero_point,
       "w4a8/w4a16 repacking: sym (zero point 8), asym (integer zero per group) or fp (f16 offset "
       "per group: q4_0/q4_1/q4_k repack exactly at group_size 32)",
       {"sym", "asym", "fp"}},
      {"quantize_head",
       &Config::quantize_head,
       "w4a8/w4a16: int4 output head (false keeps it on the gguf path)",
       {}},
      {"quantize_embedding",
       &Config::quantize_embedding,
       "w4a8/w4a16: embedding rows from an int4 copy",
       {}},
      {"prefill_dequant",
       &Config::prefill_dequant,
       "w4a16: batches above dequant_threshold dequantise + GEMM (false: the decode kernel)",
       {}},
      {"direct_dequant",
       &Config::direct_dequant,
       "w4a16: dequantise from the packed layout (false: keep a row-major duplicate)",
       {}},
      {"dequant_threshold",
       &Config::dequant_threshold,
       "w4a16: tokens per batch above which prefill dequantises",
       {},
       0,
       1 << 20},
      {"gpu_layers",
       &Config::gpu_layers,
       "gpu path: at most this many layers on the GPU (-1: as many as fit; FISH_GPU_LAYERS caps "
       "it too); 0 places nothing",
       {},
       -1,
       1 << 20},
      {"vram_budget_mb",
       &Config::vram_budget_mb,
       "gpu path: FISH's ceiling on device memory in MiB for the cell (0: the backend's, i.e. "
       "FISH_VRAM_BUDGET_MB or 85% of free at open; FISH_VRAM_BUDGET_MB caps it too)",
       {},
       0,
       1 << 24},
      {"gpu_requant",
       &Config::gpu_requant,
       "gpu path: the device gets a re-quantised copy of the placed weights (more layers fit; the "
       "CPU copy is untouched): 0 off, 1 every quantised weight -> fq3, 2 q6_k -> q4_k, 3 q4_k -> "
       "fq3 and q6_k -> q4_k (rows of 256-value blocks only); -1: FISH_GPU_REQUANT (default 0)",
       {},
       -1,
       3},
      {"gpu_span",
       &Config::gpu_span,
       "gpu path: the placed layers run as one stage 2 layer span (one submit per forward); false: "
       "stage 1, one submit per projection group (FISH_GPU_SPAN=0 turns spans off everywhere)",
       {}},
      {"gpu_pipeline",
       &Config::gpu_pipeline,
       "gpu path: greedy decode on a span that runs the whole model keeps token ids on the GPU "
       "(its embedding row looked up there) and queues step N+1 before reading step N's id; "
       "false: one synchronous step at a time (FISH_GPU_PIPELINE=0 turns it off everywhere)",
       {}},
      {"swa_kv",
       &Config::swa_kv,
       "sliding-window layers' KV (Gemma 3): ring keeps window + n_batch rows (kv_truncate rolls "
       "back at most n_batch positions), full keeps n_ctx rows; logits are identical",
       {"ring", "full"}},
      {"depth",
       &Config::depth,
       "-1: decode follows the prompt; >= 0: llama-bench's -d: the KV cache holds this many "
       "positions (an untimed prefill of the prompt tokens, repeated) before the timed prefill "
       "and, afresh, before the timed decode (both engines)",
       {},
       -1,
       1 << 20},
      {"engine",
       &Config::engine,
       "what measures the cell: fish, or llama.cpp (llama-bench as a subprocess on the same model "
       "file with the cell's n_prompt, n_gen, depth, n_threads, n_batch, gpu_layers and "
       "repetitions; fields llama.cpp cannot express make the row an error; docs/peers.md)",
       {"fish", "llama.cpp"}},
      {"llama_bench",
       &Config::llama_bench,
       "llama.cpp cells: the llama-bench binary, a path or cpu / vulkan / cuda (the build of "
       "scripts/peer/build_llama_cpp.sh in $FISH_CACHE/peer); empty: FISH_LLAMA_BENCH",
       {}},
      {"speculative",
       &Config::speculative,
       "greedy speculative decoding (docs/speculative.md): off, draft (draft_model drafts) or "
       "lookup (prompt n-gram lookup); the tokens equal plain greedy decoding's, decode_tok_s "
       "is the speculative loop's, spec_speedup its ratio to plain decode in the same repetition",
       {"off", "draft", "lookup"}},
      {"draft_model",
       &Config::draft_model,
       "speculative draft: the draft model's GGUF path (same vocabulary and tokenizer as the "
       "model; runs on the CPU; the other modes ignore it); \"\": none",
       {}},
      {"draft_n", &Config::draft_n, "speculative: tokens drafted per verify", {}, 1, 16},
  };
  return table;
}

std::span<const ValueName> config_value_names(std::string_view name) {
  // The requant modes as the field docs above describe them.
  static const ValueName kRequant[] = {
      {0, "0 off"}, {1, "1 all->fq3"}, {2, "2 q6_k->q4_k"}, {3, "3 q4_k->fq3+q6_k->q4_k"}};
  static const ValueName kGpuRequant[] = {{-1, "FISH_GPU_REQUANT", true},
                                          {0, "0 off"},
                                          {1, "1 all->fq3"},
                                          {2, "2 q6_k->q4_k"},
                                          {3, "3 q4_k->fq3+q6_k->q4_k"}};
  static const ValueName kGpuLayers[] = {{-1, "all that fit", true}};
  static const ValueName kVramBudget[] = {{0, "backend's (unset)", true}};
  if (name == "requant") return kRequant;
  if (name == "gpu_requant") return kGpuRequant;
  if (name == "gpu_layers") return kGpuLayers;
  if (name == "vram_budget_mb") return kVramBudget;
  return {};
}

const FieldSpec<Config>* find_config_field(std::string_view name) {
  return find_field(config_fields(), name);
}

Result<SessionOptions> session_options(const Config& c) {
  SessionOptions o;
  o.n_ctx = c.n_ctx;
  o.n_threads = int(c.n_threads);
  o.n_batch = c.n_batch;
  if (c.act == "int8") {
    o.act = ActMode::int8;
  } else if (c.act == "f32") {
    o.act = ActMode::f32;
  } else {
    return make_error("config: act \"{}\" is not allowed (allowed: int8, f32)", c.act);
  }
  const std::optional<SwaKv> swa = parse_swa_kv(c.swa_kv);
  if (!swa)
    return make_error("config: swa_kv \"{}\" is not allowed (allowed: ring, full)", c.swa_kv);
  o.swa_kv = *swa;
  if (c.isa == "auto") {
    o.isa = best_isa();
  } else {
    std::optional<Isa> isa = parse_isa_name(c.isa);
    if (!isa)
      return make_error("config: isa \"{}\" is not allowed (allowed: auto, scalar, avx2, avx512)",
                        c.isa);
    if (!isa_supported(*isa))
      return make_error("config: isa {}: this CPU/build cannot run it (best here: {})", c.isa,
                        isa_name(best_isa()));
    o.isa = *isa;
  }
  const std::optional<WeightPath> wp = parse_weight_path(c.weight_path);
  if (!wp)
    return make_error(
        "config: weight_path \"{}\" is not allowed (allowed: auto, gguf, w4a8, w4a16, ref)",
        c.weight_path);
  const std::optional<Int4ZeroPoint> zp = parse_int4_zero_point(c.zero_point);
  if (!zp)
    return make_error("config: zero_point \"{}\" is not allowed (allowed: sym, asym, fp)",
                      c.zero_point);
  if (c.group_size != 32 && c.group_size != 64 && c.group_size != 128)
    return make_error("config: group_size {} is not allowed (allowed: 32, 64, 128)", c.group_size);
  o.weights.weight_path = *wp;
  o.weights.fmt = {int(c.group_size), *zp};
  o.weights.quantize_head = c.quantize_head;
  o.weights.quantize_embedding = c.quantize_embedding;
  o.weights.prefill_dequant = c.prefill_dequant;
  o.weights.direct_dequant = c.direct_dequant;
  o.weights.dequant_threshold = c.dequant_threshold;
  return o;
}

Result<GpuRequest> gpu_request(const Config& c) {
  FISH_ASSIGN_OR_RETURN(int64_t env_cap, gpu_layers_from_env());
  GpuRequest r;
  r.max_layers = c.gpu_layers;
  if (env_cap >= 0) r.max_layers = r.max_layers < 0 ? env_cap : std::min(r.max_layers, env_cap);
  if (c.vram_budget_mb > 0) r.upload.budget_bytes = uint64_t(c.vram_budget_mb) << 20;
  if (c.gpu_requant >= 0) r.upload.requant = int(c.gpu_requant);
  r.upload.n_threads = int(c.n_threads);
  r.span = span_request_from_env(c.gpu_span ? c.n_ctx : 0, c.n_batch);
  r.span.pipeline = r.span.pipeline && c.gpu_pipeline;
  return r;
}

void SessionPlan::set_n_ctx(int64_t n_ctx) {
  session.n_ctx = n_ctx;
  if (gpu && gpu->span.n_ctx > 0) gpu->span.n_ctx = n_ctx;
}

Result<SessionPlan> plan_session(const Config& c, bool gpu_path) {
  SessionPlan p;
  FISH_ASSIGN_OR_RETURN(p.load, model_load_options(c));
  FISH_ASSIGN_OR_RETURN(p.session, session_options(c));
  if (gpu_path) {
    FISH_ASSIGN_OR_RETURN(p.gpu, gpu_request(c));
    p.load.defer_x16 = true;  // the CPU's matrices are packed when the session knows them
  }
  return p;
}

Result<ModelLoadOptions> model_load_options(const Config& c) {
  if (c.requant < 0 || c.requant > 3)
    return make_error("config: requant {} is out of range (expected 0 to 3)", c.requant);
  ModelLoadOptions o;
  o.requant = int(c.requant);
  if (c.kquant_repack == "on" || c.kquant_repack == "keep") {
    o.kquant_repack = true;
    o.keep_gguf = c.kquant_repack == "keep";
  } else if (c.kquant_repack == "auto") {
    // Measured (docs/cpu-kernels.md, Measured): x16 is ahead at avx2 for every type, and at
    // avx512 for Q4_K/Q5_K/Q6_K (decode 1.2-1.7x, prefill 2.3-3.1x) and Q8_0 (prefill 3.5x;
    // decode 0.95x on one machine, 2.1x on the quiet EPYC, where Gemma 3 and SmolLM2 (tied Q8_0
    // heads) decoded 2.13x / 1.29x faster at 1 thread, 1.46x / 1.15x at 2).
    const std::optional<Isa> isa =
        c.isa == "auto" ? std::optional<Isa>(best_isa()) : parse_isa_name(c.isa);
    o.kquant_repack = isa && *isa >= Isa::avx2 && isa_supported(*isa) &&
                      (c.weight_path == "auto" || c.weight_path == "gguf");
  } else if (c.kquant_repack != "off") {
    return make_error("config: kquant_repack \"{}\" is not allowed (allowed: auto, on, off, keep)",
                      c.kquant_repack);
  }
  o.n_threads = int(c.n_threads);
  return o;
}

namespace field_detail {

std::string describe_json(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::string:
      return "string " + v.dump();
    case nlohmann::json::value_t::array:
      return v.empty() ? "an empty list" : "a list";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "boolean " + v.dump();
    default:
      return v.dump();
  }
}

std::string allowed_list(std::span<const std::string_view> allowed) {
  std::string s;
  for (std::string_view a : allowed) s += fmt::format("{}{}", s.empty() ? "" : ", ", a);
  return s;
}

std::string range_text(double min, double max) {
  const bool has_min = std::isfinite(min), has_max = std::isfinite(max);
  // Integral bounds print as integers (4294967295, not 4.294967295e+09).
  auto text = [](double x) {
    return x == std::floor(x) && std::fabs(x) < 1e18 ? fmt::format("{:.0f}", x)
                                                     : fmt::format("{}", x);
  };
  if (has_min && has_max) return text(min) + " to " + text(max);
  if (has_min) return ">= " + text(min);
  if (has_max) return "<= " + text(max);
  return "";
}

}  // namespace field_detail
}  // namespace fish
