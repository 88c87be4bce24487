// Load-time x16 repacking (ModelLoadOptions::kquant_repack, Config kquant_repack): which matrices
// get a copy, the GGUF pages released or kept, embeddings from the copy, and sessions on the copy
// give the logits of the per-row kernels: bitwise at the scalar level (the x16 kernels are
// bitwise the scalar reference at every level), within float-order error at AVX2.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/model.h"
#include "engine/model_shapes.h"
#include "engine/session.h"
#include "engine/synthetic_model.h"
#include "kernels/kquant_x16.h"
#include "test_env.h"

namespace fish {
namespace {

class KquantRepackTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { write_tiny("q4_k_m"); }
  // The tiny shape as file type `type`, in the temp dir; path_ names it.
  static void write_tiny(const std::string& type) {
    path_ = (test::temp_dir() / ("fish_kquant_repack_tiny_" + type + ".gguf")).string();
    auto ft = parse_file_type(type);
    ASSERT_TRUE(ft.ok());
    ASSERT_TRUE(write_synthetic_model(*find_model_shape("tiny"), ft.value(), {9, 1}, path_).ok());
  }
  static std::shared_ptr<const Model> load(bool repack, bool keep = false) {
    ModelLoadOptions o;
    o.kquant_repack = repack;
    o.keep_gguf = keep;
    auto m = Model::load(path_, o);
    EXPECT_TRUE(m.ok()) << m.error().message;
    return m.ok() ? m.value() : nullptr;
  }
  // Logits of 7 tokens one at a time (decode: matmul_group) then of 9 more in one batch.
  static std::vector<float> logits(const std::shared_ptr<const Model>& m, Isa isa, int threads) {
    SessionOptions opt;
    opt.n_ctx = 64;
    opt.isa = isa;
    opt.n_threads = threads;
    auto s = Session::create(m, opt);
    EXPECT_TRUE(s.ok());
    std::mt19937 rng(5);
    std::vector<float> all;
    for (int i = 0; i < 7; ++i) {
      const int32_t t = int32_t(rng() % uint32_t(m->params().n_vocab));
      auto lg = s.value()->append(std::span<const int32_t>(&t, 1));
      EXPECT_TRUE(lg.ok());
      all.insert(all.end(), lg.value().begin(), lg.value().end());
    }
    std::vector<int32_t> batch(9);
    for (int32_t& t : batch) t = int32_t(rng() % uint32_t(m->params().n_vocab));
    auto lg = s.value()->forward(batch, 0, LogitsMode::all);
    EXPECT_TRUE(lg.ok());
    all.insert(all.end(), lg.value().begin(), lg.value().end());
    return all;
  }
  static std::string path_;
};
std::string KquantRepackTest::path_;

TEST_F(KquantRepackTest, EveryKQuantMatrixGetsACopyAndItsPagesAreReleased) {
  auto off = load(false);
  auto on = load(true);
  ASSERT_TRUE(off && on);
  EXPECT_EQ(off->kquant_repack().matrices, 0);
  EXPECT_EQ(off->output().x16, nullptr);
  const KquantRepackStats& st = on->kquant_repack();
  // tiny: 2 layers x 7 matrices + the tied q6_k embedding / head (one copy for both views).
  EXPECT_EQ(st.matrices, 2 * 7 + 1);
  EXPECT_EQ(st.released_bytes, st.gguf_bytes);
  EXPECT_GT(st.packed_bytes, st.gguf_bytes);  // unpacked Q4_K scales: +2.8%
  EXPECT_LT(double(st.packed_bytes), 1.03 * double(st.gguf_bytes));
  EXPECT_NE(on->output().x16, nullptr);
  EXPECT_EQ(on->output().x16, on->token_embd().x16);
  for (const LayerWeights& L : on->layers())
    for (const MatrixView* mv : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down})
      EXPECT_NE(mv->x16, nullptr) << mv->name << " " << type_name(mv->type);
  auto keep = load(true, true);
  EXPECT_EQ(keep->kquant_repack().matrices, st.matrices);
  EXPECT_EQ(keep->kquant_repack().released_bytes, 0u);
}

