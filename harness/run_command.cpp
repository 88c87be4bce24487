// `fish run`: see run_command.h.
#include "harness/run_command.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "base/env_knobs.h"
#include "base/path_checks.h"
#include "base/sha256.h"
#include "engine/config.h"
#include "engine/gpu_placement.h"
#include "engine/memory_budget.h"
#include "engine/model.h"
#include "engine/session.h"
#include "engine/synthetic_model.h"
#include "engine/tokenizer.h"
#include "harness/cell_guard.h"
#include "harness/cell_runner.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"
#include "harness/experiment.h"
#include "harness/gate.h"
#include "harness/gpu_cell.h"
#include "harness/measure.h"
#include "harness/measure_context.h"
#include "harness/peer_llama.h"
#include "harness/quality.h"
#include "harness/results_writer.h"
#include "harness/stats.h"
#include "kernels/thread_pool.h"

namespace fish {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool parse_int(std::string_view s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Writes `text` to `path` via a temporary file and a rename (readers never see half a file).
Status write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return make_error("{}: cannot write", tmp);
    f << text;
    if (!f.flush()) return make_error("{}: write failed", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return make_error("{}: cannot rename to {}: {}", tmp, path, ec.message());
  return Status::success();
}

}  // namespace

Result<Shard> resolve_shard(std::string_view flag,
                            const std::function<const char*(const char*)>& env) {
  Shard s;
  auto check = [](Shard x, std::string_view from) -> Result<Shard> {
    if (x.count < 1 || x.index < 0 || x.index >= x.count)
      return make_error("shard {}/{} (from {}): expected 0 <= i < N", x.index, x.count, from);
    return x;
  };
  if (!flag.empty()) {
    const size_t slash = flag.find('/');
    if (slash == std::string_view::npos || !parse_int(flag.substr(0, slash), s.index) ||
        !parse_int(flag.substr(slash + 1), s.count))
      return make_error("--shard \"{}\": expected i/N, e.g. 0/3", flag);
    return check(s, "--shard");
  }
  auto get_int = [&](const char* name, int& out) -> Status {
    const char* v = env(name);
    if (!v || !parse_int(v, out))
      return make_error("{}=\"{}\": expected an integer", name, v ? v : "");
    return Status::success();
  };
  if (env("SLURM_ARRAY_TASK_ID") && env("SLURM_ARRAY_TASK_COUNT")) {
    int id = 0, min = 0;
    FISH_TRY(get_int("SLURM_ARRAY_TASK_ID", id));
    FISH_TRY(get_int("SLURM_ARRAY_TASK_COUNT", s.count));
    if (env("SLURM_ARRAY_TASK_MIN")) FISH_TRY(get_int("SLURM_ARRAY_TASK_MIN", min));
    s.index = id - min;
    return check(s, "SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT");
  }
  if (env("JOB_COMPLETION_INDEX")) {
    FISH_TRY(get_int("JOB_COMPLETION_INDEX", s.index));
    if (!env("FISH_SHARD_COUNT"))
      return make_error(
          "JOB_COMPLETION_INDEX is set but FISH_SHARD_COUNT is not (hint: set it to the job's "
          "completions, or pass --shard i/N)");
    FISH_TRY(get_int("FISH_SHARD_COUNT", s.count));
    return check(s, "JOB_COMPLETION_INDEX of FISH_SHARD_COUNT");
  }
  return s;
}

namespace {

// Planning: the experiment, this shard's cells grouped by model load, their models and ids, the
// units and visits (measure.order), and the results file, checked to be no input.
Result<RunPlan> plan_run(const RunOptions& o, const Shard& shard) {
  RunPlan p;
  FISH_ASSIGN_OR_RETURN(p.e, load_experiment(o.experiment_path, o.max_cells));
  const Experiment& e = p.e;
  const std::vector<Cell> all = expand_cells(e);
  p.n_cells_all = int64_t(all.size());
  for (const Cell& c : all)
    if (c.index % shard.count == shard.index) p.cells.push_back(c);
  // A model load per (model, requant), so cells sharing one run together (cell indices and ids
  // are unchanged).
  std::stable_sort(p.cells.begin(), p.cells.end(), [](const Cell& a, const Cell& b) {
    return std::pair(a.model_index, a.config.requant) < std::pair(b.model_index, b.config.requant);
  });
  const std::string out_dir = o.out_dir.empty() ? e.output.dir : o.out_dir;
  p.results_path =
      (std::filesystem::path(out_dir) / results_file_name(e.name, shard.index, shard.count))
          .string();
  for (const Cell& c : p.cells)
    if (!p.models.count(c.model_index))
      p.models[c.model_index] = resolve_model(e.models[c.model_index], !o.dry_run);
  // The results file is appended to and the renderings replaced: none may be an input.
  std::vector<std::string> inputs = {o.experiment_path, e.workload.text, e.quality.text,
                                     e.quality.prompt_file};
  for (const auto& [i, m] : p.models) inputs.push_back(m.path);
  const std::string stem = p.results_path.substr(0, p.results_path.size() - 6);  // drop ".jsonl"
  for (const std::string& out : {p.results_path, stem + ".csv", stem + ".md"})
    FISH_TRY(check_output_path(out, inputs, ".tmp"));
  for (const Cell& c : p.cells) p.ids.push_back(cell_id(e, c, p.models[c.model_index].sha256));
  p.units = plan_units(p.cells);
  p.visits = plan_visits(p.units.size(), e.measure);
  return p;
}

std::string order_text(const MeasureSpec& m) {
  if (m.order == "shuffle") return fmt::format("order shuffle (seed {})", m.seed);
  if (m.order == "interleave") return fmt::format("order interleave ({} rounds)", m.repetitions);
  return "order fixed";
}

// --dry-run: the cells in visiting order, then what a real run would fail on (a dry run that exits
// 0 promises a run).
int print_dry_run(const RunPlan& p, const Shard& shard) {
  const Experiment& e = p.e;
  std::string paths_text;
  for (const std::string& path : e.measure.paths)
    paths_text += (paths_text.empty() ? "" : ",") + path;
  std::printf("experiment %s (%s): %lld cells%s, paths %s, %s -> %s\n", e.name.c_str(),
              e.file_path.c_str(), static_cast<long long>(p.n_cells_all),
              shard.count > 1 ? fmt::format(", shard {}/{}: {} of them", shard.index, shard.count,
                                            p.cells.size())
                                    .c_str()
                              : "",
              paths_text.c_str(), order_text(e.measure).c_str(), p.results_path.c_str());
  // The cells in the order the first round visits them (shuffle: the seed's permutation).
  std::vector<size_t> order;
  for (const Visit& v : p.visits)
    if (v.round == 0) order.insert(order.end(), p.units[v.unit].begin(), p.units[v.unit].end());
  for (size_t i : order) {
    const Cell& c = p.cells[i];
    const ModelEntry& m = p.models.at(c.model_index);
    std::printf("  #%-4lld %s  %s  %s%s\n", static_cast<long long>(c.index),
                m.pending ? "(id when written) " : p.ids[i].c_str(),
                e.models[c.model_index].c_str(), cell_axes_text(c).c_str(),
                m.pending         ? "  [synthetic model: written on the first run]"
                : m.error.empty() ? ""
                                  : "  [model missing: its rows will be errors]");
  }
  std::vector<std::string> problems;
  for (const auto& [i, m] : p.models)
    if (!m.pending && !m.error.empty()) problems.push_back(m.error);
  auto readable = [](const std::string& f) {
    std::error_code ec;
    return std::filesystem::is_regular_file(f, ec);
  };
  if (!e.workload.text.empty() && !readable(e.workload.text))
    problems.push_back("workload.text " + e.workload.text + ": not a readable file");
  const bool text_metrics =
      e.quality.wants("top1") || e.quality.wants("kl") || e.quality.wants("ppl");
  if (text_metrics && e.quality.source == "text" && !readable(e.quality.text))
    problems.push_back("quality.text " + e.quality.text + ": not a readable file");
  if ((e.quality.wants("greedy_exact") || (text_metrics && e.quality.source == "greedy")) &&
      !readable(e.quality.prompt_file))
    problems.push_back("quality.prompt_file " + e.quality.prompt_file + ": not a readable file");
  for (const std::string& pr : problems)
    std::fprintf(stderr, "fish run: dry run: %s\n", pr.c_str());
  return problems.empty() ? kExitOk : kExitUsage;
}

// The run's references, measured before any cell, into the context line: the stream bandwidth
// (its buffer is the run's one large allocation outside the cells, checked the same way) and,
// with a gpu path, the device copy bandwidth.
Result<RunReferences> measure_references(const Experiment& e, json& ctx) {
  SessionMemory stream_need;
  stream_need.buffers = uint64_t(e.measure.stream_MiB) << 20;
  FISH_ASSIGN_OR_RETURN(const HostMemory have, host_memory_available());
  FISH_TRY(check_host_memory(stream_need, have,
                             fmt::format("measure.stream_MiB {}", e.measure.stream_MiB),
                             "a smaller measure.stream_MiB"));
  RunReferences refs;
  const std::vector<double> stream =
      measure_stream_GBps(size_t(e.measure.stream_MiB) << 20, int(e.measure.stream_passes), 0);
  refs.stream_GBps = median(stream);
  ctx["stream_GBps"] = sample_summary_json(stream);
  // The gpu rows' reference: what a compute shader moves on the device, measured in this run.
  if (std::find(e.measure.paths.begin(), e.measure.paths.end(), "gpu") != e.measure.paths.end()) {
    const std::vector<double> gc = measure_gpu_copy_GBps(int(e.measure.stream_passes));
    if (!gc.empty()) {
      refs.gpu_copy_GBps = median(gc);
      ctx["gpu_copy_GBps"] = sample_summary_json(gc);
    }
  }
  return refs;
}

// Renderings of everything the results file holds (earlier runs of a resumed sweep included).
// False when one could not be written.
bool render_outputs(const RunPlan& p) {
  bool ok = true;
  const std::string stem = p.results_path.substr(0, p.results_path.size() - 6);  // drop ".jsonl"
  for (const std::string& fmt_name : p.e.output.formats) {
    auto text = fmt_name == "csv" ? render_csv(p.results_path) : render_markdown(p.results_path);
    const std::string out_path = stem + "." + fmt_name;
    if (!text.ok()) {
      std::fprintf(stderr, "fish run: rendering %s: %s\n", out_path.c_str(),
                   text.error().message.c_str());
      ok = false;
      continue;
    }
    if (Status st = write_file_atomic(out_path, text.value()); !st.ok()) {
      std::fprintf(stderr, "fish run: %s\n", st.error().message.c_str());
      ok = false;
      continue;
    }
    std::fprintf(stderr, "fish run: table: %s\n", out_path.c_str());
  }
  return ok;
}

}  // namespace

int run_experiment(const RunOptions& o) {
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "fish run: %s\n", msg.c_str());
    return int(kExitUsage);
  };
  auto shard_r = resolve_shard(o.shard, [](const char* n) { return std::getenv(n); });
  if (!shard_r.ok()) return fail(shard_r.error().message);
  const Shard shard = shard_r.value();
  auto plan_r = plan_run(o, shard);
  if (!plan_r.ok()) return fail(plan_r.error().message);
  const RunPlan& plan = plan_r.value();
  const Experiment& e = plan.e;
  for (const std::string& w : repetition_warnings(e.measure.repetitions))
    std::fprintf(stderr, "fish run: %s: warning: %s\n", e.file_path.c_str(), w.c_str());
  if (o.dry_run) return print_dry_run(plan, shard);

  auto writer_r = ResultsWriter::open(plan.results_path, o.resume);
  if (!writer_r.ok()) return fail(writer_r.error().message);
  ResultsWriter& writer = *writer_r.value();
  if (writer.truncated_bytes() > 0)
    std::fprintf(stderr, "fish run: %s: cut a partial last line (%zu bytes) left by a killed run\n",
                 plan.results_path.c_str(), writer.truncated_bytes());
  if (!writer.experiment_shas().empty() && writer.experiment_shas().back() != e.file_sha256)
    std::fprintf(stderr,
                 "fish run: note: %s was written by another version of %s (experiment_sha256 "
                 "differs); cells whose parameters changed get new ids and run, the old rows "
                 "stay in the file\n",
                 plan.results_path.c_str(), e.file_path.c_str());
  size_t n_pending = 0;
  for (size_t i = 0; i < plan.cells.size(); ++i)
    for (const std::string& p : e.measure.paths)
      n_pending += path_pending(writer, plan.ids[i], p, o.retry_errors);

  bool any_failed = false;
  if (n_pending == 0) {
    std::fprintf(stderr, "fish run: every cell of %s is finished in %s (nothing to run)\n",
                 e.name.c_str(), plan.results_path.c_str());
  } else {
    RunIdentity rid{new_run_id(), plan.n_cells_all, shard.index, shard.count};
    std::fprintf(stderr,
                 "fish run: %s: %zu cells x %zu paths, %zu to run%s, %s (%lld model loads); "
                 "measuring the stream bandwidth (%lld MiB)...\n",
                 e.name.c_str(), plan.cells.size(), e.measure.paths.size(), n_pending,
                 o.resume ? " (resume)" : "", order_text(e.measure).c_str(),
                 static_cast<long long>(plan.model_loads()),
                 static_cast<long long>(e.measure.stream_MiB));
    json ctx = run_context(e, rid);
    auto refs = measure_references(e, ctx);
    if (!refs.ok()) return fail(refs.error().message);
    if (Status st = writer.append(ctx); !st.ok()) return fail(st.error().message);
    const auto t_run = Clock::now();
    CellRunner runner(plan, o.retry_errors, writer, rid.run_id, refs.value());
    if (!runner.run()) return kExitUsage;
    any_failed = runner.n_error() > 0;
    std::fprintf(stderr, "fish run: %s: %zu ok, %zu error, %zu skipped in %s -> %s\n",
                 e.name.c_str(), runner.n_ok(), runner.n_error(), runner.n_skipped(),
                 duration_text(seconds_since(t_run)).c_str(), plan.results_path.c_str());
  }
  if (!render_outputs(plan)) any_failed = true;
  // Failed cells of earlier runs of this file count too: the sweep is not clean until they pass.
  size_t n_failed = 0;
  for (size_t i = 0; i < plan.cells.size(); ++i)
    for (const std::string& p : e.measure.paths)
      n_failed += writer.status(plan.ids[i], p) == "error";
  if (n_failed > 0) {
    std::fprintf(stderr,
                 "fish run: %zu cell path(s) of this %s have error rows (--resume --retry-errors "
                 "runs them again)\n",
                 n_failed, shard.count > 1 ? "shard" : "experiment");
    any_failed = true;
  }
  return any_failed ? kExitCellsFailed : kExitOk;
}

