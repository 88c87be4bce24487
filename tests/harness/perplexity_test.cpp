// fish perplexity: the statistics against hand computations, KL against its closed form, the
// chunking rules, the saved reference file (round trip, corruption, another text refused), and
// the command end to end on two synthetic files of one model (q8_0 reference, q4_k_m scored).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/model.h"
#include "engine/sampling.h"
#include "engine/tokenizer.h"
#include "harness/cli_test_util.h"
#include "harness/experiment.h"
#include "harness/perplexity.h"
#include "harness/reference_logits.h"
#include "test_env.h"

namespace fish {
namespace {

using ::testing::HasSubstr;

std::vector<float> log_probs(std::vector<float> logits) {
  std::vector<float> out(logits.size());
  log_softmax(logits, out.data());
  return out;
}

TEST(Perplexity, KlOfAPositionIsTheClosedForm) {
  const std::vector<float> p = log_probs({1.0f, 2.0f, 0.5f, -1.0f});
  const std::vector<float> q = log_probs({1.5f, 1.0f, 0.5f, 0.0f});
  double want = 0;
  for (size_t i = 0; i < p.size(); ++i) want += std::exp(double(p[i])) * (p[i] - q[i]);
  const PositionScore s = score_position(q, 0, p, 1, /*next=*/2);
  EXPECT_NEAR(s.kld, want, 1e-7);
  EXPECT_NEAR(s.nll, -q[2], 1e-7);
  EXPECT_NEAR(s.nll_ref, -p[2], 1e-7);
  EXPECT_NEAR(s.p - s.p_ref, std::exp(q[2]) - std::exp(p[2]), 1e-7);
  EXPECT_FALSE(s.same_top);
  const PositionScore same = score_position(p, 1, p, 1, 0);
  EXPECT_EQ(same.kld, 0.0);
  EXPECT_TRUE(same.same_top);
}

TEST(Perplexity, StatisticsAreTheHandComputedOnes) {
  // nll 1, 2, 3, 4 -> mean 2.5, population variance 1.25, se sqrt(1.25 / 3).
  std::vector<PositionScore> v(4);
  for (int i = 0; i < 4; ++i) {
    v[size_t(i)].nll = i + 1;
    v[size_t(i)].nll_ref = i + 1 - 0.5 * (i % 2);  // ln ratio 0, 0.5, 0, 0.5
    v[size_t(i)].kld = 0.1 * (i + 1);              // 0.1 .. 0.4
    v[size_t(i)].p = 0.5;
    v[size_t(i)].p_ref = 0.5 - 0.1 * i;  // dp 0, 10, 20, 30 %
    v[size_t(i)].same_top = i != 3;      // 75 %
  }
  const PerplexityStats s = summarize(v, true);
  EXPECT_EQ(s.n, 4);
  EXPECT_NEAR(s.ppl, std::exp(2.5), 1e-9);
  EXPECT_NEAR(s.ppl_se, std::exp(2.5) * std::sqrt(1.25 / 3), 1e-9);
  EXPECT_NEAR(s.ln_ratio, 0.25, 1e-12);
  EXPECT_NEAR(s.ratio, std::exp(0.25), 1e-12);
  EXPECT_NEAR(s.kld.mean, 0.25, 1e-12);
  EXPECT_NEAR(s.kld.se, std::sqrt(0.0125 / 3), 1e-12);
  // Quantiles interpolate at (n - 1) x f: the median of 0.1..0.4 is 0.25, p90 0.37.
  auto q = [](const ValueSummary& x, double f) {
    for (const auto& [g, v] : x.quantiles)
      if (g == f) return v;
    return std::nan("");
  };
  EXPECT_NEAR(q(s.kld, 0.5), 0.25, 1e-12);
  EXPECT_NEAR(q(s.kld, 0.1), 0.13, 1e-12);
  EXPECT_NEAR(q(s.kld, 1.0), 0.4, 1e-12);
  EXPECT_NEAR(q(s.kld, 0.0), 0.1, 1e-12);
  EXPECT_NEAR(s.dp.mean, 15.0, 1e-9);
  EXPECT_NEAR(s.rms_dp, std::sqrt((0 + 100 + 400 + 900) / 4.0), 1e-9);
  EXPECT_NEAR(s.same_top, 75.0, 1e-12);
  EXPECT_NEAR(s.same_top_se, std::sqrt((0.75 * 10000 - 75.0 * 75.0) / 3), 1e-9);
  const std::string text = stats_text(s);
  EXPECT_THAT(text, HasSubstr("Mean    KLD:   0.250000 ±"));
  EXPECT_THAT(text, HasSubstr("Median  KLD:   0.250000"));
  EXPECT_THAT(text, HasSubstr("99.9%   KLD:"));
  EXPECT_THAT(text, HasSubstr("Same top p: 75.000 ±"));
  EXPECT_EQ(stats_json(s)["kld"]["quantiles"]["p99.9"].get<double>(), q(s.kld, 0.999));
  EXPECT_THAT(stats_text(summarize(v, false)), HasSubstr("Final estimate: PPL = 12.1825 +/- "));
}

class PerplexityModels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(std::filesystem::exists(test::fish_bin())) << test::fish_bin() << " not built";
    for (const char* type : {"q8_0", "q4_k_m"}) {
      const std::string out =
          (test::temp_dir() / (std::string("ppl_tiny_") + type + ".gguf")).string();
      ASSERT_EQ(
          test::shell_exit_code(test::fish_bin() + " make-model --shape tiny --seed 3 --type " +
                                    type + " --out " + out,
                                (test::temp_dir() / "ppl_make_model.log").string()),
          0);
    }
    ref_ = (test::temp_dir() / "ppl_tiny_q8_0.gguf").string();
    model_ = (test::temp_dir() / "ppl_tiny_q4_k_m.gguf").string();
    text_ = "/usr/share/common-licenses/GPL-3";
  }
  int ppl(const std::string& args) {
    return test::shell_exit_code("(" + test::fish_bin() + " perplexity -t 1 -f " + text_ + " " +
                                     args + " 2>" + dir_.file("err.txt") + ")",
                                 dir_.file("out.txt"));
  }
  std::string out() { return test::file_text(dir_.file("out.txt")); }
  std::string err() { return test::file_text(dir_.file("err.txt")); }

