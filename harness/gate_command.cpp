// `fish gate BASELINE NEW [--rules FILE]`
#include <cstdio>

#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "harness/gate.h"

namespace fish {

void add_gate_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string base, head, rules = "experiments/gate_rules.json";
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "gate",
      "Regression gate: join NEW's rows with BASELINE's; a speed metric fails only when it is "
      "significantly (Mann-Whitney) AND practically (per-metric %) worse, a quality metric when it "
      "is worse by more than its absolute tolerance. Prints every check; exit code 3 on a "
      "regression.");
  cmd->add_option("baseline", args->base, "Baseline results .jsonl (comma-separate several)")
      ->required();
  cmd->add_option("new", args->head, "New results .jsonl (comma-separate several)")->required();
  cmd->add_option("--rules", args->rules, "Rules JSON (thresholds per metric, see README)")
      ->capture_default_str();
  cmd->callback([args, exit_code] {
    *exit_code = kExitUsage;
    auto rules = load_gate_rules(args->rules);
    if (!rules.ok()) {
      std::fprintf(stderr, "fish gate: %s\n", rules.error().message.c_str());
      return;
    }
    auto base = read_results_files(split_paths(args->base));
    if (!base.ok()) {
      std::fprintf(stderr, "fish gate: BASELINE: %s\n", base.error().message.c_str());
      return;
    }
    auto head = read_results_files(split_paths(args->head));
    if (!head.ok()) {
      std::fprintf(stderr, "fish gate: NEW: %s\n", head.error().message.c_str());
      return;
    }
    for (const ResultSet* s : {&base.value(), &head.value()})
      for (const std::string& w : s->warnings)
        std::fprintf(stderr, "fish %s: %s\n", "gate", w.c_str());
    const RowJoin join = join_rows(*base, *head);
    if (join.both.empty()) {
      std::fprintf(stderr,
                   "fish gate: no row of NEW matches a BASELINE row (same model, config, workload "
                   "and path): nothing to gate; are these runs of the same experiment?\n");
      return;
    }
    const GateResult result = run_gate(join, *rules);
    const std::string md = render_gate(result, *rules);
    std::fwrite(md.data(), 1, md.size(), stdout);
    *exit_code = result.passed() ? kExitOk : kExitGateFailed;
  });
}

}  // namespace fish
