// Model re-quantisation (engine/requant.h, ModelLoadOptions::requant): error on the real models'
// blk.0 against the seed's measured ranges, the candidates and skips, load-time views, and a
// written file that runs exactly like the in-memory copy.
#include "engine/requant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "engine/model.h"
#include "engine/session.h"
#include "engine/synthetic_model.h"
#include "test_env.h"

namespace fish {
namespace {

RequantResult requant_file(const std::string& path, int mode) {
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << f.error().message;
  ThreadPool pool(2);
  auto r = requantize_gguf(f.value(), mode, pool);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return std::move(r.value());
}

const RequantTensor& tensor(const RequantResult& r, const std::string& name) {
  for (const RequantTensor& t : r.tensors)
    if (t.name == name) return t;
  ADD_FAILURE() << name << " not in the result";
  static const RequantTensor none;
  return none;
}

// Seed 000: Q6_K->Q4_K 7.3-7.5%, Q4_K->FQ3 13.9-14.6% relative RMS (1B blk.0). Gemma 3 270M has
// both pairs in blk.0 (attn_output q4_k, ffn_down q6_k); its other blk.0 matrices have 640-value
// rows, which no 256-value block fits.
TEST(RequantRealModel, Gemma3Blk0ErrorsAreWithinOrBelowTheSeedsRanges) {
  const std::string path = test::model_path(test::kGemma3);
  ASSERT_FALSE(path.empty()) << test::kGemma3 << " missing (scripts/setup.sh fetches it)";
  const RequantResult r = requant_file(path, 3);
  const RequantTensor& wo = tensor(r, "blk.0.attn_output.weight");
  EXPECT_EQ(wo.from, GgmlType::q4_k);
  EXPECT_EQ(wo.to, GgmlType::fq3);
  EXPECT_GT(wo.relative_rms, 0.10);
  EXPECT_LE(wo.relative_rms, 0.146);
  const RequantTensor& down = tensor(r, "blk.0.ffn_down.weight");
  EXPECT_EQ(down.from, GgmlType::q6_k);
  EXPECT_EQ(down.to, GgmlType::q4_k);
  EXPECT_GT(down.relative_rms, 0.05);
  EXPECT_LE(down.relative_rms, 0.075);
  EXPECT_EQ(down.bytes_to, down.bytes_from * 144 / 210);
  const auto pairs = r.summary();
  ASSERT_EQ(pairs.size(), 2u);
  for (const RequantPairSummary& p : pairs) {
    EXPECT_LE(p.rms_min, p.rms_mean);
    EXPECT_LE(p.rms_mean, p.rms_max);
  }
  EXPECT_GT(r.n_weights, 0);
  EXPECT_GT(r.seconds, 0.0);
}

// SmolLM2 is Q4_1 throughout: mode 1 turns ffn_down (1536-value rows) into fq3; every other matrix
// has 576-value rows and is kept, saying why.
TEST(RequantRealModel, SmolLm2Mode1ConvertsWhatFitsAndSaysWhyTheRestIsKept) {
  const std::string path = test::model_path(test::kSmolLm2);
  ASSERT_FALSE(path.empty()) << test::kSmolLm2 << " missing (scripts/setup.sh fetches it)";
  const RequantResult r = requant_file(path, 1);
  const RequantTensor& down = tensor(r, "blk.0.ffn_down.weight");
  EXPECT_EQ(down.from, GgmlType::q4_1);
  EXPECT_EQ(down.to, GgmlType::fq3);
  EXPECT_GT(down.relative_rms, 0.10);
  EXPECT_LE(down.relative_rms, 0.146);
  const RequantTensor& q = tensor(r, "blk.0.attn_q.weight");
  EXPECT_EQ(q.to, GgmlType::q4_1);
  EXPECT_EQ(q.skipped, "row length 576 is not a multiple of fq3's block 256");
  EXPECT_TRUE(q.data.empty());
  // Tied embeddings are the output projection: a candidate (and kept here: 576-value rows).
  EXPECT_FALSE(tensor(r, "token_embd.weight").skipped.empty());
  EXPECT_EQ(requant_file(path, 2).tensors.size(), 0u);  // no q6_k
}

TEST(Requant, RejectsModesOutside0To3) {
  auto f = GgufFile::open(test::model_path(test::kSmolLm2));
  ASSERT_TRUE(f.ok());
  ThreadPool pool(1);
  for (int mode : {-1, 4}) {
    auto r = requantize_gguf(f.value(), mode, pool);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("mode " + std::to_string(mode)), std::string::npos);
  }
}

class RequantModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = (test::temp_dir() / "fish_requant_test_tiny_q4_k_m.gguf").string();
    auto ft = parse_file_type("q4_k_m");
    ASSERT_TRUE(ft.ok());
    ASSERT_TRUE(write_synthetic_model(*find_model_shape("tiny"), ft.value(), {5, 1}, path_).ok());
  }
  static std::shared_ptr<const Model> load(const std::string& path, int mode) {
    auto m = Model::load(path, ModelLoadOptions{mode, 2});
    EXPECT_TRUE(m.ok()) << m.error().message;
    return m.value();
  }
  static std::vector<float> logits(std::shared_ptr<const Model> m, ActMode act) {
    SessionOptions opt;
    opt.n_ctx = 64;
    opt.n_threads = 2;
    opt.act = act;
    auto s = Session::create(m, opt);
    EXPECT_TRUE(s.ok());
    std::vector<int32_t> toks = {1, 17, 42, 99, 3, 250, 7, 8};
    auto lg = s.value()->forward(toks, 0, LogitsMode::all);
    EXPECT_TRUE(lg.ok()) << lg.error().message;
    return {lg.value().begin(), lg.value().end()};
  }
  static inline std::string path_;
};

