// `fish run` end to end through the real CLI on a tiny synthetic model: error rows and the sweep
// going on (exit code 2), skipped gpu rows, the gpu path on lavapipe, requant and weight-path
// cells, dry-run (of every committed experiment too), shards, and a sweep killed with SIGKILL
// mid-run then resumed: no finished row lost, none duplicated.
#include "harness/run_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/config.h"
#include "harness/exit_codes.h"
#include "test_env.h"

namespace fish {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string fish_bin() {
  return test::binary_dir() + "/fish";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Complete lines only: a run killed mid-write leaves a partial last line without its newline.
std::vector<json> lines_of(const std::string& path) {
  std::vector<json> out;
  std::string text = slurp(path);
  text.resize(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

std::vector<json> rows_of(const std::string& path) {
  std::vector<json> out;
  for (json& j : lines_of(path))
    if (j["kind"] == "row") out.push_back(std::move(j));
  return out;
}

// Exit code of a shell command (stdout and stderr to `log`).
int run_shell(const std::string& cmd, const std::string& log) {
  const int st = std::system((cmd + " >" + log + " 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class RunCommand : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(std::filesystem::exists(fish_bin())) << fish_bin() << " not built";
    model_ = (test::temp_dir() / "run_tiny.gguf").string();
    ASSERT_EQ(run_shell(fish_bin() + " make-model --shape tiny --type q8_0 --out " + model_,
                        (test::temp_dir() / "make_model.log").string()),
              0);
  }

  // Writes an experiment file into dir_ and returns its path.
  std::string write_exp(const std::string& body) {
    const std::string p = dir_.file("exp.json");
    std::ofstream(p) << body;
    return p;
  }
  std::string fish_run(const std::string& args) { return fish_bin() + " run " + args; }

  static inline std::string model_;
  test::TempDir dir_;
};

TEST_F(RunCommand, AFailingCellWritesAnErrorRowAndTheSweepGoesOn) {
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "e",
    "model": [")" + model_ + R"(", "/nonexistent/missing.gguf"],
    "sweep": {"n_ctx": [8, 64]}, "defaults": {"n_threads": 1},
    "workload": {"n_prompt": 16, "n_gen": 4},
    "measure": {"warmup": 0, "repetitions": 2, "stream_MiB": 4, "stream_passes": 2,
                "order": "fixed"}})");
  const std::string out = dir_.file("out");
  EXPECT_EQ(run_shell(fish_run(exp + " --out " + out), dir_.file("log")), kExitCellsFailed);
  const std::vector<json> rows = rows_of(out + "/e.jsonl");
  ASSERT_EQ(rows.size(), 4u) << slurp(dir_.file("log"));
  EXPECT_EQ(rows[0]["status"], "error");  // n_ctx 8 < 16 + 4
  EXPECT_THAT(rows[0]["error"].get<std::string>(),
              HasSubstr("n_prompt + n_gen = 20 exceed n_ctx 8"));
  EXPECT_TRUE(rows[0]["metrics"]["decode_tok_s"].is_null());
  EXPECT_EQ(rows[1]["status"], "ok");  // the next cell still ran
  EXPECT_EQ(rows[1]["metrics"]["decode_tok_s"]["n"], 2);
  EXPECT_EQ(rows[1]["config"]["n_ctx"], 64);
  for (int i : {2, 3}) {
    EXPECT_EQ(rows[size_t(i)]["status"], "error");
    EXPECT_THAT(rows[size_t(i)]["error"].get<std::string>(),
                HasSubstr("model /nonexistent/missing.gguf: not found"));
  }
  EXPECT_TRUE(std::filesystem::exists(out + "/e.csv"));
  EXPECT_THAT(slurp(out + "/e.md"), HasSubstr("n_prompt + n_gen = 20 exceed n_ctx 8"));
  // A resume keeps the error rows (finished) and still says the sweep failed; --retry-errors
  // runs exactly the failed (cell, path) pairs again.
  const std::string before = slurp(out + "/e.jsonl");
  EXPECT_EQ(run_shell(fish_run(exp + " --out " + out + " --resume"), dir_.file("log")),
            kExitCellsFailed);
  EXPECT_EQ(slurp(out + "/e.jsonl"), before);
  EXPECT_EQ(
      run_shell(fish_run(exp + " --out " + out + " --resume --retry-errors"), dir_.file("log")),
      kExitCellsFailed);
  const std::vector<json> again = rows_of(out + "/e.jsonl");
  ASSERT_EQ(again.size(), 7u);  // 4 + the 3 failed ones re-run
  for (size_t i = 4; i < 7; ++i) EXPECT_EQ(again[i]["status"], "error");
  EXPECT_NE(again[4]["cell_index"], 1);
}

TEST_F(RunCommand, AGpuPathWithoutABackendIsASkippedRowNotAFailure) {
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "g", "model": ")" + model_ +
                                    R"(", "defaults": {"n_ctx": 64, "n_threads": 1},
    "workload": {"n_prompt": 8, "n_gen": 4},
    "measure": {"paths": ["gpu", "cpu"], "warmup": 0, "repetitions": 2, "stream_MiB": 4}})");
  auto no_gpu_run = [&](const std::string& args) { return "FISH_GPU=0 " + fish_run(args); };
  EXPECT_EQ(run_shell(no_gpu_run(exp + " --out " + dir_.file("out")), dir_.file("log")), kExitOk);
  const std::vector<json> rows = rows_of(dir_.file("out/g.jsonl"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["path"], "gpu");
  EXPECT_EQ(rows[0]["status"], "skipped");
#if FISH_HAVE_VULKAN
  EXPECT_THAT(rows[0]["error"].get<std::string>(), HasSubstr("disabled by FISH_GPU=0"));
#else
  EXPECT_THAT(rows[0]["error"].get<std::string>(), HasSubstr("no Vulkan backend in this build"));
#endif
  EXPECT_EQ(rows[1]["path"], "cpu");
  EXPECT_EQ(rows[1]["status"], "ok");
  EXPECT_EQ(rows[1]["metrics"]["bits_per_weight"], 8.5);  // q8_0: 34 bytes per 32 weights
  EXPECT_EQ(rows[0]["cell_id"], rows[1]["cell_id"]);      // one cell, two paths
  // Resuming retries a skipped path only once it can run: nothing to do, nothing appended.
  const std::string before = slurp(dir_.file("out/g.jsonl"));
  EXPECT_EQ(
      run_shell(no_gpu_run(exp + " --out " + dir_.file("out") + " --resume"), dir_.file("log")),
      kExitOk);
  EXPECT_EQ(slurp(dir_.file("out/g.jsonl")), before);
}

TEST_F(RunCommand, QualityAgainstTheReferenceIsPerfectForTheReferenceItself) {
  const std::string prompts = dir_.file("prompts.txt");
  std::ofstream(prompts) << "one two three\nfour five\n";
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "q", "model": ")" + model_ +
                                    R"(", "defaults": {"n_ctx": 64, "n_threads": 1},
    "sweep": {"act": ["f32", "int8"]},
    "workload": {"n_prompt": 8, "n_gen": 2},
    "measure": {"warmup": 0, "repetitions": 1, "stream_MiB": 4},
    "quality": {"metrics": ["top1", "kl", "ppl", "greedy_exact"], "reference": {"act": "f32"},
                "text": "/usr/share/common-licenses/GPL-3", "n_tokens": 40,
                "prompt_file": ")" + prompts +
                                    R"(", "greedy_tokens": 4}})");
  ASSERT_EQ(run_shell(fish_run(exp + " --out " + dir_.file("out")), dir_.file("log")), kExitOk)
      << slurp(dir_.file("log"));
  const std::vector<json> rows = rows_of(dir_.file("out/q.jsonl"));
  ASSERT_EQ(rows.size(), 2u);
  const json& ref = rows[0]["metrics"];
  EXPECT_EQ(ref["top1"], 1.0);
  EXPECT_EQ(ref["kl_max"], 0.0);
  EXPECT_EQ(ref["greedy_exact"], json({{"n", 2}, {"of", 2}}));
  EXPECT_GT(ref["ppl"].get<double>(), 1.0);
  const json& q = rows[1]["metrics"];  // int8: close to, not necessarily equal to, the reference
  EXPECT_GE(q["kl_max"].get<double>(), q["kl_p99"].get<double>());
  EXPECT_GE(q["kl_p99"].get<double>(), 0.0);
  EXPECT_LE(q["top1"].get<double>(), 1.0);
}

