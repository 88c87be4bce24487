// llama.cpp as a peer engine; see peer_llama.h.
#include "harness/peer_llama.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/env_knobs.h"
#include "base/path_checks.h"
#include "base/sha256.h"
#include "base/subprocess.h"
#include "engine/gguf.h"
#include "harness/measure.h"
#include "harness/measure_context.h"
#include "harness/metrics.h"
#include "kernels/thread_pool.h"
#include "quant/types.h"

namespace fish {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr double kDefaultTimeoutS = 1800;  // one invocation; an 8B pp512 x 6 takes ~1 min

std::string clip(std::string_view s, size_t n = 80) {
  std::string t(s.substr(0, n));
  for (char& ch : t)
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  return s.size() > n ? t + "..." : t;
}

// One test object -> LlamaBenchTest; problems appended as "what is wrong".
std::optional<LlamaBenchTest> read_test(const json& j, std::string* problem) {
  if (!j.is_object()) {
    *problem = fmt::format("expected a JSON object, found {}", j.is_array() ? "a list" : j.dump());
    return std::nullopt;
  }
  LlamaBenchTest t;
  t.json = j;
  for (const char* k : {"n_prompt", "n_gen"}) {
    if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<int64_t>() < 0) {
      *problem = fmt::format("{}: expected an integer >= 0, found {}", k,
                             j.contains(k) ? clip(j[k].dump()) : "nothing");
      return std::nullopt;
    }
  }
  t.n_prompt = j["n_prompt"].get<int64_t>();
  t.n_gen = j["n_gen"].get<int64_t>();
  if (j.contains("n_depth")) {
    if (!j["n_depth"].is_number_integer() || j["n_depth"].get<int64_t>() < 0) {
      *problem =
          fmt::format("n_depth: expected an integer >= 0, found {}", clip(j["n_depth"].dump()));
      return std::nullopt;
    }
    t.n_depth = j["n_depth"].get<int64_t>();
  }
  const json* s = j.contains("samples_ts") ? &j["samples_ts"] : nullptr;
  bool good = s && s->is_array() && !s->empty();
  if (good)
    for (const json& x : *s) {
      good = good && x.is_number() && std::isfinite(x.get<double>()) && x.get<double>() > 0;
      if (good) t.samples_ts.push_back(x.get<double>());
    }
  if (!good) {
    *problem = fmt::format("samples_ts: expected a non-empty list of positive numbers, found {}",
                           s ? clip(s->dump()) : "nothing");
    return std::nullopt;
  }
  return t;
}

std::string str_or(const json& j, const char* k) {
  return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
}

// llama-bench's own complaint: its stderr lines that say error / failed, else the last few.
std::string stderr_gist(const std::string& err) {
  std::vector<std::string> lines, picked;
  std::istringstream in(err);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  for (const std::string& l : lines)
    if (l.find("error") != std::string::npos || l.find("failed") != std::string::npos ||
        l.find("invalid") != std::string::npos || l.find("unknown") != std::string::npos)
      picked.push_back(l);
  if (picked.empty())
    for (size_t i = lines.size() > 3 ? lines.size() - 3 : 0; i < lines.size(); ++i)
      picked.push_back(lines[i]);
  if (picked.size() > 4) picked.erase(picked.begin(), picked.end() - 4);
  std::string s;
  for (const std::string& l : picked) s += (s.empty() ? "" : " | ") + clip(l, 200);
  return s.empty() ? "(nothing on stderr)" : s;
}

// Device lines llama.cpp prints at start (Vulkan: "ggml_vulkan: 0 = NVIDIA H200 ...", CUDA:
// "  Device 0: NVIDIA H200, compute capability 9.0, ...").
std::vector<std::string> device_lines(const std::string& err) {
  std::vector<std::string> out;
  std::istringstream in(err);
  for (std::string l; std::getline(in, l);)
    if ((l.rfind("ggml_vulkan: ", 0) == 0 && l.find(" = ") != std::string::npos) ||
        l.find("Device ") != std::string::npos)
      if (out.size() < 8) out.push_back(l);
  return out;
}

std::string cache_dir() {
  return fish_cache_dir();
}

}  // namespace

