// fish: the FISH command-line entry point. Subcommands live in harness/*_command.cpp.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/build_info.h"
#include "harness/cell_guard.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"

int main(int argc, char** argv) {
  CLI::App app{"FISH " FISH_VERSION
               ": LLM quantisation and GPU-offload experiments on GGUF models.\n"
               "Exit codes: 0 ok, 1 usage or input error, 2 some sweep cells failed, "
               "3 regression gate failed.",
               "fish"};
  app.require_subcommand(1);
  // The binary's provenance: version, commit (dirty + diff digest), build flags, compiler.
  std::string version = fish::build_info_text();
  while (!version.empty() && version.back() == '\n') version.pop_back();
  app.set_version_flag("--version", version);
  int exit_code = fish::kExitOk;
  fish::add_inspect_command(app, &exit_code);
  fish::add_make_model_command(app, &exit_code);
  fish::add_generate_command(app, &exit_code);
  fish::add_requant_command(app, &exit_code);
  fish::add_requant_quality_command(app, &exit_code);
  fish::add_perplexity_command(app, &exit_code);
  fish::add_bench_command(app, &exit_code);
  fish::add_run_command(app, &exit_code);
  fish::add_merge_command(app, &exit_code);
  fish::add_report_command(app, &exit_code);
  fish::add_compare_command(app, &exit_code);
  fish::add_gate_command(app, &exit_code);
  fish::add_quantize_w4_command(app, &exit_code);
  fish::add_gpu_command(app, &exit_code);
  fish::add_env_command(app, &exit_code);
  fish::add_schema_command(app, &exit_code);
  fish::add_import_command(app, &exit_code);
  try {
    std::vector<std::string> args(argv, argv + argc);
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || (args.size() > 1 && sub->get_name() == args[1]);
    }
    if (args.size() > 1 && !args[1].empty() && args[1][0] != '-' && !known) {
      std::fprintf(stderr, "fish: unknown command '%s' (commands: %s; fish --help)\n",
                   args[1].c_str(), names.c_str());
      return fish::kExitUsage;
    }
    fish::llama_bench_spellings(args);
    args.erase(args.begin());                // CLI11 takes the arguments without the program
    std::reverse(args.begin(), args.end());  // name, last first
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return fish::kExitUsage;
  } catch (...) {
    // The command boundary: whatever a command throws (std::bad_alloc past the memory
    // estimate, ...) is a message and exit 1, never std::terminate's abort.
    const auto subs = app.get_subcommands();
    std::fprintf(stderr, "fish %s: %s\n", subs.empty() ? "" : subs.front()->get_name().c_str(),
                 fish::describe_current_exception().c_str());
    return fish::kExitUsage;
  }
  return exit_code;
}