TEST_F(RunCommand, QualityOverTheReferencesOwnGreedyRunIsPerfectForTheReference) {
  const std::string prompts = dir_.file("prompts.txt");
  std::ofstream(prompts) << "one two three\n";
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "g", "model": ")" + model_ +
                                    R"(", "defaults": {"n_ctx": 64, "n_threads": 1},
    "sweep": {"act": ["f32", "int8"]},
    "workload": {"n_prompt": 8, "n_gen": 2},
    "measure": {"warmup": 0, "repetitions": 1, "stream_MiB": 4},
    "quality": {"metrics": ["top1", "kl"], "reference": {"act": "f32"}, "source": "greedy",
                "n_tokens": 20, "prompt_file": ")" +
                                    prompts + R"("}})");
  ASSERT_EQ(run_shell(fish_run(exp + " --out " + dir_.file("out")), dir_.file("log")), kExitOk)
      << slurp(dir_.file("log"));
  const std::vector<json> rows = rows_of(dir_.file("out/g.jsonl"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["metrics"]["top1"], 1.0);  // the reference predicts its own greedy tokens
  EXPECT_EQ(rows[0]["metrics"]["kl_max"], 0.0);
  const double top1 = rows[1]["metrics"]["top1"].get<double>();
  // 20 scored positions (the generated tokens): top-1 moves in steps of 1/20.
  EXPECT_NEAR(top1 * 20, std::round(top1 * 20), 1e-9);
  EXPECT_GE(rows[1]["metrics"]["kl_mean"].get<double>(), 0.0);
}

// Rows of `path` in cell order.
std::vector<json> rows_for(const std::vector<json>& rows, const std::string& path) {
  std::vector<json> out;
  for (const json& r : rows)
    if (r["path"] == path) out.push_back(r);
  std::sort(out.begin(), out.end(),
            [](const json& a, const json& b) { return a["cell_index"] < b["cell_index"]; });
  return out;
}

