// The hostile-input cases of the reliability review, each through the real CLI with its message
// checked: no input ends a process uncleanly (no abort, no hang, no endless read), no sweep loses
// a cell, no command overwrites its input, and every refusal says what is wrong and what is
// allowed. One test per case, named for the behaviour.
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "gguf_patch.h"
#include "harness/cli_test_util.h"
#include "harness/exit_codes.h"
#include "test_env.h"

namespace fish {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

class Reliability : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(std::filesystem::exists(test::fish_bin())) << test::fish_bin() << " not built";
    tiny_ = (test::temp_dir() / "reliability_tiny.gguf").string();
    ASSERT_EQ(test::shell_exit_code(
                  test::fish_bin() + " make-model --shape tiny --type q8_0 --out " + tiny_,
                  (test::temp_dir() / "reliability_make_model.log").string()),
              0);
  }

  // Runs `fish ARGS` with `env` (VAR=value ...) in front; the exit code, output in log().
  int fish(const std::string& args, const std::string& env = "") {
    return test::shell_exit_code(env + (env.empty() ? "" : " ") + test::fish_bin() + " " + args,
                                 log_path());
  }
  std::string log_path() const { return dir_.file("log"); }
  std::string log() const { return test::file_text(log_path()); }

  // An experiment over `models` (JSON list text) on `paths` with `extra` keys, quick to measure.
  std::string write_exp(const std::string& models, const std::string& extra,
                        const std::string& paths = R"(["cpu"])") {
    const std::string p = dir_.file("exp.json");
    std::ofstream(p) << R"({"schema_version": 1, "name": "rel", "model": )" << models
                     << R"(, "defaults": {"n_threads": 1},
        "workload": {"n_prompt": 8, "n_gen": 2},
        "measure": {"paths": )"
                     << paths << R"(, "warmup": 0, "repetitions": 1, "stream_MiB": 4,
        "stream_passes": 1})"
                     << (extra.empty() ? "" : ", " + extra) << "}";
    return p;
  }
  std::string out_dir() const { return dir_.file("out"); }
  std::vector<json> rows() const { return test::result_rows(out_dir() + "/rel.jsonl"); }

  static std::string smollm2() { return test::model_path(test::kSmolLm2); }
  // A copy of `path` in this test's directory with `patch` applied to its bytes.
  std::string patched_copy(const std::string& path, const std::string& name,
                           const std::function<void(std::vector<uint8_t>&)>& patch) {
    const std::string text = test::file_text(path);
    std::vector<uint8_t> b(text.begin(), text.end());
    patch(b);
    const std::string out = dir_.file(name);
    std::ofstream(out, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
    return out;
  }

  static inline std::string tiny_;
  test::TempDir dir_;
};

// ---- memory: estimated before allocation, every exception caught at a boundary -------------

