// The measurement protocol without timing assertions: which repetitions run in which order,
// what is kept, the statistics' shape, validity flags, prompts, and the engine repetition itself
// on a synthetic model.
#include "harness/measure.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/model.h"
#include "engine/synthetic_model.h"
#include "test_env.h"

namespace fish {
namespace {

using ::testing::ElementsAre;

// Path i's repetitions return prefill = 100 * i + call number, decode = call number.
struct FakePaths {
  std::vector<int> order;
  std::vector<int> calls = std::vector<int>(3, 0);
  std::function<Result<RepSample>()> path(int i, int fail_at = -1) {
    return [this, i, fail_at]() -> Result<RepSample> {
      order.push_back(i);
      const int n = calls[size_t(i)]++;
      if (n == fail_at) return make_error("path {} broke", i);
      return RepSample{100.0 * i + n, double(n)};
    };
  }
};

TEST(MeasurePaths, InterleavesPathsWithinEachRepetitionAndDropsWarmup) {
  MeasureSpec spec;
  spec.warmup = 1;
  spec.repetitions = 3;
  spec.interleave = true;
  FakePaths f;
  std::vector<std::function<Result<RepSample>()>> fns = {f.path(0), f.path(1)};
  auto out = measure_paths(spec, fns);
  EXPECT_THAT(f.order, ElementsAre(0, 1, 0, 1, 0, 1, 0, 1));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(out[0].decode_tok_s, ElementsAre(1, 2, 3));  // call 0 was the warm-up
  EXPECT_THAT(out[1].prefill_tok_s, ElementsAre(101, 102, 103));
}

TEST(MeasurePaths, WithoutInterleaveRunsEachPathsRepetitionsInTurn) {
  MeasureSpec spec;
  spec.warmup = 0;
  spec.repetitions = 2;
  spec.interleave = false;
  FakePaths f;
  std::vector<std::function<Result<RepSample>()>> fns = {f.path(0), f.path(1)};
  measure_paths(spec, fns);
  EXPECT_THAT(f.order, ElementsAre(0, 0, 1, 1));
}

TEST(MeasurePaths, AFailingPathStopsAndTheOthersGoOn) {
  MeasureSpec spec;
  spec.warmup = 0;
  spec.repetitions = 4;
  FakePaths f;
  std::vector<std::function<Result<RepSample>()>> fns = {f.path(0, 1), f.path(1)};
  auto out = measure_paths(spec, fns);
  ASSERT_TRUE(out[0].error.has_value());
  EXPECT_EQ(out[0].error->message, "path 0 broke");
  EXPECT_EQ(f.calls[0], 2);
  EXPECT_EQ(out[1].decode_tok_s.size(), 4u);
  EXPECT_FALSE(out[1].error.has_value());
}

TEST(SpeedMetric, HasMedianCiCvCountAndTheRawSamples) {
  const std::vector<double> x = {5, 1, 4, 2, 3, 7, 6};
  const nlohmann::json j = speed_metric_json(x);
  EXPECT_EQ(j["median"], 4.0);
  EXPECT_EQ(j["n"], 7);
  EXPECT_EQ(j["samples"], nlohmann::json(x));  // in measurement order
  // n = 7: the order-statistic 95% CI of the median is [x_(1), x_(7)] (coverage 98.4%).
  EXPECT_EQ(j["ci95"], nlohmann::json({1.0, 7.0}));
  EXPECT_FALSE(j.contains("min_max"));
  EXPECT_NEAR(j["cv"].get<double>(), 2.1602468994692865 / 4.0, 1e-12);
  EXPECT_TRUE(speed_metric_json(std::vector<double>{}).is_null());
}

TEST(SpeedMetric, FewerThanSixSamplesCarryTheirRangeUnderItsOwnName) {
  // n = 3: no 95% CI of the median exists; [min, max] is written as "min_max", never "ci95".
  const nlohmann::json j = speed_metric_json(std::vector<double>{5, 1, 4});
  EXPECT_EQ(j["min_max"], nlohmann::json({1.0, 5.0}));
  EXPECT_FALSE(j.contains("ci95"));
  const nlohmann::json s = sample_summary_json(std::vector<double>{3, 2});
  EXPECT_EQ(s, nlohmann::json({{"median", 2.5}, {"min_max", {2.0, 3.0}}, {"n", 2}}));
}

TEST(Validity, FlagsFewRepetitionsAndNoise) {
  PathSamples p;
  p.prefill_tok_s = {10, 10, 10, 10, 10};
  p.decode_tok_s = {10, 10, 10, 10, 10};
  EXPECT_THAT(validity_flags(p, 0.05), ElementsAre("few_repetitions"));
  p.prefill_tok_s.push_back(10);
  p.decode_tok_s.push_back(10);
  EXPECT_TRUE(validity_flags(p, 0.05).empty());
  p.decode_tok_s.back() = 20;  // CV ~ 0.35
  EXPECT_THAT(validity_flags(p, 0.05), ElementsAre("noisy"));
  EXPECT_TRUE(validity_flags(p, 0.5).empty());
}

TEST(WorkloadPrompt, RandomTokensAreSeededAndInRange) {
  Workload w;
  w.n_prompt = 50;
  w.seed = 7;
  auto a = workload_prompt(w, nullptr, 1000);
  auto b = workload_prompt(w, nullptr, 1000);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.value(), b.value());
  EXPECT_EQ(a->size(), 50u);
  for (int32_t t : a.value()) EXPECT_TRUE(t >= 0 && t < 1000);
  w.seed = 8;
  EXPECT_NE(workload_prompt(w, nullptr, 1000).value(), a.value());
}

TEST(WorkloadPrompt, AMissingTextIsAnErrorNamingIt) {
  Workload w;
  w.text = "/nonexistent/text.txt";
  auto r = workload_prompt(w, nullptr, 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "workload.text: /nonexistent/text.txt: cannot open: No such file or directory");
}

class RepetitionOnSyntheticModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string p = (test::temp_dir() / "measure_tiny.gguf").string();
    ASSERT_TRUE(
        write_synthetic_model(*find_model_shape("tiny"), parse_file_type("q8_0").value(), {}, p)
            .ok());
    model_ = Model::load(p).value();
  }
  static inline std::shared_ptr<const Model> model_;
};

