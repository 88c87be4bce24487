// JSON Schemas (draft 2020-12) of the experiment file and of a results row, generated from the
// field tables: config_fields() and the section tables (harness/experiment.h), metric_fields()
// (harness/metrics.h). `fish schema experiment|result-row` prints them; the copies in
// docs/schema/ are checked against these by a test, which also validates every committed
// experiments/*.json and results/**/*.jsonl row with them.
//
// The schemas use these keywords only: $schema, $id, title, description, type, enum, minimum,
// maximum, pattern, properties, required, additionalProperties, items, minItems, minProperties,
// anyOf. They check shape and the tables' allowed values and ranges; what needs the whole file
// (a zip group of unequal axes, an exclude value no axis has, the cell limit) is
// parse_experiment's.
#pragma once

#include <nlohmann/json.hpp>

namespace fish {

nlohmann::json experiment_json_schema();
// A "kind": "row" line of a fish-results/1 file. Config keys outside today's table are allowed
// (rows of earlier harness versions carry retired fields); metric keys are the table's only.
nlohmann::json result_row_json_schema();

}  // namespace fish
