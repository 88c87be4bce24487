// Results files as the writer leaves them: appended lines, finished (cell, path) pairs on resume,
// a partial last line cut off, no silent mixing of runs, and the CSV / Markdown renderings.
#include "harness/results_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_env.h"

namespace fish {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json context_line(const std::string& run_id) {
  return {{"kind", "context"},
          {"schema", "fish-results/1"},
          {"harness_version", "0.1.0"},
          {"run_id", run_id},
          {"experiment", "t"},
          {"experiment_file", "t.json"},
          {"experiment_sha256", std::string(64, 'e')},
          {"n_cells", 2},
          {"shard", {{"index", 0}, {"count", 1}}},
          {"started_utc", "2026-01-01T00:00:00Z"},
          {"commit", "abc"},
          {"dirty", false},
          {"build_type", "Release"},
          {"build_flags", ""},
          {"compiler", "g++"},
          {"cpu", "x"},
          {"cpu_features", ""},
          {"n_cpus", 2},
          {"gpu", nullptr},
          {"gpu_driver", nullptr},
          {"vulkan", nullptr},
          {"os", "Linux"},
          {"host", "h"},
          {"stream_GBps", {{"median", 10.0}, {"ci95", {9.0, 11.0}}, {"n", 5}}}};
}

json speed(double m) {
  return {{"median", m},
          {"ci95", {m - 1, m + 1}},
          {"cv", 0.01},
          {"n", 3},
          {"samples", {m - 1, m, m + 1}}};
}

json row(const std::string& run_id, int index, const std::string& id, const std::string& path,
         const std::string& status, const std::string& act) {
  json metrics;
  for (const char* k :
       {"prefill_tok_s", "decode_tok_s", "weight_GBps", "weight_GBps_pct_stream", "rss_peak_MB",
        "vram_peak_MB", "rel_rms", "top1", "kl_mean", "kl_p99", "kl_max", "ppl", "greedy_exact"})
    metrics[k] = nullptr;
  if (status == "ok") {
    metrics["prefill_tok_s"] = speed(100 + index);
    metrics["decode_tok_s"] = speed(20 + index);
    metrics["weight_GBps"] = 2.0;
    metrics["weight_GBps_pct_stream"] = 20.0;
    metrics["top1"] = 0.5;
    metrics["greedy_exact"] = {{"n", 3}, {"of", 4}};
  }
  return {{"kind", "row"},
          {"run_id", run_id},
          {"cell_id", id},
          {"cell_index", index},
          {"path", path},
          {"status", status},
          {"error", status == "ok" ? json() : json("it broke, badly")},
          {"model", "models/m.gguf"},
          {"model_sha256", std::string(64, 'a')},
          {"config",
           {{"n_ctx", 512}, {"n_threads", 1}, {"act", act}, {"n_batch", 256}, {"isa", "auto"}}},
          {"workload", {{"n_prompt", 8}, {"n_gen", 4}, {"seed", 1}, {"prompt_source", "random"}}},
          {"placement", {{"gpu_layers", 0}, {"gpu_detail", ""}}},
          {"metrics", metrics},
          {"validity", status == "ok" ? json::array({"few_repetitions"}) : json::array()},
          {"t_wall_s", 1.5}};
}

TEST(ResultsFileName, ShardsGetTheirOwnFile) {
  EXPECT_EQ(results_file_name("q", 0, 1), "q.jsonl");
  EXPECT_EQ(results_file_name("q", 2, 3), "q.shard-2-of-3.jsonl");
}

TEST(ResultsWriter, AppendsOneLinePerObjectAndTracksFinishedPairs) {
  test::TempDir dir;
  const std::string p = dir.file("sub/t.jsonl");
  auto w = ResultsWriter::open(p, false);
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_TRUE((*w)->append(context_line("r1")).ok());
  ASSERT_TRUE((*w)->append(row("r1", 0, "c000000000000000", "cpu", "ok", "int8")).ok());
  ASSERT_TRUE((*w)->append(row("r1", 0, "c000000000000000", "gpu", "skipped", "int8")).ok());
  ASSERT_TRUE((*w)->append(row("r1", 1, "c111111111111111", "cpu", "error", "f32")).ok());
  EXPECT_TRUE((*w)->finished("c000000000000000", "cpu"));
  EXPECT_FALSE((*w)->finished("c000000000000000", "gpu"));  // skipped rows are retried
  EXPECT_TRUE((*w)->finished("c111111111111111", "cpu"));   // error rows are finished
  EXPECT_EQ((*w)->status("c000000000000000", "gpu"), "skipped");
  EXPECT_EQ((*w)->status("c111111111111111", "cpu"), "error");
  EXPECT_EQ((*w)->status("c111111111111111", "gpu"), "");
  ASSERT_TRUE((*w)->append(row("r1", 1, "c111111111111111", "cpu", "ok", "f32")).ok());
  EXPECT_EQ((*w)->status("c111111111111111", "cpu"), "ok");  // the later row wins
  const std::string text = slurp(p);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5);
  EXPECT_EQ(json::parse(text.substr(0, text.find('\n')))["run_id"], "r1");
}

TEST(ResultsWriter, RefusesToAppendToAnExistingFileWithoutResume) {
  test::TempDir dir;
  const std::string p = dir.file("t.jsonl");
  {
    auto w = ResultsWriter::open(p, false);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->append(context_line("r1")).ok());
  }
  auto again = ResultsWriter::open(p, false);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.error().message, HasSubstr("pass --resume to continue it"));
}

