// `fish gate BASELINE NEW [--rules FILE]`
#include <cstdio>
#include <optional>

#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "harness/gate.h"

namespace fish {

void add_gate_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string base, head, rules;  // rules empty: default_gate_rules
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "gate",
      "Regression gate: join NEW's rows with BASELINE's; a speed metric fails when it is "
      "significantly (Mann-Whitney) AND practically (per-metric %) worse, or when its sample "
      "sizes cannot reach significance at all (underpowered), a quality metric when it is worse "
      "by more than its absolute tolerance. Without --rules every speed metric of the baseline's "
      "joined rows is checked (10% threshold; one NEW lost fails as missing). Prints every check; "
      "exit code 3 when the gate fails.");
  cmd->add_option("baseline", args->base, "Baseline results .jsonl (comma-separate several)")
      ->required();
  cmd->add_option("new", args->head, "New results .jsonl (comma-separate several)")->required();
  cmd->add_option("--rules", args->rules,
                  "Rules JSON (thresholds per metric, docs/measurement.md; "
                  "experiments/gate_rules.json is the CI gate's); default: every speed metric of "
                  "the baseline, higher is better, 10%");
  cmd->add_flag("--json", args->json,
                "Print the checks as JSON (schema fish-gate/1, docs/results.md) instead of the "
                "table; the exit code is the same");
  cmd->callback([args, exit_code] {
    *exit_code = kExitUsage;
    std::optional<Result<GateRules>> rules;
    if (!args->rules.empty()) {
      rules = load_gate_rules(args->rules);
      if (!rules->ok()) {
        std::fprintf(stderr, "fish gate: %s\n", rules->error().message.c_str());
        return;
      }
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
    auto joined = join_rows(*base, *head);
    if (!joined.ok()) {
      std::fprintf(stderr, "fish gate: %s\n", joined.error().message.c_str());
      return;
    }
    const RowJoin& join = joined.value();
    if (join.both.empty()) {
      std::fprintf(stderr,
                   "fish gate: no row of NEW matches a BASELINE row (same model, config, workload "
                   "and path): nothing to gate; are these runs of the same experiment?\n");
      return;
    }
    const GateRules used = rules ? rules->value() : default_gate_rules(join);
    if (used.rules.empty()) {
      std::fprintf(stderr,
                   "fish gate: the baseline's joined rows have no speed metric: nothing to gate "
                   "(pass --rules for quality metrics)\n");
      return;
    }
    const GateResult result = run_gate(join, used);
    const std::string md =
        args->json ? gate_json(result, used).dump(2) + "\n" : render_gate(result, used);
    std::fwrite(md.data(), 1, md.size(), stdout);
    *exit_code = result.passed() ? kExitOk : kExitGateFailed;
  });
}

}  // namespace fish