// The copies share one arena, each matrix page aligned inside it, asking for huge pages unless
// FISH_HUGEPAGES=0; the logits do not depend on it. A bad value fails the load by name.
TEST_F(KquantRepackTest, CopiesLiveInOneHugePageArenaTheKnobCanTurnOff) {
  auto on = load(true);
  ASSERT_TRUE(on);
  EXPECT_TRUE(on->kquant_repack().huge_requested);
  EXPECT_LE(on->kquant_repack().huge_bytes, on->kquant_repack().packed_bytes + (2u << 20));
  for (const LayerWeights& L : on->layers())
    for (const MatrixView* mv : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down})
      EXPECT_EQ(reinterpret_cast<uintptr_t>(mv->x16) % 4096, 0u) << mv->name;
  std::shared_ptr<const Model> off;
  {
    test::ScopedEnv e("FISH_HUGEPAGES", "0");
    off = load(true);
  }
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->kquant_repack().huge_requested);
  EXPECT_EQ(off->kquant_repack().huge_bytes, 0u);
  EXPECT_NE(off->kquant_repack().describe().find("huge pages off"), std::string::npos);
  EXPECT_EQ(logits(on, Isa::scalar, 1), logits(off, Isa::scalar, 1));
  test::ScopedEnv e("FISH_HUGEPAGES", "maybe");
  ModelLoadOptions o;
  o.kquant_repack = true;
  auto bad = Model::load(path_, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("FISH_HUGEPAGES"), std::string::npos) << bad.error().message;
}

TEST(KquantRepackQ8_0, Q8_0MatricesStayGgufRowsWhenRepackQ8_0IsOff) {
  const std::string path = (test::temp_dir() / "fish_kquant_repack_tiny_q8_0.gguf").string();
  auto ft = parse_file_type("q8_0");
  ASSERT_TRUE(ft.ok());
  ASSERT_TRUE(write_synthetic_model(*find_model_shape("tiny"), ft.value(), {9, 1}, path).ok());
  ModelLoadOptions o;
  o.kquant_repack = true;
  auto all = Model::load(path, o);
  o.repack_q8_0 = false;
  auto kq = Model::load(path, o);
  ASSERT_TRUE(all.ok() && kq.ok());
  int q8 = 0;
  for (const LayerWeights& L : kq.value()->layers())
    for (const MatrixView* mv : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) {
      if (mv->type != GgmlType::q8_0) continue;
      ++q8;
      EXPECT_EQ(mv->x16, nullptr) << mv->name;
    }
  ASSERT_GT(q8, 0) << "the q8_0 file has no q8_0 layer matrix: the test checks nothing";
  EXPECT_GE(all.value()->kquant_repack().matrices, q8);
  EXPECT_EQ(all.value()->kquant_repack().matrices - kq.value()->kquant_repack().matrices,
            q8 + (kq.value()->output().type == GgmlType::q8_0 ? 1 : 0));
}

// A Q5_0 file (Q4_K_M's type for rows that are not whole super-blocks: Gemma 3 270M's layers):
// every Q5_0 matrix gets an x16 copy of GGUF's size, and scalar sessions on it give bitwise the
// per-row logits.
class KquantRepackQ5_0Test : public KquantRepackTest {
 protected:
  static void SetUpTestSuite() { write_tiny("q5_0"); }
};

TEST_F(KquantRepackQ5_0Test, EveryQ5_0MatrixGetsACopyAndScalarLogitsAreThePerRowOnes) {
  auto off = load(false);
  auto on = load(true);
  ASSERT_TRUE(off && on);
  int q5 = 0;
  for (const LayerWeights& L : on->layers())
    for (const MatrixView* mv : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) {
      if (mv->type != GgmlType::q5_0) continue;
      ++q5;
      EXPECT_NE(mv->x16, nullptr) << mv->name;
    }
  ASSERT_GT(q5, 0) << "the q5_0 file has no q5_0 layer matrix: the test checks nothing";
  // Q5_0 and the Q6_K head take GGUF's bytes (tiny's row counts are multiples of 16).
  EXPECT_EQ(on->kquant_repack().packed_bytes, on->kquant_repack().gguf_bytes);
  for (int threads : {1, 2}) {
    const std::vector<float> a = logits(off, Isa::scalar, threads);
    const std::vector<float> b = logits(on, Isa::scalar, threads);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << threads << " threads";
  }
}

