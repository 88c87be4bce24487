// llama.cpp as a peer engine: a cell with engine "llama.cpp" is measured by llama-bench (a
// subprocess, no shell) on the same model file, with the cell's workload and Config mapped onto
// llama-bench's flags, its JSONL (samples_ts) read into the same speed metrics as FISH rows.
//
//   workload.n_prompt, n_gen   -p N -n 0 and -p 0 -n G (two tests: prefill, decode)
//   depth                      -1 (decode follows the prompt): decode runs at -d n_prompt, the
//                              prefill at -d 0; >= 0: both at -d depth
//   n_threads                  -t (0: FISH's default, FISH_THREADS or all hardware threads)
//   n_batch                    -b and -ub
//   path cpu / gpu, gpu_layers -ngl 0 / -ngl 999 (gpu_layers -1) or -ngl gpu_layers
//   measure.repetitions        -r;  measure.warmup 0: --no-warmup (else llama-bench's warmup)
// What llama.cpp cannot express (requant, FISH weight paths and their int4 knobs, f32
// activations, an ISA cap, gpu_requant, stage 1 offload, a VRAM budget, a full SWA cache, FISH
// tensor types in the file, quality metrics) makes the row an error naming the field.
//
// The row's "peer" object records the binary, its arguments, llama-bench's build_commit,
// backends, gpu_info, cpu_info, model_type, the device lines it printed, and the build-info.txt
// of scripts/peer/build_llama_cpp.sh when one lies beside the binary (or one folder up).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/config.h"
#include "harness/experiment.h"
#include "harness/measure.h"

namespace fish {

// The commit of scripts/peer/llama_cpp.pin (a test keeps them equal): the build directories of
// the backend names are $FISH_CACHE/peer/<kLlamaCppCommitShort>-<backend>.
inline constexpr std::string_view kLlamaCppCommitShort = "0c1e570";

// One llama-bench test: a line of `-o jsonl` or an element of `-o json`.
struct LlamaBenchTest {
  nlohmann::json json;  // the whole object
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
  std::vector<double> samples_ts;  // tokens/s per repetition
  bool is_prefill() const { return n_prompt > 0 && n_gen == 0; }
  bool is_decode() const { return n_gen > 0 && n_prompt == 0; }
};

// Parses llama-bench output: JSONL (one object per line; blank lines ignored) or a JSON array.
// Each test needs integers n_prompt, n_gen (n_depth: 0 when absent) and samples_ts, a non-empty
// list of positive numbers. Errors name `label`, the line (or array element) and what is wrong:
// "out.jsonl:3: not JSON: \"garbage\"", "...: samples_ts: expected a non-empty list of
// positive numbers"; empty text is an error ("no llama-bench results").
Result<std::vector<LlamaBenchTest>> parse_llama_bench_output(std::string_view text,
                                                             std::string_view label);

// What of the cell llama.cpp cannot run, as the error message; empty when it can. `model_path`
// is the resolved model file (checked for FISH tensor types; "" skips the check).
std::string llama_unsupported(const Config& c, const QualitySpec& q,
                              const std::string& model_path);

// The llama-bench binary of a cell: llama_bench as a path, a backend name (cpu, vulkan, cuda:
// $FISH_CACHE/peer/<commit>-<backend>/bin/llama-bench), or FISH_LLAMA_BENCH when empty. Errors:
// none given, or the file is missing / not executable (with a hint naming the build script).
Result<std::string> resolve_llama_bench(const Config& c);

// The llama-bench argument lists (without the binary) one cell runs: one or two invocations.
std::vector<std::vector<std::string>> llama_bench_invocations(const std::string& model_path,
                                                              const Workload& w,
                                                              const MeasureSpec& m,
                                                              const Config& c,
                                                              const std::string& path,
                                                              int n_threads);

struct PeerMeasurement {
  std::vector<double> prefill_tok_s, decode_tok_s;
  nlohmann::json peer;  // the row's "peer" object
};

// Runs the invocations of the cell and collects the samples. Errors (the row's error message):
// the binary's (resolve_llama_bench), a run that crashes, times out or exits non-zero (naming
// how, with llama-bench's own error lines: a model it rejects says so), output that does not
// parse, or tests that are not the ones asked for.
Result<PeerMeasurement> measure_llama_bench(const Config& c, const Workload& w,
                                            const MeasureSpec& m, const std::string& path,
                                            const std::string& model_path, int n_threads);

// Whether `peer` is a llama.cpp twin of the FISH cell `fish`: every field equal but engine and
// llama_bench.
bool is_llama_twin(const Config& fish, const Config& peer);

// The repetitions of one llama.cpp cell in blocks, to take turns with its FISH twin's
// repetitions (measure.peer_block): next() hands out one repetition, and when none is left runs
// llama-bench for `block` more (measure_llama_bench with repetitions = block).
class LlamaBenchBlocks {
 public:
  LlamaBenchBlocks(Config c, Workload w, MeasureSpec m, std::string path, std::string model_path,
                   int n_threads, int64_t block);
  Result<RepSample> next();
  // The row's "peer" object: the first call's, with every call's arguments and wall time.
  const nlohmann::json& peer() const { return peer_; }

 private:
  Config c_;
  Workload w_;
  MeasureSpec m_;
  std::string path_, model_path_;
  int n_threads_;
  std::vector<double> prefill_, decode_;
  size_t pos_ = 0;
  nlohmann::json peer_;
};

// build-info.txt (KEY=VALUE lines) beside the binary or in its parent folder, as an object;
// null when there is none.
nlohmann::json llama_build_info(const std::string& binary);

// `fish import llama-bench`: the tests of `file` (JSONL or a JSON array) as one FISH results
// file `out_dir`/<file stem>.jsonl: a context line (experiment "import-<stem>", the source file
// and its sha256, llama.cpp's build_commit / cpu_info / gpu_info of the first test) and one row per
// test (engine llama.cpp; n_threads, n_batch, gpu_layers from the test; path gpu when layers
// were offloaded to a non-CPU backend; a prefill test fills prefill_tok_s, a decode test
// decode_tok_s; a -pg test, which times both together, is an error row). Returns the path
// written. Errors: unreadable or unparsable input, an unwritable output.
Result<std::string> import_llama_bench(const std::string& file, const std::string& out_dir);

}  // namespace fish
