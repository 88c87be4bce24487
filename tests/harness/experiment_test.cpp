// Experiment files: every schema error with its message and JSON path, sweep expansion (ranges,
// zip, exclude), the run order, and cell-id stability.
#include "harness/experiment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "harness/cli_test_util.h"
#include "test_env.h"

namespace fish {
namespace {

using ::testing::HasSubstr;

// A valid experiment with `extra` spliced in after the required keys.
std::string exp_text(const std::string& extra) {
  return R"({"schema_version": 1, "name": "t", "model": "m.gguf")" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

std::string error_of(const std::string& text) {
  auto r = parse_experiment(text, "e.json");
  return r.ok() ? std::string("(parsed without error)") : r.error().message;
}

// "act=int8 n_threads=1" per cell, in run order.
std::vector<std::string> cell_axes(const Experiment& e) {
  std::vector<std::string> out;
  for (const Cell& c : expand_cells(e)) {
    std::string s;
    if (e.models.size() > 1) s = e.models[c.model_index];
    for (const auto& [k, v] : c.axes)
      s += (s.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    out.push_back(s);
  }
  return out;
}

TEST(ExperimentSchema, ParsesAMinimalFileWithDefaults) {
  auto r = parse_experiment(exp_text(""), "e.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "t");
  EXPECT_EQ(r->models, std::vector<std::string>{"m.gguf"});
  EXPECT_EQ(r->defaults.n_ctx, Config{}.n_ctx);
  EXPECT_EQ(r->measure.paths, std::vector<std::string>{"cpu"});
  EXPECT_EQ(expand_cells(*r).size(), 1u);
}

TEST(ExperimentSchema, RejectsUnknownKeysNamingThePathAndTheKnownKeys) {
  EXPECT_THAT(error_of(exp_text(R"("sweeps": {})")),
              HasSubstr("e.json: sweeps: unknown key (known: schema_version, name"));
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"n_thread": 2})")),
              HasSubstr("e.json: defaults.n_thread: unknown key (known: n_ctx, n_threads, act"));
  EXPECT_THAT(error_of(exp_text(R"("measure": {"reps": 2})")),
              HasSubstr("e.json: measure.reps: unknown key (known: paths, warmup, repetitions"));
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"threads": [1, 2]})")),
              HasSubstr("e.json: sweep.threads: unknown key"));
}

TEST(ExperimentSchema, RejectsWrongTypesSayingExpectedAndFound) {
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"n_ctx": "4k"})")),
              HasSubstr("e.json: defaults.n_ctx: wrong type: expected integer, found string "
                        "\"4k\""));
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"n_ctx": 1.5})")),
              HasSubstr("defaults.n_ctx: wrong type: expected integer, found 1.5"));
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"n_threads": [1, 2]})")),
              HasSubstr("defaults.n_threads: wrong type: expected integer, found a list (a list "
                        "is a sweep axis: put it under \"sweep\")"));
  EXPECT_THAT(error_of(exp_text(R"("measure": {"interleave": "yes"})")),
              HasSubstr("measure.interleave: wrong type: expected boolean, found string"));
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"act": "int8"})")),
              HasSubstr("sweep.act: wrong type: expected a list, found string \"int8\""));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "name": "t", "model": 3})"),
              HasSubstr("model: wrong type: expected a string or a list, found 3"));
  EXPECT_THAT(error_of("[1]"), HasSubstr("expected a JSON object at the top level"));
  EXPECT_THAT(error_of("{\"name\": "), HasSubstr("e.json: not valid JSON"));
}

