// Experiment files: the declarative JSON a `fish run` executes, and its expansion into cells.
//
// A file (schema_version 1) names the models, the Config defaults, the sweep axes (any Config
// field, as a list or an integer range string "A-B", "A-B+STEP", "A-B*FACTOR"), zip groups of axes
// that move together, exclude rules, and the workload, measure, quality and output sections.
// Every key is described by a field table (engine/config.h for Config; kTopLevelKeys and the
// section tables here), which `fish run --help-fields` prints. Example:
//   {"schema_version": 1, "name": "act_threads",
//    "model": ["models/SmolLM2-135M-Instruct.Q4_1.gguf", "models/gemma-3-270m-q4_k_m.gguf"],
//    "defaults": {"n_ctx": 512},
//    "sweep": {"act": ["int8", "f32"], "n_threads": "1-2"},
//    "exclude": [{"act": "f32", "n_threads": 1}],
//    "workload": {"n_prompt": 64, "n_gen": 32},
//    "measure": {"paths": ["cpu"], "repetitions": 6},
//    "quality": {"metrics": ["top1", "kl", "ppl"], "reference": {"act": "f32"}}}
//
// A cell is one model + one resolved Config. Cells are ordered model-major (one model load per
// model), then by the sweep axes in file order, the first axis outermost; a zip group is one
// axis at the position of its first member. cell_id hashes what determines a cell's results (see
// cell_id()); the measure and output sections do not change it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/config.h"

