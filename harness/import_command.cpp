// `fish import llama-bench FILE [--out DIR]`: llama-bench results (-o jsonl or -o json) from
// anywhere as FISH result rows (harness/peer_llama.h import_llama_bench), for fish report / compare.
#include <cstdio>
#include <memory>
#include <string>

#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "harness/peer_llama.h"
#include "harness/results_reader.h"

namespace fish {

void add_import_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string file, out = "build/runs/import";
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "import", "Turn another tool's benchmark output into FISH results rows (fish report / compare "
                "read them beside FISH's own)");
  cmd->require_subcommand(1);
  CLI::App* lb = cmd->add_subcommand(
      "llama-bench",
      "llama-bench output (-o jsonl, or the -o json array) -> DIR/<file stem>.jsonl: one row per "
      "test (engine llama.cpp, its threads, batch, GPU layers, depth), a context line with "
      "llama.cpp's build_commit, cpu_info and gpu_info");
  lb->add_option("file", a->file, "llama-bench output file")->required();
  lb->add_option("--out", a->out, "Results directory")->capture_default_str();
  lb->callback([a, exit_code] {
    auto out = import_llama_bench(a->file, a->out);
    if (!out.ok()) {
      std::fprintf(stderr, "fish import llama-bench: %s\n", out.error().message.c_str());
      *exit_code = kExitUsage;
      return;
    }
    // What was written must read back as results (the same checks report / compare apply).
    ResultSet set;
    if (Status st = read_results_file(out.value(), &set); !st.ok()) {
      std::fprintf(stderr, "fish import llama-bench: %s\n", st.error().message.c_str());
      *exit_code = kExitUsage;
      return;
    }
    size_t n_err = 0;
    for (const ResultRow& r : set.rows) n_err += r.status != "ok";
    std::fprintf(stderr, "fish import llama-bench: %zu rows (%zu errors) -> %s\n", set.rows.size(),
                 n_err, out.value().c_str());
    *exit_code = n_err > 0 ? int(kExitCellsFailed) : int(kExitOk);
  });
}

}  // namespace fish