TEST(ExperimentSchema, RejectsValuesOutsideTheAllowedSetOrRange) {
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"act": "f16"})")),
              HasSubstr("defaults.act: \"f16\" is not allowed (allowed: int8, f32)"));
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"isa": ["avx2", "neon"]})")),
              HasSubstr("sweep.isa[1]: \"neon\" is not allowed (allowed: auto, scalar, avx2, "
                        "avx512)"));
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"n_ctx": 0})")),
              HasSubstr("defaults.n_ctx: 0 is out of range (expected 1 to 1048576)"));
  EXPECT_THAT(error_of(exp_text(R"("measure": {"paths": ["cpu", "tpu"]})")),
              HasSubstr("measure.paths[1]: \"tpu\" is not allowed (allowed: cpu, gpu)"));
  EXPECT_THAT(error_of(exp_text(R"("quality": {"metrics": ["bleu"]})")),
              HasSubstr("quality.metrics[0]: \"bleu\" is not allowed (allowed: top1, kl, ppl, "
                        "greedy_exact)"));
  EXPECT_THAT(error_of(exp_text(R"("quality": {"reference": {"act": "bf16"}})")),
              HasSubstr("quality.reference.act: \"bf16\" is not allowed"));
}

TEST(ExperimentSchema, ValidatesTheRequantWeightPathAndGpuFields) {
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"requant": "0-4"})")),
              HasSubstr("sweep.requant[4]: 4 is out of range (expected 0 to 3)"));
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"weight_path": "w8a8"})")),
              HasSubstr("defaults.weight_path: \"w8a8\" is not allowed (allowed: auto, gguf, "
                        "w4a8, w4a16, ref)"));
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"group_size": [32, 48]})")),
              HasSubstr("sweep.group_size[1]: 48 is not allowed (allowed: 32, 64, 128)"));
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"group_size": "64"})")),
              HasSubstr("defaults.group_size: wrong type: expected integer, found string"));
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"zero_point": "none"})")),
              HasSubstr("defaults.zero_point: \"none\" is not allowed (allowed: sym, asym, fp)"));
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"quantize_head": 1})")),
              HasSubstr("defaults.quantize_head: wrong type: expected boolean, found 1"));
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"dequant_threshold": -1})")),
              HasSubstr("defaults.dequant_threshold: -1 is out of range (expected 0 to "));
  EXPECT_THAT(error_of(exp_text(R"("defaults": {"gpu_layers": -2})")),
              HasSubstr("defaults.gpu_layers: -2 is out of range (expected -1 to "));
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"vram_budget_mb": [4096, -1]})")),
              HasSubstr("sweep.vram_budget_mb[1]: -1 is out of range (expected 0 to "));
  EXPECT_THAT(error_of(exp_text(R"("quality": {"reference": {"weight_path": "fp32"}})")),
              HasSubstr("quality.reference.weight_path: \"fp32\" is not allowed"));
  auto ok = parse_experiment(
      exp_text(R"("defaults": {"weight_path": "w4a16", "group_size": 128, "zero_point": "sym",
                 "quantize_head": false, "gpu_layers": 12, "vram_budget_mb": 4096},
                 "sweep": {"requant": "0-3"}, "quality": {"reference": {"weight_path": "ref"}})"),
      "e.json");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->defaults.group_size, 128);
  EXPECT_FALSE(ok->defaults.quantize_head);
  EXPECT_EQ(ok->quality.reference.weight_path, "ref");
  EXPECT_EQ(cell_axes(*ok),
            (std::vector<std::string>{"requant=0", "requant=1", "requant=2", "requant=3"}));
}

TEST(ExperimentSchema, SessionAndLoadOptionsFollowTheConfig) {
  Config c;
  c.weight_path = "w4a8";
  c.group_size = 32;
  c.zero_point = "sym";
  c.quantize_embedding = true;
  c.dequant_threshold = 3;
  c.requant = 2;
  auto o = session_options(c);
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->weights.weight_path, WeightPath::w4a8);
  EXPECT_EQ(o->weights.fmt.group_size, 32);
  EXPECT_EQ(o->weights.fmt.zero_point, Int4ZeroPoint::sym);
  EXPECT_TRUE(o->weights.quantize_embedding);
  EXPECT_EQ(o->weights.dequant_threshold, 3);
  EXPECT_EQ(o->gpu, nullptr);
  auto lo = model_load_options(c);
  ASSERT_TRUE(lo.ok());
  EXPECT_EQ(lo->requant, 2);
  c.requant = 5;  // set in code, past the table's check
  EXPECT_THAT(model_load_options(c).error().message, HasSubstr("requant 5 is out of range"));
  c.requant = 0;
  c.group_size = 48;
  EXPECT_THAT(session_options(c).error().message,
              HasSubstr("group_size 48 is not allowed (allowed: 32, 64, 128)"));
}

