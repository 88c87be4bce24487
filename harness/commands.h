// The `fish` subcommands. Each add_*_command registers its CLI11 subcommand on `app`; when the
// subcommand runs, its callback stores the process exit code in `*exit_code`.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace fish {

void add_inspect_command(CLI::App& app, int* exit_code);
void add_make_model_command(CLI::App& app, int* exit_code);
void add_generate_command(CLI::App& app, int* exit_code);
void add_requant_command(CLI::App& app, int* exit_code);
void add_requant_quality_command(CLI::App& app, int* exit_code);
// Run side (run_command.h): execute an experiment file into a results file.
void add_run_command(CLI::App& app, int* exit_code);
// Results side (results_reader.h): merge shards, render reports, compare runs, gate regressions.
void add_merge_command(CLI::App& app, int* exit_code);
void add_report_command(CLI::App& app, int* exit_code);
void add_compare_command(CLI::App& app, int* exit_code);
void add_gate_command(CLI::App& app, int* exit_code);
void add_quantize_w4_command(CLI::App& app, int* exit_code);
void add_gpu_command(CLI::App& app, int* exit_code);
void add_env_command(CLI::App& app, int* exit_code);  // FISH_* knobs: list and check
// JSON Schemas of the experiment file and a results row (harness/json_schema.h).
void add_schema_command(CLI::App& app, int* exit_code);
// llama-bench's idiom over fish run: flags -> experiment files -> rows -> one table on stdout.
void add_bench_command(CLI::App& app, int* exit_code);
// llama-bench's multi-letter short flags (-pg, -ngl), which CLI11 cannot name, rewritten to
// their long spellings in `args` (argv as strings) when the subcommand is bench.
void llama_bench_spellings(std::vector<std::string>& args);
// llama-perplexity's chunked perplexity and KL statistics against a reference (perplexity.h).
void add_perplexity_command(CLI::App& app, int* exit_code);
// Peer results (harness/peer_llama.h): llama-bench output -> results rows.
void add_import_command(CLI::App& app, int* exit_code);

}  // namespace fish