TEST_F(RunCommand, RequantCellsLoadTheirOwnModelAndReportTheirBitsPerWeight) {
  const std::string q6k = dir_.file("tiny_q6k.gguf");
  ASSERT_EQ(
      run_shell(fish_bin() + " make-model --shape tiny --type q6_k --out " + q6k, dir_.file("log")),
      0);
  // The reference is mode 2: the mode-0 cell needs a second load for it.
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "rq", "model": ")" + q6k +
                                    R"(", "defaults": {"n_ctx": 64, "n_threads": 1},
    "sweep": {"requant": [2, 0]},
    "workload": {"n_prompt": 8, "n_gen": 2},
    "measure": {"warmup": 0, "repetitions": 1, "stream_MiB": 4},
    "quality": {"metrics": ["top1", "kl"], "reference": {"requant": 2}, "n_tokens": 24}})");
  ASSERT_EQ(run_shell(fish_run(exp + " --out " + dir_.file("out")), dir_.file("log")), kExitOk)
      << slurp(dir_.file("log"));
  const std::vector<json> rows = rows_of(dir_.file("out/rq.jsonl"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["config"]["requant"], 0);  // run order: one load per (model, requant)
  EXPECT_EQ(rows[0]["cell_index"], 1);
  EXPECT_EQ(rows[0]["metrics"]["bits_per_weight"], 6.5625);  // q6_k: 210 bytes per 256
  EXPECT_EQ(rows[1]["metrics"]["bits_per_weight"], 4.5);     // q4_k: 144 bytes per 256
  EXPECT_EQ(rows[1]["metrics"]["kl_max"], 0.0);              // the reference's own mode
  EXPECT_GT(rows[0]["metrics"]["kl_max"].get<double>(), 0.0);
}

TEST_F(RunCommand, Int4WeightPathCellsRunAgainstTheF32Reference) {
  const std::string prompts = dir_.file("prompts.txt");
  std::ofstream(prompts) << "one two three\nfour five\n";
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "w4", "model": ")" + model_ +
                                    R"(", "defaults": {"n_ctx": 64, "n_threads": 1},
    "sweep": {"weight_path": ["gguf", "w4a16"], "zero_point": ["sym", "asym"]},
    "exclude": [{"weight_path": "gguf", "zero_point": "asym"}],
    "workload": {"n_prompt": 8, "n_gen": 2},
    "measure": {"warmup": 0, "repetitions": 1, "stream_MiB": 4},
    "quality": {"metrics": ["top1", "greedy_exact"], "reference": {"weight_path": "ref"},
                "n_tokens": 24, "prompt_file": ")" +
                                    prompts + R"(", "greedy_tokens": 4}})");
  ASSERT_EQ(run_shell(fish_run(exp + " --out " + dir_.file("out")), dir_.file("log")), kExitOk)
      << slurp(dir_.file("log"));
  const std::vector<json> rows = rows_of(dir_.file("out/w4.jsonl"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["config"]["weight_path"], "gguf");
  EXPECT_EQ(rows[0]["metrics"]["bits_per_weight"], 8.5);  // the q8_0 file as it is
  for (int i : {1, 2}) {
    const json& m = rows[size_t(i)]["metrics"];
    EXPECT_EQ(rows[size_t(i)]["config"]["weight_path"], "w4a16");
    EXPECT_GT(m["bits_per_weight"].get<double>(), 4.0);  // int4 codes + per-group scale (+ zero)
    EXPECT_LT(m["bits_per_weight"].get<double>(), 5.0);
    EXPECT_EQ(m["greedy_exact"]["of"], 2);
    EXPECT_LE(m["top1"].get<double>(), 1.0);
  }
  // asym stores a zero point per group: never fewer bytes than sym.
  EXPECT_GE(rows[2]["metrics"]["bits_per_weight"].get<double>(),
            rows[1]["metrics"]["bits_per_weight"].get<double>());
}