namespace fish {

inline constexpr int64_t kExperimentSchemaVersion = 1;
// Cells a sweep may have before fish run refuses it (--max-cells raises it): at a few seconds a
// cell, 100000 cells are days of measurement; more is a typo in a range string.
inline constexpr int64_t kDefaultMaxCells = 100000;
inline constexpr std::string_view kHarnessVersion = FISH_VERSION;

// What each measurement runs: n_prompt tokens of prefill, then n_gen greedy decode steps.
struct Workload {
  int64_t n_prompt = 64;
  int64_t n_gen = 32;
  int64_t seed = 1;  // random prompt tokens when no text is given
  std::string text;  // prompt = the first n_prompt tokens of this file; empty: random tokens
};
std::span<const FieldSpec<Workload>> workload_fields();

struct MeasureSpec {
  std::vector<std::string> paths = {"cpu"};
  int64_t warmup = 1;
  int64_t repetitions = 6;  // the fewest whose median has an order-statistic 95% CI
  bool interleave = true;
  // The order cells are visited in (harness/run_plan.h): "fixed" (plan order, all repetitions of
  // a cell back to back), "shuffle" (the same, in an order drawn from `seed`), or "interleave"
  // (each repetition visits every cell: round r of every cell before round r + 1).
  std::string order = "interleave";
  int64_t seed = 1;        // of the shuffle order
  int64_t peer_block = 3;  // llama.cpp twins: repetitions per llama-bench call (0: no turns)
  double max_cv = 0.10;
  int64_t stream_MiB = 1024;
  int64_t stream_passes = 6;
};
std::span<const FieldSpec<MeasureSpec>> measure_fields();

struct QualitySpec {
  std::vector<std::string> metrics;  // empty: no quality metrics
  // What top1/kl/ppl teacher-force: "text" (the first n_tokens tokens of `text`) or "greedy"
  // (the reference's greedy continuation of n_tokens tokens after prompt_file's first line).
  std::string source = "text";
  std::string text = "/usr/share/common-licenses/GPL-3";
  int64_t n_tokens = 128;
  std::string prompt_file = "experiments/prompts/greedy12.txt";
  int64_t greedy_tokens = 16;
  int64_t chunk = 64;  // tokens per forward of the quality runs (<= 4: the GPU's matvec kernels)
  Config reference;    // defaults + quality.reference (set by parse_experiment)
  // quality.reference.model: another GGUF of the same vocabulary (e.g. a q8_0 or f16 file of
  // the scored model) the reference configuration runs on; empty: each cell's own model.
  // Resolved as `model` entries are (a synthetic:SHAPE:TYPE[:seed] spec included).
  std::string reference_model;
  bool wants(std::string_view metric) const;
};
std::span<const FieldSpec<QualitySpec>> quality_fields();

struct OutputSpec {
  std::string dir = "build/runs";
  std::vector<std::string> formats = {"csv", "md"};
};
std::span<const FieldSpec<OutputSpec>> output_fields();

struct SweepAxis {
  std::string name;                    // a Config field
  std::vector<nlohmann::json> values;  // validated against the field
};

struct Experiment {
  int64_t schema_version = kExperimentSchemaVersion;
  std::string name;  // [A-Za-z0-9_.-]+, names the results files
  std::string description;
  std::string file_path;            // as given to load_experiment (or the label)
  std::string file_sha256;          // of the file's bytes
  std::vector<std::string> models;  // GGUF paths as written (relative: to the working directory)
  Config defaults;
  std::vector<SweepAxis> sweep;               // file order
  std::vector<std::vector<std::string>> zip;  // groups of axis names
  std::vector<nlohmann::json> exclude;        // objects: key -> value or list of values
  Workload workload;
  MeasureSpec measure;
  QualitySpec quality;
  OutputSpec output;
};

struct TopLevelKey {
  std::string_view name;
  std::string_view doc;
};
// The keys an experiment file may have at the top level, with their docs.
std::span<const TopLevelKey> experiment_top_level_keys();

// Parses and validates experiment JSON text. `label` names the file in messages. Every problem is
// reported, one per line, each naming its JSON path and the expected or allowed values: unknown
// keys, wrong types, values out of range or not allowed, bad range strings, empty sweeps, zip
// groups naming a non-axis or of unequal lengths, exclude rules on unknown or unswept keys or
// values no axis has, and a sweep whose exclude rules remove every cell.
// Also: a key twice in one object, nesting deeper than kMaxJsonDepth (harness/json_strict.h), and
// a cross product of more than max_cells cells (counted before anything is expanded, so a
// 10^10-cell sweep is refused in microseconds with its count and dimensions).
Result<Experiment> parse_experiment(std::string_view text, std::string_view label,
                                    int64_t max_cells = kDefaultMaxCells);
// Reads the file (a regular file of at most kMaxJsonFileBytes, base/path_checks.h), then
// parse_experiment; records file_path and file_sha256.
Result<Experiment> load_experiment(const std::string& path, int64_t max_cells = kDefaultMaxCells);

// A model entry "synthetic:SHAPE:TYPE[:SEED]" (fish make-model's shapes and file types; seed 1
// when omitted): `fish run` writes the file once into $FISH_SYNTHETIC_DIR (default
// ~/.cache/fish/synthetic) and uses it like a path. nullopt for a plain path; an error for a
// malformed synthetic entry (unknown shape or type, listing the known ones).
struct SyntheticModelSpec {
  std::string shape;
  std::string type;
  uint64_t seed = 1;
  std::string file_name() const;  // "SHAPE-TYPE-sSEED.gguf"
};
Result<std::optional<SyntheticModelSpec>> parse_synthetic_model(std::string_view model);

struct Cell {
  int64_t index = 0;       // position in the run order
  size_t model_index = 0;  // into Experiment::models
  Config config;
  std::vector<std::pair<std::string, nlohmann::json>> axes;  // this cell's value of each axis
};

// The cells in run order (see the header comment). parse_experiment guarantees at least one.
std::vector<Cell> expand_cells(const Experiment& e);
// The cross product's size before exclude rules (models x each axis or zip group), saturating
// at UINT64_MAX; expand_cells returns at most this many.
uint64_t count_cells(const Experiment& e);

// Integer values of a range string: "A-B" (step 1), "A-B+STEP", "A-B*FACTOR" (geometric), A <= B,
// both ends included when hit. Errors say what is wrong with the string.
Result<std::vector<int64_t>> parse_range(std::string_view s);

// {"n_prompt","n_gen","seed","prompt_source"} as results rows carry it.
nlohmann::json workload_json(const Workload& w);
// The quality spec as hashed into cell ids (null when no metrics are asked for; `source` and
// `chunk` only when not the default, so ids from before those keys existed stay).
nlohmann::json quality_json(const QualitySpec& q);
// First 16 hex digits of sha256 over the canonical JSON (sorted keys, no spaces) of
// {"harness_version","model","model_sha256","config","workload","quality"}: "model" is the entry
// as listed, so two listed models with the same bytes (or two missing files, whose sha256 is
// empty) are different cells.
std::string cell_id(const Experiment& e, const Cell& c, std::string_view model_sha256);
// A Config as cell ids hash it: every field, but depth / engine / llama_bench only when not the
// default (ids of cells from before those fields stay).
nlohmann::json cell_id_config(const Config& c);

// Markdown reference of every key of the experiment file (for --help-fields and
// docs/experiments.md).
std::string experiment_format_help();

}  // namespace fish