Result<std::vector<LlamaBenchTest>> parse_llama_bench_output(std::string_view text,
                                                             std::string_view label) {
  std::vector<LlamaBenchTest> out;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos)
    return make_error("{}: no llama-bench results (empty output)", label);
  std::string problem;
  if (text[first] == '[') {  // -o json
    const json arr = json::parse(text.begin(), text.end(), nullptr, false);
    if (arr.is_discarded() || !arr.is_array())
      return make_error("{}: starts with '[' but is not a JSON array (-o json output cut short?)",
                        label);
    for (size_t i = 0; i < arr.size(); ++i) {
      auto t = read_test(arr[i], &problem);
      if (!t) return make_error("{}: element {}: {}", label, i, problem);
      out.push_back(std::move(*t));
    }
  } else {  // -o jsonl
    size_t line_no = 0, pos = 0;
    while (pos <= text.size()) {
      const size_t nl = std::min(text.find('\n', pos), text.size());
      const std::string_view line = text.substr(pos, nl - pos);
      pos = nl + 1;
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      const json j = json::parse(line.begin(), line.end(), nullptr, false);
      if (j.is_discarded())
        return make_error("{}:{}: not JSON: \"{}\"", label, line_no, clip(line));
      auto t = read_test(j, &problem);
      if (!t) return make_error("{}:{}: {}", label, line_no, problem);
      out.push_back(std::move(*t));
    }
  }
  if (out.empty()) return make_error("{}: no llama-bench results (an empty list)", label);
  return out;
}

std::string llama_unsupported(const Config& c, const QualitySpec& q,
                              const std::string& model_path) {
  const Config d;
  std::vector<std::string> why;
  if (c.requant != 0)
    why.push_back(fmt::format("requant {} (FISH's load-time re-quantisation)", c.requant));
  if (c.weight_path != d.weight_path)
    why.push_back(fmt::format("weight_path {} (FISH's CPU weight paths)", c.weight_path));
  if (c.act != d.act) why.push_back(fmt::format("act {} (FISH's f32 reference)", c.act));
  if (c.isa != d.isa) why.push_back(fmt::format("isa {} (FISH's ISA cap)", c.isa));
  if (c.gpu_requant > 0) why.push_back(fmt::format("gpu_requant {}", c.gpu_requant));
  if (!c.gpu_span) why.push_back("gpu_span false (FISH's stage 1 offload)");
  if (!c.gpu_pipeline) why.push_back("gpu_pipeline false (FISH's decode loop)");
  if (c.vram_budget_mb != 0) why.push_back(fmt::format("vram_budget_mb {}", c.vram_budget_mb));
  if (c.swa_kv != d.swa_kv) why.push_back(fmt::format("swa_kv {}", c.swa_kv));
  if (c.speculative != d.speculative)
    why.push_back(fmt::format("speculative {} (FISH's speculative decoding)", c.speculative));
  if (!q.metrics.empty())
    why.push_back(
        "quality metrics (llama-bench measures speed only: exclude the llama.cpp cells "
        "from a quality experiment)");
  if (!model_path.empty()) {
    auto g = GgufFile::open(model_path);
    if (g.ok()) {
      for (const GgufTensorInfo& t : g.value().tensors())
        if (is_fish_type(t.type)) {
          why.push_back(
              fmt::format("the model has FISH tensor types ({}: {}), which llama.cpp "
                          "cannot load",
                          t.name, type_name(t.type)));
          break;
        }
    }
  }
  if (why.empty()) return "";
  std::string s;
  for (const std::string& w : why) s += (s.empty() ? "" : "; ") + w;
  return "engine llama.cpp cannot express " + s +
         " (hint: exclude these cells for engine llama.cpp)";
}

Result<std::string> resolve_llama_bench(const Config& c) {
  std::string bin = c.llama_bench, from = "llama_bench";
  if (bin == "cpu" || bin == "vulkan" || bin == "cuda") {
    bin = fmt::format("{}/peer/{}-{}/bin/llama-bench", cache_dir(), kLlamaCppCommitShort,
                      c.llama_bench);
    from = fmt::format("llama_bench \"{}\"", c.llama_bench);
  } else if (bin.empty()) {
    auto v = env_value("FISH_LLAMA_BENCH");
    if (!v)
      return make_error(
          "engine llama.cpp: no llama-bench binary (set the llama_bench field or "
          "FISH_LLAMA_BENCH; hint: scripts/peer/build_llama_cpp.sh cpu builds one)");
    bin = *v;
    from = "FISH_LLAMA_BENCH";
  }
  std::error_code ec;
  const auto st = fs::status(bin, ec);
  if (ec || !fs::exists(st))
    return make_error(
        "engine llama.cpp: llama-bench {} (from {}) does not exist (hint: "
        "scripts/peer/build_llama_cpp.sh {} builds it)",
        bin, from, c.llama_bench == "vulkan" || c.llama_bench == "cuda" ? c.llama_bench : "cpu");
  if (!fs::is_regular_file(st))
    return make_error("engine llama.cpp: llama-bench {} (from {}) is not a file", bin, from);
  if ((st.permissions() &
       (fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec)) == fs::perms::none)
    return make_error("engine llama.cpp: llama-bench {} (from {}) is not executable", bin, from);
  return bin;
}

