// `fish inspect MODEL.gguf [--json]`
#include <cstdio>

#include "engine/gguf.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "harness/inspect.h"

namespace fish {

void add_inspect_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string model;
    bool json = false;
    size_t max_array_items = 16;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Show a GGUF file: architecture and hyper-parameters, tokenizer, tensor table (name, type, "
      "shape, bytes, offset), totals per type and bits per weight.");
  cmd->add_option("model,-m,--model", args->model, "GGUF file (positional or -m, as elsewhere)")->required();
  cmd->add_flag("--json", args->json, "Machine-readable JSON instead of text");
  cmd->add_option("--max-array-items", args->max_array_items,
                  "JSON: arrays longer than this are summarised as {type, count, head}")
      ->capture_default_str();
  cmd->callback([args, exit_code] {
    auto file = GgufFile::open(args->model);
    if (!file.ok()) {
      std::fprintf(stderr, "fish inspect: %s\n", file.error().message.c_str());
      *exit_code = kExitUsage;
      return;
    }
    const std::string out = args->json
                                ? json_text(inspect_json(file.value(), args->max_array_items), 1)
                                : inspect_text(file.value());
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (args->json) std::fputc('\n', stdout);
    *exit_code = kExitOk;
  });
}

}  // namespace fish
