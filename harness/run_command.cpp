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
#include "kernels/thread_pool.h"
#include "harness/cell_guard.h"
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

std::string duration_text(double s) {
  if (s < 90) return fmt::format("{:.0f} s", s);
  if (s < 5400) return fmt::format("{:.0f} min {:02.0f} s", std::floor(s / 60), std::fmod(s, 60));
  return fmt::format("{:.1f} h", s / 3600);
}

// A model as the run sees it: where it is, its sha256, or why it cannot be used.
struct ModelEntry {
  std::string path;  // resolved
  std::string sha256;
  std::string error;
  bool pending = false;  // a synthetic model not written yet (dry run)
};

std::string synthetic_dir() {
  if (const char* d = std::getenv("FISH_SYNTHETIC_DIR"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/fish/synthetic";
}

// create = false (dry run): a synthetic model that is not written yet stays pending.
ModelEntry resolve_model(const std::string& given, bool create) {
  ModelEntry m;
  std::error_code ec;
  auto syn = parse_synthetic_model(given);  // validated by parse_experiment
  if (syn.ok() && syn.value()) {
    const SyntheticModelSpec& s = *syn.value();
    m.path = (std::filesystem::path(synthetic_dir()) / s.file_name()).string();
    if (!std::filesystem::exists(m.path, ec) && !create) {
      m.pending = true;
      return m;
    }
    if (!std::filesystem::exists(m.path, ec)) {
      std::filesystem::create_directories(synthetic_dir(), ec);
      std::fprintf(
          stderr, "fish run: writing %s (fish make-model --shape %s --type %s --seed %llu)\n",
          m.path.c_str(), s.shape.c_str(), s.type.c_str(), static_cast<unsigned long long>(s.seed));
      SyntheticModelOptions opt;
      opt.seed = s.seed;
      Status st = write_synthetic_model(*find_model_shape(s.shape), parse_file_type(s.type).value(),
                                        opt, m.path);
      if (!st.ok()) {
        m.error = st.error().message;
        return m;
      }
    }
  } else if (std::filesystem::exists(given, ec)) {
    m.path = given;
  } else if (const char* dir = std::getenv("FISH_MODELS_DIR"); dir && *dir) {
    const auto alt = std::filesystem::path(dir) / std::filesystem::path(given).filename();
    if (std::filesystem::exists(alt, ec)) m.path = alt.string();
  }
  if (m.path.empty()) {
    m.error = fmt::format(
        "model {}: not found (also looked in $FISH_MODELS_DIR by file name; "
        "scripts/setup.sh fetches the real models, fish make-model writes "
        "synthetic ones)",
        given);
    return m;
  }
  auto sha = sha256_file_hex(m.path);
  if (!sha.ok())
    m.error = sha.error().message;
  else
    m.sha256 = sha.value();
  return m;
}

std::string axes_text(const Cell& c) {
  std::string s;
  for (const auto& [k, v] : c.axes)
    s += fmt::format("{}{}={}", s.empty() ? "" : " ", k,
                     v.is_string() ? v.get<std::string>() : v.dump());
  return s.empty() ? "(defaults)" : s;
}

// Why this machine cannot run `path` (empty: it can). The gpu path needs a usable GPU backend.
std::string path_unavailable(const std::string& path) {
  if (path == "gpu") return gpu_path_unavailable();
  return "";
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

// The matrices one decode step reads (every layer matrix and the output) as the session runs
// them: the model's views (re-quantised ones when requant > 0), or the packed int4 copies of a
// w4a8 / w4a16 session (which count the head as it runs: int4 or its GGUF bytes). On the gpu
// path the placed matrices run their GGUF types (the GPU goes first); with int4 on the CPU the
// unplaced ones count at the int4 copies' average bits (exact when all or none are placed).
struct DecodeWeights {
  double bytes = 0, elems = 0;
  double bytes_per_token = 0;  // all weight bytes a decode step reads (weight_GBps)
  double bits_per_weight() const { return elems > 0 ? 8.0 * bytes / elems : 0.0; }
};
DecodeWeights decode_weights(const Session& s, const CellPlacement* gpu) {
  const Model& m = s.model();
  DecodeWeights d;
  double placed_bytes = 0, placed_elems = 0;
  auto add = [&](const MatrixView& v) {
    const double elems = double(v.n_in) * double(v.n_out);
    d.bytes += double(v.n_bytes);
    d.elems += elems;
    if (gpu && gpu->placement() && gpu->placement()->handle(&v) != 0) {
      placed_bytes += double(v.n_bytes);
      placed_elems += elems;
    }
  };
  for (const LayerWeights& L : m.layers())
    for (const MatrixView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) add(*v);
  add(m.output());
  d.bytes_per_token = double(m.weight_bytes_per_token());
  if (const Int4Weights* w4 = s.int4_weights()) {
    const double int4_bytes_per_elem = d.elems > 0 ? double(w4->bytes_per_token()) / d.elems : 0;
    d.bytes = placed_bytes + int4_bytes_per_elem * (d.elems - placed_elems);
    d.bytes_per_token = d.bytes;
  }
  return d;
}

// Everything of a row but status, error and metrics.
json row_base(const std::string& run_id, const Experiment& e, const Cell& c, const std::string& id,
              const std::string& path, const std::string& model_sha) {
  json r;
  r["kind"] = "row";
  r["run_id"] = run_id;
  r["cell_id"] = id;
  r["cell_index"] = c.index;
  r["path"] = path;
  r["status"] = "ok";
  r["error"] = nullptr;
  r["model"] = e.models[c.model_index];
  r["model_sha256"] = model_sha;
  r["config"] = fields_to_json(c.config, config_fields());
  r["workload"] = workload_json(e.workload);
  r["placement"] = {{"gpu_layers", 0}, {"gpu_detail", ""}};
  json m;
  for (const char* k : {"prefill_tok_s", "decode_tok_s", "prefill_pct_stream", "decode_pct_stream",
                        "prefill_vs_cpu", "decode_vs_cpu", "weight_GBps", "weight_GBps_pct_stream",
                        "bits_per_weight", "rss_peak_MB", "vram_peak_MB", "rel_rms", "top1",
                        "kl_mean", "kl_p99", "kl_max", "ppl", "greedy_exact"})
    m[k] = nullptr;
  r["metrics"] = m;
  r["validity"] = json::array();
  r["t_wall_s"] = 0.0;
  return r;
}

// A llama.cpp row's speeds, validity, peer object and placement (harness/peer_llama.h).
void fill_peer_row(json& row, const PathSamples& ps, const json& peer, int n_threads,
                   double max_cv) {
  row["peer"] = peer;
  row["n_threads_resolved"] = n_threads;
  json& m = row["metrics"];
  m["prefill_tok_s"] = speed_metric_json(ps.prefill_tok_s);
  m["decode_tok_s"] = speed_metric_json(ps.decode_tok_s);
  row["validity"] = validity_flags(ps, max_cv);
  if (row["path"] == "gpu")
    row["placement"] = {{"gpu_layers", peer.value("n_gpu_layers", json(0))},
                        {"gpu_detail", "llama.cpp " + peer.value("backends", std::string())}};
}

// The reference of q on `model` (loaded from `path` at requant `loaded_requant`): loads the file
// again at the reference's own requant when that differs, or q.reference_model when set (same
// vocabulary; the text is tokenized with the scored model's tokenizer, which the reference's
// must agree with).
Result<QualityReference> quality_reference(const std::shared_ptr<const Model>& model,
                                           int64_t loaded_requant, const std::string& path,
                                           const Tokenizer& tok, const QualitySpec& q) {
  std::shared_ptr<const Model> ref_model = model;
  if (!q.reference_model.empty()) {
    const ModelEntry me = resolve_model(q.reference_model, /*create=*/true);
    if (!me.error.empty()) return make_error("quality.reference.model: {}", me.error);
    FISH_ASSIGN_OR_RETURN(ModelLoadOptions lo, model_load_options(q.reference));
    FISH_ASSIGN_OR_RETURN(ref_model, Model::load(me.path, lo));
    if (ref_model->params().n_vocab != model->params().n_vocab)
      return make_error("quality.reference.model {}: a vocabulary of {}, {} has {}", me.path,
                        ref_model->params().n_vocab, path, model->params().n_vocab);
    FISH_ASSIGN_OR_RETURN(Tokenizer ref_tok, Tokenizer::from_gguf(ref_model->gguf()));
    const std::string probe = "The quick brown fox, 1234 ünïcödé.";
    if (ref_tok.encode(probe, true, false) != tok.encode(probe, true, false))
      return make_error("quality.reference.model {}: its tokenizer differs from {}'s", me.path,
                        path);
  } else if (q.reference.requant != loaded_requant) {
    FISH_ASSIGN_OR_RETURN(ModelLoadOptions lo, model_load_options(q.reference));
    FISH_ASSIGN_OR_RETURN(ref_model, Model::load(path, lo));
  }
  return build_quality_reference(ref_model, tok, q);
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

int run_experiment(const RunOptions& o) {
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "fish run: %s\n", msg.c_str());
    return int(kExitUsage);
  };
  auto exp_r = load_experiment(o.experiment_path, o.max_cells);
  if (!exp_r.ok()) return fail(exp_r.error().message);
  const Experiment& e = exp_r.value();
  auto shard_r = resolve_shard(o.shard, [](const char* n) { return std::getenv(n); });
  if (!shard_r.ok()) return fail(shard_r.error().message);
  const Shard shard = shard_r.value();
  for (const std::string& w : repetition_warnings(e.measure.repetitions))
    std::fprintf(stderr, "fish run: %s: warning: %s\n", e.file_path.c_str(), w.c_str());

  const std::vector<Cell> all = expand_cells(e);
  std::vector<const Cell*> cells;
  for (const Cell& c : all)
    if (c.index % shard.count == shard.index) cells.push_back(&c);
  // Run order: a model load per (model, requant), so cells sharing one run together (cell
  // indices and ids are unchanged).
  std::stable_sort(cells.begin(), cells.end(), [](const Cell* a, const Cell* b) {
    return std::pair(a->model_index, a->config.requant) <
           std::pair(b->model_index, b->config.requant);
  });
  const std::string out_dir = o.out_dir.empty() ? e.output.dir : o.out_dir;
  const std::string results_path =
      (std::filesystem::path(out_dir) / results_file_name(e.name, shard.index, shard.count))
          .string();

  std::map<size_t, ModelEntry> models;
  for (const Cell* c : cells)
    if (!models.count(c->model_index))
      models[c->model_index] = resolve_model(e.models[c->model_index], !o.dry_run);
  // The results file is appended to and the renderings replaced: none may be an input.
  {
    std::vector<std::string> inputs = {o.experiment_path, e.workload.text, e.quality.text,
                                       e.quality.prompt_file};
    for (const auto& [i, m] : models) inputs.push_back(m.path);
    const std::string stem = results_path.substr(0, results_path.size() - 6);  // drop ".jsonl"
    for (const std::string& out : {results_path, stem + ".csv", stem + ".md"})
      if (Status st = check_output_path(out, inputs, ".tmp"); !st.ok())
        return fail(st.error().message);
  }
  std::vector<std::string> ids;
  for (const Cell* c : cells) ids.push_back(cell_id(e, *c, models[c->model_index].sha256));

  if (o.dry_run) {
    std::string paths_text;
    for (const std::string& p : e.measure.paths) paths_text += (paths_text.empty() ? "" : ",") + p;
    std::printf("experiment %s (%s): %zu cells%s, paths %s -> %s\n", e.name.c_str(),
                e.file_path.c_str(), all.size(),
                shard.count > 1 ? fmt::format(", shard {}/{}: {} of them", shard.index, shard.count,
                                              cells.size())
                                      .c_str()
                                : "",
                paths_text.c_str(), results_path.c_str());
    for (size_t i = 0; i < cells.size(); ++i) {
      const Cell& c = *cells[i];
      const ModelEntry& m = models[c.model_index];
      std::printf("  #%-4lld %s  %s  %s%s\n", static_cast<long long>(c.index),
                  m.pending ? "(id when written) " : ids[i].c_str(),
                  e.models[c.model_index].c_str(), axes_text(c).c_str(),
                  m.pending         ? "  [synthetic model: written on the first run]"
                  : m.error.empty() ? ""
                                    : "  [model missing: its rows will be errors]");
    }
    // What a real run would fail on is a problem now: a dry run that exits 0 promises a run.
    std::vector<std::string> problems;
    for (const auto& [i, m] : models)
      if (!m.pending && !m.error.empty())
        problems.push_back(m.error);
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
    for (const std::string& p : problems) std::fprintf(stderr, "fish run: dry run: %s\n", p.c_str());
    return problems.empty() ? kExitOk : kExitUsage;
  }

  auto writer_r = ResultsWriter::open(results_path, o.resume);
  if (!writer_r.ok()) return fail(writer_r.error().message);
  ResultsWriter& writer = *writer_r.value();
  if (writer.truncated_bytes() > 0)
    std::fprintf(stderr, "fish run: %s: cut a partial last line (%zu bytes) left by a killed run\n",
                 results_path.c_str(), writer.truncated_bytes());
  if (!writer.experiment_shas().empty() && writer.experiment_shas().back() != e.file_sha256)
    std::fprintf(stderr,
                 "fish run: note: %s was written by another version of %s (experiment_sha256 "
                 "differs); cells whose parameters changed get new ids and run, the old rows "
                 "stay in the file\n",
                 results_path.c_str(), e.file_path.c_str());
  // A (cell, path) still to run: no row yet; an error row with --retry-errors; a skipped row
  // once the path can run.
  auto todo_path = [&](const std::string& id, const std::string& p) {
    const std::string st = writer.status(id, p);
    if (st == "error") return o.retry_errors;
    if (st == "skipped") return path_unavailable(p).empty();
    return st != "ok";
  };
  size_t n_todo = 0, n_cells_todo = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    size_t n = 0;
    for (const std::string& p : e.measure.paths) n += todo_path(ids[i], p);
    n_todo += n;
    n_cells_todo += n > 0;
  }

  bool any_failed = false;
  size_t n_ok = 0, n_err = 0, n_skip = 0;
  if (n_todo == 0) {
    std::fprintf(stderr, "fish run: every cell of %s is finished in %s (nothing to run)\n",
                 e.name.c_str(), results_path.c_str());
  } else {
    RunIdentity rid{new_run_id(), int64_t(all.size()), shard.index, shard.count};
    std::fprintf(stderr,
                 "fish run: %s: %zu cells x %zu paths, %zu to run%s; measuring the stream "
                 "bandwidth (%lld MiB)...\n",
                 e.name.c_str(), cells.size(), e.measure.paths.size(), n_todo,
                 o.resume ? " (resume)" : "", static_cast<long long>(e.measure.stream_MiB));
    // The stream buffer is the run's one large allocation outside the cells: checked the same way.
    SessionMemory stream_need;
    stream_need.buffers = uint64_t(e.measure.stream_MiB) << 20;
    auto have = host_memory_available();
    if (!have.ok()) return fail(have.error().message);
    if (Status st = check_host_memory(stream_need, have.value(),
                                      fmt::format("measure.stream_MiB {}", e.measure.stream_MiB),
                                      "a smaller measure.stream_MiB");
        !st.ok())
      return fail(st.error().message);
    const std::vector<double> stream =
        measure_stream_GBps(size_t(e.measure.stream_MiB) << 20, int(e.measure.stream_passes), 0);
    const double stream_median = median(stream);
    json ctx = run_context(e, rid);
    ctx["stream_GBps"] = sample_summary_json(stream);
    // The gpu rows' reference: what a compute shader moves on the device, measured in this run.
    double gpu_copy_median = 0;
    if (std::find(e.measure.paths.begin(), e.measure.paths.end(), "gpu") != e.measure.paths.end()) {
      const std::vector<double> gc = measure_gpu_copy_GBps(int(e.measure.stream_passes));
      if (!gc.empty()) {
        gpu_copy_median = median(gc);
        ctx["gpu_copy_GBps"] = sample_summary_json(gc);
      }
    }
    if (Status st = writer.append(ctx); !st.ok()) return fail(st.error().message);

    const auto t_run = Clock::now();
    size_t n_done = 0, n_cells_done = 0;  // rows; cells whose paths are all written
    size_t paths_left = 0;                // rows the current cell still has to write
    int64_t written_cell = -1;            // the cell whose rows written_paths lists
    std::set<std::string> written_paths;
    auto emit = [&](json row, const Cell& c, double t_cell) -> bool {
      row["t_wall_s"] = t_cell;
      if (written_cell != c.index) written_paths.clear();
      written_cell = c.index;
      written_paths.insert(row["path"].get<std::string>());
      const std::string status = row["status"];
      if (status == "ok") ++n_ok;
      if (status == "error") {
        ++n_err;
        any_failed = true;
      }
      if (status == "skipped") ++n_skip;
      Status st = writer.append(row);
      if (!st.ok()) {
        std::fprintf(stderr, "fish run: %s\n", st.error().message.c_str());
        return false;
      }
      ++n_done;
      if (paths_left > 0 && --paths_left == 0) ++n_cells_done;
      const double el = seconds_since(t_run);
      std::string what;
      if (status == "ok") {
        const json& d = row["metrics"]["decode_tok_s"];
        const json& p = row["metrics"]["prefill_tok_s"];
        what = fmt::format("prefill {:.1f} tok/s, decode {:.2f} tok/s",
                           p.is_object() ? p["median"].get<double>() : 0.0,
                           d.is_object() ? d["median"].get<double>() : 0.0);
      } else {
        what = row["error"].get<std::string>();
      }
      std::fprintf(stderr, "fish run: [%zu/%zu] #%lld %s %s %s: %s | %s elapsed, ETA %s\n", n_done,
                   n_todo, static_cast<long long>(c.index), axes_text(c).c_str(),
                   row["path"].get<std::string>().c_str(), status.c_str(), what.c_str(),
                   duration_text(el).c_str(),
                   n_cells_done == 0 ? "after the first cell"
                                     : duration_text(el / double(n_cells_done) *
                                                     double(n_cells_todo - n_cells_done))
                                           .c_str());
      return true;
    };

    // Per (model, requant) load: the model, tokenizer, prompt; per model: the quality reference
    // (built with the reference's own Config, its requant loaded separately when it differs).
    std::optional<size_t> loaded_index;
    std::optional<int64_t> loaded_requant;
    std::optional<std::string> loaded_repack;  // Config kquant_repack of the loaded model
    std::shared_ptr<const Model> model;
    std::optional<Tokenizer> tok;
    std::string model_error;
    std::vector<int32_t> prompt;
    std::optional<Result<QualityReference>> ref;
    // One cell: its rows, then kCellDone; or the exit code when a row cannot be written.
    constexpr int kCellDone = -1;
    // An engine llama.cpp cell: llama-bench per path on the model file (harness/peer_llama.h);
    // FISH loads nothing.
    auto run_peer_cell = [&](size_t i, const std::vector<std::string>& todo) -> int {
      const Cell& c = *cells[i];
      const ModelEntry& me = models[c.model_index];
      const auto t_cell = Clock::now();
      paths_left = todo.size();
      for (const std::string& path : todo) {
        json row = row_base(rid.run_id, e, c, ids[i], path, me.sha256);
        auto error_row = [&](const std::string& msg) {
          row["status"] = "error";
          row["error"] = msg;
          return emit(row, c, seconds_since(t_cell));
        };
        std::string why;
        if (Status st = check_env_knobs(false); !st.ok()) why = st.error().message;
        if (why.empty()) why = me.error;
        if (why.empty()) why = llama_unsupported(c.config, e.quality, me.path);
        if (!why.empty()) {
          if (!error_row(why)) return kExitUsage;
          continue;
        }
        const int n_threads =
            c.config.n_threads > 0 ? int(c.config.n_threads) : default_thread_count();
        auto pm = measure_llama_bench(c.config, e.workload, e.measure, path, me.path, n_threads);
        if (!pm.ok()) {
          if (!error_row(pm.error().message)) return kExitUsage;
          continue;
        }
        PathSamples ps;
        ps.prefill_tok_s = pm.value().prefill_tok_s;
        ps.decode_tok_s = pm.value().decode_tok_s;
        fill_peer_row(row, ps, pm.value().peer, n_threads, e.measure.max_cv);
        if (!emit(row, c, seconds_since(t_cell))) return kExitUsage;
      }
      return kCellDone;
    };
    auto run_cell = [&](size_t i) -> int {
      const Cell& c = *cells[i];
      const ModelEntry& me = models[c.model_index];
      std::vector<std::string> todo;
      for (const std::string& p : e.measure.paths)
        if (todo_path(ids[i], p)) todo.push_back(p);
      if (todo.empty()) return kCellDone;
      if (c.config.engine == "llama.cpp") return run_peer_cell(i, todo);
      if (loaded_index != c.model_index || loaded_requant != c.config.requant ||
          loaded_repack != c.config.kquant_repack) {
        if (loaded_index != c.model_index) ref.reset();
        loaded_index = c.model_index;
        loaded_requant = c.config.requant;
        loaded_repack = c.config.kquant_repack;
        model.reset();
        tok.reset();
        prompt.clear();
        model_error = me.error;
        auto lo = model_load_options(c.config);
        if (model_error.empty() && !lo.ok()) model_error = lo.error().message;
        if (model_error.empty()) {
          auto m = Model::load(me.path, lo.value());
          if (!m.ok()) {
            model_error = m.error().message;
          } else {
            model = m.value();
            auto t = Tokenizer::from_gguf(model->gguf());
            if (t.ok()) tok = std::move(t.value());
            auto pr = workload_prompt(e.workload, tok ? &*tok : nullptr, model->params().n_vocab);
            if (!pr.ok())
              model_error = pr.error().message;
            else
              prompt = std::move(pr.value());
          }
        }
      }
      const auto t_cell = Clock::now();
      paths_left = todo.size();
      // Paths that can run get a session each; the others write their skipped/error row now.
      struct PathRun {
        json row;
        std::unique_ptr<CellPlacement> gpu;  // gpu path: the cell's placement (outlives session)
        std::unique_ptr<Session> session;
      };
      std::vector<PathRun> runs;
      reset_peak_rss();  // the peak is the cell's (all its paths)
      for (const std::string& path : todo) {
        json row = row_base(rid.run_id, e, c, ids[i], path, me.sha256);
        auto error_row = [&](const std::string& msg) {
          row["status"] = "error";
          row["error"] = msg;
          return emit(row, c, seconds_since(t_cell));
        };
        // A bad FISH_* value fails the paths it affects (FISH_GPU*: the gpu rows), not skips them.
        if (Status st = check_env_knobs(path == "gpu"); !st.ok()) {
          if (!error_row(st.error().message)) return kExitUsage;
          continue;
        }
        if (const std::string why = path_unavailable(path); !why.empty()) {
          row["status"] = "skipped";
          row["error"] = why;
          if (!emit(row, c, seconds_since(t_cell))) return kExitUsage;
          continue;
        }
        if (!model_error.empty()) {
          if (!error_row(model_error)) return kExitUsage;
          continue;
        }
        const int64_t need = workload_ctx_need(e.workload, c.config.depth);
        if (need > c.config.n_ctx) {
          if (!error_row(fmt::format("{} = {} exceed n_ctx {} (hint: raise n_ctx or exclude the "
                                     "cell)",
                                     c.config.depth < 0 ? "n_prompt + n_gen"
                                                          : "depth + max(n_prompt, n_gen)",
                                     need, c.config.n_ctx)))
            return kExitUsage;
          continue;
        }
        auto opt = session_options(c.config);
        if (!opt.ok()) {
          if (!error_row(opt.error().message)) return kExitUsage;
          continue;
        }
        // The gpu path: the cpu path's options plus the cell's placement.
        std::unique_ptr<CellPlacement> gpu;
        if (path == "gpu") {
          auto pl = CellPlacement::place(*model, c.config);
          if (!pl.ok()) {
            if (!error_row(pl.error().message)) return kExitUsage;
            continue;
          }
          gpu = std::move(pl.value());
          opt.value().gpu = gpu->placement();
          row["placement"] = {{"gpu_layers", gpu->gpu_layers()}, {"gpu_detail", gpu->detail()}};
          row["metrics"]["vram_peak_MB"] = gpu->vram_MB();
        }
        auto sess = Session::create(model, opt.value());
        if (!sess.ok()) {
          if (!error_row(sess.error().message)) return kExitUsage;
          continue;
        }
        runs.push_back({std::move(row), std::move(gpu), std::move(sess.value())});
      }
      if (runs.empty()) return kCellDone;

      // The paths' repetitions, back to back (interleaved per measure.interleave).
      std::vector<std::function<Result<RepSample>()>> fns;
      for (PathRun& r : runs) {
        Session* s = r.session.get();
        const int64_t depth = c.config.depth;
        fns.push_back([s, &prompt, &e, depth] {
          return run_repetition(*s, prompt, e.workload.n_gen, depth);
        });
      }
      // llama.cpp twins (harness/peer_llama.h): the cells right after this FISH cell that differ
      // only in engine / llama_bench take turns with its repetitions, measure.peer_block per
      // llama-bench call. A twin that cannot run (unsupported fields, no binary, ...) is left to
      // its own cell, which writes the reason.
      struct TwinRun {
        size_t cell;
        std::string path;
        int n_threads;
        std::unique_ptr<LlamaBenchBlocks> blocks;
      };
      std::vector<TwinRun> twins;
      if (e.measure.peer_block > 0 && c.config.engine == "fish" && check_env_knobs(false).ok())
        for (size_t j = i + 1; j < cells.size() && cells[j]->model_index == c.model_index &&
                               is_llama_twin(c.config, cells[j]->config);
             ++j) {
          const Config& tc = cells[j]->config;
          if (!llama_unsupported(tc, e.quality, me.path).empty() || !resolve_llama_bench(tc).ok())
            continue;
          const int nt = tc.n_threads > 0 ? int(tc.n_threads) : default_thread_count();
          for (const PathRun& r : runs) {
            const std::string p = r.row["path"];
            if (!todo_path(ids[j], p)) continue;
            twins.push_back({j, p, nt,
                             std::make_unique<LlamaBenchBlocks>(tc, e.workload, e.measure, p,
                                                                me.path, nt,
                                                                e.measure.peer_block)});
          }
        }
      for (TwinRun& t : twins) {
        LlamaBenchBlocks* b = t.blocks.get();
        fns.push_back([b] { return b->next(); });
      }
      const std::vector<PathSamples> samples = measure_paths(e.measure, fns);
      const std::optional<double> rss_speed = peak_rss_MB();
      // The cell's cpu path: the gpu rows' speeds are also given relative to it (same run).
      const PathSamples* cpu_samples = nullptr;
      for (size_t p = 0; p < runs.size(); ++p)
        if (runs[p].row["path"] == "cpu" && !samples[p].error) cpu_samples = &samples[p];
      for (size_t p = 0; p < runs.size(); ++p) {
        json& row = runs[p].row;
        const DecodeWeights dw = decode_weights(*runs[p].session, runs[p].gpu.get());
        // config.n_threads stays as given (0: the default); what it resolved to is recorded here.
        row["n_threads_resolved"] = runs[p].session->n_threads();
        if (const KquantRepackStats& kr = model->kquant_repack(); kr.matrices > 0)
          row["kquant_repack"] = {{"matrices", kr.matrices},
                                  {"packed_MB", double(kr.packed_bytes) / 1e6},
                                  {"gguf_MB", double(kr.gguf_bytes) / 1e6},
                                  {"released_MB", double(kr.released_bytes) / 1e6},
                                  {"seconds", kr.seconds}};
        uint64_t gpu_fallbacks = runs[p].session->gpu_fallbacks();
        // vram_peak_MB: placement plus the matmul scratch the runs allocated (kept until the
        // last weight goes).
        if (runs[p].gpu)
          row["metrics"]["vram_peak_MB"] =
              std::max(runs[p].gpu->vram_MB(), runs[p].gpu->resident_MB());
        runs[p].session.reset();
        // The placement stays for the quality runs; then the device memory goes back to zero.
        struct ReleaseAtEnd {
          std::unique_ptr<CellPlacement>& gpu;
          ~ReleaseAtEnd() { gpu.reset(); }
        } release_at_end{runs[p].gpu};
        const std::shared_ptr<const GpuPlacement> placement =
            runs[p].gpu ? runs[p].gpu->placement() : nullptr;
        const PathSamples& ps = samples[p];
        if (ps.error) {
          row["status"] = "error";
          row["error"] = ps.error->message;
          if (!emit(row, c, seconds_since(t_cell))) return kExitUsage;
          continue;
        }
        json& m = row["metrics"];
        m["prefill_tok_s"] = speed_metric_json(ps.prefill_tok_s);
        m["decode_tok_s"] = speed_metric_json(ps.decode_tok_s);
        const double gbps = median(ps.decode_tok_s) * dw.bytes_per_token / 1e9;
        m["weight_GBps"] = gbps;
        m["bits_per_weight"] = dw.bits_per_weight();
        // A gpu row's weights stream from device memory: its reference is the device copy, not
        // the host's stream (null when no GPU copy was measured).
        if (runs[p].gpu)
          m["weight_GBps_pct_gpu_copy"] =
              gpu_copy_median > 0 ? json(100.0 * gbps / gpu_copy_median) : json();
        else
          m["weight_GBps_pct_stream"] =
              stream_median > 0 ? json(100.0 * gbps / stream_median) : json();
        // Machine-normalised speeds for the CI gate (never absolute tok/s across machines):
        // per repetition, tok/s x weight bytes per token as % of this run's stream bandwidth
        // (prefill exceeds 100%: a batch reads each weight once), and a gpu row over its cell's
        // cpu row in the same repetition.
        if (stream_median > 0 && dw.bytes_per_token > 0) {
          const std::vector<double> bw(ps.decode_tok_s.size(), stream_median * 1e9 / 100.0);
          m["prefill_pct_stream"] =
              speed_metric_json(paired_ratios(ps.prefill_tok_s, bw, dw.bytes_per_token));
          m["decode_pct_stream"] =
              speed_metric_json(paired_ratios(ps.decode_tok_s, bw, dw.bytes_per_token));
        }
        if (runs[p].gpu && cpu_samples) {
          m["prefill_vs_cpu"] =
              speed_metric_json(paired_ratios(ps.prefill_tok_s, cpu_samples->prefill_tok_s));
          m["decode_vs_cpu"] =
              speed_metric_json(paired_ratios(ps.decode_tok_s, cpu_samples->decode_tok_s));
        }
        if (rss_speed) m["rss_peak_MB"] = *rss_speed;
        row["validity"] = validity_flags(ps, e.measure.max_cv);
        if (!e.quality.metrics.empty()) {
          if (!ref) {
            if (!tok)
              ref.emplace(make_error("quality: {}: the model has no tokenizer", me.path));
            else
              ref.emplace(quality_reference(model, c.config.requant, me.path, *tok, e.quality));
          }
          if (!ref->ok()) {
            row["status"] = "error";
            row["error"] = "quality reference: " + ref->error().message;
          } else {
            auto q = measure_quality(model, c.config, ref->value(), e.quality, placement);
            if (!q.ok()) {
              row["status"] = "error";
              row["error"] = "quality: " + q.error().message;
            } else {
              quality_metrics_json(q.value(), m);
              gpu_fallbacks += q.value().gpu_fallbacks;
            }
          }
          if (auto rss = peak_rss_MB()) m["rss_peak_MB"] = *rss;
        }
        if (runs[p].gpu) {
          row["placement"]["gpu_fallbacks"] = gpu_fallbacks;
          for (const std::string& f : gpu_validity_flags(gpu_fallbacks, placement.get()))
            row["validity"].push_back(f);
        }
        if (!emit(row, c, seconds_since(t_cell))) return kExitUsage;
      }
      for (size_t t = 0; t < twins.size(); ++t) {
        const size_t j = twins[t].cell;
        const Cell& tc = *cells[j];
        if (t == 0 || twins[t - 1].cell != j) {  // the twin cell's rows, for the progress count
          paths_left = 0;
          for (const TwinRun& u : twins) paths_left += u.cell == j;
        }
        json row = row_base(rid.run_id, e, tc, ids[j], twins[t].path, me.sha256);
        const PathSamples& ps = samples[runs.size() + t];
        if (ps.error) {
          row["status"] = "error";
          row["error"] = ps.error->message;
        } else {
          fill_peer_row(row, ps, twins[t].blocks->peer(), twins[t].n_threads, e.measure.max_cv);
        }
        if (!emit(row, tc, seconds_since(t_cell))) return kExitUsage;
      }
      return kCellDone;
    };
    // The cell boundary: an exception a cell throws (std::bad_alloc past the memory estimate,
    // ...) becomes an error row for each path the cell had left; the model is loaded afresh for
    // the next cell and the sweep goes on.
    auto fail_cell = [&](size_t i, const std::string& why) -> int {
      const Cell& c = *cells[i];
      loaded_index.reset();
      loaded_requant.reset();
      loaded_repack.reset();
      model.reset();
      tok.reset();
      ref.reset();
      for (const std::string& p : e.measure.paths) {
        if (!todo_path(ids[i], p) || (written_cell == c.index && written_paths.count(p))) continue;
        json row = row_base(rid.run_id, e, c, ids[i], p, models[c.model_index].sha256);
        row["status"] = "error";
        row["error"] = why;
        if (!emit(row, c, 0.0)) return kExitUsage;
      }
      return kCellDone;
    };
    for (size_t i = 0; i < cells.size(); ++i) {
      int rc = kCellDone;
      try {
        rc = run_cell(i);
      } catch (...) {
        rc = fail_cell(i, describe_current_exception());
      }
      if (rc != kCellDone) return rc;
    }
    std::fprintf(stderr, "fish run: %s: %zu ok, %zu error, %zu skipped in %s -> %s\n",
                 e.name.c_str(), n_ok, n_err, n_skip, duration_text(seconds_since(t_run)).c_str(),
                 results_path.c_str());
  }

  // Renderings of everything the file holds (earlier runs of a resumed sweep included).
  const std::string stem = results_path.substr(0, results_path.size() - 6);  // drop ".jsonl"
  for (const std::string& fmt_name : e.output.formats) {
    auto text = fmt_name == "csv" ? render_csv(results_path) : render_markdown(results_path);
    const std::string out_path = stem + "." + fmt_name;
    if (!text.ok()) {
      std::fprintf(stderr, "fish run: rendering %s: %s\n", out_path.c_str(),
                   text.error().message.c_str());
      any_failed = true;
      continue;
    }
    if (Status st = write_file_atomic(out_path, text.value()); !st.ok()) {
      std::fprintf(stderr, "fish run: %s\n", st.error().message.c_str());
      any_failed = true;
      continue;
    }
    std::fprintf(stderr, "fish run: table: %s\n", out_path.c_str());
  }
  // Failed cells of earlier runs of this file count too: the sweep is not clean until they pass.
  size_t n_failed = 0;
  for (size_t i = 0; i < cells.size(); ++i)
    for (const std::string& p : e.measure.paths) n_failed += writer.status(ids[i], p) == "error";
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