  static inline std::string ref_, model_, text_;
  test::TempDir dir_;
};

TEST_F(PerplexityModels, ChunksReplaceTheirFirstTokenWithBosAndDropTheRest) {
  auto m = Model::load(model_, {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto tok = Tokenizer::from_gguf(m.value()->gguf());
  ASSERT_TRUE(tok.ok());
  const std::string text = test::file_text(text_);
  const std::vector<int32_t> all = tok.value().encode(text, true, false);
  auto c = chunk_text(tok.value(), text, 64, 0);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.value().n_chunks, int64_t(all.size()) / 64);
  EXPECT_EQ(c.value().first, 32);
  EXPECT_EQ(c.value().n_scored(), 31);
  for (int64_t k = 0; k < c.value().n_chunks; ++k) {
    const auto ch = c.value().chunk(k);
    if (tok.value().add_bos()) {
      EXPECT_EQ(ch[0], tok.value().bos());
    } else {
      EXPECT_EQ(ch[0], all[size_t(k * 64)]);
    }
    EXPECT_TRUE(std::equal(ch.begin() + 1, ch.end(), all.begin() + k * 64 + 1));
  }
  auto too_many = chunk_text(tok.value(), text, 64, c.value().n_chunks + 1);
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.error().message, HasSubstr("fills"));
  auto too_long = chunk_text(tok.value(), "a few words", 64, 0);
  ASSERT_FALSE(too_long.ok());
  EXPECT_THAT(too_long.error().message, HasSubstr("one chunk of 64 needs 64"));
}

