// `fish schema experiment|result-row`: the JSON Schema of the experiment file or of a results
// row (harness/json_schema.h), generated from the field tables; docs/schema/ holds copies.
#include <cstdio>
#include <string>

#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "harness/json_schema.h"

namespace fish {

void add_schema_command(CLI::App& app, int* exit_code) {
  auto which = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "schema",
      "Print a JSON Schema (draft 2020-12) generated from the field tables: experiment (the "
      "experiment file) or result-row (a row of a results file). Example: fish schema experiment "
      "> experiment.schema.json");
  cmd->add_option("which", *which, "experiment or result-row")
      ->required()
      ->check(CLI::IsMember({"experiment", "result-row"}));
  cmd->callback([which, exit_code] {
    const nlohmann::json s =
        *which == "experiment" ? experiment_json_schema() : result_row_json_schema();
    const std::string text = s.dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    *exit_code = kExitOk;
  });
}

}  // namespace fish
