// Cooperative-matrix tiles and their choice (coopmat.h).
#include "engine/vulkan/coopmat.h"

#include <algorithm>

namespace fish::vk {

std::vector<CoopmatTile> coopmat_tiles(uint32_t m, uint32_t n, uint32_t k, uint32_t subgroup,
                                       uint32_t max_shared, uint32_t max_threads) {
  std::vector<CoopmatTile> out;
  if (m == 0 || n == 0 || k == 0 || kCoopmatK % k != 0 || subgroup == 0) return out;
  // name, tile (in M x N units), subgroup block (in M x N units)
  const struct {
    char name;
    uint32_t tm, tn, sm, sn;
  } shapes[] = {{'l', 8, 8, 4, 2}, {'m', 4, 4, 2, 2}, {'s', 2, 2, 2, 1}};
  for (const auto& s : shapes) {
    CoopmatTile t;
    t.name = s.name;
    t.bm = s.tm * m;
    t.bn = s.tn * n;
    t.wm = s.sm * m;
    t.wn = s.sn * n;
    t.cm = m;
    t.cn = n;
    t.ck = k;
    t.subgroup = subgroup;
    if (t.shared_bytes() <= max_shared && t.threads() <= max_threads) out.push_back(t);
  }
  const size_t n_plain = out.size();
  for (size_t i = 0; i < n_plain; ++i) {
    if (out[i].name == 's') continue;
    CoopmatTile t = out[i];
    t.name = char(t.name - 'a' + 'A');
    t.prefetch = true;
    out.push_back(t);
  }
  return out;
}

const CoopmatTile* pick_coopmat_tile(std::span<const CoopmatTile> tiles, uint32_t n_out,
                                     uint32_t n_tok, uint32_t target_groups, char forced) {
  if (tiles.empty()) return nullptr;
  if (forced)
    for (const CoopmatTile& t : tiles)
      if (t.name == forced) return &t;
  const CoopmatTile* pick = nullptr;
  for (const CoopmatTile& t : tiles) {
    if (t.prefetch) continue;
    pick = &t;  // the smallest so far
    const uint64_t grid = uint64_t((n_out + t.bm - 1) / t.bm) * ((n_tok + t.bn - 1) / t.bn);
    if (grid >= target_groups) break;
  }
  if (!pick) return &tiles.front();
  if (n_out <= kPrefetchMaxRows)
    for (const CoopmatTile& t : tiles)
      if (t.prefetch && t.bm == pick->bm && t.bn == pick->bn) return &t;
  return pick;
}

uint32_t coopmat_target_groups(uint32_t sm_count) {
  return sm_count ? std::max<uint32_t>(1, sm_count * 3 / 4) : 64;
}

}  // namespace fish::vk