std::vector<std::vector<std::string>> llama_bench_invocations(const std::string& model_path,
                                                              const Workload& w,
                                                              const MeasureSpec& m, const Config& c,
                                                              const std::string& path,
                                                              int n_threads) {
  const std::string ngl =
      path == "gpu" ? (c.gpu_layers < 0 ? std::string("999") : std::to_string(c.gpu_layers)) : "0";
  auto one = [&](int64_t p, int64_t g, int64_t d) {
    std::vector<std::string> a = {"-m",   model_path,
                                  "-p",   std::to_string(p),
                                  "-n",   std::to_string(g),
                                  "-d",   std::to_string(d),
                                  "-t",   std::to_string(n_threads),
                                  "-b",   std::to_string(c.n_batch),
                                  "-ub",  std::to_string(c.n_batch),
                                  "-ngl", ngl,
                                  "-r",   std::to_string(m.repetitions),
                                  "-o",   "jsonl"};
    if (path != "gpu") a.insert(a.end(), {"-dev", "none"});  // a GPU build offloads nothing
    if (m.warmup == 0) a.push_back("--no-warmup");
    return a;
  };
  if (c.depth >= 0) return {one(w.n_prompt, w.n_gen, c.depth)};
  return {one(w.n_prompt, 0, 0), one(0, w.n_gen, w.n_prompt)};
}

json llama_build_info(const std::string& binary) {
  const fs::path b(binary);
  for (const fs::path& dir : {b.parent_path(), b.parent_path().parent_path()}) {
    std::ifstream f(dir / "build-info.txt");
    if (!f) continue;
    json j = json::object();
    for (std::string l; std::getline(f, l);) {
      const size_t eq = l.find('=');
      if (eq != std::string::npos && eq > 0) j[l.substr(0, eq)] = l.substr(eq + 1);
    }
    return j;
  }
  return nullptr;
}

Result<PeerMeasurement> measure_llama_bench(const Config& c, const Workload& w,
                                            const MeasureSpec& m, const std::string& path,
                                            const std::string& model_path, int n_threads) {
  FISH_ASSIGN_OR_RETURN(std::string bin, resolve_llama_bench(c));
  double timeout_s = kDefaultTimeoutS;
  FISH_ASSIGN_OR_RETURN(std::optional<int64_t> t, env_int("FISH_LLAMA_BENCH_TIMEOUT_S"));
  if (t) timeout_s = double(*t);
  PeerMeasurement pm;
  json& peer = pm.peer;
  peer["engine"] = "llama.cpp";
  peer["binary"] = bin;
  peer["build_info"] = llama_build_info(bin);
  peer["args"] = json::array();
  peer["device_log"] = json::array();
  double wall_s = 0;
  for (std::vector<std::string>& args :
       llama_bench_invocations(model_path, w, m, c, path, n_threads)) {
    peer["args"].push_back(args);
    std::vector<std::string> argv = {bin};
    argv.insert(argv.end(), args.begin(), args.end());
    FISH_ASSIGN_OR_RETURN(ProcessResult r, run_process(argv, timeout_s));
    wall_s += r.wall_s;
    if (!r.ok())
      return make_error("llama-bench {} {}: {}", bin, r.how_it_ended(), stderr_gist(r.err));
    if (peer["device_log"].empty())
      for (const std::string& l : device_lines(r.err)) peer["device_log"].push_back(l);
    auto tests = parse_llama_bench_output(r.out, "llama-bench stdout");
    if (!tests.ok())
      return make_error("{} (llama-bench {}; stderr: {})", tests.error().message, bin,
                        stderr_gist(r.err));
    // The tests asked for: a prefill at -d and/or a decode at -d of this invocation.
    const int64_t p = std::stoll(args[3]), g = std::stoll(args[5]), d = std::stoll(args[7]);
    for (const LlamaBenchTest& tt : tests.value()) {
      const bool want = (tt.is_prefill() && p > 0 && tt.n_prompt == p) ||
                        (tt.is_decode() && g > 0 && tt.n_gen == g);
      if (!want || tt.n_depth != d)
        return make_error(
            "llama-bench stdout: a test with n_prompt {}, n_gen {}, n_depth {}; "
            "asked for -p {} -n {} -d {}",
            tt.n_prompt, tt.n_gen, tt.n_depth, p, g, d);
      std::vector<double>& dst = tt.is_prefill() ? pm.prefill_tok_s : pm.decode_tok_s;
      dst.insert(dst.end(), tt.samples_ts.begin(), tt.samples_ts.end());
      const json& j = tt.json;
      for (const char* k :
           {"build_commit", "build_number", "backends", "cpu_info", "gpu_info", "model_type",
            "model_size", "model_n_params", "n_threads", "n_gpu_layers", "n_batch", "n_ubatch",
            "type_k", "type_v", "flash_attn", "devices"})
        if (j.contains(k) && !peer.contains(k)) peer[k] = j[k];
    }
  }
  if (path == "gpu" && peer.value("backends", "") == "CPU")
    return make_error(
        "llama-bench {}: its build has no GPU backend (backends \"CPU\"); the gpu "
        "path needs a vulkan or cuda build (scripts/peer/build_llama_cpp.sh)",
        bin);
  if ((w.n_prompt > 0 && pm.prefill_tok_s.empty()) || (w.n_gen > 0 && pm.decode_tok_s.empty()))
    return make_error("llama-bench {}: its output lacks the {} test", bin,
                      pm.prefill_tok_s.empty() ? "prefill" : "decode");
  peer["wall_s"] = wall_s;
  return pm;
}

