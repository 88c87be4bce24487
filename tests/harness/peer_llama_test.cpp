// llama.cpp as a peer engine (harness/peer_llama.h): the llama-bench output parser on recorded
// JSONL / JSON (tests/data/peer, recorded from the pinned CPU build on SmolLM2) and malformed
// lines, the mapping of a cell onto llama-bench's flags, what llama.cpp cannot express, and
// `fish run` with fake llama-bench scripts for every failure: missing, not executable,
// crashing, a rejected model, garbage on stdout — each an error row naming the cause while the
// FISH rows of the sweep are measured.
#include "harness/peer_llama.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "harness/cli_test_util.h"
#include "harness/exit_codes.h"
#include "harness/results_reader.h"
#include "test_env.h"

namespace fish {
namespace {

using nlohmann::json;

std::string fixture(const std::string& name) {
  return test::testdata_dir() + "/peer/" + name;
}

TEST(ParseLlamaBenchOutput, ReadsRecordedJsonl) {
  const std::string text = test::read_file(fixture("llama_bench_smollm2_cpu.jsonl"));
  ASSERT_FALSE(text.empty());
  auto r = parse_llama_bench_output(text, "rec.jsonl");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r.value().size(), 2u);
  const LlamaBenchTest& pp = r.value()[0];
  const LlamaBenchTest& tg = r.value()[1];
  EXPECT_TRUE(pp.is_prefill());
  EXPECT_TRUE(tg.is_decode());
  EXPECT_EQ(pp.n_prompt, 32);
  EXPECT_EQ(tg.n_gen, 16);
  EXPECT_EQ(pp.samples_ts.size(), 3u);
  EXPECT_EQ(pp.json["build_commit"], std::string(kLlamaCppCommitShort));
  for (double x : pp.samples_ts) EXPECT_GT(x, 0);
}

TEST(ParseLlamaBenchOutput, ReadsTheJsonArrayFormatAsTheSameTests) {
  auto a = parse_llama_bench_output(test::read_file(fixture("llama_bench_smollm2_cpu.json")), "a");
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_EQ(a.value().size(), 2u);
  EXPECT_TRUE(a.value()[0].is_prefill());
  EXPECT_TRUE(a.value()[1].is_decode());
  EXPECT_EQ(a.value()[1].samples_ts.size(), 3u);
}

TEST(ParseLlamaBenchOutput, NamesTheLineAndTheProblemOfMalformedOutput) {
  const std::string good = R"({"n_prompt": 8, "n_gen": 0, "n_depth": 0, "samples_ts": [10.5, 11]})";
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"", "no llama-bench results"},
      {"\n\n", "no llama-bench results"},
      {good + "\nggml_vulkan: Found 1 Vulkan devices\n", "x:2: not JSON: \"ggml_vulkan: Found"},
      {good + "\n{\"n_prompt\": 8, \"n_gen\": 0, \"samples_ts\": [1", "x:2: not JSON"},
      {R"({"n_prompt": 8, "n_gen": 0})", "x:1: samples_ts: expected a non-empty list"},
      {R"({"n_prompt": 8, "n_gen": 0, "samples_ts": []})", "samples_ts: expected a non-empty"},
      {R"({"n_prompt": 8, "n_gen": 0, "samples_ts": [5, -1]})", "positive numbers"},
      {R"({"n_prompt": 8, "n_gen": 0, "samples_ts": ["fast"]})", "positive numbers"},
      {R"({"n_prompt": "8", "n_gen": 0, "samples_ts": [1]})", "x:1: n_prompt: expected an integer"},
      {R"({"n_gen": 4, "samples_ts": [1]})", "n_prompt: expected an integer >= 0, found nothing"},
      {R"({"n_prompt": 8, "n_gen": 0, "n_depth": -3, "samples_ts": [1]})", "n_depth"},
      {"[1, 2]", "x: element 0: expected a JSON object, found 1"},
      {"[" + good + ", 7]", "x: element 1: expected a JSON object"},
      {"[" + good, "not a JSON array"},
      {"[]", "an empty list"},
  };
  for (const Case& c : cases) {
    auto r = parse_llama_bench_output(c.text, "x");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos)
        << "text: " << c.text << "\nmessage: " << r.error().message;
  }
  auto ok = parse_llama_bench_output("\n" + good + "\n\n" + good + "\n", "x");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value().size(), 2u);
}