TEST(ExperimentSchema, RejectsMissingOrWrongRequiredKeys) {
  EXPECT_THAT(error_of(R"({"name": "t", "model": "m"})"),
              HasSubstr("schema_version: missing (expected 1)"));
  EXPECT_THAT(error_of(R"({"schema_version": 2, "name": "t", "model": "m"})"),
              HasSubstr("schema_version: expected 1, found 2"));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "name": "a b", "model": "m"})"),
              HasSubstr("name: expected a non-empty string of [A-Za-z0-9_.-], found string "
                        "\"a b\""));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "name": "t"})"), HasSubstr("model: missing"));
}

TEST(ExperimentSchema, ReportsEveryProblemNotOnlyTheFirst) {
  const std::string msg = error_of(
      exp_text(R"("defaults": {"n_ctx": -1, "act": "x"}, "bogus": 1, "sweep": {"n_batch": []})"));
  EXPECT_THAT(msg, HasSubstr("e.json: 4 problems:"));
  EXPECT_THAT(msg, HasSubstr("defaults.n_ctx: -1 is out of range"));
  EXPECT_THAT(msg, HasSubstr("defaults.act: \"x\" is not allowed"));
  EXPECT_THAT(msg, HasSubstr("bogus: unknown key"));
  EXPECT_THAT(msg, HasSubstr("sweep.n_batch: empty sweep"));
  EXPECT_THAT(msg, HasSubstr("(fish run --help-fields lists every key)"));
}

TEST(ExperimentSchema, RejectsEmptySweeps) {
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"n_threads": []})")),
              HasSubstr("sweep.n_threads: empty sweep (an axis needs at least one value)"));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "name": "t", "model": []})"),
              HasSubstr("model: empty sweep"));
  EXPECT_THAT(error_of(exp_text(
                  R"("sweep": {"act": ["int8", "f32"]}, "exclude": [{"act": ["int8", "f32"]}])")),
              HasSubstr("exclude: empty sweep: the exclude rules remove every cell"));
}

TEST(ExperimentSchema, RejectsBadRanges) {
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"n_threads": "0-32+0"})")),
              HasSubstr("sweep.n_threads: bad range \"0-32+0\": step must be >= 1"));
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"n_ctx": "4096-512"})")),
              HasSubstr("bad range \"4096-512\": start is above end"));
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"n_ctx": "512-4096*1"})")),
              HasSubstr("factor must be >= 2"));
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"n_ctx": "a-b"})")),
              HasSubstr("bad range \"a-b\": start is not a non-negative integer (expected "
                        "\"A-B\", \"A-B+STEP\" or \"A-B*FACTOR\")"));
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"n_ctx": "0-8"})")),
              HasSubstr("sweep.n_ctx[0]: 0 is out of range (expected 1 to 1048576)"));
  EXPECT_THAT(error_of(exp_text(R"("sweep": {"n_ctx": [512, 512]})")),
              HasSubstr("sweep.n_ctx[1]: 512 is listed twice"));
}

TEST(ExperimentSchema, RejectsBadZipGroups) {
  const std::string sweep = R"("sweep": {"n_ctx": [256, 512], "n_batch": [32, 64, 128]})";
  EXPECT_THAT(error_of(exp_text(sweep + R"(, "zip": [["n_ctx", "n_batch"]])")),
              HasSubstr("zip[0]: axes of unequal length (n_ctx has 2 values, n_batch has 3)"));
  EXPECT_THAT(error_of(exp_text(sweep + R"(, "zip": [["n_ctx", "act"]])")),
              HasSubstr("zip[0][1]: string \"act\" is not a sweep axis"));
  EXPECT_THAT(error_of(exp_text(sweep + R"(, "zip": [["n_ctx"]])")),
              HasSubstr("zip[0]: expected a list of at least 2 sweep axis names"));
}