TEST_F(RequantModelTest, Mode3PointsViewsAtSmallerCopiesAndMode0LeavesTheFile) {
  const auto plain = load(path_, 0);
  EXPECT_EQ(plain->requant(), nullptr);
  const auto m = load(path_, 3);
  ASSERT_NE(m->requant(), nullptr);
  int n_fq3 = 0, n_q4 = 0;
  for (size_t il = 0; il < m->layers().size(); ++il) {
    const LayerWeights& L = m->layers()[il];
    const LayerWeights& P = plain->layers()[il];
    const MatrixView* got[] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down};
    const MatrixView* was[] = {&P.wq, &P.wk, &P.wv, &P.wo, &P.gate, &P.up, &P.down};
    for (size_t k = 0; k < std::size(got); ++k) {
      const MatrixView* v = got[k];
      const GgmlType want = was[k]->type == GgmlType::q4_k   ? GgmlType::fq3
                            : was[k]->type == GgmlType::q6_k ? GgmlType::q4_k
                                                             : was[k]->type;
      EXPECT_EQ(v->type, want) << v->name;
      EXPECT_EQ(v->data == was[k]->data, want == was[k]->type) << v->name;
      n_fq3 += v->type == GgmlType::fq3;
      n_q4 += v->type == GgmlType::q4_k;
      EXPECT_EQ(v->n_bytes, row_bytes(v->type, v->n_in) * size_t(v->n_out)) << v->name;
    }
  }
  EXPECT_GT(n_q4, 0);
  EXPECT_GT(n_fq3, 0);
  EXPECT_LT(m->weight_bytes_per_token(), plain->weight_bytes_per_token());
  const std::vector<float> a = logits(plain, ActMode::int8), b = logits(m, ActMode::int8);
  ASSERT_EQ(a.size(), b.size());
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(b[i]));
    diff += (a[i] - b[i]) * double(a[i] - b[i]);
    ref += a[i] * double(a[i]);
  }
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(std::sqrt(diff / ref), 0.5);
}

TEST_F(RequantModelTest, Mode1RunsWithF32ActivationsCloseToInt8) {
  const auto m = load(path_, 1);
  const std::vector<float> a = logits(m, ActMode::int8), b = logits(m, ActMode::f32);
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * double(a[i] - b[i]);
    ref += b[i] * double(b[i]);
  }
  EXPECT_LT(std::sqrt(diff / ref), 0.05);
}

TEST_F(RequantModelTest, WrittenFileRunsBitwiseLikeTheInMemoryCopy) {
  test::TempDir dir;
  const std::string out = dir.file("tiny_mode3.gguf");
  auto f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok());
  ThreadPool pool(2);
  auto rq = requantize_gguf(f.value(), 3, pool);
  ASSERT_TRUE(rq.ok());
  ASSERT_TRUE(write_requantized_gguf(f.value(), rq.value(), out).ok());
  auto written = GgufFile::open(out);
  ASSERT_TRUE(written.ok()) << written.error().message;
  ASSERT_NE(written.value().find("fish.requant.mode"), nullptr);
  EXPECT_EQ(written.value().get_int("fish.requant.mode").value(), 3);
  EXPECT_EQ(logits(load(out, 0), ActMode::int8), logits(load(path_, 3), ActMode::int8));
}

