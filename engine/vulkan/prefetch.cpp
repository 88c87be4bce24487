// The decode weight prefetch's cursor over the span's weight stream (prefetch.h).
#include "engine/vulkan/prefetch.h"

#include <algorithm>

namespace fish::vk {

std::vector<PrefetchPiece> plan_prefetch(std::span<const uint64_t> vecs, PrefetchCursor* c,
                                         uint64_t budget) {
  std::vector<PrefetchPiece> out;
  while (budget > 0 && c->range < vecs.size()) {
    const uint64_t left = vecs[c->range] > c->vec ? vecs[c->range] - c->vec : 0;
    const uint64_t take = std::min(left, budget);
    if (take > 0) out.push_back({c->range, c->vec, take});
    budget -= take;
    c->vec += take;
    if (c->vec >= vecs[c->range]) {
      ++c->range;
      c->vec = 0;
    }
  }
  return out;
}

void prefetch_consumed(PrefetchCursor* c, size_t range) {
  if (c->range <= range) {
    c->range = range + 1;
    c->vec = 0;
  }
}

}  // namespace fish::vk