bool is_llama_twin(const Config& fish, const Config& peer) {
  if (fish.engine != "fish" || peer.engine != "llama.cpp") return false;
  Config a = fish, b = peer;
  a.engine = b.engine;
  a.llama_bench = b.llama_bench;
  return fields_to_json(a, config_fields()) == fields_to_json(b, config_fields());
}

LlamaBenchBlocks::LlamaBenchBlocks(Config c, Workload w, MeasureSpec m, std::string path,
                                   std::string model_path, int n_threads, int64_t block)
    : c_(std::move(c)),
      w_(std::move(w)),
      m_(std::move(m)),
      path_(std::move(path)),
      model_path_(std::move(model_path)),
      n_threads_(n_threads) {
  m_.repetitions = std::max<int64_t>(block, 1);
}

Result<RepSample> LlamaBenchBlocks::next() {
  if (pos_ >= prefill_.size() || pos_ >= decode_.size()) {
    FISH_ASSIGN_OR_RETURN(PeerMeasurement pm,
                          measure_llama_bench(c_, w_, m_, path_, model_path_, n_threads_));
    if (pm.prefill_tok_s.size() != pm.decode_tok_s.size())
      return make_error("llama-bench: {} prefill and {} decode samples from one call",
                        pm.prefill_tok_s.size(), pm.decode_tok_s.size());
    if (peer_.is_null()) {
      peer_ = pm.peer;
    } else {
      for (const json& a : pm.peer["args"]) peer_["args"].push_back(a);
      peer_["wall_s"] = peer_.value("wall_s", 0.0) + pm.peer.value("wall_s", 0.0);
    }
    prefill_.insert(prefill_.end(), pm.prefill_tok_s.begin(), pm.prefill_tok_s.end());
    decode_.insert(decode_.end(), pm.decode_tok_s.begin(), pm.decode_tok_s.end());
  }
  const RepSample r{prefill_[pos_], decode_[pos_]};
  ++pos_;
  return r;
}