TEST(ExperimentSchema, RejectsBadExcludeRules) {
  const std::string sweep = R"("sweep": {"act": ["int8", "f32"], "n_threads": [1, 2]})";
  EXPECT_THAT(error_of(exp_text(sweep + R"(, "exclude": [{"n_ctx": 512}])")),
              HasSubstr("exclude[0].n_ctx: not a sweep axis (exclude keys: the swept fields)"));
  EXPECT_THAT(error_of(exp_text(sweep + R"(, "exclude": [{"act": "f16"}])")),
              HasSubstr("exclude[0].act: \"f16\" is not a value of the axis (values: \"int8\", "
                        "\"f32\")"));
  EXPECT_THAT(error_of(exp_text(sweep + R"(, "exclude": [{}])")),
              HasSubstr("exclude[0]: expected a non-empty object"));
  EXPECT_THAT(error_of(exp_text(sweep + R"(, "exclude": [{"model": "m.gguf"}])")),
              HasSubstr("exclude[0].model: model is not swept"));
  EXPECT_THAT(error_of(exp_text(sweep + R"(, "exclude": {"act": "f32"})")),
              HasSubstr("exclude: wrong type: expected a list of objects"));
}

TEST(ExperimentSchema, ChecksSyntheticModelEntries) {
  EXPECT_THAT(error_of(R"({"schema_version": 1, "name": "t", "model": "synthetic:huge:q4_0"})"),
              HasSubstr("model: \"synthetic:huge:q4_0\": unknown shape \"huge\" (known: tiny, "));
  EXPECT_THAT(
      error_of(R"({"schema_version": 1, "name": "t", "model": ["a", "synthetic:tiny:q9"]})"),
      HasSubstr("model[1]: \"synthetic:tiny:q9\": unknown file type \"q9\" (known: f32, "));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "name": "t", "model": "synthetic:tiny"})"),
              HasSubstr("expected synthetic:SHAPE:TYPE or synthetic:SHAPE:TYPE:SEED"));
  auto s = parse_synthetic_model("synthetic:llama-8b:q4_k_m:7");
  ASSERT_TRUE(s.ok() && s.value().has_value());
  EXPECT_EQ(s.value()->file_name(), "llama-8b-q4_k_m-s7.gguf");
  EXPECT_FALSE(parse_synthetic_model("models/x.gguf").value().has_value());
}

TEST(ExperimentSchema, MeasureOrderIsFixedShuffleOrInterleaveWithASeedOnlyForShuffle) {
  auto def = parse_experiment(exp_text(""), "e.json");
  ASSERT_TRUE(def.ok()) << def.error().message;
  EXPECT_EQ(def.value().measure.order, MeasureSpec{}.order);
  auto sh = parse_experiment(exp_text(R"("measure": {"order": "shuffle", "seed": 7})"), "e.json");
  ASSERT_TRUE(sh.ok()) << sh.error().message;
  EXPECT_EQ(sh.value().measure.order, "shuffle");
  EXPECT_EQ(sh.value().measure.seed, 7);
  EXPECT_THAT(error_of(exp_text(R"("measure": {"order": "random"})")),
              HasSubstr("e.json: measure.order: "));
  EXPECT_THAT(error_of(exp_text(R"("measure": {"order": "random"})")),
              HasSubstr("fixed, shuffle, interleave"));
  EXPECT_THAT(error_of(exp_text(R"("measure": {"order": 3})")), HasSubstr("e.json: measure.order"));
  EXPECT_THAT(error_of(exp_text(R"("measure": {"order": "fixed", "seed": 3})")),
              HasSubstr("e.json: measure.seed: only used by order shuffle (order is fixed)"));
  EXPECT_THAT(error_of(exp_text(R"("measure": {"order": "shuffle", "seed": -1})")),
              HasSubstr("e.json: measure.seed"));
}

