// `fish make-model --shape NAME --type TYPE --seed N --out FILE`
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "engine/synthetic_model.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"

namespace fish {

void add_make_model_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string shape;
    std::string type = "q4_k_m";
    uint64_t seed = 1;
    std::string out;
    int threads = 0;
    bool list = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "make-model",
      "Write a synthetic random-weight GGUF with a real architecture's shape, metadata, tensor "
      "names and llama.cpp's per-tensor type mix. For throughput experiments on any machine; "
      "quality needs the real models.");
  cmd->add_option("--shape", args->shape, "Model shape: " + model_shape_names());
  std::string types;
  for (std::string_view t : file_type_names())
    types += fmt::format("{}{}", types.empty() ? "" : ", ", t);
  cmd->add_option("--type", args->type, "File type: " + types)->capture_default_str();
  cmd->add_option("--seed", args->seed, "Random seed (same seed -> identical file)")
      ->capture_default_str();
  cmd->add_option("--out", args->out, "Output GGUF path (written via PATH.tmp, then renamed)");
  cmd->add_option("--threads", args->threads, "Quantisation threads (0: all)")
      ->capture_default_str();
  cmd->add_flag("--list", args->list, "List the shapes and exit");
  cmd->callback([args, exit_code] {
    if (args->list) {
      for (const ModelShape& s : model_shapes())
        std::printf(
            "%-14s %-7s %2d layers, n_embd %5d, n_ff %5d, heads %2d/%d, vocab %6d%s  %.*s\n",
            std::string(s.name).c_str(), std::string(s.architecture).c_str(), s.n_layer, s.n_embd,
            s.n_ff, s.n_head, s.n_head_kv, s.n_vocab, s.tied_output ? ", tied" : "",
            int(s.description.size()), s.description.data());
      *exit_code = kExitOk;
      return;
    }
    *exit_code = kExitUsage;
    if (args->shape.empty() || args->out.empty()) {
      std::fprintf(stderr, "fish make-model: --shape and --out are required (see --help)\n");
      return;
    }
    const ModelShape* shape = find_model_shape(args->shape);
    if (!shape) {
      std::fprintf(stderr, "fish make-model: unknown shape '%s' (expected one of: %s)\n",
                   args->shape.c_str(), model_shape_names().c_str());
      return;
    }
    auto ftype = parse_file_type(args->type);
    if (!ftype.ok()) {
      std::fprintf(stderr, "fish %s\n", ftype.error().message.c_str());
      return;
    }
    SyntheticModelOptions opt;
    opt.seed = args->seed;
    opt.n_threads = args->threads;
    const auto t0 = std::chrono::steady_clock::now();
    Status st = write_synthetic_model(*shape, ftype.value(), opt, args->out);
    if (!st.ok()) {
      std::fprintf(stderr, "fish make-model: %s\n", st.error().message.c_str());
      return;
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(args->out, ec);
    std::fprintf(stderr, "fish make-model: wrote %s (%s %s, %.2f GB) in %.1f s\n",
                 args->out.c_str(), args->shape.c_str(), args->type.c_str(),
                 ec ? 0.0 : double(bytes) / 1e9, secs);
    *exit_code = kExitOk;
  });
}

}  // namespace fish