#if FISH_HAVE_VULKAN
TEST_F(RunCommand, TheGpuPathOnLavapipePlacesEachCellAndReleasesItAfter) {
  // gpu_layers 1: the output + the last layer on the GPU; then every layer; then a file whose
  // weights (bf16) have no Vulkan kernel: nothing placed, an error row, the sweep goes on.
  const std::string bf16 = dir_.file("tiny_bf16.gguf");
  ASSERT_EQ(run_shell(fish_bin() + " make-model --shape tiny --type bf16 --out " + bf16,
                      dir_.file("log")),
            0);
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "gpu", "model": [")" + model_ +
                                    R"(", ")" + bf16 + R"("],
    "defaults": {"n_ctx": 64, "n_threads": 1, "vram_budget_mb": 64},
    "sweep": {"gpu_layers": [1, -1]},
    "exclude": [{"model": ")" + bf16 +
                                    R"(", "gpu_layers": 1}],
    "workload": {"n_prompt": 8, "n_gen": 3},
    "measure": {"paths": ["gpu", "cpu"], "warmup": 0, "repetitions": 2, "stream_MiB": 4}})");
  EXPECT_EQ(
      run_shell("FISH_GPU=cpu " + fish_run(exp + " --out " + dir_.file("out")), dir_.file("log")),
      kExitCellsFailed)
      << slurp(dir_.file("log"));
  const std::vector<json> rows = rows_of(dir_.file("out/gpu.jsonl"));
  ASSERT_EQ(rows.size(), 6u) << slurp(dir_.file("log"));
  const std::vector<json> gpu = rows_for(rows, "gpu"), cpu = rows_for(rows, "cpu");
  ASSERT_EQ(gpu.size(), 3u);
  for (int i : {0, 1}) {
    const json& r = gpu[size_t(i)];
    ASSERT_EQ(r["status"], "ok") << r.dump();
    EXPECT_EQ(r["placement"]["gpu_layers"], i == 0 ? 1 : 2);
    EXPECT_THAT(r["placement"]["gpu_detail"].get<std::string>(),
                HasSubstr(i == 0 ? "output + 1 of 2 layers" : "output + 2 of 2 layers"));
    EXPECT_THAT(r["placement"]["gpu_detail"].get<std::string>(), HasSubstr("vulkan"));
    EXPECT_GT(r["metrics"]["vram_peak_MB"].get<double>(), 0.0);
    EXPECT_EQ(r["metrics"]["decode_tok_s"]["samples"].size(), 2u);
    EXPECT_EQ(r["metrics"]["bits_per_weight"], 8.5);
    EXPECT_EQ(r["cell_id"], cpu[size_t(i)]["cell_id"]);
    // Valid gpu rows: nothing fell back, something ran on the device; speeds within the run.
    EXPECT_EQ(r["placement"]["gpu_fallbacks"], 0);
    EXPECT_EQ(r["validity"].dump().find("cpu_fallback"), std::string::npos) << r.dump();
    EXPECT_EQ(r["validity"].dump().find("nothing_on_gpu"), std::string::npos) << r.dump();
    EXPECT_EQ(r["metrics"]["decode_vs_cpu"]["samples"].size(), 2u);
    EXPECT_EQ(r["metrics"]["prefill_vs_cpu"]["samples"].size(), 2u);
    EXPECT_EQ(r["metrics"]["decode_pct_stream"]["samples"].size(), 2u);
    EXPECT_TRUE(cpu[size_t(i)]["metrics"]["decode_vs_cpu"].is_null());
    // Weight GB/s: gpu rows against the device's shader copy measured at the run's start, cpu
    // rows against the host stream.
    EXPECT_GT(r["metrics"]["weight_GBps_pct_gpu_copy"].get<double>(), 0.0) << r.dump();
    EXPECT_TRUE(r["metrics"].value("weight_GBps_pct_stream", json()).is_null());
    EXPECT_GT(cpu[size_t(i)]["metrics"]["weight_GBps_pct_stream"].get<double>(), 0.0);
    EXPECT_TRUE(cpu[size_t(i)]["metrics"].value("weight_GBps_pct_gpu_copy", json()).is_null());
    // The cpu path: the same config, no placement.
    EXPECT_EQ(cpu[size_t(i)]["status"], "ok");
    EXPECT_EQ(cpu[size_t(i)]["placement"]["gpu_layers"], 0);
    EXPECT_TRUE(cpu[size_t(i)]["metrics"]["vram_peak_MB"].is_null());
  }
  // More layers, more device bytes: the second cell started from zero, not on top of the first.
  EXPECT_GT(gpu[1]["metrics"]["vram_peak_MB"].get<double>(),
            gpu[0]["metrics"]["vram_peak_MB"].get<double>());
  EXPECT_EQ(gpu[2]["status"], "error");
  EXPECT_THAT(gpu[2]["error"].get<std::string>(), HasSubstr("gpu placement: nothing placed"));
  EXPECT_THAT(gpu[2]["error"].get<std::string>(), HasSubstr("bf16"));
  EXPECT_EQ(cpu[2]["status"], "ok");
}

TEST_F(RunCommand, AGpuRowWithNothingPlacedIsFlagged) {
  const std::string exp =
      write_exp(R"({"schema_version": 1, "name": "g0", "model": ")" + model_ +
                R"(", "defaults": {"n_ctx": 64, "n_threads": 1, "gpu_layers": 0},
    "workload": {"n_prompt": 4, "n_gen": 2},
    "measure": {"paths": ["gpu"], "warmup": 0, "repetitions": 1, "stream_MiB": 4}})");
  ASSERT_EQ(
      run_shell("FISH_GPU=cpu " + fish_run(exp + " --out " + dir_.file("out")), dir_.file("log")),
      kExitOk)
      << slurp(dir_.file("log"));
  const std::vector<json> rows = rows_of(dir_.file("out/g0.jsonl"));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["status"], "ok");
  EXPECT_EQ(rows[0]["placement"]["gpu_layers"], 0);
  EXPECT_THAT(rows[0]["validity"].dump(), HasSubstr("nothing_on_gpu"));
  EXPECT_TRUE(rows[0]["metrics"]["decode_vs_cpu"].is_null());  // no cpu path in this cell
}
#endif