TEST(ExperimentRange, ExpandsArithmeticAndGeometricRanges) {
  EXPECT_EQ(parse_range("0-32+4").value(), (std::vector<int64_t>{0, 4, 8, 12, 16, 20, 24, 28, 32}));
  EXPECT_EQ(parse_range("1-4").value(), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(parse_range("1-10+4").value(), (std::vector<int64_t>{1, 5, 9}));  // 10 not hit
  EXPECT_EQ(parse_range("512-4096*2").value(), (std::vector<int64_t>{512, 1024, 2048, 4096}));
  EXPECT_EQ(parse_range("7-7").value(), (std::vector<int64_t>{7}));
  EXPECT_FALSE(parse_range("1-").ok());
  EXPECT_FALSE(parse_range("5").ok());
  EXPECT_FALSE(parse_range("1-4+2x").ok());
}

TEST(ExperimentExpansion, CrossesAxesInFileOrderFirstAxisOutermost) {
  auto e = parse_experiment(
      exp_text(R"("sweep": {"n_threads": "1-2", "act": ["int8", "f32"], "n_ctx": [512]})"), "e");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_THAT(
      cell_axes(*e),
      ::testing::ElementsAre("n_threads=1 act=int8 n_ctx=512", "n_threads=1 act=f32 n_ctx=512",
                             "n_threads=2 act=int8 n_ctx=512", "n_threads=2 act=f32 n_ctx=512"));
  const std::vector<Cell> cells = expand_cells(*e);
  for (size_t i = 0; i < cells.size(); ++i) EXPECT_EQ(cells[i].index, int64_t(i));
  EXPECT_EQ(cells[3].config.n_threads, 2);
  EXPECT_EQ(cells[3].config.act, "f32");
  EXPECT_EQ(cells[3].config.n_ctx, 512);
}

TEST(ExperimentExpansion, ZippedAxesMoveTogether) {
  auto e = parse_experiment(exp_text(R"("sweep": {"act": ["int8", "f32"], "n_ctx": [256, 512, 1024],
      "n_batch": [16, 32, 64]}, "zip": [["n_ctx", "n_batch"]])"),
                            "e");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_THAT(cell_axes(*e), ::testing::ElementsAre(
                                 "act=int8 n_ctx=256 n_batch=16", "act=int8 n_ctx=512 n_batch=32",
                                 "act=int8 n_ctx=1024 n_batch=64", "act=f32 n_ctx=256 n_batch=16",
                                 "act=f32 n_ctx=512 n_batch=32", "act=f32 n_ctx=1024 n_batch=64"));
}

TEST(ExperimentExpansion, ExcludeDropsMatchingCellsAndRenumbers) {
  auto e = parse_experiment(exp_text(R"("sweep": {"act": ["int8", "f32"], "n_threads": [1, 2, 4]},
      "exclude": [{"act": "f32", "n_threads": [2, 4]}, {"n_threads": 1, "act": "int8"}])"),
                            "e");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_THAT(cell_axes(*e), ::testing::ElementsAre("act=int8 n_threads=2", "act=int8 n_threads=4",
                                                    "act=f32 n_threads=1"));
  EXPECT_EQ(expand_cells(*e).back().index, 2);
}

TEST(ExperimentExpansion, ExcludeMatchesValuesOfARangeAxis) {
  auto e = parse_experiment(
      exp_text(R"("sweep": {"n_threads": "1-4"}, "exclude": [{"n_threads": [2, 4]}])"), "e");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_THAT(cell_axes(*e), ::testing::ElementsAre("n_threads=1", "n_threads=3"));
}

TEST(ExperimentExpansion, ModelsAreTheOutermostAxisSoEachLoadsOnce) {
  auto e = parse_experiment(R"({"schema_version": 1, "name": "t", "model": ["a.gguf", "b.gguf"],
      "sweep": {"act": ["int8", "f32"]}, "exclude": [{"model": "b.gguf", "act": "f32"}]})",
                            "e");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_THAT(cell_axes(*e),
              ::testing::ElementsAre("a.gguf act=int8", "a.gguf act=f32", "b.gguf act=int8"));
}

