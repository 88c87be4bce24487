#include "engine/synthetic_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "engine/gguf.h"
#include "kernels/quantize_fast.h"

namespace fish {
namespace {

constexpr FileType kFileTypes[] = {
    {"f32", 0, GgmlType::f32, false},     {"f16", 1, GgmlType::f16, false},
    {"bf16", 32, GgmlType::bf16, false},  {"q8_0", 7, GgmlType::q8_0, false},
    {"q4_0", 2, GgmlType::q4_0, false},   {"q4_1", 3, GgmlType::q4_1, false},
    {"q5_0", 8, GgmlType::q5_0, false},   {"q5_1", 9, GgmlType::q5_1, false},
    {"q4_k", 14, GgmlType::q4_k, false},  {"q5_k", 16, GgmlType::q5_k, false},
    {"q6_k", 18, GgmlType::q6_k, false},  {"q4_k_m", 15, GgmlType::q4_k, true},
    {"q5_k_m", 17, GgmlType::q5_k, true},
};

bool is_float(GgmlType t) {
  return t == GgmlType::f32 || t == GgmlType::f16 || t == GgmlType::bf16;
}

// llama.cpp's fallback when a row is not a whole number of 256-value super-blocks.
GgmlType fit_row(GgmlType t, int64_t row) {
  if (row % type_info(t).block_elems == 0) return t;
  switch (t) {
    case GgmlType::q4_k:
      return GgmlType::q5_0;
    case GgmlType::q5_k:
      return GgmlType::q5_1;
    case GgmlType::q6_k:
      return GgmlType::q8_0;
    default:
      return GgmlType::f16;
  }
}

// llama.cpp's use_more_bits(i_layer, n_layers): first and last eighth, and every third between.
bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// splitmix64: a fast, well-mixed generator; one stream per (seed, tensor, row).
struct SplitMix64 {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

// Approximately N(0, sigma^2): Irwin-Hall sum of four 16-bit uniforms from one 64-bit draw
// (variance 4/12, rescaled). Cheap enough that quantisation, not generation, dominates.
void fill_gaussian(SplitMix64& rng, float sigma, float* out, int64_t n) {
  const float scale = sigma * std::sqrt(3.0f) / 65536.0f;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t r = rng.next();
    int32_t sum = int32_t(r & 0xffff) + int32_t((r >> 16) & 0xffff) + int32_t((r >> 32) & 0xffff) +
                  int32_t(r >> 48) - 2 * 65536;
    out[i] = float(sum) * scale;
  }
}

// The fast quantisers write the same bytes as type_info(t).quantize_row, ~10x sooner.
void quantize_float_row(GgmlType t, const float* src, uint8_t* dst, int64_t n) {
  if (t == GgmlType::f32) {
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  }
  quantize_row_fast(t, src, dst, n);
}

std::vector<std::string> synthetic_vocab(int n_vocab) {
  // SentencePiece-style: <unk> <s> </s>, the 256 byte tokens (llama.cpp needs <0x0A>), then
  // unique made-up pieces "▁a", "▁b", ..., "▁ba", ... to the vocabulary size.
  std::vector<std::string> v = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) v.push_back(fmt::format("<0x{:02X}>", b));
  for (int64_t i = 0; int(v.size()) < n_vocab; ++i) {
    std::string word;
    for (int64_t x = i;; x = x / 26 - 1) {
      word.insert(word.begin(), char('a' + x % 26));
      if (x < 26) break;
    }
    v.push_back("\xe2\x96\x81" + word);
  }
  v.resize(size_t(n_vocab));
  return v;
}

}  // namespace

std::vector<std::string_view> file_type_names() {
  std::vector<std::string_view> names;
  for (const FileType& f : kFileTypes) names.push_back(f.name);
  return names;
}

Result<FileType> parse_file_type(std::string_view name) {
  for (const FileType& f : kFileTypes)
    if (f.name == name) {
      if (!type_info(f.base).quantize_row && f.base != GgmlType::f32)
        return make_error("make-model: type '{}' has no reference quantiser in this build", name);
      return f;
    }
  std::string all;
  for (std::string_view n : file_type_names())
    all += fmt::format("{}{}", all.empty() ? "" : ", ", n);
  return make_error("make-model: unknown type '{}' (expected one of: {})", name, all);
}