TEST_F(PerplexityModels, AgainstAReferenceModelPrintsLlamaPerplexitysStatisticsAndReusesThem) {
  const std::string saved = dir_.file("ref.fishlgp");
  const std::string args = "-m " + model_ + " -c 64 --chunks 3 --reference-model " + ref_ +
                           " --reference-logits " + saved;
  ASSERT_EQ(ppl(args), 0) << err();
  const std::string first = out();
  for (const char* line :
       {"Mean PPL(Q)", "Mean PPL(base)", "Cor(ln(PPL(Q)), ln(PPL(base)))",
        "Mean ln(PPL(Q)/PPL(base))", "Mean    KLD:", "Maximum KLD:", "99.9%   KLD:", "Median  KLD:",
        "Minimum KLD:", "Mean    Δp:", "RMS Δp    :", "Same top p:"})
    EXPECT_THAT(first, HasSubstr(line));
  EXPECT_THAT(err(), HasSubstr("saving to " + saved));
  ASSERT_TRUE(std::filesystem::exists(saved));
  // The second run reads the saved file: the same statistics up to the f16 rounding of the
  // reference (its --json has them as numbers).
  ASSERT_EQ(ppl(args + " --json"), 0) << err();
  EXPECT_THAT(err(), HasSubstr("reference log-probabilities from " + saved));
  const nlohmann::json j = nlohmann::json::parse(out());
  EXPECT_EQ(j["n_scored"].get<int64_t>(), 3 * 31);
  EXPECT_GT(j["kld"]["mean"].get<double>(), 0.0);  // q4_k_m vs q8_0 of one model differ
  EXPECT_LT(j["kld"]["mean"].get<double>(), 1.0);
  // Scoring the reference against itself: no divergence at all.
  ASSERT_EQ(
      ppl("-m " + ref_ + " --act f32 -c 64 --chunks 3 --reference-logits " + saved + " --json"), 0)
      << err();
  const nlohmann::json self = nlohmann::json::parse(out());
  EXPECT_LT(self["kld"]["mean"].get<double>(), 1e-4);  // f16 rounding of the saved file only
  EXPECT_EQ(self["same_top_p_pct"].get<double>(), 100.0);
  // Another chunking is not the file's: refused, naming both.
  ASSERT_NE(ppl("-m " + model_ + " -c 32 --chunks 3 --reference-logits " + saved), 0);
  EXPECT_THAT(err(), HasSubstr("made for chunks of 64, this run has 32"));
}

// quality.reference.model: the experiment format takes another model for the reference, hashes it
// into the cell id only when set, and refuses a malformed one.
TEST(QualityReferenceModel, ParsesIntoTheSpecAndTheCellIdOnlyWhenSet) {
  auto exp = [](const std::string& ref) {
    return R"({"schema_version": 1, "name": "q", "model": ["synthetic:tiny:q4_k_m"],
               "quality": {"metrics": ["kl"], "reference": {)" +
           ref + "}}}";
  };
  auto plain = parse_experiment(exp(R"("act": "f32")"), "plain.json");
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_TRUE(plain.value().quality.reference_model.empty());
  EXPECT_FALSE(quality_json(plain.value().quality)["reference"].contains("model"));
  auto with = parse_experiment(exp(R"("act": "f32", "model": "synthetic:tiny:q8_0")"), "with.json");
  ASSERT_TRUE(with.ok()) << with.error().message;
  EXPECT_EQ(with.value().quality.reference_model, "synthetic:tiny:q8_0");
  EXPECT_EQ(with.value().quality.reference.act, "f32");
  EXPECT_EQ(quality_json(with.value().quality)["reference"]["model"], "synthetic:tiny:q8_0");
  const Cell c = expand_cells(plain.value()).front();
  EXPECT_NE(cell_id(plain.value(), c, "x"), cell_id(with.value(), c, "x"));
  auto bad = parse_experiment(exp(R"("model": 3)"), "bad.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("bad.json: quality.reference.model: expected"));
  auto bad_syn = parse_experiment(exp(R"("model": "synthetic:nope:q8_0")"), "syn.json");
  ASSERT_FALSE(bad_syn.ok());
  EXPECT_THAT(bad_syn.error().message, HasSubstr("syn.json: quality.reference.model:"));
}

// fish run with a q8_0 reference of the scored q4_k_m model: its KL is above the one against the
// scored file itself (f32 reference activations: int8 rounding only).
TEST_F(PerplexityModels, FishRunScoresAgainstTheReferenceModel) {
  auto run = [&](const std::string& ref, const std::string& name) {
    const std::string file = dir_.file(name + ".json");
    std::ofstream(file) << R"({"schema_version": 1, "name": ")" << name << R"(", "model": [")"
                        << model_ << R"("], "defaults": {"n_threads": 1},
        "workload": {"n_prompt": 8, "n_gen": 2}, "measure": {"paths": ["cpu"], "warmup": 0,
        "repetitions": 1}, "quality": {"metrics": ["kl", "top1"], "n_tokens": 48,
        "text": ")" << text_
                        << R"(", "reference": {"act": "f32", "model": ")" << ref << R"("}},
        "output": {"dir": ")"
                        << dir_.file("out") << R"("}})";
    EXPECT_EQ(test::shell_exit_code(test::fish_bin() + " run " + file, dir_.file(name + ".log")), 0)
        << test::file_text(dir_.file(name + ".log"));
    for (const nlohmann::json& r : test::result_rows(dir_.file("out/" + name + ".jsonl")))
      if (r.contains("metrics")) return r["metrics"]["kl_mean"].get<double>();
    return -1.0;
  };
  const double vs_q8 = run(ref_, "vs_q8"), vs_self = run(model_, "vs_self");
  EXPECT_GT(vs_q8, 0.0);
  EXPECT_GE(vs_self, 0.0);
  EXPECT_GT(vs_q8, 3 * vs_self);
}