TEST_F(RunCommand, ThreadsZeroStaysZeroInTheConfigAndTheResolvedCountIsRecorded) {
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "t0", "model": ")" + model_ +
                                    R"(", "defaults": {"n_ctx": 64},
    "sweep": {"n_threads": [0, 1]},
    "workload": {"n_prompt": 4, "n_gen": 2},
    "measure": {"warmup": 0, "repetitions": 1, "stream_MiB": 4}})");
  ASSERT_EQ(
      run_shell("FISH_THREADS=3 " + fish_run(exp + " --out " + dir_.file("out")), dir_.file("log")),
      kExitOk)
      << slurp(dir_.file("log"));
  const std::vector<json> rows = rows_for(rows_of(dir_.file("out/t0.jsonl")), "cpu");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["config"]["n_threads"], 0);  // as given: the cell is "the default"
  EXPECT_EQ(rows[0]["n_threads_resolved"], 3);   // what it ran with (FISH_THREADS here)
  EXPECT_EQ(rows[1]["config"]["n_threads"], 1);
  EXPECT_EQ(rows[1]["n_threads_resolved"], 1);
}

TEST_F(RunCommand, EveryCommittedExperimentPassesTheDryRun) {
  int n = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(test::source_dir() + "/experiments")) {
    if (entry.path().extension() != ".json" || entry.path().filename() == "gate_rules.json")
      continue;
    ++n;
    EXPECT_EQ(run_shell("cd " + test::source_dir() + " && FISH_SYNTHETIC_DIR=" + dir_.file("syn") +
                            " " + fish_run(entry.path().string() + " --dry-run"),
                        dir_.file("log")),
              kExitOk)
        << entry.path() << ":\n"
        << slurp(dir_.file("log"));
    EXPECT_THAT(slurp(dir_.file("log")), HasSubstr(" cells"));
  }
  EXPECT_GE(n, 9);  // quickstart, three CPU files, five seed experiments
}

TEST_F(RunCommand, DryRunListsTheCellsAndWritesNothing) {
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "d", "model": ")" + model_ +
                                    R"(", "sweep": {"n_threads": "1-3"}})");
  EXPECT_EQ(run_shell(fish_run(exp + " --dry-run --out " + dir_.file("out")), dir_.file("log")),
            kExitOk);
  const std::string log = slurp(dir_.file("log"));
  EXPECT_THAT(log, HasSubstr("3 cells"));
  EXPECT_THAT(log, HasSubstr("#0 "));
  EXPECT_THAT(log, HasSubstr("n_threads=3"));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out")));
}

TEST_F(RunCommand, DryRunFailsOnWhatTheRunWouldFailOn) {
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "d", "model": [")" + model_ +
                                    R"(", "no_such.gguf"],
          "workload": {"text": "no_such_prompt.txt"}})");
  EXPECT_EQ(run_shell(fish_run(exp + " --dry-run --out " + dir_.file("out")), dir_.file("log")),
            kExitUsage);
  const std::string log = slurp(dir_.file("log"));
  EXPECT_THAT(log, HasSubstr("2 cells"));  // still listed
  EXPECT_THAT(log, HasSubstr("dry run: model no_such.gguf: not found"));
  EXPECT_THAT(log, HasSubstr("dry run: workload.text no_such_prompt.txt: not a readable file"));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out")));
}

TEST_F(RunCommand, AnUnknownCommandIsNamedWithTheList) {
  EXPECT_EQ(run_shell(fish_bin() + " frobnicate", dir_.file("log")), kExitUsage);
  EXPECT_THAT(slurp(dir_.file("log")),
              HasSubstr("unknown command 'frobnicate' (commands: inspect"));
}

TEST_F(RunCommand, CommandsNameTheModelTheSameWayAndShareDefaults) {
  // -m names the model for inspect as for generate, bench and requant-quality (positional too).
  EXPECT_EQ(run_shell(fish_bin() + " inspect -m " + model_, dir_.file("log")), kExitOk);
  const std::string by_flag = slurp(dir_.file("log"));
  EXPECT_EQ(run_shell(fish_bin() + " inspect " + model_, dir_.file("log")), kExitOk);
  EXPECT_EQ(slurp(dir_.file("log")), by_flag);
  // quantize-w4's group default is the Config table's, as fish run's w4 cells use.
  EXPECT_EQ(run_shell(fish_bin() + " quantize-w4 --help", dir_.file("log")), kExitOk);
  EXPECT_THAT(slurp(dir_.file("log")),
              HasSubstr("=" + std::to_string(Config{}.group_size) + " Weights per int4 group"));
}

TEST_F(RunCommand, AnInvalidExperimentIsAUsageErrorWithTheProblem) {
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "d", "model": "m",
    "sweep": {"n_threads": "3-1"}})");
  EXPECT_EQ(run_shell(fish_run(exp), dir_.file("log")), kExitUsage);
  EXPECT_THAT(slurp(dir_.file("log")), HasSubstr("sweep.n_threads: bad range \"3-1\""));
}