TEST(ResultsWriter, ResumeReadsFinishedRowsAndCutsAPartialLastLine) {
  test::TempDir dir;
  const std::string p = dir.file("t.jsonl");
  const std::string complete = context_line("r1").dump() + "\n" +
                               row("r1", 0, "c000000000000000", "cpu", "ok", "int8").dump() + "\n";
  std::ofstream(p, std::ios::binary) << complete << R"({"kind":"row","run_id":"r1","cell_i)";
  auto w = ResultsWriter::open(p, true);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_GT((*w)->truncated_bytes(), 0u);
  EXPECT_EQ(slurp(p), complete);
  EXPECT_TRUE((*w)->finished("c000000000000000", "cpu"));
  EXPECT_EQ((*w)->n_finished(), 1u);
  ASSERT_TRUE((*w)->append(context_line("r2")).ok());
  EXPECT_EQ(slurp(p), complete + context_line("r2").dump() + "\n");
}

TEST(ResultsWriter, ResumeRejectsACorruptLineInTheMiddle) {
  test::TempDir dir;
  const std::string p = dir.file("t.jsonl");
  std::ofstream(p, std::ios::binary)
      << context_line("r1").dump() << "\nnot json\n"
      << row("r1", 0, "c000000000000000", "cpu", "ok", "int8").dump() << "\n";
  auto w = ResultsWriter::open(p, true);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.error().message, HasSubstr("t.jsonl:2: not a JSON object"));
}

class Renderings : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("t.jsonl");
    auto w = ResultsWriter::open(path_, false);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->append(context_line("r1")).ok());
    ASSERT_TRUE((*w)->append(row("r1", 1, "c111111111111111", "cpu", "error", "f32")).ok());
    ASSERT_TRUE((*w)->append(row("r1", 0, "c000000000000000", "cpu", "ok", "int8")).ok());
    ASSERT_TRUE((*w)->append(context_line("r2")).ok());
    ASSERT_TRUE(
        (*w)->append(row("r2", 1, "c111111111111111", "cpu", "ok", "f32")).ok());  // later row wins
  }
  test::TempDir dir_;
  std::string path_;
};

TEST_F(Renderings, CsvHasEveryConfigFieldAndTheLatestRowPerCellInCellOrder) {
  auto csv = render_csv(path_);
  ASSERT_TRUE(csv.ok()) << csv.error().message;
  std::istringstream lines(csv.value());
  std::string header, r0, r1, extra;
  std::getline(lines, header);
  std::getline(lines, r0);
  std::getline(lines, r1);
  EXPECT_FALSE(std::getline(lines, extra));
  EXPECT_THAT(
      header,
      HasSubstr(
          "experiment,cell_index,cell_id,path,status,model,n_ctx,n_threads,"
          "act,n_batch,isa,requant,kquant_repack,weight_path,group_size,zero_point,"
          "quantize_head,quantize_embedding,prefill_dequant,direct_dequant,"
          "dequant_threshold,gpu_layers,vram_budget_mb,gpu_requant,gpu_span,gpu_pipeline,swa_kv,"
          "depth,engine,"
          "llama_bench,speculative,draft_model,draft_n,prefill_tok_s,"
          "prefill_tok_s_lo,prefill_tok_s_hi,prefill_tok_s_interval,prefill_tok_s_cv"));
  // The fixture's rows predate the requant..draft_n fields: their cells are empty.
  EXPECT_THAT(r0, HasSubstr("t,0,c000000000000000,cpu,ok,models/m.gguf,512,1,int8,256,auto,,,,,,,,,"
                            ",,,,,,,,,,,,,,100,99,101,min_max,0.01,3,"));
  EXPECT_THAT(r1, HasSubstr("t,1,c111111111111111,cpu,ok,"));
  EXPECT_THAT(r0, HasSubstr(",3/4,,,few_repetitions,1.5,"));  // greedy_exact, RSS, VRAM
  EXPECT_THAT(header, ::testing::EndsWith(",error,n_prompt,n_gen,commit,dirty,cpu,gpu,run_id"));
}

TEST_F(Renderings, MarkdownShowsVaryingFieldsSpeedsWithCisAndQuality) {
  auto md = render_markdown(path_);
  ASSERT_TRUE(md.ok()) << md.error().message;
  EXPECT_THAT(md.value(),
              HasSubstr("| # | act | path | status | prefill tok/s | decode tok/s | weight GB/s | "
                        "% stream | top-1 | greedy exact | validity / error |"));
  EXPECT_THAT(
      md.value(),
      HasSubstr("| 0 | int8 | cpu | ok | 100 [99, 101] | 20 [19, 21] | 2 | 20 | 0.5 | 3/4 | "
                "few_repetitions |"));
  EXPECT_THAT(md.value(), ::testing::Not(HasSubstr("n_threads |")));  // does not vary
  // 3 repetitions: the brackets are the range, and the legend says so (with its coverage).
  EXPECT_THAT(md.value(), HasSubstr("Speeds: median [min, max] over 3 repetitions: fewer than 6 "
                                    "allow no 95% CI of the median"));
  EXPECT_THAT(md.value(), HasSubstr("probability 75% at n = 3"));
  EXPECT_THAT(md.value(), ::testing::Not(HasSubstr("95% CI]")));
}

}  // namespace
}  // namespace fish