TEST(LlamaBenchInvocations, DecodeAfterThePromptRunsAtDepthNPromptUnlessADepthIsGiven) {
  Workload w;
  w.n_prompt = 128;
  w.n_gen = 64;
  MeasureSpec m;
  m.repetitions = 6;
  Config c;
  c.n_batch = 256;
  auto inv = llama_bench_invocations("m.gguf", w, m, c, "cpu", 2);
  ASSERT_EQ(inv.size(), 2u);
  const std::vector<std::string> pp = {"-m", "m.gguf", "-p", "128",   "-n",   "0",   "-d",   "0",
                                       "-t", "2",      "-b", "256",   "-ub",  "256", "-ngl", "0",
                                       "-r", "6",      "-o", "jsonl", "-dev", "none"};
  EXPECT_EQ(inv[0], pp);
  EXPECT_EQ(inv[1][3], "0");    // -p 0
  EXPECT_EQ(inv[1][5], "64");   // -n 64
  EXPECT_EQ(inv[1][7], "128");  // -d n_prompt: FISH's decode follows the prompt
  c.depth = 512;
  m.warmup = 0;
  c.gpu_layers = -1;
  inv = llama_bench_invocations("m.gguf", w, m, c, "gpu", 16);
  ASSERT_EQ(inv.size(), 1u);
  EXPECT_EQ(inv[0][3], "128");
  EXPECT_EQ(inv[0][5], "64");
  EXPECT_EQ(inv[0][7], "512");
  EXPECT_EQ(inv[0][15], "999");  // all layers
  EXPECT_EQ(inv[0].back(), "--no-warmup");
  c.gpu_layers = 7;
  EXPECT_EQ(llama_bench_invocations("m.gguf", w, m, c, "gpu", 16)[0][15], "7");
}

TEST(LlamaUnsupported, NamesEveryFieldLlamaCppCannotExpress) {
  Config c;
  QualitySpec q;
  EXPECT_EQ(llama_unsupported(c, q, ""), "");
  c.requant = 3;
  c.weight_path = "w4a8";
  std::string why = llama_unsupported(c, q, "");
  EXPECT_NE(why.find("requant 3"), std::string::npos) << why;
  EXPECT_NE(why.find("weight_path w4a8"), std::string::npos) << why;
  c = Config{};
  c.act = "f32";
  EXPECT_NE(llama_unsupported(c, q, "").find("act f32"), std::string::npos);
  c = Config{};
  c.gpu_span = false;
  EXPECT_NE(llama_unsupported(c, q, "").find("gpu_span"), std::string::npos);
  c = Config{};
  q.metrics = {"top1"};
  EXPECT_NE(llama_unsupported(c, q, "").find("quality metrics"), std::string::npos);
}

TEST(LlamaUnsupported, AFileWithFishTensorTypesIsRefused) {
  test::TempDir dir;
  const std::string fq3 = dir.file("fq3.gguf"), q8 = dir.file("q8.gguf");
  ASSERT_EQ(
      test::shell_exit_code(test::fish_bin() + " make-model --shape tiny --type q8_0 --out " + q8,
                            dir.file("log")),
      0);
  ASSERT_EQ(test::shell_exit_code(test::fish_bin() + " requant " + q8 + " " + fq3 + " --mode 1",
                                  dir.file("log")),
            0)
      << test::file_text(dir.file("log"));
  EXPECT_EQ(llama_unsupported(Config{}, QualitySpec{}, q8), "");
  const std::string why = llama_unsupported(Config{}, QualitySpec{}, fq3);
  EXPECT_NE(why.find("FISH tensor types"), std::string::npos) << why;
  EXPECT_NE(why.find("fq3"), std::string::npos) << why;
}

TEST(ResolveLlamaBench, BackendNamesAreTheBuildScriptsDirectories) {
  test::TempDir dir;
  const std::string bin =
      dir.file("peer/" + std::string(kLlamaCppCommitShort) + "-cpu/bin/llama-bench");
  std::filesystem::create_directories(std::filesystem::path(bin).parent_path());
  ::setenv("FISH_CACHE", dir.path().c_str(), 1);
  Config c;
  c.llama_bench = "cpu";
  auto r = resolve_llama_bench(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(bin), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("build_llama_cpp.sh cpu"), std::string::npos);
  { std::ofstream(bin) << "#!/bin/sh\n"; }
  r = resolve_llama_bench(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not executable"), std::string::npos) << r.error().message;
  ::chmod(bin.c_str(), 0755);
  r = resolve_llama_bench(c);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value(), bin);
  ::unsetenv("FISH_CACHE");
  c.llama_bench = "";
  ::unsetenv("FISH_LLAMA_BENCH");
  r = resolve_llama_bench(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("FISH_LLAMA_BENCH"), std::string::npos);
}

