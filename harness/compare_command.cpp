// `fish compare BASE HEAD`
#include <cstdio>

#include "harness/commands.h"
#include "harness/compare.h"
#include "harness/exit_codes.h"

namespace fish {

void add_compare_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string base, head, base_where, head_where, ignore;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Compare two sets of results: rows joined on model, config, workload and path; per speed "
      "metric the ratio of medians HEAD/BASE with its 95% CI (the ratios a Mann-Whitney test does "
      "not reject; [min, max] of the pairwise ratios where the sample sizes allow no CI) and the "
      "Mann-Whitney U p-value of the raw samples; per quality/scalar metric both values and the "
      "difference.");
  cmd->add_option("base", args->base, "Results .jsonl of the baseline (comma-separate several)")
      ->required();
  cmd->add_option("head", args->head, "Results .jsonl to compare with it (comma-separate several)")
      ->required();
  cmd->add_option("--base-where", args->base_where,
                  "Only BASE rows whose parameters read KEY=VALUE[,KEY=VALUE...] (e.g. "
                  "engine=llama.cpp,llama_bench=cuda)");
  cmd->add_option("--head-where", args->head_where, "Only HEAD rows whose parameters match");
  cmd->add_option("--ignore", args->ignore,
                  "Parameters the join ignores, comma-separated (FISH vs a peer: "
                  "engine,llama_bench; docs/peers.md)");
  cmd->add_flag("--json", args->json,
                "Print the comparison as JSON (schema fish-compare/1, docs/results.md) instead of "
                "Markdown; the exit code is the same");
  cmd->callback([args, exit_code] {
    *exit_code = kExitUsage;
    JoinOptions jo;
    for (const auto& [text, dst] : {std::pair{&args->base_where, &jo.base_where},
                                    std::pair{&args->head_where, &jo.head_where}}) {
      auto w = parse_where(*text);
      if (!w.ok()) {
        std::fprintf(stderr, "fish compare: %s\n", w.error().message.c_str());
        return;
      }
      *dst = w.value();
    }
    for (const std::string& k : split_paths(args->ignore)) jo.ignore.insert(k);
    auto base = read_results_files(split_paths(args->base));
    if (!base.ok()) {
      std::fprintf(stderr, "fish compare: BASE: %s\n", base.error().message.c_str());
      return;
    }
    auto head = read_results_files(split_paths(args->head));
    if (!head.ok()) {
      std::fprintf(stderr, "fish compare: HEAD: %s\n", head.error().message.c_str());
      return;
    }
    for (const ResultSet* s : {&base.value(), &head.value()})
      for (const std::string& w : s->warnings)
        std::fprintf(stderr, "fish %s: %s\n", "compare", w.c_str());
    auto joined = join_rows(*base, *head, jo);
    if (!joined.ok()) {
      std::fprintf(stderr, "fish compare: %s\n", joined.error().message.c_str());
      return;
    }
    const RowJoin& join = joined.value();
    const std::string md =
        args->json ? comparison_json(join).dump(2) + "\n" : render_comparison(join);
    std::fwrite(md.data(), 1, md.size(), stdout);
    std::fprintf(stderr, "fish compare: %zu rows joined, %zu only in BASE, %zu only in HEAD\n",
                 join.both.size(), join.only_base.size(), join.only_head.size());
    // Nothing joined is not a comparison: most often the two runs differ in a field or a model
    // file name, which the rows only in BASE / HEAD above show.
    if (join.both.empty()) {
      std::fprintf(stderr,
                   "fish compare: no row of HEAD matches a row of BASE (model, config, "
                   "workload and path must all be equal)\n");
      return;
    }
    *exit_code = kExitOk;
  });
}

}  // namespace fish
