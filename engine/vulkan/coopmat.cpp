// Cooperative-matrix tiles and their choice (coopmat.h).
#include "engine/vulkan/coopmat.h"

#include <algorithm>

namespace fish::vk {
namespace {

bool has_dbuf(std::span<const CoopmatTile> tiles) {
  return std::any_of(tiles.begin(), tiles.end(), [](const CoopmatTile& t) { return t.touch; });
}

// The tiles the rule chooses among (with the prefetch variants of the single-buffered family):
// the double-buffered ones with the touch where the device has any, else the single-buffered.
bool in_rule_family(const CoopmatTile& t, bool dbuf) {
  return dbuf ? t.dbuf && t.touch : !t.dbuf;
}

}  // namespace

std::vector<CoopmatTile> coopmat_tiles(uint32_t m, uint32_t n, uint32_t k, uint32_t subgroup,
                                       uint32_t max_shared, uint32_t max_threads) {
  std::vector<CoopmatTile> out;
  if (m == 0 || n == 0 || k == 0 || kCoopmatK % k != 0 || subgroup == 0) return out;
  // name, tile (in M x N units), subgroup block (in M x N units), double-buffered
  const struct {
    char name;
    uint32_t tm, tn, sm, sn;
    bool dbuf;
  } shapes[] = {{'b', 8, 8, 4, 4, true}, {'h', 8, 4, 4, 2, true},  {'w', 4, 8, 2, 4, true},
                {'c', 4, 4, 2, 2, true}, {'l', 8, 8, 4, 2, false}, {'m', 4, 4, 2, 2, false},
                {'s', 2, 2, 2, 1, false}};
  for (const auto& s : shapes) {
    CoopmatTile t;
    t.name = s.name;
    t.dbuf = t.touch = s.dbuf;
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
    if (out[i].dbuf || out[i].name == 's') continue;
    CoopmatTile t = out[i];
    t.name = char(t.name - 'a' + 'A');
    t.prefetch = true;
    out.push_back(t);
  }
  for (size_t i = 0; i < n_plain; ++i) {
    if (out[i].name != 'b') continue;
    CoopmatTile t = out[i];  // bn: b without the touch
    t.name = 'B';
    t.touch = false;
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
  // The family: double-buffered where the device has any, else the single-buffered one.
  const bool dbuf = has_dbuf(tiles);
  const CoopmatTile* pick = nullptr;  // the first (largest) that fills the grid
  const CoopmatTile* most = nullptr;  // else the one of most workgroups
  uint64_t most_groups = 0;
  for (const CoopmatTile& t : tiles) {
    if (!in_rule_family(t, dbuf) || t.prefetch) continue;
    const uint64_t grid = uint64_t((n_out + t.bm - 1) / t.bm) * ((n_tok + t.bn - 1) / t.bn);
    if (grid >= target_groups) {
      pick = &t;
      break;
    }
    if (grid > most_groups) {
      most = &t;
      most_groups = grid;
    }
  }
  if (!pick) pick = most;
  if (!pick) return &tiles.front();
  if (!dbuf && n_out <= kPrefetchMaxRows)
    for (const CoopmatTile& t : tiles)
      if (t.prefetch && t.bm == pick->bm && t.bn == pick->bn) return &t;
  return pick;
}

bool coopmat_tile_reachable(std::span<const CoopmatTile> tiles, const CoopmatTile& t, char forced) {
  if (forced && std::any_of(tiles.begin(), tiles.end(),
                            [&](const CoopmatTile& x) { return x.name == forced; }))
    return t.name == forced;
  return in_rule_family(t, has_dbuf(tiles));
}

uint32_t coopmat_target_groups(uint32_t sm_count) {
  return sm_count ? std::max<uint32_t>(1, sm_count * 3 / 4) : 64;
}

}  // namespace fish::vk