TEST(ReferenceLogitsFile, RoundTripsAndRefusesCorruptionAndTruncation) {
  test::TempDir dir;
  const std::string path = dir.file("r.fishlgp");
  LogitsLayout layout{5, 8, 4, 2, tokens_sha256(std::vector<int32_t>(16, 7))};
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<std::vector<float>> rows;
  {
    auto w = ReferenceLogitsWriter::create(path, layout, {{"note", "test"}});
    ASSERT_TRUE(w.ok()) << w.error().message;
    for (int i = 0; i < 2 * 3; ++i) {
      std::vector<float> lg(5);
      for (float& x : lg) x = nd(rng);
      rows.push_back(log_probs(lg));
      ASSERT_TRUE(w.value()->append(rows.back()).ok());
    }
    EXPECT_FALSE(std::filesystem::exists(path));  // only PATH.tmp until finish()
    ASSERT_TRUE(w.value()->finish().ok());
  }
  auto r = ReferenceLogits::open(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r.value().check_matches(layout).ok());
  EXPECT_EQ(r.value().header()["note"], "test");
  std::vector<float> got(5);
  for (int i = 0; i < 6; ++i) {
    r.value().read(i / 3, i % 3, got.data());
    for (size_t k = 0; k < 5; ++k) EXPECT_NEAR(got[k], rows[size_t(i)][k], 4e-3);
  }
  LogitsLayout other = layout;
  other.tokens_sha256 = tokens_sha256(std::vector<int32_t>(16, 8));
  EXPECT_THAT(r.value().check_matches(other).error().message, HasSubstr("tokens with sha256"));

  // One flipped payload byte: the checksum names it.
  const std::string bad = dir.file("bad.fishlgp");
  std::filesystem::copy_file(path, bad);
  {
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.put('\x55');
  }
  auto rb = ReferenceLogits::open(bad);
  ASSERT_FALSE(rb.ok());
  EXPECT_THAT(rb.error().message, HasSubstr("payload sha256"));
  // Truncated: no trailer.
  std::filesystem::resize_file(bad, std::filesystem::file_size(bad) - 3);
  auto rt = ReferenceLogits::open(bad);
  ASSERT_FALSE(rt.ok());
  EXPECT_THAT(rt.error().message, HasSubstr("not a FISH reference-logits file"));
  // An unfinished writer leaves nothing behind.
  {
    auto w = ReferenceLogitsWriter::create(dir.file("u.fishlgp"), layout, {});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w.value()->append(rows[0]).ok());
    EXPECT_FALSE(w.value()->finish().ok());  // 1 of 6 positions
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("u.fishlgp")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("u.fishlgp.tmp")));
}

}  // namespace
}  // namespace fish