TEST(ExperimentExpansion, DefaultsApplyToEveryCellAndAxesOverrideThem) {
  auto e = parse_experiment(
      exp_text(R"("defaults": {"n_ctx": 300, "act": "f32"}, "sweep": {"act": ["int8"]})"), "e");
  ASSERT_TRUE(e.ok()) << e.error().message;
  const Cell c = expand_cells(*e)[0];
  EXPECT_EQ(c.config.n_ctx, 300);
  EXPECT_EQ(c.config.act, "int8");
  EXPECT_EQ(e->quality.reference.n_ctx, 300);  // reference = defaults + quality.reference
}

TEST(CellId, IsStableAcrossRunsAndVersionsOfTheFileLayout) {
  // Golden value, computed independently of FISH from the documented definition:
  //   python3 -c 'import json,hashlib; print(hashlib.sha256(json.dumps({"harness_version":
  //   "0.1.0", "model": "m.gguf", "model_sha256": "a"*64, "config": {"n_ctx": 512, "n_threads": 0,
  //   "act": "int8",
  //   "n_batch": 256, "isa": "auto", "requant": 0, "weight_path": "auto", "group_size": 64,
  //   "zero_point": "asym", "quantize_head": True, "quantize_embedding": False,
  //   "prefill_dequant": True, "direct_dequant": True, "dequant_threshold": 8,
  //   "gpu_layers": -1, "vram_budget_mb": 0, "gpu_requant": -1, "gpu_span": True,
  //   "swa_kv": "ring"},
  //   "workload": {"n_prompt": 64, "n_gen": 32, "seed": 1, "prompt_source": "random"}, "quality":
  //   None}, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16])'
  // Changing it breaks --resume and the joins of every committed result; only a deliberate
  // change of the id's definition (or a new Config field) may update it.
  auto e = parse_experiment(exp_text(R"("defaults": {"n_ctx": 512})"), "e");
  ASSERT_TRUE(e.ok()) << e.error().message;
  const Cell c = expand_cells(*e)[0];
  const std::string sha(64, 'a');
  EXPECT_EQ(cell_id(*e, c, sha), "7cfc94c03e61f351");
  // Fields added later are hashed only away from their defaults: the id above holds.
  const auto id_with = [&](const std::string& defaults) {
    auto ex = parse_experiment(exp_text(R"("defaults": )" + defaults), "e");
    EXPECT_TRUE(ex.ok()) << defaults << ": " << ex.error().message;
    return ex.ok() ? cell_id(*ex, expand_cells(*ex)[0], sha) : std::string();
  };
  EXPECT_EQ(id_with(R"({"n_ctx": 512, "kquant_repack": "auto"})"), "7cfc94c03e61f351");
  EXPECT_NE(id_with(R"({"n_ctx": 512, "kquant_repack": "off"})"), "7cfc94c03e61f351");
  EXPECT_EQ(id_with(R"({"n_ctx": 512, "speculative": "off", "draft_n": 4})"), "7cfc94c03e61f351");
  EXPECT_NE(id_with(R"({"n_ctx": 512, "speculative": "lookup"})"), "7cfc94c03e61f351");
  EXPECT_EQ(id_with(R"({"n_ctx": 512, "gpu_pipeline": true})"), "7cfc94c03e61f351");
  EXPECT_NE(id_with(R"({"n_ctx": 512, "gpu_pipeline": false})"), "7cfc94c03e61f351");
  // Same parameters written differently (key order, measure/output sections): same id.
  auto e2 = parse_experiment(R"({"defaults": {"n_ctx": 512}, "model": "m.gguf",
      "name": "other", "schema_version": 1, "measure": {"repetitions": 9}, "output": {"dir": "x"}})",
                             "e2");
  ASSERT_TRUE(e2.ok()) << e2.error().message;
  EXPECT_EQ(cell_id(*e2, expand_cells(*e2)[0], sha), cell_id(*e, c, sha));
}