TEST_F(RunCommand, AShardRunsEveryNthCellIntoItsOwnFile) {
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "s", "model": ")" + model_ +
                                    R"(", "defaults": {"n_ctx": 64, "n_threads": 1},
    "sweep": {"n_batch": "1-7"}, "workload": {"n_prompt": 8, "n_gen": 2},
    "measure": {"warmup": 0, "repetitions": 1, "stream_MiB": 4}, "output": {"formats": []}})");
  EXPECT_EQ(run_shell(fish_run(exp + " --shard 1/3 --out " + dir_.file("out")), dir_.file("log")),
            kExitOk);
  const std::vector<json> lines = lines_of(dir_.file("out/s.shard-1-of-3.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["shard"], json({{"index", 1}, {"count", 3}}));
  EXPECT_EQ(lines[0]["n_cells"], 7);
  EXPECT_EQ(lines[1]["cell_index"], 1);
  EXPECT_EQ(lines[2]["cell_index"], 4);
}

TEST_F(RunCommand, ASyntheticModelIsWrittenOnceAndReused) {
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "y",
    "model": "synthetic:tiny:q4_0:5", "defaults": {"n_ctx": 64, "n_threads": 1},
    "workload": {"n_prompt": 8, "n_gen": 2},
    "measure": {"warmup": 0, "repetitions": 1, "stream_MiB": 4}, "output": {"formats": []}})");
  const std::string env = "FISH_SYNTHETIC_DIR=" + dir_.file("syn") + " ";
  const std::string model = dir_.file("syn/tiny-q4_0-s5.gguf");
  EXPECT_EQ(run_shell(env + fish_run(exp + " --dry-run"), dir_.file("log")), kExitOk);
  EXPECT_FALSE(std::filesystem::exists(model));  // a dry run writes nothing
  EXPECT_EQ(run_shell(env + fish_run(exp + " --out " + dir_.file("a")), dir_.file("log")), kExitOk);
  ASSERT_TRUE(std::filesystem::exists(model));
  const auto written = std::filesystem::last_write_time(model);
  EXPECT_EQ(run_shell(env + fish_run(exp + " --out " + dir_.file("b")), dir_.file("log")), kExitOk);
  EXPECT_EQ(std::filesystem::last_write_time(model), written);
  const std::vector<json> a = rows_of(dir_.file("a/y.jsonl")), b = rows_of(dir_.file("b/y.jsonl"));
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0]["status"], "ok");
  EXPECT_EQ(a[0]["model"], "synthetic:tiny:q4_0:5");
  EXPECT_EQ(a[0]["cell_id"], b[0]["cell_id"]);
}

// A speculative sweep: lookup and the model as its own draft report decode tok/s, accepted per
// verify and the speedup over the plain decode of the same repetitions; the own draft accepts
// every draft (draft_n per verify) and no row's tokens differ from plain greedy decoding; a
// draft model of another vocabulary is an error row naming both sizes, and the sweep goes on.
TEST_F(RunCommand, SpeculativeCellsReportAcceptanceAndSpeedupOverPlainDecode) {
  const std::string other = dir_.file("vocab.gguf");
  ASSERT_EQ(run_shell(fish_bin() + " make-model --shape smollm2-135m --type q4_0 --out " + other,
                      dir_.file("log")),
            0);
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "s", "model": ")" + model_ +
                                    R"(", "defaults": {"n_ctx": 64, "n_threads": 1},
    "sweep": {"speculative": ["off", "lookup", "draft"], "draft_model": [")" +
                                    model_ + R"(", ")" + other + R"("]},
    "exclude": [{"speculative": "off", "draft_model": ")" +
                                    other + R"("},
                {"speculative": "lookup", "draft_model": ")" +
                                    other + R"("}],
    "workload": {"n_prompt": 8, "n_gen": 9},
    "measure": {"warmup": 0, "repetitions": 2, "stream_MiB": 4}, "output": {"formats": []}})");
  EXPECT_EQ(run_shell(fish_run(exp + " --out " + dir_.file("o")), dir_.file("log")),
            kExitCellsFailed)
      << slurp(dir_.file("log"));
  const std::vector<json> rows = rows_of(dir_.file("o/s.jsonl"));
  ASSERT_EQ(rows.size(), 4u);
  for (const json& r : rows) {
    const std::string mode = r["config"]["speculative"];
    const json& m = r["metrics"];
    if (r["config"]["draft_model"] == other) {
      EXPECT_EQ(r["status"], "error");
      EXPECT_THAT(r.dump(), HasSubstr("49152 tokens")) << r.dump();
      continue;
    }
    ASSERT_EQ(r["status"], "ok") << r.dump();
    EXPECT_EQ(r["validity"].dump().find("spec_tokens_differ"), std::string::npos) << r.dump();
    if (mode == "off") {
      EXPECT_TRUE(m["accepted_per_verify"].is_null());
      EXPECT_TRUE(m["spec_speedup"].is_null());
      continue;
    }
    ASSERT_EQ(m["spec_speedup"]["samples"].size(), 2u) << r.dump();
    EXPECT_GT(m["spec_speedup"]["median"].get<double>(), 0.0);
    EXPECT_GT(m["decode_tok_s"]["median"].get<double>(), 0.0);
    if (mode == "draft")  // 9 tokens after the first: verifies of 1 + 4, 1 + 3 (draft_n 4)
      EXPECT_DOUBLE_EQ(m["accepted_per_verify"]["median"].get<double>(), 3.5) << r.dump();
  }
}

