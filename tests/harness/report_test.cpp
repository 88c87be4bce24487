// fish report on the fixtures: the committed golden document and plots (reviewed by eye once),
// then one test per promise: only varying parameters as columns, CIs in brackets, an order that
// does not depend on input or line order, later rows winning, --check telling stale from fresh.
// FISH_UPDATE_GOLDEN=1 rewrites the golden files instead of checking them.
#include "harness/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "harness/report_svg.h"
#include "results_fixture.h"
#include "test_env.h"

namespace fish {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<std::string> kInputs = {test::results_fixture("sweep.jsonl"),
                                          test::results_fixture("quality.jsonl")};

ReportOptions golden_options() {
  return {test::results_fixture("report_golden_plots"), "report_golden_plots"};
}

std::string section(const std::string& md, const std::string& experiment) {
  const size_t b = md.find("### " + experiment + "\n");
  if (b == std::string::npos) return "";
  const size_t e = md.find("\n### ", b + 1);
  return md.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

std::string table_header(const std::string& md) {
  const size_t b = md.find("\n| ");
  return b == std::string::npos ? "" : md.substr(b + 1, md.find('\n', b + 1) - b - 1);
}

TEST(Report, MatchesTheGoldenDocumentAndPlots) {
  auto files = render_report(kInputs, golden_options());
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_EQ(files->plots.size(), 5u);  // prefill + decode vs n_threads; top-1, KL, PPL vs bpw
  const std::string golden = test::results_fixture("report_golden.md");
  const bool update = std::getenv("FISH_UPDATE_GOLDEN") != nullptr;
  auto stale = write_report(*files, golden, golden_options(), /*check=*/!update);
  ASSERT_TRUE(stale.ok()) << stale.error().message;
  EXPECT_THAT(*stale, ::testing::IsEmpty())
      << "re-run with FISH_UPDATE_GOLDEN=1 after checking the new output by eye";
}

TEST(Report, TablesShowOnlyTheParametersThatVary) {
  auto files = render_report(kInputs, {});
  ASSERT_TRUE(files.ok()) << files.error().message;
  const std::string sweep = section(files->markdown, "fixture_sweep");
  EXPECT_EQ(table_header(sweep),
            "| act | n_threads | prefill tok/s | decode tok/s | weight GB/s | % stream | RSS MB | "
            "notes |");
  EXPECT_THAT(sweep, HasSubstr("Fixed: model SmolLM2-135M-Instruct.Q4_1.gguf, n_ctx 512, n_gen "
                               "32, n_prompt 64, prompt_source builtin, seed 1, path cpu."));
  // Metric columns appear only where some row has a value: no quality in the sweep.
  EXPECT_THAT(sweep, Not(HasSubstr("top-1")));
  const std::string quality = section(files->markdown, "fixture_quality");
  EXPECT_EQ(table_header(quality),
            "| weight_type | path | decode tok/s | weight GB/s | % stream | bits/weight | top-1 | "
            "KL mean | KL p99 | KL max | PPL | greedy exact | RSS MB |");
}

TEST(Report, SpeedsCarryTheirCiInBracketsAndFailuresTheirMessage) {
  auto files = render_report(kInputs, {});
  ASSERT_TRUE(files.ok()) << files.error().message;
  const std::string sweep = section(files->markdown, "fixture_sweep");
  EXPECT_THAT(sweep, HasSubstr("| int8 | 1 | 240 [232.8, 247.2] | 40 [39.2, 40.8] |"));
  EXPECT_THAT(sweep, HasSubstr("| f32 | 4 | - | - | - | - | - | error |"));
  EXPECT_THAT(sweep, HasSubstr("- cell 5 (cpu): fixture: session: out of memory for n_ctx 512"));
  EXPECT_THAT(sweep, HasSubstr("6 of 6 cells, 6 rows (1 error, 5 ok)"));
  EXPECT_THAT(sweep, HasSubstr("Context: commit 0123456789ab; Release build, g++ 12.2.0; cpu "
                               "Fixture CPU x2 (2 CPUs); gpu none;"));
  const std::string quality = section(files->markdown, "fixture_quality");
  EXPECT_THAT(quality, HasSubstr("| q4_0 | cpu | 60 [59.4, 60.6] |"));
  EXPECT_THAT(quality, HasSubstr("| 9/12 |"));  // greedy exact n/of
}

TEST(Report, SkippedRowsAreListedOncePerReason) {
  test::TempDir dir;
  const std::string run = "cdcdcdcdcdcdcdcd";
  std::vector<nlohmann::json> lines = {test::make_context(run, "s", 2)};
  for (int i = 0; i < 2; ++i) {
    lines.push_back(test::make_row(run, i, "cpu", {{"n_threads", i + 1}},
                                   {{"decode_tok_s", test::speed_metric({10, 11})}}));
    nlohmann::json gpu = test::make_row(run, i, "gpu", {{"n_threads", i + 1}}, {});
    gpu["status"] = "skipped";
    gpu["error"] = "no Vulkan backend in this build";
    lines.push_back(gpu);
  }
  test::write_jsonl(dir.file("s.jsonl"), lines);
  auto files = render_report({dir.file("s.jsonl")}, {});
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_THAT(files->markdown, HasSubstr("| 1 | gpu | - | skipped |"));
  EXPECT_THAT(files->markdown,
              HasSubstr("\n- skipped (gpu, 2 rows): no Vulkan backend in this build\n"));
}

TEST(Report, TheLaterRowOfACellWins) {
  auto files = render_report({test::results_fixture("sweep.jsonl")}, {});
  ASSERT_TRUE(files.ok()) << files.error().message;
  // Cell 1 (int8, 2 threads) was 1 tok/s in the first run and re-measured in the resume.
  EXPECT_THAT(files->markdown, HasSubstr("| int8 | 2 | 447.9 [434.4, 461.3] | 74.64"));
  EXPECT_THAT(files->markdown, Not(HasSubstr("| 1 [1, 1] |")));
}

TEST(Report, OrderDoesNotDependOnInputOrLineOrder) {
  auto a = render_report(kInputs, {"p", "p"});
  auto b = render_report({kInputs[1], kInputs[0]}, {"p", "p"});
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(a->markdown, b->markdown);
  EXPECT_LT(a->markdown.find("### fixture_quality"), a->markdown.find("### fixture_sweep"));
  // The shards hold the same final rows in another line order (and three contexts).
  auto shards = render_report(
      {test::results_fixture("shard_2_of_3.jsonl"), test::results_fixture("shard_0_of_3.jsonl"),
       test::results_fixture("shard_1_of_3.jsonl")},
      {});
  auto whole = render_report({test::results_fixture("sweep.jsonl")}, {});
  ASSERT_TRUE(shards.ok() && whole.ok());
  auto table = [](const std::string& md) {
    const size_t begin = md.find("\n| "), end = md.find("\n\n", begin);
    return md.substr(begin, end - begin);
  };
  EXPECT_EQ(table(shards->markdown), table(whole->markdown));
  EXPECT_THAT(shards->markdown, HasSubstr("shard 2/3"));
}

TEST(Report, PlotsHaveOnePointPerOkRowAndAreLinked) {
  auto files = render_report({test::results_fixture("sweep.jsonl")}, {"out/plots", "plots"});
  ASSERT_TRUE(files.ok()) << files.error().message;
  ASSERT_EQ(files->plots.size(), 2u);
  EXPECT_EQ(files->plots[1].first, "fixture_sweep-decode_tok_s-vs-n_threads.svg");
  const std::string& svg = files->plots[1].second;
  size_t circles = 0;
  for (size_t p = svg.find("<circle"); p != std::string::npos; p = svg.find("<circle", p + 1))
    ++circles;
  EXPECT_EQ(circles, 5u);  // 6 cells, one failed
  EXPECT_THAT(svg, HasSubstr(">act=int8</text>"));
  EXPECT_THAT(svg, HasSubstr(">act=f32</text>"));
  EXPECT_THAT(files->markdown, HasSubstr("![fixture_sweep: decode tok/s vs n_threads]"
                                         "(plots/fixture_sweep-decode_tok_s-vs-n_threads.svg)"));
}

TEST(Report, QualityIsPlottedAgainstWeightBytesPerTokenWithoutBitsPerWeight) {
  test::TempDir dir;
  // Two weight types of one shape: 100 tok/s at 5 GB/s = 50 MB/token, 50 tok/s at 5 GB/s = 100.
  const std::string run = "abababababababab";
  test::write_jsonl(
      dir.file("q.jsonl"),
      {test::make_context(run, "q", 2),
       test::make_row(
           run, 0, "cpu", {{"type", "q4_0"}},
           {{"decode_tok_s", test::speed_metric({100, 100})}, {"weight_GBps", 5.0}, {"top1", 0.9}}),
       test::make_row(run, 1, "cpu", {{"type", "q8_0"}},
                      {{"decode_tok_s", test::speed_metric({50, 50})},
                       {"weight_GBps", 5.0},
                       {"top1", 0.99}})});
  auto files = render_report({dir.file("q.jsonl")}, {"p", "p"});
  ASSERT_TRUE(files.ok()) << files.error().message;
  ASSERT_EQ(files->plots.size(), 1u);
  EXPECT_EQ(files->plots[0].first, "q-top1-vs-weight_MB.svg");
  const std::string& svg = files->plots[0].second;
  EXPECT_THAT(svg, HasSubstr(">weight MB read per token</text>"));
  EXPECT_THAT(svg, HasSubstr(">50</text>"));  // x ticks at the two data values
  EXPECT_THAT(svg, HasSubstr(">100</text>"));
  EXPECT_THAT(svg, HasSubstr(">q8_0</text>"));  // points labelled with their type
}

// Modes and sentinels are categories, named as the Config table names them: requant 0..3 evenly
// spaced with their names, vram_budget_mb 0 ("the backend's budget") after every number instead
// of at x = 0; two points at one place (modes that change nothing) get one label.
TEST(Report, ModesAndSentinelsArePlottedAsNamedCategories) {
  test::TempDir dir;
  const std::string run = "cdcdcdcdcdcdcdcd";
  std::vector<nlohmann::json> lines = {test::make_context(run, "cat", 8)};
  for (int mode = 0; mode < 4; ++mode)
    lines.push_back(test::make_row(run, mode, "cpu", {{"requant", mode}},
                                   {{"decode_tok_s", test::speed_metric({10.0 + mode, 11.0})},
                                    {"bits_per_weight", mode == 1 ? 5.5 : 4.5},
                                    {"top1", mode == 1 ? 0.6 : 1.0}}));
  test::write_jsonl(dir.file("cat.jsonl"), lines);
  const std::string run2 = "efefefefefefefef";
  std::vector<nlohmann::json> budget_lines = {test::make_context(run2, "bud", 4)};
  int i = 0;
  for (int budget : {4096, 0, 2048, 8192})
    budget_lines.push_back(test::make_row(run2, i++, "gpu", {{"vram_budget_mb", budget}},
                                          {{"decode_tok_s", test::speed_metric({20, 21})}}));
  test::write_jsonl(dir.file("bud.jsonl"), budget_lines);
  auto files = render_report({dir.file("cat.jsonl"), dir.file("bud.jsonl")}, {"p", "p"});
  ASSERT_TRUE(files.ok()) << files.error().message;
  auto plot = [&](const std::string& name) -> std::string {
    for (const auto& [file, svg] : files->plots)
      if (file == name) return svg;
    std::string have;
    for (const auto& [file, svg] : files->plots) have += " " + file;
    ADD_FAILURE() << "no plot " << name << "; plots:" << have;
    return "";
  };
  // The x tick labels in drawing order.
  auto ticks = [](const std::string& svg) {
    std::vector<std::string> out;
    for (size_t p = svg.find("text-anchor=\"middle\">"); p != std::string::npos;
         p = svg.find("text-anchor=\"middle\">", p + 1)) {
      const size_t b = svg.find('>', p) + 1;
      out.push_back(svg.substr(b, svg.find('<', b) - b));
    }
    return out;
  };
  const std::vector<std::string> modes = ticks(plot("cat-decode_tok_s-vs-requant.svg"));
  EXPECT_THAT(modes, ::testing::IsSupersetOf({"0 off", "1 all-&gt;fq3", "2 q6_k-&gt;q4_k",
                                              "3 q4_k-&gt;fq3+q6_k-&gt;q4_k"}));
  const std::vector<std::string> budgets = ticks(plot("bud-decode_tok_s-vs-vram_budget_mb.svg"));
  const auto at = [&](const std::string& t) {
    return std::find(budgets.begin(), budgets.end(), t) - budgets.begin();
  };
  EXPECT_LT(at("2048"), at("4096"));
  EXPECT_LT(at("4096"), at("8192"));
  EXPECT_LT(at("8192"), at("backend's (unset)"));
  EXPECT_EQ(std::count(budgets.begin(), budgets.end(), "0"), 0);
  // Modes 0, 2 and 3 sit at (4.5 bits, top-1 1): one label for the three.
  const std::string top1 = plot("cat-top1-vs-bpw.svg");
  EXPECT_THAT(top1, HasSubstr(">requant 0, 2, 3</text>"));
  EXPECT_THAT(top1, HasSubstr(">requant 1 all-&gt;fq3</text>"));
}

TEST(ReportSvg, NumericTickLabelsThatWouldOverlapAreLeftOut) {
  Plot p;
  p.title = "t";
  PlotSeries s;
  s.name = "s";
  for (double x : {5.441, 7.13, 7.174, 7.262, 7.353}) s.points.push_back({x, 1, 1, 1, ""});
  p.series.push_back(s);
  const std::string svg = render_svg(p);
  EXPECT_THAT(svg, HasSubstr(">5.441</text>"));
  EXPECT_THAT(svg, HasSubstr(">7.13</text>"));
  EXPECT_THAT(svg, Not(HasSubstr(">7.174</text>")));  // 3 px from 7.13 at this scale
}

TEST(Report, CheckTellsStaleFromFresh) {
  test::TempDir dir;
  const ReportOptions opt{dir.file("R_plots"), "R_plots"};
  auto files = render_report(kInputs, opt);
  ASSERT_TRUE(files.ok()) << files.error().message;
  const std::string md = dir.file("R.md");
  auto check = [&] { return write_report(*files, md, opt, true).value(); };
  EXPECT_EQ(check().size(), 6u);  // nothing written yet: markdown + 5 plots missing
  ASSERT_TRUE(write_report(*files, md, opt, false).ok());
  EXPECT_TRUE(check().empty());

  std::ofstream(md, std::ios::app) << "edited by hand\n";
  EXPECT_THAT(check(), ::testing::ElementsAre(md + " (differs)"));
  ASSERT_TRUE(write_report(*files, md, opt, false).ok());
  EXPECT_TRUE(check().empty());

  const std::string plot = (std::filesystem::path(opt.plots_dir) / files->plots[0].first).string();
  std::filesystem::remove(plot);
  EXPECT_THAT(check(), ::testing::ElementsAre(plot + " (missing)"));
  ASSERT_TRUE(write_report(*files, md, opt, false).ok());

  const std::string stray = dir.file("R_plots/old.svg");
  std::ofstream(stray) << "<svg/>";
  EXPECT_THAT(check(), ::testing::ElementsAre(stray + " (no longer generated)"));
  ASSERT_TRUE(write_report(*files, md, opt, false).ok());  // removes it
  EXPECT_FALSE(std::filesystem::exists(stray));
  EXPECT_TRUE(check().empty());
}

TEST(Report, CheckCommandExitsNonZeroWhenStale) {
  const std::string fish = test::binary_dir() + "/fish";
  ASSERT_TRUE(std::filesystem::exists(fish)) << fish << " not built";
  test::TempDir dir;
  const std::string md = dir.file("B.md");
  const std::string args = kInputs[0] + " " + kInputs[1] + " -o " + md;
  ASSERT_EQ(std::system((fish + " report " + args + " 2>/dev/null").c_str()), 0);
  EXPECT_EQ(std::system((fish + " report --check " + args + " 2>/dev/null").c_str()), 0);
  std::ofstream(md, std::ios::app) << "x";
  EXPECT_NE(std::system((fish + " report --check " + args + " 2>/dev/null").c_str()), 0);
}

TEST(Report, RendersGoogleBenchmarkFiles) {
  auto files = render_report({test::results_fixture("gbench_small.json")}, {});
  ASSERT_TRUE(files.ok()) << files.error().message;
  const std::string& md = files->markdown;
  EXPECT_THAT(md, HasSubstr("## Microbenchmarks (google-benchmark)\n\n### gbench_small\n"));
  EXPECT_THAT(md, HasSubstr("| benchmark | n | time (median [min, max]) | CV | bytes/s | tok/s | "
                            "MB/token | GFLOP/s |"));
  // Median of 17.5/15.1/19.1 ms; population CV 9.5%; bytes/s median 6.05e9; counters' medians.
  EXPECT_THAT(md, HasSubstr("| decode/tiny/threads:1 | 3 | 17.5 ms [15.1 ms, 19.1 ms] | 9.5% | "
                            "6.05GB/s | 57.0 | 96.4 |  |"));
  EXPECT_THAT(md,
              HasSubstr("| dot/q4_0/4096 | 3 | 2.1 us [2 us, 2.2 us] | 3.9% |  |  |  | 13.5 |"));
  EXPECT_THAT(md, HasSubstr("- error: decode/missing_model: model not found"));
}

TEST(Report, RejectsAnInputOfUnknownKind) {
  auto files = render_report({"notes.txt"}, {});
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.error().message, HasSubstr("notes.txt: unknown input"));
  auto bad = render_report({test::results_fixture("bad.jsonl")}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("bad.jsonl:3: not valid JSON"));
}

TEST(Report, AContextWithoutGitStateRendersAsUnknownNotDirty) {
  // Runs on a machine without a git checkout (the GPU machine) record "dirty": null.
  test::TempDir dir;
  std::ifstream in(test::results_fixture("sweep.jsonl"));
  const std::string path = (dir.path() / "nogit.jsonl").string();
  std::ofstream out(path);
  std::string line;
  while (std::getline(in, line)) {
    const std::string clean = "\"dirty\":false";
    const size_t k = line.find(clean);
    if (k != std::string::npos) line.replace(k, clean.size(), "\"dirty\":null");
    out << line << "\n";
  }
  out.close();
  auto files = render_report({path}, {});
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_THAT(files->markdown, Not(HasSubstr("(dirty)")));
}

// Rows of two versions of one experiment file are two sections, the newest run's first, each
// with the command that reproduces it: the knobs that change results (not where files are).
TEST(Report, EachVersionOfAnExperimentFileIsItsOwnSectionWithItsCommand) {
  test::TempDir dir;
  std::vector<nlohmann::json> lines;
  nlohmann::json old_ctx = test::make_context("r_old", "exp", 1);
  old_ctx["experiment_file"] = "experiments/exp.json";
  old_ctx["experiment_sha256"] = std::string(64, 'a');
  old_ctx["started_utc"] = "2026-01-01T00:00:00Z";
  old_ctx.erase("env");
  nlohmann::json new_ctx = old_ctx;
  new_ctx["run_id"] = "r_new";
  new_ctx["experiment_sha256"] = std::string(64, 'b');
  new_ctx["started_utc"] = "2026-02-01T00:00:00Z";
  new_ctx["env"] = {{"FISH_VK_ATTN_SPLIT", "0"}, {"FISH_SYNTHETIC_DIR", "/tmp/syn"}};
  lines.push_back(old_ctx);
  lines.push_back(test::make_row("r_old", 0, "cpu", {{"n_threads", 1}},
                                 {{"decode_tok_s", test::speed_metric({1, 2, 3})}}));
  lines.push_back(new_ctx);
  lines.push_back(test::make_row("r_new", 0, "cpu", {{"n_threads", 2}},
                                 {{"decode_tok_s", test::speed_metric({4, 5, 6})}}));
  const std::string path = dir.file("exp.jsonl");
  test::write_jsonl(path, lines);
  auto files = render_report({path}, {});
  ASSERT_TRUE(files.ok()) << files.error().message;
  const std::string& md = files->markdown;
  const size_t newer = md.find("### exp, file version bbbbbbbbbbbb\n");
  const size_t older = md.find("### exp, file version aaaaaaaaaaaa\n");
  ASSERT_NE(newer, std::string::npos) << md;
  ASSERT_NE(older, std::string::npos) << md;
  EXPECT_LT(newer, older);
  const std::string new_section = md.substr(newer, older - newer);
  const std::string old_section = md.substr(older);
  EXPECT_THAT(new_section, HasSubstr("Reproduce: `FISH_VK_ATTN_SPLIT=0 fish run "
                                     "experiments/exp.json` with the file of sha256 bbbbbbbbbbbb"));
  EXPECT_THAT(new_section, Not(HasSubstr("FISH_SYNTHETIC_DIR=")));
  EXPECT_THAT(new_section, Not(HasSubstr("r_old")));
  EXPECT_THAT(old_section, HasSubstr("the run's FISH_* knobs were not recorded"));
  EXPECT_THAT(old_section, Not(HasSubstr("r_new")));
}

TEST(Report, ShortNumbersKeepFourSignificantDigits) {
  EXPECT_EQ(short_number(28629), "28629");
  EXPECT_EQ(short_number(1234.56), "1235");
  EXPECT_EQ(short_number(447.875), "447.9");
  EXPECT_EQ(short_number(0.0021), "0.0021");
  EXPECT_EQ(short_number(3.1e-05), "3.1e-05");
  EXPECT_EQ(short_number(0), "0");
}

}  // namespace
}  // namespace fish
