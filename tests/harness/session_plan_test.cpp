// One run plan behind every command (engine/config.h plan_session, docs/gpu.md "One plan, passed
// down"): the same knobs given as a fish run experiment, as fish bench flags and as fish generate
// flags resolve to the same plan; fish generate has a flag for every Config field a generation
// uses, and they reach its placement; the harness reaches the GPU only through ComputeBackend.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "engine/config.h"
#include "harness/cli_fields.h"
#include "harness/cli_test_util.h"
#include "harness/exit_codes.h"
#include "harness/experiment.h"

namespace fish {
namespace {

using ::testing::HasSubstr;

// Every resolved value of a plan as text, so two plans compare field by field in a failure.
std::string plan_text(const SessionPlan& p) {
  const SessionOptions& s = p.session;
  std::string t = fmt::format(
      "load: requant {} threads {} kquant_repack {} keep_gguf {} repack_q8_0 {}\n"
      "session: n_ctx {} threads {} act {} n_batch {} swa_kv {} isa {} weight_path {} group {} "
      "zero {} head {} embedding {} prefill_dequant {} direct {} threshold {}\n",
      p.load.requant, p.load.n_threads, p.load.kquant_repack, p.load.keep_gguf, p.load.repack_q8_0,
      s.n_ctx, s.n_threads, int(s.act), s.n_batch, int(s.swa_kv), int(s.isa),
      int(s.weights.weight_path), s.weights.fmt.group_size, int(s.weights.fmt.zero_point),
      s.weights.quantize_head, s.weights.quantize_embedding, s.weights.prefill_dequant,
      s.weights.direct_dequant, s.weights.dequant_threshold);
  if (!p.gpu) return t + "gpu: none\n";
  const GpuRequest& g = *p.gpu;
  return t + fmt::format("gpu: layers {} budget {} requant {} threads {} span {} {} {}\n",
                         g.max_layers,
                         g.upload.budget_bytes ? std::to_string(*g.upload.budget_bytes) : "-",
                         g.upload.requant ? std::to_string(*g.upload.requant) : "-",
                         g.upload.n_threads, g.span.n_ctx, g.span.max_tok, g.span.kv_reserve);
}

SessionPlan gpu_plan(const Config& c) {
  auto p = plan_session(c, /*gpu_path=*/true);
  EXPECT_TRUE(p.ok()) << p.error().message;
  return p.ok() ? p.value() : SessionPlan{};
}

// The first cell's Config of an experiment file.
Config first_cell(const std::string& path) {
  auto e = load_experiment(path);
  EXPECT_TRUE(e.ok()) << path << ": " << e.error().message;
  if (!e.ok()) return {};
  const std::vector<Cell> cells = expand_cells(e.value());
  return cells.front().config;
}

class SessionPlanTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(std::filesystem::exists(test::fish_bin())) << test::fish_bin() << " not built";
    model_ = (test::temp_dir() / "session_plan_tiny.gguf").string();
    ASSERT_EQ(test::shell_exit_code(
                  test::fish_bin() + " make-model --shape tiny --type q8_0 --out " + model_,
                  (test::temp_dir() / "session_plan_make_model.log").string()),
              0);
  }
  static inline std::string model_;
  test::TempDir dir_;
};