TEST_F(Reliability, GenerateRefusesAContextThatCannotFitSayingWhatItNeedsAndHas) {
  if (smollm2().empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  // n_ctx 1048576 (the documented maximum) used to end with terminate ... std::bad_alloc.
  EXPECT_EQ(
      fish("generate -m " + smollm2() + " -p hi -n 2 --n-ctx 1048576", "FISH_RAM_BUDGET_MB=2048"),
      kExitUsage);
  EXPECT_THAT(log(), HasSubstr("fish generate: session: n_ctx 1048576, n_batch 256 needs 45.0 GiB "
                               "of host memory (KV 45.0 GiB, attention scores"));
  EXPECT_THAT(log(), HasSubstr("have 2.0 GiB (FISH_RAM_BUDGET_MB)"));
}

TEST_F(Reliability, GenerateTurnsAThrownBadAllocIntoAMessageAndExit1) {
  if (smollm2().empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  EXPECT_EQ(fish("generate -m " + smollm2() + " -p hi -n 2", "FISH_FAULT=bad_alloc@session_create"),
            kExitUsage);
  EXPECT_THAT(log(), HasSubstr("fish generate: out of memory (std::bad_alloc)"));
  EXPECT_THAT(log(), Not(HasSubstr("terminate")));
}

TEST_F(Reliability, RunWritesAnErrorRowForACellThatCannotFitAndTheSweepGoesOn) {
  const std::string exp =
      write_exp("\"" + tiny_ + "\"", R"("sweep": {"n_ctx": [64, 1048576, 128]})");
  EXPECT_EQ(fish("run " + exp + " --out " + out_dir(), "FISH_RAM_BUDGET_MB=1024"),
            kExitCellsFailed);
  std::vector<json> r = rows();
  ASSERT_EQ(r.size(), 3u) << log();
  EXPECT_EQ(r[0]["status"], "ok");
  EXPECT_EQ(r[1]["status"], "error");
  EXPECT_THAT(r[1]["error"].get<std::string>(),
              HasSubstr("session: n_ctx 1048576, n_batch 256 needs 2.0 GiB of host memory (KV 2.0 "
                        "GiB"));
  EXPECT_THAT(r[1]["error"].get<std::string>(), HasSubstr("have 1.0 GiB (FISH_RAM_BUDGET_MB)"));
  EXPECT_EQ(r[2]["status"], "ok");
  // --resume: every cell finished (the error row too), nothing runs, the sweep still failed.
  EXPECT_EQ(fish("run " + exp + " --out " + out_dir() + " --resume", "FISH_RAM_BUDGET_MB=1024"),
            kExitCellsFailed);
  EXPECT_THAT(log(), HasSubstr("nothing to run"));
  EXPECT_EQ(rows().size(), 3u);
}

TEST_F(Reliability, RunTurnsAnExceptionInACellIntoItsErrorRowAndResumeRetriesIt) {
  const std::string exp = write_exp("\"" + tiny_ + "\"", R"("sweep": {"n_ctx": [64, 96, 128]})");
  // The second session of the sweep throws std::bad_alloc: that cell's row, the others run.
  EXPECT_EQ(fish("run " + exp + " --out " + out_dir(), "FISH_FAULT=bad_alloc@session_create:2"),
            kExitCellsFailed);
  std::vector<json> r = rows();
  ASSERT_EQ(r.size(), 3u) << log();
  EXPECT_EQ(r[0]["status"], "ok");
  EXPECT_EQ(r[1]["status"], "error");
  EXPECT_THAT(r[1]["error"].get<std::string>(), HasSubstr("out of memory (std::bad_alloc)"));
  EXPECT_EQ(r[2]["status"], "ok");
  EXPECT_THAT(log(), Not(HasSubstr("terminate")));
  // The fault gone, --resume --retry-errors runs exactly that cell again, and the sweep is clean.
  EXPECT_EQ(fish("run " + exp + " --out " + out_dir() + " --resume --retry-errors"), kExitOk)
      << log();
  r = rows();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[3]["cell_index"], 1);
  EXPECT_EQ(r[3]["status"], "ok");
}

TEST_F(Reliability, RunTurnsAModelLoadExceptionIntoErrorRowsAndLoadsTheNextModel) {
  const std::string copy = dir_.file("copy.gguf");
  std::filesystem::copy_file(tiny_, copy);
  const std::string exp = write_exp("[\"" + tiny_ + "\", \"" + copy + "\"]", "");
  EXPECT_EQ(fish("run " + exp + " --out " + out_dir(), "FISH_FAULT=runtime_error@model_load:1"),
            kExitCellsFailed);
  std::vector<json> r = rows();
  ASSERT_EQ(r.size(), 2u) << log();
  EXPECT_EQ(r[0]["status"], "error");
  EXPECT_EQ(r[0]["error"],
            "unexpected exception (std::runtime_error): FISH_FAULT=runtime_error@model_load:1: "
            "injected fault");
  EXPECT_EQ(r[1]["status"], "ok");
}

// ---- bounds shared by the CLI and the experiment format; the cell limit --------------------

TEST_F(Reliability, GenerateNBatchHasTheExperimentFormatsBound) {
  if (smollm2().empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  // Unbounded, it grew to 24 GB before the kernel killed it.
  EXPECT_EQ(fish("generate -m " + smollm2() + " -p hi --n-batch 10000000"), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("--n-batch: 10000000 is out of range (expected 1 to 65536)"));
  const std::string exp = write_exp("\"" + tiny_ + "\"", R"("sweep": {"n_batch": [10000000]})");
  EXPECT_EQ(fish("run " + exp + " --dry-run"), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("sweep.n_batch[0]: 10000000 is out of range (expected 1 to 65536)"));
}

TEST_F(Reliability, RunRefusesAHugeSweepAtPlanningWithItsCount) {
  // 10^10 cells reached 6.7 GB in 22 s; 10^7 printed nothing for 120 s. Now both are counted.
  const std::string exp = write_exp("\"" + tiny_ + "\"", R"("sweep": {"n_ctx": "1-100",
      "n_batch": "1-100", "dequant_threshold": "1-100", "gpu_layers": "0-99",
      "vram_budget_mb": "1-100"})");
  EXPECT_EQ(fish("run " + exp + " --dry-run"), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("sweep: 10000000000 cells (1 model x n_ctx 100 x n_batch 100 x "
                               "dequant_threshold 100 x gpu_layers 100 x vram_budget_mb 100), over "
                               "the limit of 100000 cells (fish run --max-cells N raises it)"));
  const std::string small =
      write_exp("\"" + tiny_ + "\"", R"("sweep": {"n_ctx": "64-83", "n_batch": "1-10"})");
  EXPECT_EQ(fish("run " + small + " --dry-run --max-cells 199"), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("sweep: 200 cells (1 model x n_ctx 20 x n_batch 10), over the "
                               "limit of 199 cells"));
  EXPECT_EQ(fish("run " + small + " --dry-run --max-cells 200"), kExitOk) << log();
  EXPECT_THAT(log(), HasSubstr(": 200 cells"));
}

// ---- cell ids -------------------------------------------------------------------------------

TEST_F(Reliability, RunGivesEveryListedModelItsOwnCellAndMergeFindsNoneMissing) {
  // Two copies of one file and two missing files used to share ids: "4 to run", two ran.
  const std::string copy = dir_.file("copy.gguf");
  std::filesystem::copy_file(tiny_, copy);
  const std::string exp = write_exp(
      "[\"" + tiny_ + "\", \"" + copy + "\", \"/nonexistent/a.gguf\", \"/nonexistent/b.gguf\"]",
      "");
  EXPECT_EQ(fish("run " + exp + " --out " + out_dir()), kExitCellsFailed);
  std::vector<json> r = rows();
  ASSERT_EQ(r.size(), 4u) << log();
  std::set<std::string> ids;
  for (const json& row : r) ids.insert(row["cell_id"].get<std::string>());
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(r[0]["status"], "ok");
  EXPECT_EQ(r[1]["status"], "ok");
  EXPECT_THAT(r[2]["error"].get<std::string>(), HasSubstr("model /nonexistent/a.gguf: not found"));
  EXPECT_THAT(r[3]["error"].get<std::string>(), HasSubstr("model /nonexistent/b.gguf: not found"));
  // merge and --resume agree: every cell has a row, nothing is left to run.
  EXPECT_EQ(fish("merge " + dir_.file("merged.jsonl") + " " + out_dir() + "/rel.jsonl"), kExitOk)
      << log();
  EXPECT_THAT(log(), HasSubstr("all 4 cells present"));
  EXPECT_EQ(fish("run " + exp + " --out " + out_dir() + " --resume"), kExitCellsFailed);
  EXPECT_THAT(log(), HasSubstr("nothing to run"));
}

// ---- outputs that resolve to an input ---------------------------------------------------------

TEST_F(Reliability, RequantAndQuantizeW4RefuseToOverwriteTheirInput) {
  const std::string in = dir_.file("in.gguf");
  std::filesystem::copy_file(tiny_, in);
  const std::string link = dir_.file("link.gguf");
  std::filesystem::create_symlink(in, link);
  const std::string before = sha256_hex(test::file_text(in));
  EXPECT_EQ(fish("requant " + in + " " + in + " --mode 1"), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("fish requant: " + in + ": is the input " + in +
                               " (the same file); write the output to another path"));
  EXPECT_EQ(fish("requant " + in + " " + link + " --mode 1"), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("(the same file, through a link)"));
  EXPECT_EQ(fish("quantize-w4 " + in + " " + in), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("fish quantize-w4: " + in + ": is the input"));
  EXPECT_EQ(fish("report " + in + " -o " + in), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("fish report: " + in + ": is the input"));
  EXPECT_EQ(sha256_hex(test::file_text(in)), before);
  EXPECT_FALSE(std::filesystem::exists(in + ".tmp"));
  // A real output path still works.
  EXPECT_EQ(fish("requant " + in + " " + dir_.file("out.gguf") + " --mode 1"), kExitOk) << log();
}

TEST_F(Reliability, RunRefusesAResultsFileThatIsItsExperimentFile) {
  // Results go to OUT/NAME.jsonl: an experiment file named rel.jsonl in OUT would be appended to.
  std::filesystem::create_directories(out_dir());
  const std::string exp = write_exp("\"" + tiny_ + "\"", "");
  const std::string inside = out_dir() + "/rel.jsonl";
  std::filesystem::copy_file(exp, inside);
  EXPECT_EQ(fish("run " + inside + " --out " + out_dir()), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("fish run: " + inside + ": is the input " + inside));
}

// ---- GGUF data layout --------------------------------------------------------------------------

TEST_F(Reliability, InspectAndGenerateRejectATensorRelabelledToASmallerType) {
  if (smollm2().empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  // q4_1 -> q4_0 keeps the dims valid; accepted, generate printed garbage.
  const std::string bad = patched_copy(smollm2(), "relabelled.gguf", [](std::vector<uint8_t>& b) {
    b[test::tensor_type_pos(b, "blk.0.ffn_up.weight")] = 2;  // q4_0
  });
  EXPECT_EQ(fish("inspect " + bad), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("tensor blk.0.ffn_up.weight: byte size does not match the data: "
                               "blk.0.ffn_up.weight (q4_0 [576, 1536], 497664 bytes"));
  EXPECT_EQ(fish("generate -m " + bad + " -p hi -n 2"), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("byte size does not match the data"));
}

TEST_F(Reliability, InspectAndGenerateRejectOverlappingTensorData) {
  // The tiny model's second tensor pointed at the first one's data.
  const std::string bad = patched_copy(tiny_, "overlap.gguf", [](std::vector<uint8_t>& b) {
    const size_t emb = test::tensor_type_pos(b, "token_embd.weight") + 4;
    const size_t norm = test::tensor_type_pos(b, "output_norm.weight") + 4;
    std::memcpy(b.data() + norm, b.data() + emb, 8);  // same data offset
  });
  EXPECT_EQ(fish("inspect " + bad), kExitUsage);
  EXPECT_THAT(log(), HasSubstr(": data overlaps tensor "));
  EXPECT_THAT(log(), HasSubstr("output_norm.weight"));
  EXPECT_THAT(log(), HasSubstr("token_embd.weight"));
  const std::string exp = write_exp("\"" + bad + "\"", "");
  EXPECT_EQ(fish("run " + exp + " --out " + out_dir()), kExitCellsFailed);
  ASSERT_EQ(rows().size(), 1u);
  EXPECT_THAT(rows()[0]["error"].get<std::string>(), HasSubstr(": data overlaps tensor "));
}

// ---- sampling, threads and environment knobs ---------------------------------------------------

TEST_F(Reliability, GenerateRefusesSamplingAndThreadArgumentsOutsideTheirRange) {
  if (smollm2().empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--temp nan", "--temp: nan is not a finite number (expected 0 to 100)"},
      {"--temp -1", "--temp: -1.0 is out of range (expected 0 to 100)"},
      {"--top-p 2", "--top-p: 2.0 is out of range (expected 0 to 1)"},
      {"--top-k -3", "--top-k: -3 is out of range (expected 0 to 1048576)"},
      {"--threads 999", "--threads: 999 is out of range (expected 0 to 512)"},
      // Was "n_ctx -4 must be >= 1".
      {"-n -5", "--n-predict: -5 is out of range (expected 1 to 1048576)"},
      {"--seed x", "--seed: \"x\" is not an integer (expected 0 to 4294967295)"},
  };
  for (const auto& [args, message] : cases) {
    EXPECT_EQ(fish("generate -m " + smollm2() + " -p hi " + args), kExitUsage) << args;
    EXPECT_THAT(log(), HasSubstr(message)) << args;
  }
}

TEST_F(Reliability, GenerateRefusesAnEnvironmentKnobOutsideItsValues) {
  if (smollm2().empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"FISH_GPU_SPAN=maybe",
       "fish generate: FISH_GPU_SPAN='maybe': expected one of 0, off, false, no, 1, on, true, yes"},
      {"FISH_GPU=maybe",
       "fish generate: FISH_GPU='maybe': expected one of 0, off, false, no, 1, "
       "on, true, yes, cpu"},
      {"FISH_THREADS=abc", "fish generate: FISH_THREADS='abc': expected an integer 1 to 512"},
      {"FISH_GPU_REQUANT=7", "fish generate: FISH_GPU_REQUANT='7': expected an integer 0 to 3"},
  };
  for (const auto& [env, message] : cases) {
    EXPECT_EQ(fish("generate -m " + smollm2() + " -p hi -n 2", env), kExitUsage) << env;
    EXPECT_THAT(log(), HasSubstr(message)) << env;
  }
}

TEST_F(Reliability, RunTurnsAGpuKnobErrorIntoGpuErrorRowsNotSkippedOnes) {
  // FISH_GPU_REQUANT=7 used to turn every gpu row into "skipped": a GPU sweep made CPU-only.
  const std::string exp = write_exp("\"" + tiny_ + "\"", "", R"(["cpu", "gpu"])");
  EXPECT_EQ(fish("run " + exp + " --out " + out_dir(), "FISH_GPU_REQUANT=7"), kExitCellsFailed);
  std::vector<json> r = rows();
  ASSERT_EQ(r.size(), 2u) << log();
  // The gpu row is written first: it fails before the cpu path runs.
  const json& gpu = r[0]["path"] == "gpu" ? r[0] : r[1];
  const json& cpu = r[0]["path"] == "cpu" ? r[0] : r[1];
  EXPECT_EQ(cpu["status"], "ok");
  EXPECT_EQ(gpu["status"], "error");
  EXPECT_EQ(gpu["error"], "FISH_GPU_REQUANT='7': expected an integer 0 to 3");
}

TEST_F(Reliability, RunRefusesAnExperimentWithADuplicateKey) {
  const std::string exp =
      write_exp("\"" + tiny_ + "\"", R"("sweep": {"n_ctx": [64], "n_ctx": [8]})");
  EXPECT_EQ(fish("run " + exp + " --dry-run"), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("sweep.n_ctx: duplicate key"));
}

// ---- inputs that are not regular files; messages that say what is wrong -----------------------

TEST_F(Reliability, InspectReportsACutShortFileAsTruncated) {
  if (smollm2().empty()) FAIL() << "model missing; scripts/setup.sh fetches it";
  const std::string cut = dir_.file("cut.gguf");
  std::ofstream(cut, std::ios::binary) << test::file_text(smollm2()).substr(0, 1024);
  EXPECT_EQ(fish("inspect " + cut), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("header: truncated file: 1024 bytes in all, but the header's 272 "
                               "tensor infos need at least 8704 bytes"));
  EXPECT_THAT(log(), Not(HasSubstr("absurd")));
}

TEST_F(Reliability, CommandsRefuseADirectoryAFifoAndADeviceAtOnce) {
  EXPECT_EQ(fish("run " + dir_.path().string()), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("fish run: " + dir_.path().string() +
                               ": is a directory, expected a regular file"));
  EXPECT_THAT(log(), Not(HasSubstr("not valid JSON")));
  EXPECT_EQ(fish("run /dev/zero"), kExitUsage);  // used to read until std::bad_alloc
  EXPECT_THAT(log(),
              HasSubstr("fish run: /dev/zero: is a character device, expected a regular file"));
  const std::string fifo = dir_.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Without a writer a blocking open never returns: `timeout` turns a hang into exit 124.
  EXPECT_EQ(
      test::shell_exit_code("timeout 60 " + test::fish_bin() + " inspect " + fifo, log_path()),
      kExitUsage);
  EXPECT_THAT(log(), HasSubstr("fish inspect: " + fifo + ": is a FIFO, expected a regular file"));
  EXPECT_EQ(fish("merge " + dir_.file("m.jsonl") + " /dev/zero"), kExitUsage);
  EXPECT_THAT(log(), HasSubstr("/dev/zero: is a character device"));
  // A model that is a device: its own error row, not a hash of an endless file.
  const std::string exp = write_exp("\"/dev/zero\"", "");
  EXPECT_EQ(fish("run " + exp + " --out " + out_dir()), kExitCellsFailed);
  ASSERT_EQ(rows().size(), 1u) << log();
  EXPECT_EQ(rows()[0]["error"],
            "sha256: /dev/zero: is a character device, expected a regular file");
}

}  // namespace
}  // namespace fish