TEST(ResolveShard, FlagThenSlurmThenIndexedJobThenNone) {
  std::map<std::string, std::string> env;
  auto get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto s = resolve_shard("", get);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 0);
  EXPECT_EQ(s->count, 1);
  env = {
      {"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_MIN", "4"}, {"SLURM_ARRAY_TASK_COUNT", "3"}};
  s = resolve_shard("", get);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->index, 1);
  EXPECT_EQ(s->count, 3);
  s = resolve_shard("2/4", get);  // the flag wins
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 4);
  env = {{"JOB_COMPLETION_INDEX", "2"}};
  EXPECT_THAT(resolve_shard("", get).error().message, HasSubstr("FISH_SHARD_COUNT is not"));
  env["FISH_SHARD_COUNT"] = "5";
  s = resolve_shard("", get);
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 5);
  EXPECT_THAT(resolve_shard("3/3", get).error().message, HasSubstr("expected 0 <= i < N"));
  EXPECT_THAT(resolve_shard("x", get).error().message, HasSubstr("expected i/N"));
}

TEST_F(RunCommand, ASweepKilledMidRunAndResumedLosesNoRowAndDuplicatesNone) {
  constexpr int kCells = 24;
  // Enough repetitions that the sweep takes seconds, so the kill lands mid-run.
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "k", "model": ")" + model_ +
                                    R"(", "defaults": {"n_ctx": 128, "n_threads": 1},
    "sweep": {"n_batch": "1-24"}, "workload": {"n_prompt": 48, "n_gen": 16},
    "measure": {"warmup": 1, "repetitions": 30, "stream_MiB": 4, "order": "fixed"}})");
  const std::string out = dir_.file("out");
  const std::string results = out + "/k.jsonl";

  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    const std::string bin = fish_bin();
    ::execl(bin.c_str(), bin.c_str(), "run", exp.c_str(), "--out", out.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait for a few finished rows (not a timing assertion: the deadline only stops a hung test).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  size_t n_before = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = slurp(results);
    n_before = size_t(std::count(text.begin(), text.end(), '\n'));
    if (n_before >= 4) break;  // context + 3 rows
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it was killed";

  const std::string before = slurp(results);
  const std::string before_complete = before.substr(0, before.rfind('\n') + 1);
  std::set<std::string> finished_before;
  for (const json& r : rows_of(results)) finished_before.insert(r["cell_id"].get<std::string>());
  ASSERT_GE(finished_before.size(), 3u);
  ASSERT_LT(finished_before.size(), size_t(kCells)) << "the kill did not land mid-run";

  EXPECT_EQ(run_shell(fish_run(exp + " --out " + out + " --resume"), dir_.file("resume.log")),
            kExitOk)
      << slurp(dir_.file("resume.log"));
  const std::string after = slurp(results);
  EXPECT_EQ(after.substr(0, before_complete.size()), before_complete);  // nothing rewritten
  std::map<std::string, int> count;
  std::set<int64_t> indices;
  int n_contexts = 0;
  for (const json& j : lines_of(results)) {
    if (j["kind"] == "context") {
      ++n_contexts;
      continue;
    }
    EXPECT_EQ(j["status"], "ok");
    ++count[j["cell_id"].get<std::string>() + "/" + j["path"].get<std::string>()];
    indices.insert(j["cell_index"].get<int64_t>());
  }
  EXPECT_EQ(n_contexts, 2);
  EXPECT_EQ(count.size(), size_t(kCells));
  for (const auto& [key, n] : count) EXPECT_EQ(n, 1) << key;
  EXPECT_EQ(indices.size(), size_t(kCells));
  for (const std::string& id : finished_before) EXPECT_EQ(count[id + "/cpu"], 1);

  // A second resume has nothing left to do and appends nothing.
  EXPECT_EQ(run_shell(fish_run(exp + " --out " + out + " --resume"), dir_.file("resume2.log")),
            kExitOk);
  EXPECT_EQ(slurp(results), after);
  EXPECT_THAT(slurp(dir_.file("resume2.log")), HasSubstr("nothing to run"));
}

TEST_F(RunCommand, DryRunListsAShuffledRunInItsSeedsOrder) {
  auto listing = [&](const std::string& measure) {
    const std::string exp =
        write_exp(R"({"schema_version": 1, "name": "d", "model": ")" + model_ +
                  R"(", "sweep": {"n_batch": "1-12"}, "measure": )" + measure + "}");
    EXPECT_EQ(run_shell(fish_run(exp + " --dry-run --out " + dir_.file("out")), dir_.file("log")),
              kExitOk)
        << slurp(dir_.file("log"));
    std::vector<int> indices;
    std::istringstream in(slurp(dir_.file("log")));
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("  #", 0) == 0) indices.push_back(std::stoi(line.substr(3)));
    return indices;
  };
  const std::vector<int> fixed = listing(R"({"order": "fixed"})");
  EXPECT_EQ(fixed, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(listing(R"({"order": "interleave"})"), fixed);
  const std::vector<int> a = listing(R"({"order": "shuffle", "seed": 3})");
  EXPECT_EQ(a, listing(R"({"order": "shuffle", "seed": 3})"));
  EXPECT_NE(a, listing(R"({"order": "shuffle", "seed": 4})"));
  EXPECT_NE(a, fixed);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, fixed);
  EXPECT_THAT(slurp(dir_.file("log")), HasSubstr("order shuffle (seed 4)"));
}

