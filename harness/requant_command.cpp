// `fish requant IN.gguf OUT.gguf --mode N | --to TYPE [--threads T]`: writes IN with its matmul
// weights re-quantised as mode N says, or every one of them into TYPE (e.g. a q8_0 reference copy
// for fish perplexity; engine/requant.h), every other tensor and all metadata copied, plus
// fish.requant.mode (fish.requant.to). Prints one line per converted or skipped tensor (relative
// RMS, time), a summary per type pair (min/mean/max relative RMS, bytes) and ns/weight at the
// thread count used.
#include <array>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "base/env_knobs.h"
#include "base/path_checks.h"
#include "engine/config.h"
#include "engine/gguf.h"
#include "engine/requant.h"
#include "harness/cli_fields.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"

namespace fish {

void add_requant_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string in, out;
    int mode = 1;
    std::string to;  // --to TYPE instead of a mode
    Config cfg;      // n_threads
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "requant",
      "Re-quantise a GGUF's matmul weights into a new GGUF (mode 1: every quantised weight -> "
      "fq3; 2: q6_k -> q4_k; 3: q4_k -> fq3 and q6_k -> q4_k) and report the error per tensor "
      "(relative RMS), per type pair (min/mean/max) and the time in ns per weight. --to TYPE "
      "converts every matmul weight into TYPE instead (e.g. a q8_0 reference for fish "
      "perplexity).\n\nExample:\n  fish requant models/gemma-3-270m-q4_k_m.gguf gemma-q8_0.gguf "
      "--to q8_0");
  cmd->add_option("IN", a->in, "Input GGUF")->required();
  cmd->add_option("OUT", a->out, "Output GGUF (written via OUT.tmp, then renamed)")->required();
  CLI::Option* mode = cmd->add_option("--mode", a->mode, "Re-quantisation mode 1..3")
                          ->check(CLI::Range(1, 3))
                          ->capture_default_str();
  cmd->add_option("--to", a->to,
                  "Every matmul weight (quantised or float) into this type: q8_0, q4_k, q6_k, "
                  "fq3, f16, ...")
      ->excludes(mode);
  add_field_option(cmd, "--threads", &a->cfg, config_fields(), "n_threads",
                   "Threads (0: FISH_THREADS or all hardware threads)");
  cmd->callback([a, exit_code] {
    *exit_code = kExitUsage;
    auto fail = [](const Error& e) {
      std::fprintf(stderr, "fish requant: %s\n", e.message.c_str());
    };
    if (Status st = check_env_knobs(/*with_gpu=*/false); !st.ok()) return fail(st.error());
    // Before anything is read or written: OUT (or the OUT.tmp it goes through) must not be IN.
    if (Status st = check_output_path(a->out, std::array{a->in}, ".tmp"); !st.ok())
      return fail(st.error());
    auto file_r = GgufFile::open(a->in);
    if (!file_r.ok()) return fail(file_r.error());
    const GgufFile& f = file_r.value();
    ThreadPool pool(int(a->cfg.n_threads));
    Result<RequantResult> rq_r = make_error("unreachable");
    if (!a->to.empty()) {
      const std::optional<GgmlType> to = parse_type_name(a->to);
      if (!to) return fail(make_error("--to {}: not a tensor type FISH knows", a->to));
      rq_r = requantize_gguf_to(f, *to, pool);
    } else {
      rq_r = requantize_gguf(f, a->mode, pool);
    }
    if (!rq_r.ok()) return fail(rq_r.error());
    const RequantResult& rq = rq_r.value();

    if (Status st = write_requantized_gguf(f, rq, a->out); !st.ok()) return fail(st.error());

    for (const RequantTensor& t : rq.tensors) {
      if (!t.skipped.empty()) {
        std::printf("%-28s %-5s kept: %s\n", t.name.c_str(), std::string(type_name(t.from)).c_str(),
                    t.skipped.c_str());
        continue;
      }
      std::printf("%-28s %-5s -> %-5s rel_rms %6.2f%%  %6.1f ms\n", t.name.c_str(),
                  std::string(type_name(t.from)).c_str(), std::string(type_name(t.to)).c_str(),
                  100.0 * t.relative_rms, 1e3 * t.seconds);
    }
    for (const RequantPairSummary& p : rq.summary()) {
      std::printf(
          "%3d x %-5s -> %-5s rel_rms min %.2f%% mean %.2f%% max %.2f%%  %.1f MB (from %.1f)\n",
          p.count, std::string(type_name(p.from)).c_str(), std::string(type_name(p.to)).c_str(),
          100.0 * p.rms_min, 100.0 * p.rms_mean, 100.0 * p.rms_max, double(p.bytes_to) / 1e6,
          double(p.bytes_from) / 1e6);
    }
    const std::string what = a->to.empty() ? fmt::format("mode {}", a->mode) : "to " + a->to;
    std::printf("requant %s: %lld weights in %.3f s = %.2f ns/weight at %d threads -> %s\n",
                what.c_str(), static_cast<long long>(rq.n_weights), rq.seconds, rq.ns_per_weight(),
                rq.n_threads, a->out.c_str());
    *exit_code = kExitOk;
  });
}

}  // namespace fish