TEST(LlamaCppPin, TheCommitMatchesThePinFile) {
  const std::string pin = test::read_file(test::source_dir() + "/scripts/peer/llama_cpp.pin");
  ASSERT_FALSE(pin.empty());
  EXPECT_NE(pin.find("\ncommit_short=" + std::string(kLlamaCppCommitShort) + "\n"),
            std::string::npos);
}

// A fake llama-bench: `body` runs after `#!/bin/sh`; the good one answers the -p/-n/-d/-r it is
// given with that many samples, as the real one does.
std::string write_script(const test::TempDir& dir, const std::string& name, const std::string& body,
                         bool executable = true) {
  const std::string path = dir.file(name);
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), executable ? 0755 : 0644);
  return path;
}

constexpr const char* kFakeGood = R"SH(p=0; n=0; d=0; r=5; t=1; ngl=0
while [ $# -gt 0 ]; do case "$1" in -p) p=$2;; -n) n=$2;; -d) d=$2;; -r) r=$2;; -t) t=$2;; -ngl) ngl=$2;; esac; shift; done
s=""; i=0; while [ $i -lt $r ]; do s="$s${s:+, }$((100 + i))"; i=$((i + 1)); done
echo "ggml_vulkan: 0 = Fake GPU | int dot: 1" >&2
if [ "$p" -gt 0 ]; then echo "{\"build_commit\": \"0c1e570\", \"backends\": \"CPU\", \"cpu_info\": \"fake cpu\", \"gpu_info\": \"\", \"model_type\": \"fake\", \"n_threads\": $t, \"n_gpu_layers\": $ngl, \"n_prompt\": $p, \"n_gen\": 0, \"n_depth\": $d, \"samples_ts\": [ $s ]}"; fi
if [ "$n" -gt 0 ]; then echo "{\"build_commit\": \"0c1e570\", \"backends\": \"CPU\", \"n_prompt\": 0, \"n_gen\": $n, \"n_depth\": $d, \"samples_ts\": [ $s ]}"; fi
)SH";

class PeerRun : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(test::fish_bin())) << test::fish_bin() << " not built";
    model_ = dir_.file("tiny.gguf");
    ASSERT_EQ(test::shell_exit_code(
                  test::fish_bin() + " make-model --shape tiny --type q8_0 --out " + model_,
                  dir_.file("log")),
              0);
  }
  // An experiment on the tiny model: `defaults` and `rest` are JSON members (text).
  std::string experiment(const std::string& defaults, const std::string& rest) {
    const std::string path = dir_.file("peer.json");
    std::ofstream(path) << R"({"schema_version": 1, "name": "peer", "model": ")" << model_
                        << R"(", "defaults": {"n_ctx": 64, "n_threads": 1)" << defaults << "}, "
                        << rest << R"(, "workload": {"n_prompt": 8, "n_gen": 4},
      "measure": {"warmup": 0, "repetitions": 3, "stream_MiB": 4}, "output": {"formats": []}})";
    return path;
  }
  std::vector<json> run(const std::string& exp, int expect_rc) {
    const int rc = test::shell_exit_code(
        test::fish_bin() + " run " + exp + " --out " + dir_.file("out"), dir_.file("run.log"));
    EXPECT_EQ(rc, expect_rc) << test::file_text(dir_.file("run.log"));
    return test::result_rows(dir_.file("out/peer.jsonl"));
  }
  test::TempDir dir_;
  std::string model_;
};

