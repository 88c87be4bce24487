// The `fish` subcommands. Each add_*_command registers its CLI11 subcommand on `app`; when the
// subcommand runs, its callback stores the process exit code in `*exit_code`.
#pragma once

#include <CLI/CLI.hpp>

namespace fish {

void add_inspect_command(CLI::App& app, int* exit_code);
void add_make_model_command(CLI::App& app, int* exit_code);
void add_generate_command(CLI::App& app, int* exit_code);
void add_gpu_command(CLI::App& app, int* exit_code);

}  // namespace fish
