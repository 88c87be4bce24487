// JSON Schemas from the field tables; see json_schema.h.
#include "harness/json_schema.h"

#include <cmath>
#include <string>

#include "engine/config.h"
#include "harness/experiment.h"
#include "harness/metrics.h"

namespace fish {
namespace {

using nlohmann::json;

constexpr const char* kDraft = "https://json-schema.org/draft/2020-12/schema";

// The schema of one field's value.
template <typename T>
json field_schema(const FieldSpec<T>& f) {
  json s = {{"description", std::string(f.doc)}};
  // Integer bounds as integers (a schema reader compares 1048576 and 1048576.0 alike, a person
  // reading it should not wonder).
  auto bound = [&](double v) {
    return f.type() == FieldType::integer ? json(int64_t(v)) : json(v);
  };
  auto range = [&](json& out) {
    if (std::isfinite(f.min)) out["minimum"] = bound(f.min);
    if (std::isfinite(f.max)) out["maximum"] = bound(f.max);
  };
  switch (f.type()) {
    case FieldType::integer:
      s["type"] = "integer";
      if (!f.allowed.empty()) {
        json e = json::array();
        for (std::string_view a : f.allowed) e.push_back(std::stoll(std::string(a)));
        s["enum"] = e;
      } else {
        range(s);
      }
      break;
    case FieldType::number:
      s["type"] = "number";
      range(s);
      break;
    case FieldType::boolean:
      s["type"] = "boolean";
      break;
    case FieldType::string:
      s["type"] = "string";
      if (!f.allowed.empty())
        s["enum"] = std::vector<std::string>(f.allowed.begin(), f.allowed.end());
      break;
    case FieldType::string_list: {
      json item = {{"type", "string"}};
      if (!f.allowed.empty())
        item["enum"] = std::vector<std::string>(f.allowed.begin(), f.allowed.end());
      s["type"] = "array";
      s["items"] = item;
      break;
    }
  }
  return s;
}

// An object of a table's fields, none required.
template <typename T>
json fields_schema(std::span<const FieldSpec<T>> table, bool closed, const std::string& doc) {
  json props = json::object();
  for (const FieldSpec<T>& f : table) props[std::string(f.name)] = field_schema(f);
  return {{"type", "object"},
          {"description", doc},
          {"properties", props},
          {"additionalProperties", !closed}};
}

json top_doc(std::string_view key) {
  for (const TopLevelKey& k : experiment_top_level_keys())
    if (k.name == key) return std::string(k.doc);
  return "";
}

// A speed / ratio summary (harness/measure.h speed_metric_json).
json samples_schema() {
  const json pair = {{"type", "array"}, {"items", {{"type", "number"}}}, {"minItems", 2}};
  return {{"type", "object"},
          {"required", {"median", "n"}},
          {"properties",
           {{"median", {{"type", "number"}}},
            {"ci95", pair},
            {"min_max", pair},
            {"n", {{"type", "integer"}, {"minimum", 0}}},
            {"cv", {{"type", "number"}}},
            {"samples", {{"type", "array"}, {"items", {{"type", "number"}}}}}}},
          {"additionalProperties", false}};
}

json metric_schema(const MetricField& f) {
  json value;
  switch (f.kind) {
    case MetricKind::speed:
    case MetricKind::ratio:
      value = samples_schema();
      break;
    case MetricKind::scalar:
      value = {{"type", "number"}};
      break;
    case MetricKind::count:
      value = {{"type", "object"},
               {"required", {"n", "of"}},
               {"properties", {{"n", {{"type", "number"}}}, {"of", {{"type", "number"}}}}},
               {"additionalProperties", false}};
      break;
  }
  std::string doc(f.doc);
  if (!f.unit.empty()) doc += " (" + std::string(f.unit) + ")";
  return {{"description", doc}, {"anyOf", {json{{"type", "null"}}, value}}};
}

}  // namespace

nlohmann::json experiment_json_schema() {
  const json config = fields_schema(config_fields(), true, "Config fields (engine/config.h)");
  json sweep_props = json::object();
  for (const FieldSpec<Config>& f : config_fields()) {
    json options = json::array({{{"type", "array"}, {"minItems", 1}, {"items", field_schema(f)}}});
    if (f.type() == FieldType::integer)
      options.push_back({{"type", "string"}, {"pattern", "^[0-9]+-[0-9]+([+*][0-9]+)?$"}});
    sweep_props[std::string(f.name)] = {{"anyOf", options}};
  }
  json quality = fields_schema(quality_fields(), true, top_doc("quality").get<std::string>());
  quality["properties"]["reference"] = config;
  quality["properties"]["reference"]["description"] =
      "the reference configuration: defaults + these Config fields";
  quality["properties"]["reference"]["properties"]["model"] = {
      {"description",
       "another model of the same vocabulary to score against (a GGUF path or "
       "synthetic:SHAPE:TYPE, e.g. a q8_0 copy from fish requant --to q8_0)"},
      {"type", "string"},
      {"minLength", 1}};
  json props = json::object();
  props["schema_version"] = {{"description", top_doc("schema_version")}, {"enum", {1}}};
  props["name"] = {
      {"description", top_doc("name")}, {"type", "string"}, {"pattern", "^[A-Za-z0-9_.-]+$"}};
  props["description"] = {{"description", top_doc("description")}, {"type", "string"}};
  json model_list = {{"type", "array"}, {"minItems", 1}, {"items", {{"type", "string"}}}};
  props["model"] = {{"description", top_doc("model")},
                    {"anyOf", json::array({json{{"type", "string"}}, model_list})}};
  props["defaults"] = config;
  props["sweep"] = {{"description", top_doc("sweep")},
                    {"type", "object"},
                    {"properties", sweep_props},
                    {"additionalProperties", false}};
  json zip_group = {{"type", "array"}, {"minItems", 2}, {"items", {{"type", "string"}}}};
  props["zip"] = {{"description", top_doc("zip")}, {"type", "array"}, {"items", zip_group}};
  json rule = {{"type", "object"}, {"minProperties", 1}};
  props["exclude"] = {{"description", top_doc("exclude")}, {"type", "array"}, {"items", rule}};
  props["workload"] =
      fields_schema(workload_fields(), true, top_doc("workload").get<std::string>());
  props["measure"] = fields_schema(measure_fields(), true, top_doc("measure").get<std::string>());
  props["quality"] = quality;
  props["output"] = fields_schema(output_fields(), true, top_doc("output").get<std::string>());
  props["defaults"]["description"] = top_doc("defaults");
  return {{"$schema", kDraft},
          {"$id", "https://fish.invalid/schema/experiment.schema.json"},
          {"title", "FISH experiment file (schema_version 1)"},
          {"type", "object"},
          {"required", {"schema_version", "name", "model"}},
          {"properties", props},
          {"additionalProperties", false}};
}

nlohmann::json result_row_json_schema() {
  json config = fields_schema(config_fields(), false,
                              "the cell's Config (fields of earlier harness versions allowed)");
  json metrics = json::object();
  for (const MetricField& f : metric_fields()) metrics[std::string(f.name)] = metric_schema(f);
  const json str = {{"type", "string"}};
  json props = {
      {"kind", {{"enum", {"row"}}}},
      {"run_id", str},
      {"cell_id", str},
      {"cell_index", {{"type", "integer"}, {"minimum", 0}}},
      {"path", {{"enum", {"cpu", "gpu"}}}},
      {"status", {{"enum", {"ok", "error", "skipped"}}}},
      {"error", {{"type", {"string", "null"}}}},
      {"model", str},
      {"model_sha256", str},
      {"config", config},
      {"workload",
       {{"type", "object"},
        {"required", {"n_prompt", "n_gen"}},
        {"properties",
         {{"n_prompt", {{"type", "integer"}}},
          {"n_gen", {{"type", "integer"}}},
          {"seed", {{"type", "integer"}}},
          {"prompt_source", str}}},
        {"additionalProperties", true}}},
      {"placement", {{"type", "object"}}},
      {"metrics",
       {{"type", "object"},
        {"description", "metric_fields() (harness/metrics.h, docs/results.md)"},
        {"properties", metrics},
        {"additionalProperties", false}}},
      {"validity", {{"type", "array"}, {"items", str}}},
      {"t_wall_s", {{"type", "number"}, {"minimum", 0}}},
      {"n_threads_resolved", {{"type", "integer"}}},
      {"kquant_repack", {{"type", "object"}}},
      {"peer", {{"type", "object"}}},
  };
  return {{"$schema", kDraft},
          {"$id", "https://fish.invalid/schema/result-row.schema.json"},
          {"title", "A row of a FISH results file (fish-results/1, docs/results.md)"},
          {"type", "object"},
          {"required",
           {"kind", "run_id", "cell_id", "cell_index", "path", "status", "error", "model", "config",
            "workload", "metrics"}},
          {"properties", props},
          {"additionalProperties", false}};
}

}  // namespace fish
