// libFuzzer target: parse_experiment on arbitrary text (the experiment JSON format), then, for
// every input that parses, everything fish run plans from it: the cell count, the cells
// themselves (checked against the count), each cell's id, the workload and quality JSON, and the
// --help-fields text. ASan + UBSan see any bad access or undefined behaviour; the traps check the
// parser's promises.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "harness/experiment.h"

namespace {

volatile uint64_t g_sink;  // keeps the results from being optimised away

// Small enough that an input cannot make one execution slow; parse_experiment must refuse a
// larger cross product before expanding it.
constexpr int64_t kFuzzMaxCells = 512;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = fish::parse_experiment(text, "fuzz.json", kFuzzMaxCells);
  if (!r.ok()) {
    // Every error names the file first.
    if (r.error().message.rfind("fuzz.json: ", 0) != 0) __builtin_trap();
    g_sink = g_sink + r.error().message.size();
    return 0;
  }
  const fish::Experiment& e = r.value();
  const uint64_t planned = fish::count_cells(e);
  if (planned > uint64_t(kFuzzMaxCells)) __builtin_trap();  // over the limit yet accepted
  const std::vector<fish::Cell> cells = fish::expand_cells(e);
  if (cells.empty() || cells.size() > planned) __builtin_trap();
  std::set<std::string> ids;
  uint64_t h = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    const fish::Cell& c = cells[i];
    if (c.index != int64_t(i) || c.model_index >= e.models.size()) __builtin_trap();
    const std::string id = fish::cell_id(e, c, "");
    if (id.size() != 16) __builtin_trap();
    ids.insert(id);
    h += c.axes.size() + uint64_t(c.config.n_ctx);
  }
  // Cells differ in model or in some axis value, so their ids differ.
  if (ids.size() != cells.size()) __builtin_trap();
  h += fish::workload_json(e.workload).dump().size();
  h += fish::quality_json(e.quality).dump().size();
  g_sink = g_sink + h;
  return 0;
}