TEST_F(SessionPlanTest, RunBenchAndGenerateResolveTheSameKnobsToTheSamePlan) {
  // fish run: the knobs as an experiment's defaults.
  const std::string exp = dir_.file("run.json");
  std::ofstream(exp) << fmt::format(
      R"({{"schema_version": {}, "name": "plan", "model": ["{}"],
          "workload": {{"n_prompt": 8, "n_gen": 1}}, "measure": {{"paths": ["gpu"]}},
          "defaults": {{"n_threads": 3, "n_batch": 64, "act": "f32", "gpu_layers": 1,
                        "vram_budget_mb": 512, "gpu_requant": 2, "gpu_span": false,
                        "kquant_repack": "off"}}}})",
      kExperimentSchemaVersion, model_);
  const SessionPlan run = gpu_plan(first_cell(exp));

  // fish bench: the same knobs as its flags; --dry-run writes the experiment file it runs.
  const std::string res = dir_.file("res");
  ASSERT_EQ(
      test::shell_exit_code(test::fish_bin() + " bench -m " + model_ + " --out " + res +
                                " -p 8 -n 0 -t 3 -b 64 --act f32 --ngl 1 --vram-budget-mb 512 "
                                "--gpu-requant 2 --gpu-span false --kquant-repack off --dry-run",
                            dir_.file("bench.log")),
      0)
      << test::file_text(dir_.file("bench.log"));
  const SessionPlan bench = gpu_plan(first_cell(res + "/bench-p8-n1-gpu.json"));

  // fish generate: the same knobs as its flags (the flags fish generate registers).
  CLI::App app;
  Config gen_config;
  add_generate_config_flags(&app, &gen_config);
  ASSERT_NO_THROW(app.parse(
      "--threads 3 --n-batch 64 --act f32 --gpu-layers 1 --vram-budget-mb 512 --gpu-requant 2 "
      "--gpu-span false --kquant-repack off",
      false));
  const SessionPlan generate = gpu_plan(gen_config);

  EXPECT_EQ(plan_text(bench), plan_text(run));
  EXPECT_EQ(plan_text(generate), plan_text(run));
  ASSERT_TRUE(run.gpu.has_value());
  GpuRequest want;
  want.max_layers = 1;
  want.upload.budget_bytes = uint64_t(512) << 20;
  want.upload.requant = 2;
  want.upload.n_threads = 3;
  want.span.n_ctx = 0;  // gpu_span false: stage 1
  want.span.max_tok = 64;
  EXPECT_EQ(*run.gpu, want) << plan_text(run);
  EXPECT_EQ(*generate.gpu, want) << plan_text(generate);
}

TEST(SessionPlan, TheCpuPathHasNoGpuRequestAndTheSpanFollowsTheContext) {
  Config c;
  auto cpu = plan_session(c, /*gpu_path=*/false);
  ASSERT_TRUE(cpu.ok()) << cpu.error().message;
  EXPECT_FALSE(cpu.value().gpu.has_value());
  auto gpu = plan_session(c, /*gpu_path=*/true);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message;
  ASSERT_TRUE(gpu.value().gpu.has_value());
  EXPECT_EQ(gpu.value().gpu->span.n_ctx, c.n_ctx);  // gpu_span true: a span over n_ctx
  gpu.value().set_n_ctx(77);  // fish generate sizes the context from its prompt
  EXPECT_EQ(gpu.value().session.n_ctx, 77);
  EXPECT_EQ(gpu.value().gpu->span.n_ctx, 77);
  c.gpu_span = false;
  auto stage1 = plan_session(c, true);
  ASSERT_TRUE(stage1.ok());
  stage1.value().set_n_ctx(77);
  EXPECT_EQ(stage1.value().gpu->span.n_ctx, 0);  // no span stays no span
}

TEST(SessionPlan, FishGpuLayersCapsTheRequestAndABadValueIsAnError) {
  Config c;
  c.gpu_layers = 5;
  setenv("FISH_GPU_LAYERS", "3", 1);
  auto capped = gpu_request(c);
  c.gpu_layers = -1;
  auto uncapped_field = gpu_request(c);
  setenv("FISH_GPU_LAYERS", "x", 1);
  auto bad = gpu_request(c);
  unsetenv("FISH_GPU_LAYERS");
  ASSERT_TRUE(capped.ok()) << capped.error().message;
  EXPECT_EQ(capped.value().max_layers, 3);
  ASSERT_TRUE(uncapped_field.ok());
  EXPECT_EQ(uncapped_field.value().max_layers, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("FISH_GPU_LAYERS"));
  EXPECT_FALSE(plan_session(Config{}, false).value().gpu.has_value());  // the cpu path ignores it
}

