#include "harness/merge.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

#include "harness/results_reader.h"
#include "harness/row_provenance.h"

namespace fish {
namespace {

Status write_all_fd(int fd, const std::string& text, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error("merge: {}: write failed: {}", path, std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return Status::success();
}

// Writes `text` to `path` via a temporary file in the same directory, fsync'd, then renamed.
Status write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error("merge: {}: cannot create: {} (does the directory exist?)", tmp,
                      std::strerror(errno));
  Status st = write_all_fd(fd, text, tmp);
  if (st.ok() && ::fsync(fd) != 0)
    st = make_error("merge: {}: fsync failed: {}", tmp, std::strerror(errno));
  ::close(fd);
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = make_error("merge: {}: rename to {} failed: {}", tmp, path, std::strerror(errno));
  if (!st.ok()) std::remove(tmp.c_str());
  return st;
}

std::string experiment_label(const ResultContext& c) {
  return fmt::format("{} ({})", c.experiment, c.experiment_sha256.substr(0, 12));
}

}  // namespace

Result<MergeSummary> merge_results(const std::vector<std::string>& inputs, const std::string& out,
                                   bool force) {
  if (inputs.empty()) return make_error("merge: no input files (usage: fish merge OUT IN...)");
  FISH_ASSIGN_OR_RETURN(ResultSet set, read_results_files(inputs));
  MergeSummary summary;
  summary.n_inputs = inputs.size();
  summary.n_rows_read = set.rows.size();
  summary.warnings = set.warnings;

  // Every context names its experiment by content hash; differing hashes are different
  // experiment files (or edited ones), whose cells need not be comparable.
  const ResultContext& first = set.contexts.front();
  for (const ResultContext& c : set.contexts) {
    if (!force && c.experiment_sha256 != first.experiment_sha256)
      return make_error(
          "merge: {}:{}: experiment_sha256 {} ({}) differs from {}:{}: {} ({}); these are "
          "different experiment files (use --force to merge anyway)",
          c.file, c.line, c.experiment_sha256.substr(0, 12), c.experiment, first.file, first.line,
          first.experiment_sha256.substr(0, 12), first.experiment);
    MergeSummary::Experiment& e = summary.experiments[experiment_label(c)];
    if (e.n_cells != 0 && e.n_cells != c.n_cells)
      return make_error("merge: {}:{}: n_cells {} but an earlier context of {} says {}", c.file,
                        c.line, c.n_cells, c.experiment, e.n_cells);
    e.n_cells = c.n_cells;
  }

  std::string text;
  std::set<std::string> run_ids;
  for (const ResultContext& c : set.contexts)
    if (run_ids.insert(c.run_id).second) text += c.text + "\n";

  // The current rows (results_reader.h latest_rows): a later row of equal provenance replaces
  // an earlier one; one cell measured under different provenance cannot go into one file
  // without dropping a measurement.
  std::vector<const ResultRow*> rows = set.latest_rows();
  if (const auto variants = set.cell_variants(); !variants.empty()) {
    // In read order (rows live in one vector): the earlier row first.
    const auto [pa, pb] =
        std::minmax(variants[0][0], variants[0][1], std::less<const ResultRow*>());
    const ResultRow& a = *pa;
    const ResultRow& b = *pb;
    return make_error(
        "merge: {}:{} and {}:{} hold cell {} ({}, cell {}) measured under different provenance "
        "({}); merging would keep only one: keep them in separate files (fish report shows them "
        "side by side)",
        a.file, a.line, b.file, b.line, a.cell_id, a.path, a.cell_index,
        provenance_difference(set.context_of(a).provenance, set.context_of(b).provenance));
  }
  summary.n_replaced = set.rows.size() - rows.size();
  std::sort(rows.begin(), rows.end(), [](const ResultRow* a, const ResultRow* b) {
    if (a->cell_index != b->cell_index) return a->cell_index < b->cell_index;
    if (a->path != b->path) return a->path < b->path;
    return a->cell_id < b->cell_id;
  });
  std::map<std::string, std::set<int64_t>> covered;
  for (const ResultRow* r : rows) {
    text += r->text + "\n";
    covered[experiment_label(set.context_of(*r))].insert(r->cell_index);
  }
  summary.n_rows_written = rows.size();
  for (auto& [label, e] : summary.experiments) {
    const std::set<int64_t>& have = covered[label];
    for (int64_t i = 0; i < e.n_cells; ++i)
      if (!have.count(i)) e.missing.push_back(i);
  }
  FISH_TRY(write_atomically(out, text));
  return summary;
}

}  // namespace fish