TEST_F(PeerRun, ALlamaCppCellIsMeasuredBesideItsFishCellWithTheSameRowSchema) {
  const std::string good = write_script(dir_, "good.sh", kFakeGood);
  const std::vector<json> rows = run(experiment(R"(, "llama_bench": ")" + good + "\"",
                                                R"("sweep": {"engine": ["fish", "llama.cpp"]})"),
                                     kExitOk);
  ASSERT_EQ(rows.size(), 2u);
  const json& f = rows[0];
  const json& l = rows[1];
  EXPECT_EQ(f["config"]["engine"], "fish");
  EXPECT_EQ(l["config"]["engine"], "llama.cpp");
  EXPECT_NE(f["cell_id"], l["cell_id"]);
  EXPECT_EQ(f["workload"], l["workload"]);
  EXPECT_EQ(f["status"], "ok");
  ASSERT_EQ(l["status"], "ok") << l.dump();
  EXPECT_EQ(l["metrics"]["prefill_tok_s"]["samples"], json({100, 101, 102}));
  EXPECT_EQ(l["metrics"]["decode_tok_s"]["median"], 101);
  EXPECT_TRUE(l["metrics"]["decode_tok_s"].contains("min_max"));  // 3 samples: no 95% CI
  EXPECT_EQ(l["validity"], json({"few_repetitions"}));
  EXPECT_EQ(l["n_threads_resolved"], 1);
  const json& peer = l["peer"];
  EXPECT_EQ(peer["build_commit"], "0c1e570");
  EXPECT_EQ(peer["backends"], "CPU");
  EXPECT_EQ(peer["cpu_info"], "fake cpu");
  EXPECT_EQ(peer["binary"], good);
  ASSERT_EQ(peer["args"].size(), 2u);  // prefill at -d 0, decode at -d n_prompt
  EXPECT_EQ(peer["args"][1][7], "8");
  EXPECT_EQ(peer["device_log"][0], "ggml_vulkan: 0 = Fake GPU | int dot: 1");
  // Both rows read back as results: report and compare see the same schema.
  ResultSet set;
  ASSERT_TRUE(read_results_file(dir_.file("out/peer.jsonl"), &set).ok());
  EXPECT_EQ(set.rows.size(), 2u);
  // The report puts FISH over the peer, per speed metric, with the ratio's interval.
  ASSERT_EQ(test::shell_exit_code(test::fish_bin() + " report " + dir_.file("out/peer.jsonl"),
                                  dir_.file("report.md")),
            0);
  const std::string md = test::file_text(dir_.file("report.md"));
  EXPECT_NE(md.find("| peer | metric | FISH | peer | FISH / peer [interval] |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("llama.cpp " + good + " (CPU, 0c1e570) | prefill_tok_s | "), std::string::npos)
      << md;
  // fish compare: the peer rows as BASE, the FISH rows as HEAD, joined without the engine fields.
  const std::string out = dir_.file("out/peer.jsonl");
  ASSERT_EQ(test::shell_exit_code(test::fish_bin() + " compare " + out + " " + out +
                                      " --base-where engine=llama.cpp --head-where engine=fish "
                                      "--ignore engine,llama_bench",
                                  dir_.file("cmp.log")),
            0)
      << test::file_text(dir_.file("cmp.log"));
  EXPECT_NE(
      test::file_text(dir_.file("cmp.log")).find("1 rows joined, 0 only in BASE, 0 only in HEAD"),
      std::string::npos)
      << test::file_text(dir_.file("cmp.log"));
}

TEST_F(PeerRun, ATwinTakesTurnsWithItsFishCellInBlocksOfPeerBlockRepetitions) {
  const std::string good = write_script(dir_, "good.sh", kFakeGood);
  std::string exp = experiment(R"(, "llama_bench": ")" + good + "\"",
                               R"("sweep": {"engine": ["fish", "llama.cpp"]})");
  std::string text = test::file_text(exp);
  text.replace(text.find("\"stream_MiB\""), 0, "\"peer_block\": 2, ");
  std::ofstream(exp) << text;
  const std::vector<json> rows = run(exp, kExitOk);
  ASSERT_EQ(rows.size(), 2u);
  const json& l = rows[1];
  ASSERT_EQ(l["status"], "ok") << l.dump();
  // 3 repetitions in blocks of 2: two calls per phase, each answering 100, 101.
  EXPECT_EQ(l["metrics"]["prefill_tok_s"]["samples"], json({100, 101, 100}));
  EXPECT_EQ(l["metrics"]["decode_tok_s"]["samples"], json({100, 101, 100}));
  ASSERT_EQ(l["peer"]["args"].size(), 4u);
  EXPECT_EQ(l["peer"]["args"][0][17], "2");  // -r 2
  EXPECT_EQ(rows[0]["status"], "ok");
  // peer_block 0: one call per phase, after the FISH cell.
  const std::string two = "\"peer_block\": 2";
  text.replace(text.find(two), two.size(), "\"peer_block\": 0");
  std::ofstream(exp) << text;
  std::filesystem::remove_all(dir_.file("out"));
  const std::vector<json> again = run(exp, kExitOk);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[1]["metrics"]["prefill_tok_s"]["samples"], json({100, 101, 102}));
  EXPECT_EQ(again[1]["peer"]["args"].size(), 2u);
}