Result<std::string> import_llama_bench(const std::string& file, const std::string& out_dir) {
  std::ifstream f(file, std::ios::binary);
  if (!f) return make_error("{}: cannot read", file);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  FISH_ASSIGN_OR_RETURN(std::vector<LlamaBenchTest> tests, parse_llama_bench_output(text, file));
  std::string stem = fs::path(file).stem().string();
  for (char& ch : stem)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.')
      ch = '_';
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return make_error("{}: cannot create: {}", out_dir, ec.message());
  const std::string out = (fs::path(out_dir) / (stem + ".jsonl")).string();
  if (fs::exists(out, ec) && fs::equivalent(out, file, ec))
    return make_error("{}: the output would overwrite the input", out);

  const std::string run_id = new_run_id();
  const json& t0 = tests.front().json;
  json ctx;
  ctx["kind"] = "context";
  ctx["schema"] = "fish-results/1";
  ctx["harness_version"] = std::string(kHarnessVersion);
  ctx["run_id"] = run_id;
  ctx["experiment"] = "import-" + stem;
  ctx["experiment_file"] = file;
  ctx["experiment_sha256"] = sha256_hex(text);
  ctx["n_cells"] = int64_t(tests.size());
  ctx["shard"] = {{"index", 0}, {"count", 1}};
  ctx["source"] = "fish import llama-bench";
  // The provenance of these rows is llama.cpp's, not a FISH binary's.
  ctx["commit"] = "llama.cpp " + str_or(t0, "build_commit");
  ctx["build_type"] = "llama.cpp";
  ctx["build_flags"] = str_or(t0, "backends");
  ctx["compiler"] = "";
  ctx["cpu"] = str_or(t0, "cpu_info");
  ctx["gpu"] = str_or(t0, "gpu_info").empty() ? json() : json(str_or(t0, "gpu_info"));
  ctx["env"] = json::object();
  ctx["test_time"] = str_or(t0, "test_time");

  std::string lines = ctx.dump() + "\n";
  for (size_t i = 0; i < tests.size(); ++i) {
    const LlamaBenchTest& t = tests[i];
    const json& j = t.json;
    Config c;
    c.engine = "llama.cpp";
    c.llama_bench = "imported";
    c.depth = t.n_depth;
    if (j.contains("n_threads") && j["n_threads"].is_number_integer()) c.n_threads = j["n_threads"];
    if (j.contains("n_batch") && j["n_batch"].is_number_integer()) c.n_batch = j["n_batch"];
    const int64_t ngl = j.contains("n_gpu_layers") && j["n_gpu_layers"].is_number_integer()
                            ? j["n_gpu_layers"].get<int64_t>()
                            : 0;
    const std::string backends = str_or(j, "backends");
    const bool gpu = ngl > 0 && !backends.empty() && backends != "CPU";
    c.gpu_layers = gpu ? (ngl >= 999 ? -1 : ngl) : 0;
    json workload = {{"n_prompt", t.n_prompt},
                     {"n_gen", t.n_gen},
                     {"seed", 0},
                     {"prompt_source", "llama-bench"}};
    const std::string model = str_or(j, "model_filename");
    json r;
    r["kind"] = "row";
    r["run_id"] = run_id;
    r["cell_index"] = int64_t(i);
    r["path"] = gpu ? "gpu" : "cpu";
    r["status"] = "ok";
    r["error"] = nullptr;
    r["model"] = model.empty() ? std::string("unknown") : model;
    r["model_sha256"] = "";
    r["config"] = fields_to_json(c, config_fields());
    r["workload"] = workload;
    r["placement"] = {{"gpu_layers", ngl}, {"gpu_detail", ""}};
    json m = empty_metrics_json();
    PathSamples ps;
    if (t.is_prefill()) {
      m["prefill_tok_s"] = speed_metric_json(t.samples_ts);
      ps.prefill_tok_s = t.samples_ts;
    } else if (t.is_decode()) {
      m["decode_tok_s"] = speed_metric_json(t.samples_ts);
      ps.decode_tok_s = t.samples_ts;
    } else {
      r["status"] = "error";
      r["error"] = fmt::format(
          "llama-bench test {}: n_prompt {} and n_gen {} together (-pg) time prompt and "
          "generation as one; FISH rows keep prefill and decode apart",
          i, t.n_prompt, t.n_gen);
    }
    r["metrics"] = m;
    r["validity"] = validity_flags(ps, MeasureSpec{}.max_cv);
    r["t_wall_s"] = 0.0;
    json peer = {{"engine", "llama.cpp"}, {"imported_from", file}};
    for (const char* k :
         {"build_commit", "build_number", "backends", "cpu_info", "gpu_info", "model_type",
          "model_size", "model_n_params", "n_threads", "n_gpu_layers", "n_batch", "n_ubatch",
          "type_k", "type_v", "flash_attn", "devices", "test_time"})
      if (j.contains(k)) peer[k] = j[k];
    r["peer"] = peer;
    // The cell id: what the test measured (its parameters, not its results).
    json id_src = {
        {"model", r["model"]}, {"config", r["config"]}, {"workload", workload}, {"peer", peer}};
    id_src["peer"].erase("imported_from");
    id_src["peer"].erase("test_time");
    r["cell_id"] = sha256_hex(id_src.dump()).substr(0, 16);
    lines += r.dump() + "\n";
  }
  {
    std::ofstream o(out + ".tmp", std::ios::binary | std::ios::trunc);
    if (!o) return make_error("{}.tmp: cannot write", out);
    o << lines;
    if (!o.flush()) return make_error("{}.tmp: write failed", out);
  }
  fs::rename(out + ".tmp", out, ec);
  if (ec) return make_error("{}: cannot rename into place: {}", out, ec.message());
  return out;
}

}  // namespace fish
