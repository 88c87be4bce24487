// Model loading: hyper-parameters of the real models as llama.cpp reads them, and clear errors for
// an unknown architecture, a missing or ill-shaped tensor and unsupported RoPE scaling.
#include "engine/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>

#include "engine/gguf.h"
#include "engine/session.h"
#include "engine/synthetic_model.h"
#include "real_model.h"
#include "test_env.h"

namespace fish {
namespace {

TEST(Model, ReadsSmolLm2AsTiedLlamaWithNormalRope) {
  const std::shared_ptr<const Model> model = test::load_real_model(test::kSmolLm2);
  ASSERT_TRUE(model);
  const ModelParams& p = model->params();
  EXPECT_EQ(p.arch, Arch::llama);
  EXPECT_EQ(p.n_layer, 30);
  EXPECT_EQ(p.n_embd, 576);
  EXPECT_EQ(p.n_ff, 1536);
  EXPECT_EQ(p.n_head, 9);
  EXPECT_EQ(p.n_head_kv, 3);
  EXPECT_EQ(p.head_dim, 64);
  EXPECT_EQ(p.n_vocab, 49152);
  EXPECT_TRUE(p.tied_output);
  EXPECT_EQ(model->output().name, "token_embd.weight");
  EXPECT_EQ(p.rope_style, RopeStyle::normal);
  EXPECT_FLOAT_EQ(p.rope_base, 100000.0f);
  EXPECT_FLOAT_EQ(p.attn_scale, 0.125f);
  EXPECT_FLOAT_EQ(p.embd_scale, 1.0f);
  EXPECT_EQ(p.sliding_window, 0);
  for (const LayerWeights& L : model->layers()) {
    EXPECT_FALSE(L.swa);
    EXPECT_TRUE(L.q_norm.empty() && L.bq.empty() && L.post_attn_norm.empty());
  }
  EXPECT_TRUE(model->rope_freq_factors().empty());
}

TEST(Model, ReadsGemma3SlidingWindowLayersNormsAndScales) {
  const std::shared_ptr<const Model> model = test::load_real_model(test::kGemma3);
  ASSERT_TRUE(model);
  const ModelParams& p = model->params();
  EXPECT_EQ(p.arch, Arch::gemma3);
  EXPECT_EQ(p.n_layer, 18);
  EXPECT_EQ(p.head_dim, 256);
  EXPECT_EQ(p.q_dim(), 1024);  // 4 heads x 256 > n_embd 640
  EXPECT_EQ(p.n_vocab, 262144);
  EXPECT_TRUE(p.tied_output);
  EXPECT_EQ(p.rope_style, RopeStyle::neox);
  EXPECT_FLOAT_EQ(p.attn_scale, 1.0f / 16.0f);  // 1/sqrt(head_dim)
  EXPECT_FLOAT_EQ(p.embd_scale, std::sqrt(640.0f));
  EXPECT_EQ(p.sliding_window, 512);
  for (size_t il = 0; il < model->layers().size(); ++il) {
    const LayerWeights& L = model->layers()[il];
    const bool global = il % 6 == 5;
    EXPECT_EQ(L.swa, !global) << il;
    EXPECT_FLOAT_EQ(L.rope_base, global ? 1e6f : 1e4f) << il;
    EXPECT_EQ(L.q_norm.size(), 256u);
    EXPECT_EQ(L.k_norm.size(), 256u);
    EXPECT_EQ(L.post_attn_norm.size(), 640u);
    EXPECT_EQ(L.post_ffn_norm.size(), 640u);
  }
}

TEST(Model, WeightBytesPerTokenCountTheLayerAndOutputMatrices) {
  const std::shared_ptr<const Model> model = test::load_real_model(test::kSmolLm2);
  ASSERT_TRUE(model);
  // Q4_1: 20 bytes per 32 weights; per layer 576*(576*2 + 192*2) + 3*576*1536; output Q8_0
  // (34 per 32) of 49152 x 576.
  const uint64_t per_layer = (576ull * (576 * 2 + 192 * 2) + 3ull * 576 * 1536) / 32 * 20;
  const uint64_t output = 49152ull * 576 / 32 * 34;
  EXPECT_EQ(model->weight_bytes_per_token(), 30 * per_layer + output);
}

// A copy of the synthetic "tiny" llama with edits: `keep` filters tensors, `edit` rewrites
// metadata after the copy.
std::string edited_tiny(
    const std::string& name, const std::function<bool(const GgufTensorInfo&)>& keep,
    const std::function<void(GgufWriter&)>& edit,
    const std::function<std::vector<int64_t>(const GgufTensorInfo&)>& dims = nullptr) {
  const auto dir = test::temp_dir();
  const std::string src = (dir / "fish_model_test_tiny.gguf").string();
  if (!std::filesystem::exists(src)) {
    auto ft = parse_file_type("q8_0");
    EXPECT_TRUE(ft.ok());
    EXPECT_TRUE(write_synthetic_model(*find_model_shape("tiny"), ft.value(), {1, 1}, src).ok());
  }
  static std::vector<std::unique_ptr<GgufFile>> keep_alive;  // tensor data spans
  auto f = GgufFile::open(src);
  EXPECT_TRUE(f.ok());
  keep_alive.push_back(std::make_unique<GgufFile>(std::move(f.value())));
  const GgufFile& g = *keep_alive.back();
  GgufWriter w;
  for (const GgufKv& kv : g.metadata()) w.set(kv.key, kv.value);
  for (const GgufTensorInfo& t : g.tensors()) {
    if (!keep(t)) continue;
    w.add_tensor(t.name, t.type, dims ? dims(t) : t.dims,
                 std::span<const uint8_t>(t.data, size_t(t.n_bytes)));
  }
  edit(w);
  const std::string out = (dir / ("fish_model_test_" + name + ".gguf")).string();
  Status st = w.write(out);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return out;
}

std::string load_error(const std::string& path) {
  auto m = Model::load(path);
  return m.ok() ? std::string() : m.error().message;
}

TEST(Model, LoadsTheUneditedCopy) {
  const std::string p = edited_tiny(
      "same", [](const GgufTensorInfo&) { return true; }, [](GgufWriter&) {});
  EXPECT_EQ(load_error(p), "");
}

TEST(Model, RejectsAnUnknownArchitectureNamingIt) {
  const std::string p = edited_tiny(
      "arch", [](const GgufTensorInfo&) { return true; },
      [](GgufWriter& w) { w.set("general.architecture", gguf_str("mamba")); });
  const std::string e = load_error(p);
  EXPECT_NE(e.find("general.architecture 'mamba'"), std::string::npos) << e;
}

TEST(Model, RejectsAMissingTensorNamingIt) {
  const std::string p = edited_tiny(
      "missing", [](const GgufTensorInfo& t) { return t.name != "blk.1.ffn_up.weight"; },
      [](GgufWriter&) {});
  const std::string e = load_error(p);
  EXPECT_NE(e.find("blk.1.ffn_up.weight is missing"), std::string::npos) << e;
}

TEST(Model, RejectsAnIllShapedTensorNamingItAndTheShapes) {
  // attn_q stored as [n_embd, n_embd / 2, 2]: same bytes, wrong shape.
  const std::string p = edited_tiny(
      "shape", [](const GgufTensorInfo&) { return true; }, [](GgufWriter&) {},
      [](const GgufTensorInfo& t) {
        if (t.name != "blk.0.attn_q.weight") return t.dims;
        return std::vector<int64_t>{t.dims[0], t.dims[1] / 2, 2};
      });
  const std::string e = load_error(p);
  EXPECT_NE(e.find("blk.0.attn_q.weight has shape [256, 128, 2], expected [256, 256]"),
            std::string::npos)
      << e;
}

TEST(Model, RejectsUnsupportedRopeScalingAndAppliesLinear) {
  const std::string yarn = edited_tiny(
      "yarn", [](const GgufTensorInfo&) { return true; },
      [](GgufWriter& w) { w.set("llama.rope.scaling.type", gguf_str("yarn")); });
  EXPECT_NE(load_error(yarn).find("rope.scaling.type 'yarn'"), std::string::npos)
      << load_error(yarn);
  const std::string linear = edited_tiny(
      "linear", [](const GgufTensorInfo&) { return true; },
      [](GgufWriter& w) {
        w.set("llama.rope.scaling.type", gguf_str("linear"));
        w.set("llama.rope.scaling.factor", gguf_f32(4.0f));
      });
  auto m = Model::load(linear);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_FLOAT_EQ(m.value()->params().rope_scale, 0.25f);
}

// Renames the llama.* keys of the tiny copy to `arch`.* and sets general.architecture.
void as_arch(GgufWriter& w, const std::string& arch) {
  auto f = GgufFile::open((test::temp_dir() / "fish_model_test_tiny.gguf").string());
  ASSERT_TRUE(f.ok());
  for (const GgufKv& kv : f.value().metadata())
    if (kv.key.rfind("llama.", 0) == 0) w.set(arch + kv.key.substr(5), kv.value);
  w.set("general.architecture", gguf_str(arch));
}

// Per-layer f32 vectors added to a copy (values stay alive for the writer).
void add_vectors(GgufWriter& w, const std::vector<std::pair<std::string, int64_t>>& what,
                 float value) {
  static std::vector<std::unique_ptr<std::vector<float>>> keep;
  for (int il = 0; il < 2; ++il) {
    for (const auto& [suffix, n] : what) {
      keep.push_back(std::make_unique<std::vector<float>>(static_cast<size_t>(n), value));
      w.add_tensor("blk." + std::to_string(il) + "." + suffix, GgmlType::f32, {n},
                   std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(keep.back()->data()),
                                            keep.back()->size() * sizeof(float)));
    }
  }
}

std::vector<float> logits_of(const std::string& path) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return {};
  SessionOptions opt;
  opt.n_ctx = 16;
  auto s = Session::create(m.value(), opt);
  const std::vector<int32_t> toks = {1, 17, 300, 42, 5, 99};
  auto lg = s.value()->forward(toks, 0, LogitsMode::all);
  EXPECT_TRUE(lg.ok());
  return std::vector<float>(lg.value().begin(), lg.value().end());
}