TEST_F(PeerRun, EveryBrokenLlamaBenchIsAnErrorRowNamingTheCauseAndTheSweepGoesOn) {
  const std::string good = write_script(dir_, "good.sh", kFakeGood);
  const std::string noexec = write_script(dir_, "noexec.sh", kFakeGood, false);
  const std::string crash =
      write_script(dir_, "crash.sh", "echo '{\"n_prompt\": 8' ; kill -SEGV $$\n");
  const std::string reject = write_script(
      dir_, "reject.sh",
      "echo \"llama_model_load: error loading model: unknown model architecture\" >&2\n"
      "echo \"main: error: failed to load model '$2'\" >&2\nexit 1\n");
  const std::string garbage = write_script(dir_, "garbage.sh", "echo '| model | size |'\n");
  const std::string missing = dir_.file("nowhere/llama-bench");
  const std::string bins = "\"" + good + "\", \"" + missing + "\", \"" + noexec + "\", \"" + crash +
                           "\", \"" + reject + "\", \"" + garbage + "\"";
  const std::vector<json> rows =
      run(experiment("", R"("sweep": {"engine": ["fish", "llama.cpp"], "llama_bench": [)" + bins +
                             R"(]}, "exclude": [{"engine": "fish", "llama_bench": [)" +
                             bins.substr(bins.find(',') + 2) + "]}]"),
          kExitCellsFailed);
  ASSERT_EQ(rows.size(), 7u);
  std::map<std::string, json> by_bin;
  for (const json& r : rows)
    by_bin[r["config"]["engine"].get<std::string>() + " " +
           r["config"]["llama_bench"].get<std::string>()] = r;
  EXPECT_EQ(by_bin["fish " + good]["status"], "ok");
  EXPECT_EQ(by_bin["llama.cpp " + good]["status"], "ok");
  const std::pair<std::string, std::string> expect[] = {
      {missing, "does not exist"},
      {noexec, "is not executable"},
      {crash, "killed by signal 11 (SIGSEGV)"},
      {reject, "failed to load model"},
      {garbage, "not JSON: \"| model | size |\""},
  };
  for (const auto& [bin, what] : expect) {
    const json& r = by_bin["llama.cpp " + bin];
    EXPECT_EQ(r["status"], "error") << bin;
    const std::string err = r["error"].is_string() ? r["error"].get<std::string>() : "";
    EXPECT_NE(err.find(what), std::string::npos) << bin << ": " << err;
  }
  EXPECT_NE(by_bin["llama.cpp " + reject]["error"].get<std::string>().find("exited with status 1"),
            std::string::npos);
}

TEST_F(PeerRun, FieldsLlamaCppCannotExpressAreErrorRowsWithTheReason) {
  const std::string good = write_script(dir_, "good.sh", kFakeGood);
  const std::vector<json> rows = run(
      experiment(R"(, "llama_bench": ")" + good + "\"",
                 R"("sweep": {"engine": ["fish", "llama.cpp"], "weight_path": ["auto", "ref"]})"),
      kExitCellsFailed);
  ASSERT_EQ(rows.size(), 4u);
  int n_ok = 0;
  for (const json& r : rows) {
    if (r["config"]["engine"] == "llama.cpp" && r["config"]["weight_path"] == "ref") {
      EXPECT_EQ(r["status"], "error");
      EXPECT_NE(r["error"].get<std::string>().find("weight_path ref"), std::string::npos)
          << r["error"];
    } else {
      n_ok += r["status"] == "ok";
    }
  }
  EXPECT_EQ(n_ok, 3);
}

// measure.order seen from outside: a fake llama-bench logs the n_batch of every call. Two FISH
// cells, each with its llama.cpp twin taking one repetition per call (peer_block 1): interleave
// visits the cells round-robin (every cell's repetition r before any r + 1), fixed measures
// one cell's repetitions back to back, then the next.
TEST_F(PeerRun, InterleaveVisitsTheCellsRoundRobinAndFixedOneAfterTheOther) {
  const std::string log = dir_.file("calls.log");
  const std::string logging =
      write_script(dir_, "logging.sh",
                   "for a in \"$@\"; do [ \"$prev\" = -b ] && echo \"$a\" >> " + log +
                       "; prev=$a; done\n" + kFakeGood);
  auto calls_for = [&](const std::string& order) {
    std::string exp =
        experiment(R"(, "llama_bench": ")" + logging + "\"",
                   R"("sweep": {"n_batch": [1, 2], "engine": ["fish", "llama.cpp"]})");
    std::string text = test::file_text(exp);
    text.replace(text.find("\"stream_MiB\""), 0,
                 "\"peer_block\": 1, \"order\": \"" + order + "\", ");
    std::ofstream(exp) << text;
    std::filesystem::remove_all(dir_.file("out"));
    std::filesystem::remove(log);
    const std::vector<json> rows = run(exp, kExitOk);
    EXPECT_EQ(rows.size(), 4u);
    for (const json& r : rows) EXPECT_EQ(r["status"], "ok") << r.dump();
    std::string calls;
    for (char c : test::file_text(log))
      if (c != '\n') calls += c;
    return calls;
  };
  // One block per repetition, each a prefill and a decode call; 3 repetitions a cell.
  EXPECT_EQ(calls_for("interleave"), "112211221122");
  EXPECT_EQ(calls_for("fixed"), "111111222222");
}

