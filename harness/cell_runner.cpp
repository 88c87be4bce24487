// The measuring part of `fish run`: see cell_runner.h.
#include "harness/cell_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "base/env_knobs.h"
#include "base/sha256.h"
#include "engine/config.h"
#include "engine/gpu_placement.h"
#include "engine/memory_budget.h"
#include "engine/model.h"
#include "engine/session.h"
#include "engine/synthetic_model.h"
#include "engine/tokenizer.h"
#include "harness/cell_guard.h"
#include "harness/gpu_cell.h"
#include "harness/measure.h"
#include "harness/metrics.h"
#include "harness/peer_llama.h"
#include "harness/quality.h"
#include "harness/stats.h"
#include "kernels/thread_pool.h"

namespace fish {

namespace {
std::string synthetic_dir() {
  if (const char* d = std::getenv("FISH_SYNTHETIC_DIR"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/fish/synthetic";
}

}  // namespace

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

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double now_s() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// Why this machine cannot run `path` (empty: it can). The gpu path needs a usable GPU backend.
std::string path_unavailable(const std::string& path) {
  if (path == "gpu") return gpu_path_unavailable();
  return "";
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
    const std::string probe = "The quick brown fox, 1234 \u00fcn\u00efc\u00f6d\u00e9.";
    if (ref_tok.encode(probe, true, false) != tok.encode(probe, true, false))
      return make_error("quality.reference.model {}: its tokenizer differs from {}'s", me.path,
                        path);
  } else if (q.reference.requant != loaded_requant) {
    FISH_ASSIGN_OR_RETURN(ModelLoadOptions lo, model_load_options(q.reference));
    FISH_ASSIGN_OR_RETURN(ref_model, Model::load(path, lo));
  }
  return build_quality_reference(ref_model, tok, q);
}

void append(PathSamples& acc, const PathSamples& s) {
  auto add = [](std::vector<double>& to, const std::vector<double>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  add(acc.prefill_tok_s, s.prefill_tok_s);
  add(acc.decode_tok_s, s.decode_tok_s);
  add(acc.plain_decode_tok_s, s.plain_decode_tok_s);
  add(acc.accepted_per_verify, s.accepted_per_verify);
  acc.spec_tokens_differ += s.spec_tokens_differ;
  if (s.error && !acc.error) acc.error = s.error;
}

// A FISH row's speed metrics from its samples: tok/s, weight GB/s and bits per weight, the
// weight GB/s against the run's reference (device copy for a gpu row, host stream else), and the
// machine-normalised speeds of the CI gate (never absolute tok/s across machines): per
// repetition, tok/s x weight bytes per token as % of the run's stream bandwidth (prefill exceeds
// 100%: a batch reads each weight once), and a gpu row over its cell's cpu row in the same
// repetition (cpu: null when the cell has no cpu samples).
void speed_metrics(json& m, const PathSamples& ps, const DecodeWeights& dw, bool gpu,
                   const PathSamples* cpu, const RunReferences& refs) {
  m["prefill_tok_s"] = speed_metric_json(ps.prefill_tok_s);
  m["decode_tok_s"] = speed_metric_json(ps.decode_tok_s);
  const double gbps = median(ps.decode_tok_s) * dw.bytes_per_token / 1e9;
  m["weight_GBps"] = gbps;
  m["bits_per_weight"] = dw.bits_per_weight();
  if (gpu)
    m["weight_GBps_pct_gpu_copy"] =
        refs.gpu_copy_GBps > 0 ? json(100.0 * gbps / refs.gpu_copy_GBps) : json();
  else
    m["weight_GBps_pct_stream"] =
        refs.stream_GBps > 0 ? json(100.0 * gbps / refs.stream_GBps) : json();
  if (refs.stream_GBps > 0 && dw.bytes_per_token > 0) {
    const std::vector<double> bw(ps.decode_tok_s.size(), refs.stream_GBps * 1e9 / 100.0);
    m["prefill_pct_stream"] =
        speed_metric_json(paired_ratios(ps.prefill_tok_s, bw, dw.bytes_per_token));
    m["decode_pct_stream"] =
        speed_metric_json(paired_ratios(ps.decode_tok_s, bw, dw.bytes_per_token));
  }
  if (gpu && cpu) {
    m["prefill_vs_cpu"] = speed_metric_json(paired_ratios(ps.prefill_tok_s, cpu->prefill_tok_s));
    m["decode_vs_cpu"] = speed_metric_json(paired_ratios(ps.decode_tok_s, cpu->decode_tok_s));
  }
  if (!ps.accepted_per_verify.empty()) {  // a speculative cell
    m["accepted_per_verify"] = speed_metric_json(ps.accepted_per_verify);
    m["spec_speedup"] = speed_metric_json(paired_ratios(ps.decode_tok_s, ps.plain_decode_tok_s));
  }
}

// The drafter of a speculative cell (none for speculative off): the draft model resolved as the
// cell's models are (a path or synthetic:SHAPE:TYPE), on a CPU session of the cell's n_ctx and
// threads.
Result<DraftSetup> cell_drafter(const Config& c, const Model& target) {
  std::string path = c.draft_model;
  if (c.speculative == "draft" && !path.empty()) {
    const ModelEntry me = resolve_model(path, /*create=*/true);
    if (!me.error.empty()) return make_error("draft_model: {}", me.error);
    path = me.path;
  }
  return make_drafter(c.speculative, path, target, c.n_ctx, int(c.n_threads));
}

int resolved_threads(const Config& c) {
  return c.n_threads > 0 ? int(c.n_threads) : default_thread_count();
}

}  // namespace

std::string cell_axes_text(const Cell& c) {
  std::string s;
  for (const auto& [k, v] : c.axes)
    s += fmt::format("{}{}={}", s.empty() ? "" : " ", k,
                     v.is_string() ? v.get<std::string>() : v.dump());
  return s.empty() ? "(defaults)" : s;
}

std::string duration_text(double s) {
  if (s < 90) return fmt::format("{:.0f} s", s);
  if (s < 5400) return fmt::format("{:.0f} min {:02.0f} s", std::floor(s / 60), std::fmod(s, 60));
  return fmt::format("{:.1f} h", s / 3600);
}

int64_t RunPlan::model_loads() const {
  int64_t n = 0;
  std::optional<std::tuple<size_t, int64_t, std::string>> current;
  for (const Visit& v : visits) {
    const Cell& c = cells[units[v.unit][0]];
    if (c.config.engine != "fish") continue;  // a llama.cpp cell: FISH loads nothing
    const auto key = std::make_tuple(c.model_index, c.config.requant, c.config.kquant_repack);
    if (current != key) ++n;
    current = key;
  }
  return n;
}

bool path_pending(const ResultsWriter& w, const std::string& id, const std::string& path,
                  bool retry_errors) {
  const std::string st = w.status(id, path);
  if (st == "error") return retry_errors;
  if (st == "skipped") return path_unavailable(path).empty();
  return st != "ok";
}

// One path of a FISH cell: its row (kept from the first visit), every visit's samples.
struct PathAcc {
  std::string path;
  json row;
  PathSamples samples;
  uint64_t gpu_fallbacks = 0;
  double vram_peak_MB = 0;
  bool open = true;  // false once its row is written
};

// A llama.cpp twin taking turns with the FISH cell's repetitions.
struct TwinAcc {
  size_t cell;
  std::string path;
  int n_threads;
  std::unique_ptr<LlamaBenchBlocks> blocks;
  PathSamples samples;
};

struct CellRunner::CellState {
  bool started = false, finished = false;
  int64_t visits = 0;
  std::vector<PathAcc> paths;
  std::vector<TwinAcc> twins;
  double t_s = 0;  // seconds inside this cell's visits
  std::optional<double> rss_MB;
};

// The current model load and the current model's quality reference.
struct CellRunner::Loaded {
  std::optional<std::tuple<size_t, int64_t, std::string>> key;  // model, requant, kquant_repack
  std::shared_ptr<const Model> model;
  std::optional<Tokenizer> tok;
  std::string error;
  std::vector<int32_t> prompt;
  std::optional<size_t> ref_model;
  std::optional<Result<QualityReference>> ref;
};

// One path of a FISH cell on one visit: the placement outlives the session.
struct CellRunner::PathRun {
  size_t acc;  // into CellState::paths
  std::unique_ptr<CellPlacement> gpu;
  std::unique_ptr<Session> session;
  DraftSetup draft;  // speculative cells: the drafter (and the draft model's CPU session)
};

CellRunner::CellRunner(const RunPlan& plan, bool retry_errors, ResultsWriter& writer,
                       std::string run_id, RunReferences refs)
    : plan_(plan),
      e_(plan.e),
      retry_errors_(retry_errors),
      writer_(writer),
      run_id_(std::move(run_id)),
      refs_(refs),
      loaded_(std::make_unique<Loaded>()) {
  for (size_t i = 0; i < plan_.cells.size(); ++i) {
    state_.push_back(std::make_unique<CellState>());
    for (const std::string& p : e_.measure.paths) n_pending_ += pending(i, p);
  }
}

CellRunner::~CellRunner() = default;

bool CellRunner::pending(size_t i, const std::string& path) const {
  return path_pending(writer_, plan_.ids[i], path, retry_errors_);
}

// Everything of a row but status, error and metrics.
json CellRunner::row_base(size_t i, const std::string& path) const {
  const Cell& c = plan_.cells[i];
  json r;
  r["kind"] = "row";
  r["run_id"] = run_id_;
  r["cell_id"] = plan_.ids[i];
  r["cell_index"] = c.index;
  r["path"] = path;
  r["status"] = "ok";
  r["error"] = nullptr;
  r["model"] = e_.models[c.model_index];
  r["model_sha256"] = plan_.models.at(c.model_index).sha256;
  r["config"] = fields_to_json(c.config, config_fields());
  r["workload"] = workload_json(e_.workload);
  r["placement"] = {{"gpu_layers", 0}, {"gpu_detail", ""}};
  r["metrics"] = empty_metrics_json();
  r["validity"] = json::array();
  r["t_wall_s"] = 0.0;
  return r;
}

bool CellRunner::emit(json row, size_t i, double t_s) {
  const Cell& c = plan_.cells[i];
  row["t_wall_s"] = t_s;
  const std::string status = row["status"];
  const std::string path = row["path"];
  written_.insert({i, path});
  n_ok_ += status == "ok";
  n_err_ += status == "error";
  n_skip_ += status == "skipped";
  if (Status st = writer_.append(row); !st.ok()) {
    std::fprintf(stderr, "fish run: %s\n", st.error().message.c_str());
    return false;
  }
  ++n_done_;
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
  const double el = now_s() - t_start_;
  std::fprintf(stderr, "fish run: [%zu/%zu] #%lld %s %s %s: %s | %s elapsed, ETA %s\n", n_done_,
               n_pending_, static_cast<long long>(c.index), cell_axes_text(c).c_str(), path.c_str(),
               status.c_str(), what.c_str(), duration_text(el).c_str(),
               visits_done_ == 0 ? "after the first visit"
                                 : duration_text(el / double(visits_done_) *
                                                 double(plan_.visits.size() - visits_done_))
                                       .c_str());
  return true;
}

bool CellRunner::emit_error(json row, size_t i, const std::string& status, const std::string& why,
                            double t_s) {
  row["status"] = status;
  row["error"] = why;
  return emit(std::move(row), i, t_s);
}

void CellRunner::ensure_model(const Cell& c) {
  Loaded& L = *loaded_;
  const auto key = std::make_tuple(c.model_index, c.config.requant, c.config.kquant_repack);
  if (L.key == key) return;
  if (L.ref_model != c.model_index) {
    L.ref.reset();
    L.ref_model.reset();
  }
  L.key = key;
  L.model.reset();
  L.tok.reset();
  L.prompt.clear();
  const ModelEntry& me = plan_.models.at(c.model_index);
  L.error = me.error;
  auto lo = model_load_options(c.config);
  if (L.error.empty() && !lo.ok()) L.error = lo.error().message;
  if (!L.error.empty()) return;
  // With a gpu path, each session packs the x16 copies of the matrices it runs on the CPU
  // (ModelLoadOptions::defer_x16): the cpu path all of them, a gpu path those off the device.
  lo.value().defer_x16 =
      std::find(e_.measure.paths.begin(), e_.measure.paths.end(), "gpu") != e_.measure.paths.end();
  auto m = Model::load(me.path, lo.value());
  if (!m.ok()) {
    L.error = m.error().message;
    return;
  }
  L.model = m.value();
  auto t = Tokenizer::from_gguf(L.model->gguf());
  if (t.ok()) L.tok = std::move(t.value());
  auto pr = workload_prompt(e_.workload, L.tok ? &*L.tok : nullptr, L.model->params().n_vocab);
  if (!pr.ok())
    L.error = pr.error().message;
  else
    L.prompt = std::move(pr.value());
}

bool CellRunner::run() {
  t_start_ = now_s();
  for (const Visit& v : plan_.visits) {
    if (!visit(v)) return false;
    ++visits_done_;
  }
  return true;
}

bool CellRunner::visit(const Visit& v) {
  const std::vector<size_t>& unit = plan_.units[v.unit];
  for (size_t k = 0; k < unit.size(); ++k) {
    const size_t i = unit[k];
    const bool peer = plan_.cells[i].config.engine == "llama.cpp";
    // A twin runs with its FISH cell; what that left (paths it could not take) runs on its own
    // at the unit's last visit, as a llama.cpp cell that is no twin does.
    if (peer && !v.last) continue;
    bool ok = true;
    try {
      ok = peer ? run_peer_cell(i) : visit_fish_cell(i, v);
    } catch (...) {
      ok = fail_cell(i, describe_current_exception());
    }
    if (!ok) return false;
  }
  return true;
}

// An engine llama.cpp cell: llama-bench per path on the model file (harness/peer_llama.h); FISH
// loads nothing.
bool CellRunner::run_peer_cell(size_t i) {
  const Cell& c = plan_.cells[i];
  CellState& cs = *state_[i];
  if (cs.finished) return true;
  cs.finished = true;
  const ModelEntry& me = plan_.models.at(c.model_index);
  const double t0 = now_s();
  for (const std::string& path : e_.measure.paths) {
    if (!pending(i, path) || written_.count({i, path})) continue;
    json row = row_base(i, path);
    std::string why;
    if (Status st = check_env_knobs(false); !st.ok()) why = st.error().message;
    if (why.empty()) why = me.error;
    if (why.empty()) why = llama_unsupported(c.config, e_.quality, me.path);
    if (!why.empty()) {
      if (!emit_error(std::move(row), i, "error", why, now_s() - t0)) return false;
      continue;
    }
    const int n_threads = resolved_threads(c.config);
    auto pm = measure_llama_bench(c.config, e_.workload, e_.measure, path, me.path, n_threads);
    if (!pm.ok()) {
      if (!emit_error(std::move(row), i, "error", pm.error().message, now_s() - t0)) return false;
      continue;
    }
    PathSamples ps;
    ps.prefill_tok_s = pm.value().prefill_tok_s;
    ps.decode_tok_s = pm.value().decode_tok_s;
    fill_peer_row(row, ps, pm.value().peer, n_threads, e_.measure.max_cv);
    if (!emit(std::move(row), i, now_s() - t0)) return false;
  }
  return true;
}

// The cell's open paths on this visit: a session each (and the gpu path's placement) into
// `runs`; a path that cannot run writes its skipped or error row and closes. False when a row
// could not be written.
bool CellRunner::open_paths(size_t i, double t0, std::vector<PathRun>& runs) {
  const Cell& c = plan_.cells[i];
  CellState& cs = *state_[i];
  const Loaded& L = *loaded_;
  for (size_t a = 0; a < cs.paths.size(); ++a) {
    PathAcc& pa = cs.paths[a];
    if (!pa.open) continue;
    auto close_with = [&](const std::string& status, const std::string& why) {
      pa.open = false;
      return emit_error(pa.row, i, status, why, cs.t_s + now_s() - t0);
    };
    // A bad FISH_* value fails the paths it affects (FISH_GPU*: the gpu rows), not skips them.
    if (Status st = check_env_knobs(pa.path == "gpu"); !st.ok()) {
      if (!close_with("error", st.error().message)) return false;
      continue;
    }
    if (const std::string why = path_unavailable(pa.path); !why.empty()) {
      if (!close_with("skipped", why)) return false;
      continue;
    }
    if (!L.error.empty()) {
      if (!close_with("error", L.error)) return false;
      continue;
    }
    const int64_t need = workload_ctx_need(e_.workload, c.config.depth);
    if (need > c.config.n_ctx) {
      if (!close_with(
              "error",
              fmt::format("{} = {} exceed n_ctx {} (hint: raise n_ctx or exclude the cell)",
                          c.config.depth < 0 ? "n_prompt + n_gen" : "depth + max(n_prompt, n_gen)",
                          need, c.config.n_ctx)))
        return false;
      continue;
    }
    // The gpu path: the cpu path's options plus the placement of the cell's GpuRequest.
    auto plan = plan_session(c.config, pa.path == "gpu");
    if (!plan.ok()) {
      if (!close_with("error", plan.error().message)) return false;
      continue;
    }
    SessionOptions& opt = plan.value().session;
    PathRun r{a, nullptr, nullptr, {}};
    if (plan.value().gpu) {
      auto pl = CellPlacement::place(*L.model, *plan.value().gpu);
      if (!pl.ok()) {
        if (!close_with("error", pl.error().message)) return false;
        continue;
      }
      r.gpu = std::move(pl.value());
      opt.gpu = r.gpu->placement();
      pa.row["placement"] = {{"gpu_layers", r.gpu->gpu_layers()}, {"gpu_detail", r.gpu->detail()}};
      pa.vram_peak_MB = std::max(pa.vram_peak_MB, r.gpu->vram_MB());
      pa.row["metrics"]["vram_peak_MB"] = pa.vram_peak_MB;  // an error row still says it
    }
    auto sess = Session::create(L.model, opt);
    if (!sess.ok()) {
      if (!close_with("error", sess.error().message)) return false;
      continue;
    }
    r.session = std::move(sess.value());
    auto draft = cell_drafter(c.config, *L.model);
    if (!draft.ok()) {
      if (!close_with("error", draft.error().message)) return false;
      continue;
    }
    r.draft = std::move(draft.value());
    runs.push_back(std::move(r));
  }

  return true;
}

// llama.cpp twins (harness/peer_llama.h): the unit's other cells, which differ only in engine /
// llama_bench, take turns with this cell's repetitions, measure.peer_block per llama-bench call,
// on the paths this cell runs. Chosen at the first visit; a twin that cannot run (unsupported
// fields, no binary, ...) is left to its own cell, which writes the reason.
void CellRunner::plan_twins(size_t i, const std::vector<size_t>& unit,
                            const std::vector<PathRun>& runs) {
  const Cell& c = plan_.cells[i];
  CellState& cs = *state_[i];
  if (e_.measure.peer_block <= 0 || !check_env_knobs(false).ok()) return;
  const ModelEntry& me = plan_.models.at(c.model_index);
  for (size_t k = 1; k < unit.size(); ++k) {
    const size_t j = unit[k];
    const Config& tc = plan_.cells[j].config;
    if (!llama_unsupported(tc, e_.quality, me.path).empty() || !resolve_llama_bench(tc).ok())
      continue;
    const int nt = resolved_threads(tc);
    for (const PathRun& r : runs) {
      const std::string& p = cs.paths[r.acc].path;
      if (!pending(j, p)) continue;
      cs.twins.push_back({j,
                          p,
                          nt,
                          std::make_unique<LlamaBenchBlocks>(tc, e_.workload, e_.measure, p,
                                                             me.path, nt, e_.measure.peer_block),
                          {}});
    }
  }
}

bool CellRunner::visit_fish_cell(size_t i, const Visit& v) {
  const Cell& c = plan_.cells[i];
  CellState& cs = *state_[i];
  if (cs.finished) return true;
  if (!cs.started) {
    cs.started = true;
    for (const std::string& p : e_.measure.paths)
      if (pending(i, p)) cs.paths.push_back(PathAcc{p, row_base(i, p), {}, 0, 0, true});
  }
  if (std::none_of(cs.paths.begin(), cs.paths.end(), [](const PathAcc& a) { return a.open; }) &&
      cs.twins.empty()) {
    cs.finished = true;  // nothing left to run: no model load
    return true;
  }
  const double t0 = now_s();
  ensure_model(c);
  const Loaded& L = *loaded_;
  reset_peak_rss();  // the peak is the visit's (all its paths)
  std::vector<PathRun> runs;
  if (!open_paths(i, t0, runs)) return false;
  if (cs.visits == 0) plan_twins(i, plan_.units[v.unit], runs);
  if (runs.empty()) {
    // Every path's row is written (or none could run on this visit): the twins end with what
    // they have.
    std::vector<PathRun> none;
    cs.t_s += now_s() - t0;
    return finish_fish_cell(i, none);  // (its rows' t_wall_s count from here)
  }

  // The repetitions of the paths and twins, back to back (interleaved per measure.interleave).
  std::vector<std::function<Result<RepSample>()>> fns;
  for (PathRun& r : runs) {
    Session* s = r.session.get();
    const std::vector<int32_t>* prompt = &L.prompt;
    const int64_t depth = c.config.depth, n_gen = e_.workload.n_gen;
    const std::optional<SpecDecode> spec =
        r.draft.drafter ? std::optional<SpecDecode>({r.draft.drafter.get(), c.config.draft_n})
                        : std::nullopt;
    fns.push_back([s, prompt, n_gen, depth, spec] {
      return run_repetition(*s, *prompt, n_gen, depth, spec ? &*spec : nullptr);
    });
  }
  // llama-bench warms up in every call: after the first visit a twin's warmup turns are no-ops
  // instead of llama-bench samples thrown away.
  // A twin that failed in an earlier visit stays failed (no more llama-bench calls).
  for (TwinAcc& t : cs.twins) {
    LlamaBenchBlocks* b = t.blocks.get();
    const std::optional<Error> failed = t.samples.error;
    int64_t skip = cs.visits > 0 ? e_.measure.warmup : 0;
    fns.push_back([b, skip, failed]() mutable -> Result<RepSample> {
      if (failed) return *failed;
      if (skip > 0) {
        --skip;
        return RepSample{};
      }
      return b->next();
    });
  }
  MeasureSpec spec = e_.measure;
  spec.repetitions = v.repetitions;
  const std::vector<PathSamples> samples = measure_paths(spec, fns);
  ++cs.visits;
  if (const std::optional<double> rss = peak_rss_MB())
    cs.rss_MB = std::max(cs.rss_MB.value_or(0.0), *rss);
  for (size_t p = 0; p < runs.size(); ++p) {
    PathAcc& pa = cs.paths[runs[p].acc];
    append(pa.samples, samples[p]);
    pa.gpu_fallbacks += runs[p].session->gpu_fallbacks();
    // vram_peak_MB: placement plus the matmul scratch the runs allocated (kept until the last
    // weight goes).
    if (runs[p].gpu) pa.vram_peak_MB = std::max(pa.vram_peak_MB, runs[p].gpu->resident_MB());
  }
  for (size_t t = 0; t < cs.twins.size(); ++t)
    append(cs.twins[t].samples, samples[runs.size() + t]);
  cs.t_s += now_s() - t0;
  // A path that failed stops: its error row now, the others go on.
  for (size_t p = 0; p < runs.size(); ++p) {
    PathAcc& pa = cs.paths[runs[p].acc];
    if (!pa.samples.error || !pa.open) continue;
    pa.open = false;
    if (!emit_error(pa.row, i, "error", pa.samples.error->message, cs.t_s)) return false;
  }
  if (!v.last) return true;
  return finish_fish_cell(i, runs);
}

// The cell's rows from every visit's samples (runs: the last visit's sessions and placements).
bool CellRunner::finish_fish_cell(size_t i, std::vector<PathRun>& runs) {
  CellState& cs = *state_[i];
  cs.finished = true;
  // A row's t_wall_s: the cell's visits so far plus this finish up to the row (quality included).
  const double t_finish = now_s();
  auto elapsed = [&] { return cs.t_s + now_s() - t_finish; };
  const Loaded& L = *loaded_;
  // The cell's cpu path: the gpu rows' speeds are also given relative to it (same repetitions).
  const PathSamples* cpu_samples = nullptr;
  for (const PathAcc& pa : cs.paths)
    if (pa.path == "cpu" && pa.open && !pa.samples.error) cpu_samples = &pa.samples;
  for (PathRun& r : runs) {
    PathAcc& pa = cs.paths[r.acc];
    if (!pa.open) continue;
    pa.open = false;
    json& row = pa.row;
    const PathSamples& ps = pa.samples;
    const DecodeWeights dw = decode_weights(*r.session, r.gpu.get());
    // config.n_threads stays as given (0: the default); what it resolved to is recorded here.
    row["n_threads_resolved"] = r.session->n_threads();
    if (const KquantRepackStats& kr = L.model->kquant_repack(); kr.matrices + kr.deferred > 0)
      row["kquant_repack"] = {
          {"matrices", kr.matrices},
          {"deferred", kr.deferred},
          {"packed_MB", double(kr.packed_bytes) / 1e6},
          {"gguf_MB", double(kr.gguf_bytes) / 1e6},
          {"released_MB", double(kr.released_bytes) / 1e6},
          {"huge_pages_MB", kr.huge_requested ? json(double(kr.huge_bytes) / 1e6) : json(nullptr)},
          {"seconds", kr.seconds}};
    r.session.reset();
    // The placement stays for the quality runs; then the device memory goes back to zero.
    struct ReleaseAtEnd {
      std::unique_ptr<CellPlacement>& gpu;
      ~ReleaseAtEnd() { gpu.reset(); }
    } release_at_end{r.gpu};
    const std::shared_ptr<const GpuPlacement> placement = r.gpu ? r.gpu->placement() : nullptr;
    json& m = row["metrics"];
    if (r.gpu) m["vram_peak_MB"] = pa.vram_peak_MB;
    speed_metrics(m, ps, dw, r.gpu != nullptr, cpu_samples, refs_);
    if (cs.rss_MB) m["rss_peak_MB"] = *cs.rss_MB;
    row["validity"] = validity_flags(ps, e_.measure.max_cv);
    if (!e_.quality.metrics.empty()) add_quality(i, pa, placement);
    if (r.gpu) {
      row["placement"]["gpu_fallbacks"] = pa.gpu_fallbacks;
      for (const std::string& f : gpu_validity_flags(pa.gpu_fallbacks, placement.get()))
        row["validity"].push_back(f);
    }
    if (!emit(row, i, elapsed())) return false;
  }
  for (TwinAcc& t : cs.twins) {
    json row = row_base(t.cell, t.path);
    if (t.samples.error) {
      if (!emit_error(std::move(row), t.cell, "error", t.samples.error->message, elapsed()))
        return false;
      continue;
    }
    fill_peer_row(row, t.samples, t.blocks->peer(), t.n_threads, e_.measure.max_cv);
    if (!emit(std::move(row), t.cell, elapsed())) return false;
  }
  cs.twins.clear();
  cs.t_s = elapsed();
  return true;
}

// Quality against the reference (built once per model, with the reference's own Config) into
// the row; a failure makes the row an error naming it.
void CellRunner::add_quality(size_t i, PathAcc& pa,
                             const std::shared_ptr<const GpuPlacement>& placement) {
  const Cell& c = plan_.cells[i];
  const CellState& cs = *state_[i];
  Loaded& L = *loaded_;
  const ModelEntry& me = plan_.models.at(c.model_index);
  json& row = pa.row;
  if (!L.ref) {
    L.ref_model = c.model_index;
    if (!L.tok)
      L.ref.emplace(make_error("quality: {}: the model has no tokenizer", me.path));
    else
      L.ref.emplace(quality_reference(L.model, c.config.requant, me.path, *L.tok, e_.quality));
  }
  if (!L.ref->ok()) {
    row["status"] = "error";
    row["error"] = "quality reference: " + L.ref->error().message;
  } else {
    auto q = measure_quality(L.model, c.config, L.ref->value(), e_.quality, placement);
    if (!q.ok()) {
      row["status"] = "error";
      row["error"] = "quality: " + q.error().message;
    } else {
      quality_metrics_json(q.value(), row["metrics"]);
      pa.gpu_fallbacks += q.value().gpu_fallbacks;
    }
  }
  if (auto rss = peak_rss_MB())
    row["metrics"]["rss_peak_MB"] = std::max(cs.rss_MB.value_or(0.0), *rss);
}

// The cell boundary: an exception a cell throws (std::bad_alloc past the memory estimate, ...)
// becomes an error row for each path the cell had left; the model is loaded afresh for the next
// cell and the sweep goes on.
bool CellRunner::fail_cell(size_t i, const std::string& why) {
  CellState& cs = *state_[i];
  cs.finished = true;
  cs.twins.clear();
  loaded_ = std::make_unique<Loaded>();
  for (const std::string& p : e_.measure.paths) {
    if (!pending(i, p) || written_.count({i, p})) continue;
    if (!emit_error(row_base(i, p), i, "error", why, cs.t_s)) return false;
  }
  return true;
}

}  // namespace fish