TEST_F(RunCommand, AnInterleavedRunMeasuresEveryRepetitionOfEveryCellAndRecordsItsOrder) {
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "il", "model": ")" + model_ +
                                    R"(", "defaults": {"n_ctx": 64, "n_threads": 1},
    "sweep": {"n_batch": [1, 2, 3]}, "workload": {"n_prompt": 8, "n_gen": 4},
    "measure": {"warmup": 1, "repetitions": 3, "stream_MiB": 4, "order": "interleave"}})");
  const std::string out = dir_.file("out");
  ASSERT_EQ(run_shell(fish_run(exp + " --out " + out), dir_.file("log")), kExitOk)
      << slurp(dir_.file("log"));
  EXPECT_THAT(slurp(dir_.file("log")), HasSubstr("order interleave (3 rounds)"));
  const std::vector<json> lines = lines_of(out + "/il.jsonl");
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0]["order"], "interleave");
  EXPECT_TRUE(lines[0]["order_seed"].is_null());
  const std::vector<json> rows = rows_of(out + "/il.jsonl");
  ASSERT_EQ(rows.size(), 3u);
  std::set<int64_t> indices;
  for (const json& r : rows) {
    EXPECT_EQ(r["status"], "ok") << r.dump();
    EXPECT_EQ(r["metrics"]["decode_tok_s"]["samples"].size(), 3u);
    EXPECT_EQ(r["metrics"]["prefill_tok_s"]["samples"].size(), 3u);
    indices.insert(r["cell_index"].get<int64_t>());
  }
  EXPECT_EQ(indices, (std::set<int64_t>{0, 1, 2}));
}

TEST_F(RunCommand, AShuffledRunRecordsItsSeed) {
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "sh", "model": ")" + model_ +
                                    R"(", "defaults": {"n_ctx": 64, "n_threads": 1},
    "sweep": {"n_batch": [1, 2, 3]}, "workload": {"n_prompt": 8, "n_gen": 4},
    "measure": {"warmup": 0, "repetitions": 2, "stream_MiB": 4, "order": "shuffle", "seed": 9}})");
  const std::string out = dir_.file("out");
  ASSERT_EQ(run_shell(fish_run(exp + " --out " + out), dir_.file("log")), kExitOk)
      << slurp(dir_.file("log"));
  const std::vector<json> lines = lines_of(out + "/sh.jsonl");
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0]["order"], "shuffle");
  EXPECT_EQ(lines[0]["order_seed"], 9);
  EXPECT_EQ(rows_of(out + "/sh.jsonl").size(), 3u);
}

// A run killed in its last round leaves the rows of the cells that round finished: a resume runs
// the others (all their rounds again) and keeps the finished rows as they are.
TEST_F(RunCommand, AnInterleavedRunCutAfterItsFirstRowsResumesTheRest) {
  constexpr int kCells = 4;
  const std::string exp = write_exp(R"({"schema_version": 1, "name": "ir", "model": ")" + model_ +
                                    R"(", "defaults": {"n_ctx": 64, "n_threads": 1},
    "sweep": {"n_batch": "1-4"}, "workload": {"n_prompt": 8, "n_gen": 4},
    "measure": {"warmup": 1, "repetitions": 2, "stream_MiB": 4}})");
  const std::string out = dir_.file("out");
  const std::string results = out + "/ir.jsonl";
  ASSERT_EQ(run_shell(fish_run(exp + " --out " + out), dir_.file("log")), kExitOk)
      << slurp(dir_.file("log"));
  // What a kill in the last round leaves: the context, two finished rows, half a third line.
  const std::vector<json> full = lines_of(results);
  ASSERT_EQ(full.size(), size_t(1 + kCells));
  std::string cut;
  for (size_t k = 0; k < 3; ++k) cut += full[k].dump() + "\n";
  const std::string kept = cut;
  cut += full[3].dump().substr(0, 20);
  std::ofstream(results, std::ios::trunc | std::ios::binary) << cut;

  ASSERT_EQ(run_shell(fish_run(exp + " --out " + out + " --resume"), dir_.file("resume.log")),
            kExitOk)
      << slurp(dir_.file("resume.log"));
  EXPECT_THAT(slurp(dir_.file("resume.log")), HasSubstr("2 to run (resume)"));
  const std::string after = slurp(results);
  EXPECT_EQ(after.substr(0, kept.size()), kept);  // the finished rows stay as they were
  std::map<std::string, int> count;
  for (const json& r : rows_of(results)) {
    EXPECT_EQ(r["status"], "ok");
    EXPECT_EQ(r["metrics"]["decode_tok_s"]["samples"].size(), 2u);
    ++count[r["cell_id"].get<std::string>()];
  }
  EXPECT_EQ(count.size(), size_t(kCells));
  for (const auto& [id, n] : count) EXPECT_EQ(n, 1) << id;
}

}  // namespace
}  // namespace fish