std::vector<SyntheticTensor> synthetic_tensors(const ModelShape& s, const FileType& ft) {
  const bool quantized = !is_float(ft.base);
  const GgmlType out_type = quantized && ft.base != GgmlType::q8_0 ? GgmlType::q6_k : ft.base;
  auto matrix = [&](std::string name, int64_t row, int64_t rows, GgmlType t) {
    return SyntheticTensor{std::move(name), {row, rows}, fit_row(t, row)};
  };
  auto vec = [](std::string name, int64_t n) {
    return SyntheticTensor{std::move(name), {n}, GgmlType::f32};
  };
  const int64_t q_dim = int64_t(s.n_head) * s.head_dim, kv_dim = int64_t(s.n_head_kv) * s.head_dim;
  std::vector<SyntheticTensor> t;
  t.push_back(matrix("token_embd.weight", s.n_embd, s.n_vocab, s.tied_output ? out_type : ft.base));
  t.push_back(vec("output_norm.weight", s.n_embd));
  if (!s.tied_output) t.push_back(matrix("output.weight", s.n_embd, s.n_vocab, out_type));
  const bool gemma = s.architecture == "gemma3";
  for (int i = 0; i < s.n_layer; ++i) {
    auto n = [i](const char* what) { return fmt::format("blk.{}.{}.weight", i, what); };
    const GgmlType more = ft.mixed && use_more_bits(i, s.n_layer) ? GgmlType::q6_k : ft.base;
    t.push_back(vec(n("attn_norm"), s.n_embd));
    t.push_back(matrix(n("attn_q"), s.n_embd, q_dim, ft.base));
    t.push_back(matrix(n("attn_k"), s.n_embd, kv_dim, ft.base));
    t.push_back(matrix(n("attn_v"), s.n_embd, kv_dim, more));
    t.push_back(matrix(n("attn_output"), q_dim, s.n_embd, ft.base));
    if (gemma) {
      t.push_back(vec(n("attn_q_norm"), s.head_dim));
      t.push_back(vec(n("attn_k_norm"), s.head_dim));
      t.push_back(vec(n("post_attention_norm"), s.n_embd));
      t.push_back(vec(n("post_ffw_norm"), s.n_embd));
    }
    t.push_back(vec(n("ffn_norm"), s.n_embd));
    t.push_back(matrix(n("ffn_gate"), s.n_embd, s.n_ff, ft.base));
    t.push_back(matrix(n("ffn_up"), s.n_embd, s.n_ff, ft.base));
    t.push_back(matrix(n("ffn_down"), s.n_ff, s.n_embd, more));
  }
  return t;
}