TEST(Model, Qwen3NeedsQkNormsAndUsesNeoxRope) {
  const auto keep_all = [](const GgufTensorInfo&) { return true; };
  const std::string bare =
      edited_tiny("qwen3_bare", keep_all, [](GgufWriter& w) { as_arch(w, "qwen3"); });
  EXPECT_NE(load_error(bare).find("blk.0.attn_q_norm.weight is missing"), std::string::npos)
      << load_error(bare);
  const std::string p = edited_tiny("qwen3", keep_all, [](GgufWriter& w) {
    as_arch(w, "qwen3");
    add_vectors(w, {{"attn_q_norm.weight", 64}, {"attn_k_norm.weight", 64}}, 1.0f);
  });
  auto m = Model::load(p);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m.value()->params().rope_style, RopeStyle::neox);
  EXPECT_EQ(m.value()->layers()[1].k_norm.size(), 64u);
  const auto lg = logits_of(p);
  ASSERT_FALSE(lg.empty());
  for (float x : lg) ASSERT_TRUE(std::isfinite(x));
  // The per-head norms act: unit q/k vectors give other logits than the un-normed llama.
  EXPECT_NE(lg, logits_of(edited_tiny("same", keep_all, [](GgufWriter&) {})));
}

TEST(Model, Qwen2NeedsQkvBiasesAndAddsThem) {
  const auto keep_all = [](const GgufTensorInfo&) { return true; };
  const std::string bare =
      edited_tiny("qwen2_bare", keep_all, [](GgufWriter& w) { as_arch(w, "qwen2"); });
  EXPECT_NE(load_error(bare).find("blk.0.attn_q.bias is missing"), std::string::npos)
      << load_error(bare);
  auto with_bias = [&](const std::string& name, float b) {
    return edited_tiny(name, keep_all, [b](GgufWriter& w) {
      as_arch(w, "qwen2");
      add_vectors(w, {{"attn_q.bias", 256}, {"attn_k.bias", 128}, {"attn_v.bias", 128}}, b);
    });
  };
  const std::string zero = with_bias("qwen2_zero", 0.0f);
  auto m = Model::load(zero);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m.value()->params().rope_style, RopeStyle::neox);
  EXPECT_EQ(m.value()->layers()[0].bv.size(), 128u);
  const auto a = logits_of(zero), b = logits_of(with_bias("qwen2_half", 0.5f));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a, b);
}

TEST(Model, AppliesLlama3RopeFreqFactors) {
  const auto keep_all = [](const GgufTensorInfo&) { return true; };
  static std::vector<float> ones(32, 1.0f), ramp(32);  // n_rot / 2 for head_dim 64
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = 1.0f + float(i);
  auto with = [&](const std::string& name, const std::vector<float>& f) {
    return edited_tiny(name, keep_all, [&f](GgufWriter& w) {
      w.add_tensor("rope_freqs.weight", GgmlType::f32, {32},
                   std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(f.data()),
                                            f.size() * sizeof(float)));
    });
  };
  const std::string p = with("freqs", ramp);
  auto m = Model::load(p);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m.value()->rope_freq_factors(), ramp);
  const auto plain = logits_of(edited_tiny("same", keep_all, [](GgufWriter&) {}));
  EXPECT_EQ(logits_of(with("freqs_ones", ones)), plain);  // divisors of 1 change nothing
  EXPECT_NE(logits_of(p), plain);
}

}  // namespace
}  // namespace fish