TEST(CellId, DiffersForEveryListedModelEvenWithTheSameBytesOrNone) {
  // Two copies of one file, and two missing files (no sha256): four models, four cells.
  auto f = parse_experiment(R"({"schema_version": 1, "name": "t",
      "model": ["a.gguf", "copy-of-a.gguf", "missing1.gguf", "missing2.gguf"]})",
                            "e");
  ASSERT_TRUE(f.ok()) << f.error().message;
  const std::vector<Cell> cells = expand_cells(*f);
  ASSERT_EQ(cells.size(), 4u);
  const std::string sha(64, 'a');
  std::set<std::string> ids = {cell_id(*f, cells[0], sha), cell_id(*f, cells[1], sha),
                               cell_id(*f, cells[2], ""), cell_id(*f, cells[3], "")};
  EXPECT_EQ(ids.size(), 4u);
}

TEST(CellId, ChangesWithAParameterTheWorkloadQualityOrTheModelSha) {
  auto e = parse_experiment(exp_text(R"("sweep": {"n_threads": [1, 2]})"), "e");
  ASSERT_TRUE(e.ok()) << e.error().message;
  const std::vector<Cell> cells = expand_cells(*e);
  const std::string a(64, 'a'), b(64, 'b');
  const std::string base = cell_id(*e, cells[0], a);
  EXPECT_EQ(base.size(), 16u);
  EXPECT_NE(cell_id(*e, cells[1], a), base);  // n_threads differs
  EXPECT_NE(cell_id(*e, cells[0], b), base);  // model bytes differ
  Experiment w = *e;
  w.workload.n_gen += 1;
  EXPECT_NE(cell_id(w, cells[0], a), base);
  Experiment q = *e;
  q.quality.metrics = {"top1"};
  EXPECT_NE(cell_id(q, cells[0], a), base);
  Experiment r = q;
  r.quality.reference.act = "f32";
  EXPECT_NE(cell_id(r, cells[0], a), cell_id(q, cells[0], a));
}

TEST(ExperimentSchema, RejectsADuplicateKeyNamingItsPath) {
  // nlohmann keeps the last value silently: {"n_ctx": 512, "n_ctx": 8} would run 8.
  EXPECT_EQ(error_of(exp_text(R"("defaults": {"n_ctx": 512, "n_ctx": 8})")),
            "e.json: defaults.n_ctx: duplicate key (JSON objects take each key once; the parser "
            "would keep the last value silently)");
  EXPECT_EQ(error_of(R"({"schema_version": 1, "name": "a", "name": "b", "model": "m.gguf"})"),
            "e.json: name: duplicate key (JSON objects take each key once; the parser would keep "
            "the last value silently)");
  EXPECT_THAT(error_of(exp_text(R"("exclude": [{"act": "f32"}, {"act": "int8", "act": "f32"}])")),
              HasSubstr("e.json: exclude[1].act: duplicate key"));
  // The same key in different objects is fine.
  EXPECT_EQ(error_of(exp_text(R"("defaults": {"n_ctx": 512}, "quality": {"metrics": ["top1"],
      "reference": {"n_ctx": 512}})")),
            "(parsed without error)");
}

TEST(ExperimentSchema, RejectsNestingDeeperThanTheLimit) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  std::string path = "description";  // the top-level object is level 1: 63 arrays fit
  for (int i = 0; i < 63; ++i) path += "[0]";
  EXPECT_EQ(error_of(exp_text(R"("description": )" + deep)),
            "e.json: " + path + ": nested deeper than 64 levels");
}

TEST(ExperimentPlan, RefusesA10To10CellSweepWithoutExpandingIt) {
  // Five axes of 100 values: the cross product is counted (10^10), never built.
  auto r = parse_experiment(exp_text(R"("sweep": {"n_ctx": "1-100", "n_batch": "1-100",
      "dequant_threshold": "1-100", "gpu_layers": "0-99", "vram_budget_mb": "1-100"})"),
                            "e.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message,
              HasSubstr("e.json: sweep: 10000000000 cells (1 model x n_ctx 100 x n_batch 100 x "
                        "dequant_threshold 100 x gpu_layers 100 x vram_budget_mb 100), over the "
                        "limit of 100000 cells (fish run --max-cells N raises it)"));
}

