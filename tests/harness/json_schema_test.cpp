// The JSON Schemas (harness/json_schema.h): docs/schema/ holds the generated ones; every
// committed experiment file and results row is valid under them, and files the parser rejects
// are rejected by the schema too. The schemas are read by a small validator of the keywords
// json_schema.h lists (a keyword outside that list fails the test, so the list stays true).
// The same files were checked with python-jsonschema 4.26 (Draft202012Validator) when the
// schemas were written.
#include "harness/json_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "harness/experiment.h"
#include "test_env.h"

namespace fish {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

bool has_type(const json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && v == std::floor(v.get<double>()));
  if (t == "number") return v.is_number();
  if (t == "string") return v.is_string();
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  ADD_FAILURE() << "unknown type " << t;
  return false;
}

// Appends "PATH: problem" for each violation of `s` by `v`.
void validate(const json& s, const json& v, const std::string& path,
              std::vector<std::string>& out) {
  static const std::set<std::string> kKnown = {
      "$schema", "$id",      "title",         "description", "type",     "enum",
      "minimum", "maximum",  "pattern",       "properties",  "required", "additionalProperties",
      "items",   "minItems", "minProperties", "anyOf"};
  for (const auto& [k, x] : s.items())
    if (!kKnown.count(k)) ADD_FAILURE() << path << ": schema keyword " << k << " not understood";
  auto bad = [&](const std::string& why) { out.push_back(path + ": " + why); };
  if (s.contains("type")) {
    const json& t = s["type"];
    bool ok = false;
    if (t.is_string()) ok = has_type(v, t);
    for (const json& x : t.is_array() ? t : json::array()) ok = ok || has_type(v, x);
    if (!ok) return bad("expected type " + t.dump() + ", found " + v.dump().substr(0, 60));
  }
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
    bad(v.dump() + " not in " + s["enum"].dump());
  if (v.is_number()) {
    if (s.contains("minimum") && v.get<double>() < s["minimum"].get<double>()) bad("below minimum");
    if (s.contains("maximum") && v.get<double>() > s["maximum"].get<double>()) bad("above maximum");
  }
  if (v.is_string() && s.contains("pattern") &&
      !std::regex_search(v.get<std::string>(), std::regex(s["pattern"].get<std::string>())))
    bad("does not match " + s["pattern"].get<std::string>());
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) bad("too few items");
    if (s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i)
        validate(s["items"], v[i], path + "[" + std::to_string(i) + "]", out);
  }
  if (v.is_object()) {
    if (s.contains("minProperties") && v.size() < s["minProperties"].get<size_t>())
      bad("too few keys");
    for (const json& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) bad("missing " + r.get<std::string>());
    const json props = s.value("properties", json::object());
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        validate(props[k], x, path + "." + k, out);
      } else if (s.contains("additionalProperties")) {
        const json& ap = s["additionalProperties"];
        if (ap.is_boolean() && !ap.get<bool>()) bad("unknown key " + k);
        if (ap.is_object()) validate(ap, x, path + "." + k, out);
      }
    }
  }
  if (s.contains("anyOf")) {
    bool any = false;
    for (const json& option : s["anyOf"]) {
      std::vector<std::string> sub;
      validate(option, v, path, sub);
      any = any || sub.empty();
    }
    if (!any) bad("matches none of anyOf");
  }
}

std::vector<std::string> problems(const json& schema, const json& v) {
  std::vector<std::string> out;
  validate(schema, v, "$", out);
  return out;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(JsonSchema, TheDocsCopiesAreTheGeneratedSchemas) {
  const std::string dir = test::source_dir() + "/docs/schema/";
  EXPECT_EQ(read_json(dir + "experiment.schema.json"), experiment_json_schema())
      << "regenerate: fish schema experiment > docs/schema/experiment.schema.json";
  EXPECT_EQ(read_json(dir + "result-row.schema.json"), result_row_json_schema())
      << "regenerate: fish schema result-row > docs/schema/result-row.schema.json";
}

TEST(JsonSchema, EveryCommittedExperimentFileIsValid) {
  const json schema = experiment_json_schema();
  size_t n = 0;
  for (const auto& f : fs::directory_iterator(test::source_dir() + "/experiments")) {
    if (f.path().extension() != ".json") continue;
    const json e = read_json(f.path().string());
    if (!e.is_object() || !e.contains("schema_version")) continue;  // gate rules, ...
    ++n;
    EXPECT_THAT(problems(schema, e), ::testing::IsEmpty()) << f.path();
  }
  EXPECT_GE(n, 10u);
}

TEST(JsonSchema, EveryCommittedResultsRowIsValid) {
  const json schema = result_row_json_schema();
  size_t n = 0;
  for (const auto& f : fs::recursive_directory_iterator(test::source_dir() + "/results")) {
    if (f.path().extension() != ".jsonl") continue;
    std::ifstream in(f.path());
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty()) continue;
      const json j = json::parse(line);
      if (!j.is_object() || j.value("kind", "") != "row") continue;
      ++n;
      EXPECT_THAT(problems(schema, j), ::testing::IsEmpty()) << f.path() << ":" << line_no;
    }
  }
  EXPECT_GE(n, 100u);
}

TEST(JsonSchema, FilesTheParserRejectsForShapeTheSchemaRejects) {
  const json schema = experiment_json_schema();
  const json ok = {{"schema_version", 1}, {"name", "t"}, {"model", "m.gguf"}};
  ASSERT_THAT(problems(schema, ok), ::testing::IsEmpty());
  ASSERT_TRUE(parse_experiment(ok.dump(), "t.json").ok());
  for (const json& patch :
       {json{{"measure", {{"order", "random"}}}}, json{{"measure", {{"reps", 3}}}},
        json{{"sweep", {{"n_threads", "1to4"}}}}, json{{"sweep", {{"act", json::array()}}}},
        json{{"defaults", {{"group_size", 48}}}}, json{{"workload", {{"n_gen", 0}}}},
        json{{"name", "a b"}}, json{{"models", "m.gguf"}}}) {
    json bad = ok;
    bad.update(patch);
    EXPECT_FALSE(problems(schema, bad).empty()) << bad.dump();
    EXPECT_FALSE(parse_experiment(bad.dump(), "t.json").ok()) << bad.dump();
  }
  json no_model = ok;
  no_model.erase("model");
  EXPECT_FALSE(problems(schema, no_model).empty());
}

TEST(JsonSchema, ARowWithAnUnknownOrMistypedMetricIsRejected) {
  const json schema = result_row_json_schema();
  const json row = {{"kind", "row"},
                    {"run_id", "r"},
                    {"cell_id", "c"},
                    {"cell_index", 0},
                    {"path", "cpu"},
                    {"status", "ok"},
                    {"error", nullptr},
                    {"model", "m"},
                    {"config", {{"n_ctx", 64}}},
                    {"workload", {{"n_prompt", 8}, {"n_gen", 4}}},
                    {"metrics", {{"top1", 0.5}, {"decode_tok_s", nullptr}}}};
  ASSERT_THAT(problems(schema, row), ::testing::IsEmpty());
  for (const json& m : {json{{"tok_s", 1.0}}, json{{"top1", "high"}}, json{{"decode_tok_s", 12.5}},
                        json{{"greedy_exact", 3}}}) {
    json bad = row;
    bad["metrics"].update(m);
    EXPECT_FALSE(problems(schema, bad).empty()) << m.dump();
  }
  json bad_status = row;
  bad_status["status"] = "done";
  EXPECT_FALSE(problems(schema, bad_status).empty());
}

}  // namespace
}  // namespace fish