// --to q8_0: every matmul weight of the Q4_K_M file becomes q8_0 (q8_0 re-encodes a 4/6-bit
// weight to within its own rounding: < 1% relative RMS), the file says so and runs with
// logits close to the original's.
TEST_F(RequantModelTest, ToQ8_0ConvertsEveryMatmulWeightAndStaysClose) {
  test::TempDir dir;
  const std::string out = dir.file("tiny_q8_0.gguf");
  auto f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok());
  ThreadPool pool(2);
  auto rq = requantize_gguf_to(f.value(), GgmlType::q8_0, pool);
  ASSERT_TRUE(rq.ok()) << rq.error().message;
  int converted = 0;
  for (const RequantTensor& t : rq.value().tensors) {
    if (!t.skipped.empty()) continue;
    ++converted;
    EXPECT_EQ(t.to, GgmlType::q8_0) << t.name;
    EXPECT_LT(t.relative_rms, 0.01) << t.name;
  }
  EXPECT_GT(converted, 0);
  ASSERT_TRUE(write_requantized_gguf(f.value(), rq.value(), out).ok());
  auto written = GgufFile::open(out);
  ASSERT_TRUE(written.ok()) << written.error().message;
  ASSERT_NE(written.value().find("fish.requant.to"), nullptr);
  EXPECT_EQ(written.value().find("fish.requant.mode"), nullptr);
  for (const GgufTensorInfo& t : written.value().tensors())
    if (rq.value().find(t.name) != nullptr) EXPECT_EQ(t.type, GgmlType::q8_0) << t.name;
  const std::vector<float> a = logits(load(out, 0), ActMode::f32);
  const std::vector<float> b = logits(load(path_, 0), ActMode::f32);
  ASSERT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  EXPECT_LT(std::sqrt(num / den), 0.05);
  EXPECT_FALSE(requantize_gguf_to(f.value(), GgmlType::iq2_xxs, pool).ok());  // no quantiser
}

// The activation-aware path end to end: the engine reports every matmul input (all 7 matrices of
// each layer and the output head, with their row length), and importance given for one tensor
// changes that tensor's fq3 bytes only; a wrong column count is an error naming the tensor.
TEST_F(RequantModelTest, ObservedActivationsFeedTheWeightedFitOfTheirTensorOnly) {
  const auto plain = load(path_, 0);
  std::map<std::string, std::pair<int64_t, int64_t>> seen;  // name -> (n_in, tokens)
  SessionOptions opt;
  opt.n_ctx = 16;
  opt.n_threads = 2;
  opt.observe_matmul_input = [&](const MatrixView& w, const float*, int64_t n_tok) {
    seen[w.name].first = w.n_in;
    seen[w.name].second += n_tok;
  };
  auto s = Session::create(plain, opt);
  ASSERT_TRUE(s.ok());
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5};
  ASSERT_TRUE(s.value()->forward(toks, 0).ok());
  ASSERT_TRUE(s.value()->forward(std::span(toks).subspan(0, 1), 5).ok());
  EXPECT_EQ(seen.size(), plain->layers().size() * 7 + 1);
  EXPECT_EQ(seen["blk.0.attn_q.weight"], (std::pair<int64_t, int64_t>{256, 6}));
  EXPECT_EQ(seen["blk.1.ffn_down.weight"].first, 512);
  EXPECT_TRUE(seen.count("token_embd.weight"));  // tied output head

  auto f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok());
  ThreadPool pool(2);
  RequantImportance imp;
  std::vector<float> cols(256, 1.0f);
  for (size_t i = 0; i < cols.size(); i += 3) cols[i] = 50.0f;
  imp.columns.emplace_back("blk.0.attn_q.weight", cols);
  auto a = requantize_gguf(f.value(), 3, pool);
  auto b = requantize_gguf(f.value(), 3, pool, &imp);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const RequantTensor& t : a.value().tensors) {
    const RequantTensor* u = b.value().find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(t.data != u->data, t.name == "blk.0.attn_q.weight") << t.name;
  }
  imp.columns[0].second.resize(100);
  auto bad = requantize_gguf(f.value(), 3, pool, &imp);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(
      bad.error().message.find("importance has 100 columns, tensor blk.0.attn_q.weight has 256"),
      std::string::npos)
      << bad.error().message;
}

}  // namespace
}  // namespace fish