// ModelLoadOptions::defer_x16: the load packs nothing; pack_x16 packs what its predicate names
// (layer 1's matrices here, as a GPU placement holding layer 0 and the head would leave them),
// bytes equal to the eager load's copies, and is idempotent; a session without a placement packs
// the rest (a tied head with the output view), and its logits are bitwise the eager model's.
TEST_F(KquantRepackTest, DeferredCopiesArePackedForTheCpuMatricesAlone) {
  auto eager = load(true);
  ModelLoadOptions o;
  o.kquant_repack = true;
  o.defer_x16 = true;
  auto lazy_r = Model::load(path_, o);
  ASSERT_TRUE(lazy_r.ok()) << lazy_r.error().message;
  std::shared_ptr<const Model> lazy = lazy_r.value();
  ASSERT_TRUE(eager && lazy);
  const int all = eager->kquant_repack().matrices;
  EXPECT_EQ(lazy->kquant_repack().matrices, 0);
  EXPECT_EQ(lazy->kquant_repack().deferred, all);
  EXPECT_EQ(lazy->kquant_repack().released_bytes, 0u);
  EXPECT_TRUE(lazy->x16_deferred());
  EXPECT_NE(lazy->kquant_repack().describe().find(fmt::format("; {} left as GGUF rows", all)),
            std::string::npos)
      << lazy->kquant_repack().describe();
  EXPECT_EQ(lazy->output().x16, nullptr);
  const LayerWeights& L1 = lazy->layers()[1];
  auto in_layer1 = [&](const MatrixView& m) {
    for (const MatrixView* mv : {&L1.wq, &L1.wk, &L1.wv, &L1.wo, &L1.gate, &L1.up, &L1.down})
      if (&m == mv) return true;
    return false;
  };
  for (int pass = 0; pass < 2; ++pass) {  // the second pass packs nothing more
    ASSERT_TRUE(lazy->pack_x16(in_layer1, 1).ok());
    EXPECT_EQ(lazy->kquant_repack().matrices, 7) << "pass " << pass;
    EXPECT_EQ(lazy->kquant_repack().deferred, all - 7) << "pass " << pass;
  }
  const LayerWeights& E1 = eager->layers()[1];
  const MatrixView* lz[] = {&L1.wq, &L1.wk, &L1.wv, &L1.wo, &L1.gate, &L1.up, &L1.down};
  const MatrixView* eg[] = {&E1.wq, &E1.wk, &E1.wv, &E1.wo, &E1.gate, &E1.up, &E1.down};
  for (size_t i = 0; i < 7; ++i) {
    ASSERT_NE(lz[i]->x16, nullptr) << lz[i]->name;
    const size_t bytes = kx16_matrix_bytes(lz[i]->type, lz[i]->n_out, lz[i]->n_in);
    EXPECT_EQ(0, std::memcmp(lz[i]->x16, eg[i]->x16, bytes)) << lz[i]->name;
  }
  for (const MatrixView* mv : {&lazy->layers()[0].wq, &lazy->layers()[0].down, &lazy->output()})
    EXPECT_EQ(mv->x16, nullptr) << mv->name;
  const std::vector<float> a = logits(eager, Isa::scalar, 1);
  const std::vector<float> b = logits(lazy, Isa::scalar, 1);  // its session packs the rest
  EXPECT_FALSE(lazy->x16_deferred());
  EXPECT_EQ(lazy->kquant_repack().matrices, all);
  EXPECT_EQ(lazy->kquant_repack().released_bytes, eager->kquant_repack().released_bytes);
  EXPECT_EQ(lazy->output().x16, lazy->token_embd().x16);
  EXPECT_NE(lazy->output().x16, nullptr);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

// A tied embedding the repack skips (q8_0, llama.cpp's Q4_K_M type for a 320-wide embedding,
// with repack_q8_0 off) while the layers get copies: the head keeps its GGUF rows (no other
// matrix's copy), eagerly and deferred, and the logits are bitwise those of the unpacked model.
TEST(KquantRepackTied, ASkippedTiedEmbeddingLeavesTheHeadOnGgufRows) {
  const ModelShape shape{"test-320", "llama", "a 2-layer llama, 320 wide",
                         2,          320,     512,
                         5,          1,       64,
                         512,        true,    2048,
                         10000.0f,   1e-5f,   0};
  const std::string path = (test::temp_dir() / "fish_kquant_repack_tied_320.gguf").string();
  auto ft = parse_file_type("q4_k_m");
  ASSERT_TRUE(ft.ok());
  ASSERT_TRUE(write_synthetic_model(shape, ft.value(), {9, 4}, path).ok());
  auto plain = Model::load(path);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ASSERT_EQ(plain.value()->token_embd().type, GgmlType::q8_0);
  SessionOptions so;
  so.n_ctx = 32;
  so.isa = Isa::scalar;
  so.n_threads = 1;
  auto run = [&](std::shared_ptr<const Model> m) {
    auto sess = Session::create(m, so);
    EXPECT_TRUE(sess.ok()) << sess.error().message;
    const std::vector<int32_t> toks = {3, 141, 59, 26};
    auto lg = sess.value()->forward(toks, 0, LogitsMode::all);
    EXPECT_TRUE(lg.ok());
    return std::vector<float>(lg.value().begin(), lg.value().end());
  };
  const std::vector<float> want = run(plain.value());
  for (const bool defer : {false, true}) {
    SCOPED_TRACE(defer ? "deferred" : "eager");
    ModelLoadOptions o;
    o.kquant_repack = true;
    o.repack_q8_0 = false;
    o.defer_x16 = defer;
    auto m = Model::load(path, o);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const std::vector<float> got = run(m.value());  // its session packs (deferred)
    EXPECT_GT(m.value()->kquant_repack().matrices, 0);
    EXPECT_EQ(m.value()->output().x16, nullptr);
    EXPECT_EQ(m.value()->token_embd().x16, nullptr);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4));
  }
}