// gpu_pipeline false or FISH_GPU_PIPELINE=0: the span request takes no embedding for the
// pipelined greedy decode; both on (the defaults): it does.
TEST(SessionPlan, GpuPipelineFieldAndKnobReachTheSpanRequest) {
  Config c;
  auto on = gpu_request(c);
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on.value().span.pipeline);
  c.gpu_pipeline = false;
  auto field_off = gpu_request(c);
  ASSERT_TRUE(field_off.ok());
  EXPECT_FALSE(field_off.value().span.pipeline);
  c.gpu_pipeline = true;
  setenv("FISH_GPU_PIPELINE", "0", 1);
  auto knob_off = gpu_request(c);
  unsetenv("FISH_GPU_PIPELINE");
  ASSERT_TRUE(knob_off.ok());
  EXPECT_FALSE(knob_off.value().span.pipeline);
}

TEST(SessionPlan, GenerateHasAFlagForEveryConfigFieldItUses) {
  const std::vector<ConfigFlag> flags = generate_config_flags();
  std::vector<std::string_view> fields;
  for (const ConfigFlag& f : flags) {
    fields.push_back(f.field);
    EXPECT_THAT(f.flags, HasSubstr(field_flag(f.field))) << f.field;
  }
  for (const FieldSpec<Config>& f : config_fields()) {
    // generate sizes n_ctx from its prompt (--n-ctx 0); the others are how fish run measures.
    const bool measurement_only =
        f.name == "n_ctx" || f.name == "depth" || f.name == "engine" || f.name == "llama_bench";
    const bool has_flag = std::find(fields.begin(), fields.end(), f.name) != fields.end();
    EXPECT_EQ(has_flag, !measurement_only) << f.name;
  }
  EXPECT_EQ(field_flag("vram_budget_mb"), "--vram-budget-mb");
  const auto threads = std::find_if(flags.begin(), flags.end(),
                                    [](const ConfigFlag& f) { return f.field == "n_threads"; });
  ASSERT_NE(threads, flags.end());
  EXPECT_EQ(threads->flags, "--n-threads,--threads");
}

