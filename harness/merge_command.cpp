// `fish merge OUT IN... [--force]`
#include <cstdio>

#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "harness/merge.h"

namespace fish {

void add_merge_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string out;
    std::vector<std::string> inputs;
    bool force = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "merge",
      "Merge results files (e.g. the shards of a Slurm array) into OUT: contexts kept, rows unique "
      "by (cell_id, path) with the later input winning, sorted by cell index; a cell measured "
      "under different provenance (commit, machine, FISH_* knobs) is refused. Lists the cells "
      "of each experiment no row covers (exit code 2 when any is missing).");
  cmd->add_option("out", args->out, "Output JSONL (written atomically; may be an input)")
      ->required();
  cmd->add_option("inputs", args->inputs, "Results JSONL files, earliest first")->required();
  cmd->add_flag("--force", args->force,
                "Merge files of different experiments (experiment_sha256) anyway");
  cmd->callback([args, exit_code] {
    auto r = merge_results(args->inputs, args->out, args->force);
    if (!r.ok()) {
      std::fprintf(stderr, "fish merge: %s\n", r.error().message.c_str());
      *exit_code = kExitUsage;
      return;
    }
    const MergeSummary& s = r.value();
    for (const std::string& w : s.warnings) std::fprintf(stderr, "fish merge: %s\n", w.c_str());
    std::fprintf(stderr, "fish merge: %zu rows from %zu files -> %zu rows in %s (%zu replaced)\n",
                 s.n_rows_read, s.n_inputs, s.n_rows_written, args->out.c_str(), s.n_replaced);
    bool missing = false;
    for (const auto& [label, e] : s.experiments) {
      if (e.missing.empty()) {
        std::fprintf(stderr, "fish merge: %s: all %lld cells present\n", label.c_str(),
                     static_cast<long long>(e.n_cells));
        continue;
      }
      missing = true;
      std::string list;
      for (int64_t i : e.missing) list += fmt::format("{}{}", list.empty() ? "" : ",", i);
      std::fprintf(stderr, "fish merge: %s: %zu of %lld cells missing: %s\n", label.c_str(),
                   e.missing.size(), static_cast<long long>(e.n_cells), list.c_str());
    }
    *exit_code = missing ? kExitCellsFailed : kExitOk;
  });
}

}  // namespace fish
