// Weight prefetch for decode (FISH_VK_PREFETCH_MB; docs/gpu.md, "Weight prefetch"): while a
// latency-bound step of a decode forward runs (attention, a norm, an input's q8_1 rounding), a
// dispatch beside it (no barrier between the two) reads the next matvecs' weights, so that they
// are in the device's L2 cache when those matvecs run and the memory bus, idle during such a step,
// has already moved them.
//
// The span lists its decode matvecs' weight parts in the order a forward reads them (per layer
// q/k/v, wo, gate / up, down; then the head): the stream. A cursor walks it: each latency-bound
// step takes the next `budget` bytes from the cursor (plan_prefetch), and each matvec recorded
// moves the cursor past its part (prefetch_consumed), so nothing already read is fetched again
// and a budget never runs further ahead than what the steps so far have covered.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fish::vk {

// Where the next prefetch starts: range `range` of the stream, from its 16-byte vector `vec`.
struct PrefetchCursor {
  size_t range = 0;
  uint64_t vec = 0;
};

// One prefetch dispatch: vectors [first, first + count) of stream range `range`.
struct PrefetchPiece {
  size_t range = 0;
  uint64_t first = 0, count = 0;
  bool operator==(const PrefetchPiece&) const = default;
};

// The pieces covering the next `budget` vectors of the stream (`vecs[i]`: range i's 16-byte
// vectors) from c, which moves past them; fewer where the stream ends.
std::vector<PrefetchPiece> plan_prefetch(std::span<const uint64_t> vecs, PrefetchCursor* c,
                                         uint64_t budget);

// A matvec reads range `range` now: the cursor skips it (and anything before it) if still behind.
void prefetch_consumed(PrefetchCursor* c, size_t range);

}  // namespace fish::vk
