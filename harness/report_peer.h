// The FISH / peer table of a report section: each ok llama.cpp row (engine llama.cpp) beside the
// ok FISH row of the same experiment with the same parameters but engine and llama_bench, and per
// speed metric FISH's median over the peer's with the ratio's interval (harness/stats.h
// ratio_of_medians, the fish compare machinery: both rows' samples come from the same run).
#pragma once

#include <string>
#include <vector>

#include "harness/results_reader.h"

namespace fish {

// Markdown: a "FISH / peer" table and its legend; empty when the rows hold no such pair.
std::string render_peer_ratios(const std::vector<const ResultRow*>& rows);

}  // namespace fish