TEST_F(RepetitionOnSyntheticModel, RunsPrefillAndDecodeAndLeavesThemInTheCache) {
  SessionOptions o;
  o.n_ctx = 32;
  o.n_threads = 1;
  auto s = Session::create(model_, o);
  ASSERT_TRUE(s.ok());
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  auto r = run_repetition(*s.value(), prompt, 6);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->prefill_tok_s, 0);
  EXPECT_GT(r->decode_tok_s, 0);
  EXPECT_EQ(s.value()->n_past(), 11);
  ASSERT_TRUE(run_repetition(*s.value(), prompt, 6).ok());  // resets before each repetition
  auto too_long = run_repetition(*s.value(), prompt, 28);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().message, "n_prompt + n_gen = 33 exceed n_ctx 32 (hint: raise n_ctx)");
}

TEST_F(RepetitionOnSyntheticModel, WithADepthBothPhasesStartAfterThatManyPositions) {
  SessionOptions o;
  o.n_ctx = 32;
  o.n_threads = 1;
  auto s = Session::create(model_, o);
  ASSERT_TRUE(s.ok());
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  // depth 20: the decode runs from position 20 (the prefill's 5 tokens are not behind it).
  auto r = run_repetition(*s.value(), prompt, 6, 20);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->prefill_tok_s, 0);
  EXPECT_GT(r->decode_tok_s, 0);
  EXPECT_EQ(s.value()->n_past(), 26);
  ASSERT_TRUE(run_repetition(*s.value(), prompt, 6, 0).ok());  // from an empty cache
  EXPECT_EQ(s.value()->n_past(), 6);
  auto too_deep = run_repetition(*s.value(), prompt, 6, 27);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_EQ(too_deep.error().message,
            "depth + max(n_prompt, n_gen) = 33 exceed n_ctx 32 (hint: raise n_ctx)");
  Workload w;
  w.n_prompt = 5;
  w.n_gen = 6;
  EXPECT_EQ(workload_ctx_need(w, -1), 11);
  EXPECT_EQ(workload_ctx_need(w, 20), 26);
}

TEST(PeakRss, IsReadableAndResettable) {
  ASSERT_TRUE(peak_rss_MB().has_value());
  EXPECT_GT(*peak_rss_MB(), 0.0);
  reset_peak_rss();  // may be refused in a container; the reading must still work
  EXPECT_TRUE(peak_rss_MB().has_value());
}

TEST(StreamBandwidth, ReturnsOnePositiveSamplePerPass) {
  const std::vector<double> v = measure_stream_GBps(1 << 20, 3, 1);
  ASSERT_EQ(v.size(), 3u);
  for (double x : v) EXPECT_GT(x, 0.0);
}

}  // namespace
}  // namespace fish