Status write_synthetic_model(const ModelShape& s, const FileType& ft,
                             const SyntheticModelOptions& opt, const std::string& path) {
  const std::string arch(s.architecture);
  GgufWriter w;
  w.set("general.architecture", gguf_str(arch));
  w.set("general.name",
        gguf_str(fmt::format("fish synthetic {} {} seed {}", s.name, ft.name, opt.seed)));
  w.set("general.description",
        gguf_str(fmt::format("random weights shaped like {}", s.description)));
  w.set("general.file_type", gguf_u32(ft.gguf_file_type));
  w.set("general.quantization_version", gguf_u32(2));
  w.set(arch + ".block_count", gguf_u32(uint32_t(s.n_layer)));
  w.set(arch + ".context_length", gguf_u32(uint32_t(s.n_ctx_train)));
  w.set(arch + ".embedding_length", gguf_u32(uint32_t(s.n_embd)));
  w.set(arch + ".feed_forward_length", gguf_u32(uint32_t(s.n_ff)));
  w.set(arch + ".attention.head_count", gguf_u32(uint32_t(s.n_head)));
  w.set(arch + ".attention.head_count_kv", gguf_u32(uint32_t(s.n_head_kv)));
  w.set(arch + ".attention.key_length", gguf_u32(uint32_t(s.head_dim)));
  w.set(arch + ".attention.value_length", gguf_u32(uint32_t(s.head_dim)));
  w.set(arch + ".attention.layer_norm_rms_epsilon", gguf_f32(s.norm_eps));
  w.set(arch + ".rope.freq_base", gguf_f32(s.rope_freq_base));
  w.set(arch + ".rope.dimension_count", gguf_u32(uint32_t(s.head_dim)));
  w.set(arch + ".vocab_size", gguf_u32(uint32_t(s.n_vocab)));
  if (s.sliding_window > 0)
    w.set(arch + ".attention.sliding_window", gguf_u32(uint32_t(s.sliding_window)));

  std::vector<std::string> vocab = synthetic_vocab(s.n_vocab);
  std::vector<float> scores(vocab.size());
  std::vector<int32_t> token_type(vocab.size(), 1);  // 1 normal
  for (size_t i = 0; i < vocab.size(); ++i) scores[i] = -float(i);
  token_type[0] = 2;                                            // unknown
  token_type[1] = token_type[2] = 3;                            // control
  for (int b = 0; b < 256; ++b) token_type[size_t(3 + b)] = 6;  // byte
  w.set("tokenizer.ggml.model", gguf_str("llama"));
  w.set("tokenizer.ggml.pre", gguf_str("default"));
  w.set("tokenizer.ggml.tokens", gguf_str_array(vocab));
  w.set("tokenizer.ggml.scores", gguf_f32_array(scores));
  w.set("tokenizer.ggml.token_type", gguf_i32_array(token_type));
  w.set("tokenizer.ggml.unknown_token_id", gguf_u32(0));
  w.set("tokenizer.ggml.bos_token_id", gguf_u32(1));
  w.set("tokenizer.ggml.eos_token_id", gguf_u32(2));
  w.set("tokenizer.ggml.add_bos_token", gguf_bool(true));
  w.set("tokenizer.ggml.add_space_prefix", gguf_bool(true));

  const int n_threads =
      opt.n_threads > 0 ? opt.n_threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<SyntheticTensor> tensors = synthetic_tensors(s, ft);
  for (size_t ti = 0; ti < tensors.size(); ++ti) {
    const SyntheticTensor& spec = tensors[ti];
    if (spec.type != GgmlType::f32 && !type_info(spec.type).quantize_row)
      return make_error("make-model: tensor {}: type {} has no reference quantiser", spec.name,
                        type_name(spec.type));
    // The producer runs later, inside w.write(): capture loop locals by value.
    w.add_tensor(
        spec.name, spec.type, spec.dims,
        [&tensors, &opt, n_threads, ti](std::span<uint8_t> out) -> Status {
          const SyntheticTensor& t = tensors[ti];
          const bool is_norm = t.dims.size() == 1;
          const int64_t row = t.dims[0];
          const int64_t n_rows = is_norm ? 1 : t.dims[1];
          const size_t rb = row_bytes(t.type, row);
          std::atomic<int64_t> next{0};
          constexpr int64_t kRowsPerGrab = 16;
          auto work = [&] {
            std::vector<float> buf(size_t(row), 1.0f);
            for (;;) {
              const int64_t r0 = next.fetch_add(kRowsPerGrab);
              if (r0 >= n_rows) break;
              for (int64_t r = r0; r < std::min(n_rows, r0 + kRowsPerGrab); ++r) {
                if (!is_norm) {
                  SplitMix64 rng{opt.seed * 0x100000001b3ull ^ (uint64_t(ti) << 40) ^ uint64_t(r)};
                  fill_gaussian(rng, 0.02f, buf.data(), row);
                }
                quantize_float_row(t.type, buf.data(), out.data() + size_t(r) * rb, row);
              }
            }
          };
          const int n =
              int(std::min<int64_t>(n_threads, (n_rows + kRowsPerGrab - 1) / kRowsPerGrab));
          std::vector<std::thread> pool;
          for (int i = 1; i < n; ++i) pool.emplace_back(work);
          work();
          for (auto& th : pool) th.join();
          return Status::success();
        });
  }
  return w.write(path);
}

}  // namespace fish