TEST(ExperimentPlan, TheCellLimitCountsZipGroupsOnceAndCanBeRaised) {
  const std::string two_models = R"({"schema_version": 1, "name": "t",
      "model": ["a.gguf", "b.gguf"],
      "sweep": {"n_ctx": "1-50", "n_batch": "1-50", "dequant_threshold": "1-50"},
      "zip": [["n_batch", "dequant_threshold"]]})";
  auto refused = parse_experiment(two_models, "e.json", 4999);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message,
              HasSubstr("sweep: 5000 cells (2 models x n_ctx 50 x n_batch+dequant_threshold 50), "
                        "over the limit of 4999 cells"));
  auto ok = parse_experiment(two_models, "e.json", 5000);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(count_cells(*ok), 5000u);
  EXPECT_EQ(expand_cells(*ok).size(), 5000u);
}

TEST(ExperimentFile, RefusesADirectoryADeviceAndAnOversizedFile) {
  test::TempDir d;
  auto dir = load_experiment(d.path().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().message, d.path().string() + ": is a directory, expected a regular file");
  auto zero = load_experiment("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().message, "/dev/zero: is a character device, expected a regular file");
  const std::string big = d.file("big.json");
  std::ofstream(big) << std::string(size_t(17) << 20, ' ');
  auto b = load_experiment(big);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().message,
            big + ": 17825792 bytes, over the 16 MiB limit of an experiment file");
}

// Replays the experiment fuzz corpus (tests/fuzz/corpus/experiment) in the ordinary build: each
// input parses, or fails with a message that names the file; accepted ones plan within the limit.
TEST(ExperimentSchema, ReplaysTheFuzzCorpusWithErrorsOrValidPlans) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(test::source_dir()) / "tests/fuzz/corpus/experiment";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  size_t n_files = 0, n_valid = 0;
  for (const fs::directory_entry& f : fs::directory_iterator(dir)) {
    ++n_files;
    std::ifstream in(f.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto r = parse_experiment(ss.str(), "corpus.json", 512);
    if (!r.ok()) {
      EXPECT_EQ(r.error().message.rfind("corpus.json: ", 0), 0u) << f.path();
      continue;
    }
    ++n_valid;
    EXPECT_LE(expand_cells(*r).size(), count_cells(*r)) << f.path();
  }
  EXPECT_GE(n_files, 10u);
  EXPECT_GE(n_valid, 10u);  // the committed experiments are seeds
}

TEST(ExperimentHelp, DocumentsEveryKeyFromTheFieldTables) {
  const std::string h = experiment_format_help();
  for (const TopLevelKey& k : experiment_top_level_keys())
    EXPECT_THAT(h, HasSubstr("| `" + std::string(k.name) + "` |"));
  for (const auto& f : config_fields())
    EXPECT_THAT(h, HasSubstr("| `" + std::string(f.name) + "` |"));
  for (const auto& f : measure_fields())
    EXPECT_THAT(h, HasSubstr("| `" + std::string(f.name) + "` |"));
  EXPECT_THAT(h, HasSubstr("| `act` | string | `\"int8\"` | int8, f32 |"));
}

TEST(ExperimentHelp, DocsSectionIsTheGeneratedHelp) {
  const std::optional<std::string> section =
      test::doc_section("docs/experiments.md", "<!-- fish run --help-fields -->",
                        "<!-- end fish run --help-fields -->");
  ASSERT_TRUE(section.has_value())
      << "docs/experiments.md or its markers not found under " << test::source_dir();
  EXPECT_EQ(*section, experiment_format_help())
      << "regenerate the docs/experiments.md section with: fish run --help-fields";
}

}  // namespace
}  // namespace fish
