// `fish report RESULTS... [-o FILE] [--plots DIR] [--check]`
#include <cstdio>
#include <filesystem>

#include "base/path_checks.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "harness/metrics.h"
#include "harness/report.h"

namespace fish {

void add_report_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::vector<std::string> inputs;
    std::string out, plots;
    bool check = false, no_plots = false, help_metrics = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Render results as Markdown: one section per experiment (only the parameters that vary as "
      "columns, median [95% CI] or [min, max] where too few repetitions allow no CI, each table "
      "saying which), google-benchmark JSON files and command-run folders; SVG plots "
      "of tok/s against numeric parameters and of quality against bits per weight.");
  cmd->add_option("inputs", args->inputs,
                  "Results .jsonl files, google-benchmark .json files, command-run folders");
  cmd->add_option("-o,--out", args->out,
                  "Write the Markdown here (default: stdout); plots go to <dir>/<stem>_plots/");
  cmd->add_option("--plots", args->plots,
                  "Folder for the SVG plots (default: next to -o; none when writing to stdout)");
  cmd->add_flag("--no-plots", args->no_plots, "Tables only");
  cmd->add_flag("--check", args->check,
                "Write nothing; exit 1 when the -o file or its plots differ from a fresh render");
  cmd->add_flag("--help-metrics", args->help_metrics,
                "Print the metrics a results row carries (name, kind, unit, column title; the "
                "column order of every table) as Markdown and exit");
  cmd->callback([args, exit_code] {
    namespace fs = std::filesystem;
    *exit_code = kExitUsage;
    if (args->help_metrics) {
      const std::string h = metric_fields_help();
      std::fwrite(h.data(), 1, h.size(), stdout);
      *exit_code = kExitOk;
      return;
    }
    if (args->inputs.empty()) {
      std::fprintf(stderr,
                   "fish report: results files are required (e.g. fish report results/ci/"
                   "baseline.jsonl; see fish report --help)\n");
      return;
    }
    if (args->check && args->out.empty()) {
      std::fprintf(stderr, "fish report: --check needs -o FILE (the file to check)\n");
      return;
    }
    if (!args->out.empty()) {  // the Markdown must not replace a results file it renders
      if (Status st = check_output_path(args->out, args->inputs); !st.ok()) {
        std::fprintf(stderr, "fish report: %s\n", st.error().message.c_str());
        return;
      }
    }
    ReportOptions options;
    if (!args->no_plots) {
      if (!args->plots.empty()) {
        options.plots_dir = args->plots;
      } else if (!args->out.empty()) {
        const fs::path md(args->out);
        options.plots_dir = (md.parent_path() / (md.stem().string() + "_plots")).string();
      }
      if (!options.plots_dir.empty()) {
        // Links are relative to the markdown file's folder.
        const fs::path base = args->out.empty() ? fs::path(".") : fs::path(args->out).parent_path();
        options.plots_link =
            fs::absolute(options.plots_dir)
                .lexically_normal()
                .lexically_relative(fs::absolute(base.empty() ? "." : base).lexically_normal())
                .generic_string();
      }
    }
    auto files = render_report(args->inputs, options);
    if (!files.ok()) {
      std::fprintf(stderr, "fish report: %s\n", files.error().message.c_str());
      return;
    }
    for (const std::string& w : files->warnings)
      std::fprintf(stderr, "fish report: %s\n", w.c_str());
    if (args->out.empty()) {
      std::fwrite(files->markdown.data(), 1, files->markdown.size(), stdout);
      if (!options.plots_dir.empty()) {
        auto w = write_report(*files, "", options, false);  // the plots; the markdown went above
        if (!w.ok()) {
          std::fprintf(stderr, "fish report: %s\n", w.error().message.c_str());
          return;
        }
      }
      *exit_code = kExitOk;
      return;
    }
    auto stale = write_report(*files, args->out, options, args->check);
    if (!stale.ok()) {
      std::fprintf(stderr, "fish report: %s\n", stale.error().message.c_str());
      return;
    }
    if (args->check && !stale->empty()) {
      for (const std::string& s : *stale)
        std::fprintf(stderr, "fish report: stale: %s\n", s.c_str());
      std::fprintf(stderr,
                   "fish report: %s is stale against its results: re-run without --check (or "
                   "scripts/render_benchmarks.py) and commit the result\n",
                   args->out.c_str());
      return;
    }
    if (!args->check)
      std::fprintf(stderr, "fish report: wrote %s and %zu plot(s)%s%s\n", args->out.c_str(),
                   files->plots.size(), options.plots_dir.empty() ? "" : " in ",
                   options.plots_dir.c_str());
    *exit_code = kExitOk;
  });
}

}  // namespace fish