void add_run_command(CLI::App& app, int* exit_code) {
  struct Args {
    RunOptions o;
    bool help_fields = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run an experiment file: every cell (model x swept Config) on every path, one results row "
      "each (JSONL, fsync'd per row), then CSV/Markdown tables. A failing cell writes an error "
      "row and the sweep goes on (exit code 2).");
  cmd->add_option("experiment", a->o.experiment_path, "Experiment JSON file");
  cmd->add_flag("--dry-run", a->o.dry_run,
                "List the cells (index, cell id, model, axes); run nothing");
  cmd->add_flag(
      "--resume", a->o.resume,
      "Continue the results file: skip (cell, path) pairs already finished (ok or error)");
  cmd->add_flag("--retry-errors", a->o.retry_errors,
                "With --resume: run (cell, path) pairs whose latest row is an error again");
  cmd->add_option("--out", a->o.out_dir, "Results directory (default: the file's output.dir)");
  cmd->add_option("--shard", a->o.shard,
                  "Run cells with index % N == i (default: SLURM_ARRAY_TASK_ID/"
                  "SLURM_ARRAY_TASK_COUNT, or JOB_COMPLETION_INDEX/FISH_SHARD_COUNT, else 0/1)");
  cmd->add_option("--max-cells", a->o.max_cells,
                  "Refuse a sweep whose cross product has more cells than this (counted before "
                  "anything is expanded)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40))
      ->capture_default_str();
  cmd->add_flag("--help-fields", a->help_fields,
                "Print every key of the experiment file format (Markdown) and exit");
  cmd->callback([a, exit_code] {
    if (a->help_fields) {
      const std::string h = experiment_format_help();
      std::fwrite(h.data(), 1, h.size(), stdout);
      *exit_code = kExitOk;
      return;
    }
    if (a->o.experiment_path.empty()) {
      std::fprintf(stderr, "fish run: an experiment file is required (see fish run --help)\n");
      *exit_code = kExitUsage;
      return;
    }
    *exit_code = run_experiment(a->o);
  });
}

}  // namespace fish
