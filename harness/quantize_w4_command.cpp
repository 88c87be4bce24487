// `fish quantize-w4 IN.gguf OUT.gguf [--group-size 32|64|128] [--zero-point sym|asym|fp]`
#include <array>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "base/env_knobs.h"
#include "base/path_checks.h"
#include "engine/config.h"
#include "engine/quantize_w4.h"
#include "harness/cli_fields.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"

namespace fish {

void add_quantize_w4_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string in, out;
    Config cfg;  // group_size, zero_point, quantize_head, quantize_embedding, n_threads
  };
  auto args = std::make_shared<Args>();
  // Defaults are the Config table's (group 64, asym), as fish run's w4a8 / w4a16 cells use.
  CLI::App* cmd = app.add_subcommand(
      "quantize-w4",
      "Rewrite a GGUF with its linear layers (and the output head) as FISH packed int4 "
      "(tensor types fish_i4_g32/64/128, fish_i4fp_g32/64/128 for --zero-point fp), for the CPU "
      "W4A8 / W4A16 paths.");
  cmd->add_option("in", args->in, "Input GGUF")->required();
  cmd->add_option("out", args->out, "Output GGUF (written via OUT.tmp, then renamed)")->required();
  static constexpr FieldFlag kFlags[] = {
      {"--group-size", "group_size", "Weights per int4 group: 32, 64 or 128"},
      {"--zero-point", "zero_point",
       "sym (constant zero point 8), asym (per-group integer zero point) or fp (per-group f16 "
       "offset: q4_0/q4_1/q4_k tensors repack exactly at --group-size 32)"},
      {"--quantize-head", "quantize_head",
       "Quantise the output head (a tied embedding is untied); false keeps it as is"},
      {"--quantize-embedding", "quantize_embedding", "Also store token_embd.weight as int4"},
      {"--threads", "n_threads", "Threads (0: all)"},
  };
  add_field_options(cmd, &args->cfg, config_fields(), kFlags);
  cmd->callback([args, exit_code] {
    *exit_code = kExitUsage;
    auto fail = [](const Error& e) {
      std::fprintf(stderr, "fish quantize-w4: %s\n", e.message.c_str());
    };
    if (Status st = check_env_knobs(/*with_gpu=*/false); !st.ok()) return fail(st.error());
    // Before anything is read or written: OUT (or the OUT.tmp it goes through) must not be IN.
    if (Status st = check_output_path(args->out, std::array{args->in}, ".tmp"); !st.ok())
      return fail(st.error());
    QuantizeW4Options opt;
    opt.fmt.group_size = int(args->cfg.group_size);
    opt.fmt.zero_point = *parse_int4_zero_point(args->cfg.zero_point);  // checked by the row
    opt.quantize_head = args->cfg.quantize_head;
    opt.quantize_embedding = args->cfg.quantize_embedding;
    opt.n_threads = int(args->cfg.n_threads);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = quantize_w4_gguf(args->in, args->out, opt);
    if (!r.ok()) {
      std::fprintf(stderr, "fish %s\n", r.error().message.c_str());
      return;
    }
    const QuantizeW4Summary& s = r.value();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr,
                 "fish quantize-w4: wrote %s: %lld tensors as %s (%lld repacked exactly; %.1f -> "
                 "%.1f MB%s), %lld copied, %.1f s\n",
                 args->out.c_str(), (long long)s.tensors_packed,
                 std::string(type_name(fish_i4_type(opt.fmt))).c_str(), (long long)s.tensors_exact,
                 double(s.bytes_packed_in) / 1e6, double(s.bytes_packed_out) / 1e6,
                 s.untied_head ? ", head untied" : "", (long long)s.tensors_copied, secs);
    for (const auto& [type, e] : s.error_by_type) {
      std::fprintf(stderr, "  from %s: %lld tensors, rel RMS %.3g%s\n",
                   std::string(type_name(type)).c_str(), (long long)e.tensors, e.rel_rms(),
                   int4_repack_is_exact(type, opt.fmt) ? " (exact repack)" : " (fitted)");
    }
    *exit_code = kExitOk;
  });
}

}  // namespace fish