TEST(SessionPlan, GenerateKeepsItsDocumentedFlagSpellings) {
  CLI::App app;
  Config c;
  add_generate_config_flags(&app, &c);
  ASSERT_NO_THROW(app.parse("--threads 2 --gpu-requant 1 --weight-path gguf --swa-kv full", false));
  EXPECT_EQ(c.n_threads, 2);
  EXPECT_EQ(c.gpu_requant, 1);
  EXPECT_EQ(c.weight_path, "gguf");
  EXPECT_EQ(c.swa_kv, "full");
  // The documented usage (docs/commands.md) names only flags fish generate has.
  const std::string doc = test::file_text(test::source_dir() + "/docs/commands.md");
  const size_t b = doc.find("fish generate"), e = doc.find("fish requant ");
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  const std::string usage = doc.substr(b, e - b);
  const std::regex flag(R"(--[a-z][a-z0-9-]*)");
  int checked = 0;
  for (auto it = std::sregex_iterator(usage.begin(), usage.end(), flag);
       it != std::sregex_iterator(); ++it) {
    const std::string f = it->str();
    if (f == "--help-fields") continue;  // fish run's, named in the note
    const bool generate_own = f == "--n-predict" || f == "--n-ctx" || f == "--seed" ||
                              f == "--temp" || f == "--top-k" || f == "--top-p" || f == "--chat" ||
                              f == "--ignore-eos" || f == "--lookup" || f == "--warmup";
    EXPECT_TRUE(generate_own || app.get_option_no_throw(f) != nullptr) << f;
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

// fish generate on SmolLM2 over lavapipe: --gpu-layers caps the placement, --gpu-span false
// keeps it stage 1; asking for the GPU where there is none is a usage error that says why.
TEST(SessionPlan, GeneratePlacesWhatItsGpuFlagsAsk) {
  const std::string model = test::model_path(test::kSmolLm2);
  if (model.empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  test::TempDir dir;
  const std::string log = dir.file("gen.log");
  const std::string gen = test::fish_bin() + " generate -m " + model + " -p hi -n 2 --threads 2 ";
  ASSERT_EQ(test::shell_exit_code("FISH_GPU=cpu " + gen + "--gpu-layers 2 --gpu-span false", log),
            kExitOk)
      << test::file_text(log);
  const std::string out = test::file_text(log);
  EXPECT_THAT(out, HasSubstr("gpu output + 2 of 30 layers (28..29) on the GPU"));
  EXPECT_THAT(out, HasSubstr("layer cap 2 (gpu_layers / FISH_GPU_LAYERS)"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("; span ")));  // stage 1
  ASSERT_EQ(test::shell_exit_code("FISH_GPU=cpu " + gen + "--gpu-layers 1 --vram-budget-mb 1", log),
            kExitOk)
      << test::file_text(log);
  EXPECT_THAT(test::file_text(log), HasSubstr("vram_budget_mb"));  // the budget stopped it
  EXPECT_EQ(test::shell_exit_code("FISH_GPU=0 " + gen + "--gpu-layers 1", log), kExitUsage);
  EXPECT_THAT(test::file_text(log),
              HasSubstr("no GPU backend (vulkan: off: disabled by FISH_GPU=0)"));
}

// fish generate --warmup 1 on SmolLM2's span over lavapipe: the same continuation as a cold run,
// and FISH_GPU_PROFILE=2 counts the timed forwards alone (the prompt's and two decode steps; the
// warm-up's prompt and two steps are forgotten), as a cold run's profile does; 101 rounds is a
// usage error.
TEST(SessionPlan, GenerateWarmupKeepsTheOutputAndProfilesTheTimedRun) {
  const std::string model = test::model_path(test::kSmolLm2);
  if (model.empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  test::TempDir dir;
  const std::string gen = "FISH_GPU=cpu FISH_GPU_PROFILE=2 " + test::fish_bin() + " generate -m " +
                          model + " -p 'The capital of France is' -n 3 --threads 2 ";
  std::string out[2], err[2];
  for (int w : {0, 1}) {
    const std::string o = dir.file(fmt::format("out{}", w)), e = dir.file(fmt::format("err{}", w));
    // A subshell: shell_exit_code's own redirection would take both streams otherwise.
    ASSERT_EQ(test::shell_exit_code("(" + gen + fmt::format("--warmup {} > {} 2> {})", w, o, e),
                                    dir.file("log")),
              kExitOk)
        << test::file_text(e);
    out[w] = test::file_text(o);
    err[w] = test::file_text(e);
    EXPECT_THAT(err[w], HasSubstr("span profile: 3 forwards")) << err[w];
  }
  EXPECT_FALSE(out[0].empty());
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(test::shell_exit_code(gen + "--warmup 101", dir.file("log")), kExitUsage);
}

TEST(SessionPlan, HarnessSourcesReachTheGpuOnlyThroughComputeBackend) {
  // `fish gpu` (gpu_command.cpp) lists Vulkan devices and the Vulkan budget: the one exception.
  namespace fs = std::filesystem;
  const fs::path harness = fs::path(test::source_dir()) / "harness";
  ASSERT_TRUE(fs::is_directory(harness)) << harness;
  int files = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(harness)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".cpp" && e.path().extension() != ".h") continue;
    ++files;
    const std::string text = test::file_text(e.path().string());
    EXPECT_FALSE(std::regex_search(text, std::regex(R"(dynamic_cast<[^>]*(Backend|vk::))")))
        << name;
    if (name == "gpu_command.cpp") continue;
    EXPECT_EQ(text.find("#include \"engine/vulkan/"), std::string::npos) << name;
    EXPECT_EQ(text.find("VulkanBackend"), std::string::npos) << name;
  }
  EXPECT_GT(files, 50);
}

}  // namespace
}  // namespace fish