TEST_F(KquantRepackTest, EmbeddingsFromTheCopyEqualTheGgufOnes) {
  auto off = load(false);
  auto on = load(true);
  const int64_t n = off->params().n_embd;
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int32_t t : {0, 1, 15, 16, 17, 255, int32_t(off->params().n_vocab - 1)}) {
    off->embed(t, a.data());
    on->embed(t, b.data());
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "token " << t;
  }
}

TEST_F(KquantRepackTest, ScalarSessionsGiveBitwiseTheLogitsOfThePerRowKernels) {
  auto off = load(false);
  auto on = load(true);
  for (int threads : {1, 2}) {
    const std::vector<float> a = logits(off, Isa::scalar, threads);
    const std::vector<float> b = logits(on, Isa::scalar, threads);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << threads << " threads";
  }
}

TEST_F(KquantRepackTest, Avx2SessionsAgreeWithThePerRowKernelsWithinFloatOrderError) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "no AVX2 here (or a FISH_SCALAR_ONLY build)";
  auto off = load(false);
  auto on = load(true);
  for (int threads : {1, 2}) {
    const std::vector<float> a = logits(off, Isa::avx2, threads);
    const std::vector<float> b = logits(on, Isa::avx2, threads);
    // x16 at AVX2 is bitwise x16 at scalar, which the scalar per-row path matches bitwise.
    const std::vector<float> ref = logits(off, Isa::scalar, threads);
    ASSERT_EQ(a.size(), b.size());
    double max_ab = 0, max_logit = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      max_ab = std::max(max_ab, double(std::fabs(a[i] - b[i])));
      max_logit = std::max(max_logit, double(std::fabs(a[i])));
    }
    EXPECT_LT(max_ab, 1e-3 * std::max(1.0, max_logit)) << threads << " threads";
    EXPECT_NE(0, std::memcmp(ref.data(), a.data(), a.size() * 4))
        << "per-row AVX2 equal to scalar: the comparison above would not see a difference";
  }
}

TEST(KquantRepackConfig, AutoFollowsTheIsaAndWeightPathAndBadValuesAreErrors) {
  Config c;
  c.kquant_repack = "on";
  EXPECT_TRUE(model_load_options(c).value().kquant_repack);
  EXPECT_FALSE(model_load_options(c).value().keep_gguf);
  c.kquant_repack = "keep";
  EXPECT_TRUE(model_load_options(c).value().keep_gguf);
  c.kquant_repack = "off";
  EXPECT_FALSE(model_load_options(c).value().kquant_repack);
  c.kquant_repack = "auto";
  c.isa = "avx2";
  EXPECT_EQ(model_load_options(c).value().kquant_repack, isa_supported(Isa::avx2));
  EXPECT_TRUE(model_load_options(c).value().repack_q8_0);
  // AVX-512: Q8_0 too (x16 decoded 2.1x its per-row kernel on the quiet EPYC).
  c.isa = "avx512";
  EXPECT_EQ(model_load_options(c).value().kquant_repack, isa_supported(Isa::avx512));
  EXPECT_TRUE(model_load_options(c).value().repack_q8_0);
  c.kquant_repack = "on";
  EXPECT_TRUE(model_load_options(c).value().repack_q8_0);
  c.kquant_repack = "auto";
  c.isa = "scalar";
  EXPECT_FALSE(model_load_options(c).value().kquant_repack);
  c.isa = "avx2";
  c.weight_path = "w4a16";
  EXPECT_FALSE(model_load_options(c).value().kquant_repack);
  c.kquant_repack = "yes";
  auto r = model_load_options(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("kquant_repack"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace fish
