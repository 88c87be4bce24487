// Cooperative-matrix tiles and their choice (coopmat.h).
#include "engine/vulkan/coopmat.h"

#include <algorithm>
#include <string_view>

namespace fish::vk {

std::vector<CoopmatTile> coopmat_tiles(uint32_t m, uint32_t n, uint32_t k, uint32_t subgroup,
                                       uint32_t max_shared, uint32_t max_threads) {
  std::vector<CoopmatTile> out;
  if (m == 0 || n == 0 || k == 0 || kCoopmatK % k != 0 || subgroup == 0) return out;
  // A tile of tm x tn shape units on subgroups of sm x sn, kept where the limits allow it.
  auto add = [&](char name, uint32_t tm, uint32_t tn, uint32_t sm, uint32_t sn, bool dbuf,
                 bool local, bool vec = false, bool named = false) {
    CoopmatTile t;
    t.name = name;
    t.dbuf = dbuf || local;
    t.touch = dbuf && !local;
    t.local = local;
    t.vec = vec;
    t.named = named;
    t.bm = tm * m;
    t.bn = tn * n;
    t.wm = sm * m;
    t.wn = sn * n;
    t.cm = m;
    t.cn = n;
    t.ck = k;
    t.subgroup = subgroup;
    if (t.shared_bytes() <= max_shared && t.threads() <= max_threads) out.push_back(t);
  };
  add('b', 8, 8, 4, 4, true, false);
  add('h', 8, 4, 4, 2, true, false);
  add('w', 4, 8, 2, 4, true, false);
  add('c', 4, 4, 2, 2, true, false);
  add('l', 8, 8, 4, 2, false, false);
  add('m', 4, 4, 2, 2, false, false);
  add('s', 2, 2, 2, 1, false, false);
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
  add('g', 8, 8, 4, 2, true, false);  // b's tile on 8 subgroups of 4M x 2N
  // r, u, v: b's, c's and s's shapes with local accumulators (coopmat.h).
  add('r', 8, 8, 4, 4, false, true);
  add('u', 4, 4, 2, 2, false, true);
  add('v', 2, 2, 2, 1, false, true);
  // x, y, z: r, u, v with 16-byte weight loads.
  add('x', 8, 8, 4, 4, false, true, true);
  add('y', 4, 4, 2, 2, false, true, true);
  add('z', 2, 2, 2, 1, false, true, true);
  // d, e, f, k: named accumulators (main_named) on r's, x's, y's and l's shapes; forced only.
  add('d', 8, 8, 4, 4, false, true, false, true);
  add('e', 8, 8, 4, 4, false, true, true, true);
  add('f', 4, 4, 2, 2, false, true, true, true);
  add('k', 8, 8, 4, 2, false, true, true, true);
  // The rule's candidates: s and z where they survived the limits (pick_coopmat_tile takes z for
  // the types of coopmat_vec_rule, s for the others). Measured on an H100 (binary 779fad7,
  // results/runs/h100-prefill-tiles-779fad7, BM_VulkanPrefillMatmul at 512 tokens, TFLOP/s):
  // z beat s on every q4_k / q5_k / fq3 / f16 shape of the 8B (q4_k 4096 x 4096 60 vs 41,
  // 14336 x 4096 62 vs 42) and lost on q6_k, q8_0, q4_0 (q8_0 14336 x 4096 43 vs 50), whose
  // 2-byte-aligned blocks take 5-word funnel-shifted loads; every larger tile (r, x, b, l, ...)
  // ran at 25-29. Else b, h, w, c where any survived, else l, m, lp, mp.
  auto main_dbuf = [](const CoopmatTile& t) {
    return t.dbuf && std::string_view("bhwc").find(t.name) != std::string_view::npos;
  };
  const bool has_s =
      std::any_of(out.begin(), out.end(), [](const CoopmatTile& t) { return t.name == 's'; });
  const bool dbuf = std::any_of(out.begin(), out.end(), main_dbuf);
  for (CoopmatTile& t : out)
    t.rule = has_s ? t.name == 's' || t.name == 'z' : dbuf ? main_dbuf(t) : !t.dbuf;
  // e and k, the named-accumulator 128 x 128 tiles, for matmuls of kNamedMinTok tokens or more
  // of every type but f16 / f32 (coopmat_named_rule). Measured on an H100 (binary 0a83b5f,
  // results/runs/h100-mixed-0a83b5f-{a,b}, BM_VulkanPrefillMatmul at 512 tokens, TFLOP/s): q4_k
  // 4096 x 4096 k 131.6 / e 104.2 against z 59.5, 14336 x 4096 e 123.1 / k 94.6 against z 61.5;
  // q6_k 4096 x 4096 k 81.8 against s 43.0; q8_0 k 82.3 against s 45.9; f16 z 66.0 against k
  // 41.1 (so f16 keeps z). Their arrays-of-accumulators twins r / x ran at 28.
  for (CoopmatTile& t : out)
    if (t.named && (t.name == 'e' || t.name == 'k')) t.rule = true;
  return out;
}

bool coopmat_vec_rule(GgmlType type) {
  return type == GgmlType::q4_k || type == GgmlType::q5_k || type == GgmlType::fq3 ||
         type == GgmlType::f16;
}

bool coopmat_named_rule(GgmlType type) {
  return type != GgmlType::f16 && type != GgmlType::f32;
}

bool coopmat2_stages_scales(GgmlType type, uint32_t level) {
  if (type == GgmlType::q6_k) return level >= 2;
  return level >= 1 && (type == GgmlType::q4_k || type == GgmlType::q5_k || type == GgmlType::fq3);
}

namespace {

// The small-tile candidates (s, z; or the grid rule's where those are missing) for `vec`: the
// 16-value-load ones where vec and any exists, else the others (prefetch variants are added by
// pick_coopmat_tile after the choice).
bool rule_candidate(std::span<const CoopmatTile> tiles, const CoopmatTile& t, bool vec) {
  const bool want_vec = vec && std::any_of(tiles.begin(), tiles.end(), [](const CoopmatTile& x) {
                          return x.rule && x.vec && !x.named;
                        });
  return t.rule && !t.named && !t.prefetch && !t.unavailable && t.vec == want_vec;
}

const CoopmatTile* find_rule_tile(std::span<const CoopmatTile> tiles, char name) {
  for (const CoopmatTile& t : tiles)
    if (t.name == name && t.rule && !t.unavailable) return &t;
  return nullptr;
}

}  // namespace

const CoopmatTile* pick_coopmat2_tile(std::span<const CoopmatTile> tiles, uint32_t n_out,
                                      uint32_t n_tok, uint32_t target_groups) {
  const CoopmatTile* most = nullptr;  // no tile fills the grid: the one of most workgroups
  uint64_t most_groups = 0;
  for (char name : {'o', 'p', 'q', 'n', 'N'}) {  // o, p, q: 256 tokens (p, q: the wide rule's)
    const CoopmatTile* t = find_rule_tile(tiles, name);
    if (!t || !t->cm2) continue;
    const uint64_t grid = uint64_t((n_out + t->bm - 1) / t->bm) * ((n_tok + t->bn - 1) / t->bn);
    if (grid >= target_groups && t->bn <= n_tok) return t;
    if (grid >= most_groups) {  // ties to the smaller tile (its token tile wastes less)
      most = t;
      most_groups = grid;
    }
  }
  return most;
}

const CoopmatTile* pick_coopmat_tile(std::span<const CoopmatTile> tiles, uint32_t n_out,
                                     uint32_t n_tok, uint32_t target_groups, char forced,
                                     GgmlType type) {
  if (tiles.empty()) return nullptr;
  if (forced)
    for (const CoopmatTile& t : tiles)
      if (t.name == forced && !t.unavailable) return &t;
  const bool vec = coopmat_vec_rule(type);
  if (n_tok >= kNamedMinTok)
    if (const CoopmatTile* t = pick_coopmat2_tile(tiles, n_out, n_tok, target_groups)) return t;
  if (coopmat_named_rule(type) && n_tok >= kNamedMinTok) {
    // k (8 subgroups) where its grid is under 8/3 target_groups (about twice the SM count: a
    // 4096-row matrix at 512 tokens is 128 workgroups), e (4 subgroups of 64 x 64) above.
    const CoopmatTile* k = find_rule_tile(tiles, 'k');
    const CoopmatTile* e = find_rule_tile(tiles, 'e');
    if (k && e) {
      const uint64_t grid = uint64_t((n_out + e->bm - 1) / e->bm) * ((n_tok + e->bn - 1) / e->bn);
      return 3 * grid < 8 * uint64_t(target_groups) ? k : e;
    }
    if (k || e) return k ? k : e;
  }
  const CoopmatTile* pick = nullptr;  // the first (largest) candidate that fills the grid
  const CoopmatTile* most = nullptr;  // else the one of most workgroups
  uint64_t most_groups = 0;
  for (const CoopmatTile& t : tiles) {
    if (!rule_candidate(tiles, t, vec)) continue;
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
  if (!pick->dbuf && n_out <= kPrefetchMaxRows)
    for (const CoopmatTile& t : tiles)
      if (t.rule && t.prefetch && t.bm == pick->bm && t.bn == pick->bn) return &t;
  return pick;
}

const char* coopmat2_acc_name(uint32_t acc) {
  return acc == kCoopmat2AccFold ? "fold" : acc == kCoopmat2AccF16 ? "f16" : "f32";
}

std::vector<CoopmatTile> coopmat2_tiles(std::span<const Coopmat2Shape> shapes, uint32_t max_dim,
                                        uint32_t max_threads, uint32_t subgroup, uint32_t acc,
                                        uint32_t scales, bool wide) {
  std::vector<CoopmatTile> out;
  if (subgroup == 0) return out;
  // KU 4: four kCoopmat2K-value K steps per unrolled iteration (256 values: a K-quant
  // super-block).
  auto add = [&](char name, uint32_t bm, uint32_t bn, uint32_t wg, bool rule = true) {
    if (std::max(bm, bn) > max_dim || wg > max_threads || wg % subgroup != 0) return;
    auto fits = [&](bool f16_acc) {
      return std::any_of(shapes.begin(), shapes.end(), [&](const Coopmat2Shape& s) {
        return s.f16_acc == f16_acc && s.invocations == wg && s.m_gran && s.n_gran && s.k_gran &&
               bm % s.m_gran == 0 && bn % s.n_gran == 0 && kCoopmat2K % s.k_gran == 0;
      });
    };
    if (!fits(false) || (acc != kCoopmat2AccF32 && !fits(true))) return;
    CoopmatTile t;
    t.name = name;
    t.cm2 = true;
    t.rule = rule;  // pick_coopmat2_tile's (else reachable only forced)
    t.bm = bm;
    t.bn = bn;
    t.wg = wg;
    t.ku = 4;
    t.acc = acc;
    t.scales = scales;
    t.subgroup = subgroup;
    out.push_back(t);
  };
  add('n', 128, 128, 256);
  add('N', 64, 64, 128);
  add('o', 128, 256, 256);
  add('p', 64, 256, 256, wide);
  add('q', 32, 256, 256, wide);
  return out;
}

bool coopmat_tile_reachable(std::span<const CoopmatTile> tiles, const CoopmatTile& t, char forced,
                            GgmlType type) {
  const bool vec = coopmat_vec_rule(type);
  if (t.unavailable) return false;
  if (forced && std::any_of(tiles.begin(), tiles.end(), [&](const CoopmatTile& x) {
        return x.name == forced && !x.unavailable;
      }))
    return t.name == forced;
  if (t.cm2) return t.rule;  // any type, from kNamedMinTok tokens on
  if (t.named) return t.rule && coopmat_named_rule(type);
  if (rule_candidate(tiles, t, vec)) return true;
  // The prefetch twin of a candidate (pick_coopmat_tile swaps it in for small n_out).
  return t.rule && t.prefetch && std::any_of(tiles.begin(), tiles.end(), [&](const CoopmatTile& x) {
           return rule_candidate(tiles, x, vec) && x.bm == t.bm && x.bn == t.bn;
         });
}

uint32_t coopmat_target_groups(uint32_t sm_count) {
  return sm_count ? std::max<uint32_t>(1, sm_count * 3 / 4) : 64;
}

}  // namespace fish::vk