TEST(ImportLlamaBench, RecordedTestsBecomeRowsThatReportAndCompareRead) {
  test::TempDir dir;
  for (const char* name : {"llama_bench_smollm2_cpu.jsonl", "llama_bench_smollm2_cpu.json"}) {
    auto out = import_llama_bench(fixture(name), dir.file(std::string("imp-") + name));
    ASSERT_TRUE(out.ok()) << out.error().message;
    ResultSet set;
    Status st = read_results_file(out.value(), &set);
    ASSERT_TRUE(st.ok()) << st.error().message;
    ASSERT_EQ(set.contexts.size(), 1u);
    EXPECT_EQ(set.contexts[0].json["commit"], "llama.cpp " + std::string(kLlamaCppCommitShort));
    ASSERT_EQ(set.rows.size(), 2u);
    const ResultRow& pp = set.rows[0];
    const ResultRow& tg = set.rows[1];
    EXPECT_EQ(pp.status, "ok");
    EXPECT_EQ(pp.path, "cpu");
    EXPECT_EQ(pp.config()["engine"], "llama.cpp");
    EXPECT_EQ(pp.workload()["n_prompt"], 32);
    ASSERT_TRUE(pp.speed("prefill_tok_s"));
    EXPECT_FALSE(pp.speed("decode_tok_s"));
    ASSERT_TRUE(tg.speed("decode_tok_s"));
    EXPECT_EQ(tg.speed("decode_tok_s")->n, 3);
    EXPECT_NE(pp.cell_id, tg.cell_id);
  }
  // The two formats of the same run are the same cells: compare joins every row.
  const std::string log = dir.file("log");
  const std::string a = dir.file("imp-llama_bench_smollm2_cpu.jsonl/llama_bench_smollm2_cpu.jsonl");
  const std::string b = dir.file("imp-llama_bench_smollm2_cpu.json/llama_bench_smollm2_cpu.jsonl");
  EXPECT_EQ(test::shell_exit_code(test::fish_bin() + " compare " + a + " " + b, log), 0)
      << test::file_text(log);
  EXPECT_NE(test::file_text(log).find("2 rows joined"), std::string::npos) << test::file_text(log);
  EXPECT_EQ(test::shell_exit_code(test::fish_bin() + " report " + a, log), 0)
      << test::file_text(log);
  // The CLI: a bad file is a usage error naming the line.
  {
    std::ofstream(dir.file("bad.jsonl"))
        << "{\"n_prompt\": 1, \"n_gen\": 0, \"samples_ts\": [1]}\nnope\n";
  }
  EXPECT_EQ(test::shell_exit_code(test::fish_bin() + " import llama-bench " +
                                      dir.file("bad.jsonl") + " --out " + dir.file("imp2"),
                                  log),
            kExitUsage);
  EXPECT_NE(test::file_text(log).find("bad.jsonl:2: not JSON"), std::string::npos)
      << test::file_text(log);
}

TEST(ImportLlamaBench, APromptPlusGenerationTestIsAnErrorRow) {
  test::TempDir dir;
  {
    std::ofstream(dir.file("pg.jsonl"))
        << R"({"build_commit": "0c1e570", "n_prompt": 16, "n_gen": 8, "samples_ts": [5, 6]})"
        << "\n";
  }
  auto out = import_llama_bench(dir.file("pg.jsonl"), dir.file("o"));
  ASSERT_TRUE(out.ok()) << out.error().message;
  const std::vector<json> rows = test::result_rows(out.value());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["status"], "error");
  EXPECT_NE(rows[0]["error"].get<std::string>().find("-pg"), std::string::npos);
}

}  // namespace
}  // namespace fish
