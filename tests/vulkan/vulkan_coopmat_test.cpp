// Cooperative-matrix prefill (engine/vulkan/coopmat.h, shaders/matmul_cm.comp.glsl): the tile
// table and rule, every type's matmul_cm kernel in every tile against the CPU f32 reference
// (quant/ dequantisation, double accumulation) within the seed's per-element bound on odd shapes
// and partial tiles, and a span end to end against the f32 tiled span (teacher-forced argmax
// >= 99% of positions, KL reported).
//
// The kernel tests need a device with VK_KHR_cooperative_matrix: ctest's vulkan_next label runs
// them on Mesa 26 lavapipe (~/.cache/fish/toolchain/bin/lvp-next, scripts/vulkan_toolchain.sh
// lavapipe), scripts/device/gpu_prefill.sh on the H200; Debian 12's lavapipe has none and skips
// them with a message. The workgroup-scope tiles n, nm, o (matmul_cm2.comp.glsl) need
// VK_NV_cooperative_matrix2 (NVIDIA): EveryTileMatchesCpuReference covers them where the device
// lists them, the Coopmat2 tests skip with a message elsewhere (lavapipe has no NV2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string_view>

#include "engine/gpu_placement.h"
#include "engine/session.h"
#include "engine/vulkan/coopmat.h"
#include "engine/vulkan/device_weight.h"
#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_device.h"
#include "shaders/fish_vk_layout.h"
#include "test_env.h"
#include "vulkan_test_util.h"

namespace fish {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::f32,  GgmlType::f16,  GgmlType::q4_0, GgmlType::q4_1,
                               GgmlType::q5_0, GgmlType::q5_1, GgmlType::q8_0, GgmlType::q4_k,
                               GgmlType::q5_k, GgmlType::q6_k, GgmlType::fq3};

TEST(CoopmatTiles, SizesFollowTheCoopmatShapeAndSubgroup) {
  const std::vector<vk::CoopmatTile> t = vk::coopmat_tiles(16, 16, 16, 32, 48 * 1024, 1024);
  ASSERT_EQ(t.size(), 21u);  // b, h, w, c, l, m, s, lp, mp, bn, g, r, u, v, x, y, z, d, e, f, k
  std::string labels, rule;
  for (const vk::CoopmatTile& x : t) {
    labels += x.label() + " ";
    if (x.rule) rule += x.label() + " ";
  }
  EXPECT_EQ(labels, "b h w c l m s lp mp bn g r u v x y z d e f k ");
  EXPECT_EQ(rule, "s z e k ");  // the measured fastest: small tiles without / with 16-value
                                // loads, the named 128 x 128 tiles (coopmat.cpp)
  // Double-buffered: 4 subgroups each, 128 threads.
  EXPECT_EQ(t[0].bm, 128u);
  EXPECT_EQ(t[0].bn, 128u);
  EXPECT_EQ(t[0].wm, 64u);
  EXPECT_EQ(t[0].wn, 64u);
  EXPECT_EQ(t[1].bm, 128u);
  EXPECT_EQ(t[1].bn, 64u);
  EXPECT_EQ(t[2].bm, 64u);
  EXPECT_EQ(t[2].bn, 128u);
  EXPECT_EQ(t[3].bm, 64u);
  EXPECT_EQ(t[3].bn, 64u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(t[i].dbuf) << t[i].label();
    EXPECT_EQ(t[i].subgroups(), 4u) << t[i].label();
    EXPECT_EQ(t[i].threads(), 128u) << t[i].label();
    EXPECT_EQ(t[i].constants()[11], 1u) << t[i].label();
  }
  // b: two buffers of (128 + 128) rows x 40 f16, 4 staging tiles of 16 x 16 f32.
  EXPECT_EQ(t[0].shared_bytes(), 2u * 256 * 40 * 2 + 4 * 256 * 4);
  // Single-buffered: l, m, s, lp, mp as before.
  EXPECT_EQ(t[4].name, 'l');
  EXPECT_EQ(t[4].bm, 128u);
  EXPECT_EQ(t[4].bn, 128u);
  EXPECT_EQ(t[4].subgroups(), 8u);
  EXPECT_EQ(t[4].threads(), 256u);
  EXPECT_EQ(t[4].shared_bytes(), 256u * 40 * 2 + 8 * 256 * 4);
  EXPECT_EQ(t[5].bm, 64u);
  EXPECT_EQ(t[5].threads(), 128u);
  EXPECT_EQ(t[6].bm, 32u);
  EXPECT_EQ(t[6].bn, 32u);
  EXPECT_EQ(t[6].threads(), 64u);
  EXPECT_TRUE(t[7].prefetch);
  EXPECT_EQ(t[7].bm, 128u);
  EXPECT_EQ(t[8].constants()[10], 1u);
  EXPECT_EQ(t[5].constants()[10], 0u);
  for (int i = 4; i < 9; ++i) EXPECT_EQ(t[i].constants()[11], 0u) << t[i].label();
  // bn: b without the touch.
  EXPECT_EQ(t[9].name, 'B');
  EXPECT_TRUE(t[9].dbuf);
  EXPECT_FALSE(t[9].touch);
  EXPECT_EQ(t[9].bm, 128u);
  EXPECT_EQ(t[9].shared_bytes(), t[0].shared_bytes());
  EXPECT_EQ(t[9].constants()[11], 2u);
  // g: b's tile on 8 subgroups of 64 x 32; exactly the H200's 48 KB of shared memory.
  EXPECT_EQ(t[10].name, 'g');
  EXPECT_EQ(t[10].bm, 128u);
  EXPECT_EQ(t[10].bn, 128u);
  EXPECT_EQ(t[10].subgroups(), 8u);
  EXPECT_EQ(t[10].threads(), 256u);
  EXPECT_EQ(t[10].shared_bytes(), 48u * 1024);
  EXPECT_EQ(t[10].constants()[11], 1u);
  // r, u, v: b's, c's and s's shapes with local accumulators (DBUF 3), double-buffered.
  const struct {
    char name;
    uint32_t bm, bn, wm, wn, subgroups;
  } local[] = {{'r', 128, 128, 64, 64, 4}, {'u', 64, 64, 32, 32, 4}, {'v', 32, 32, 32, 16, 2}};
  for (int i = 0; i < 3; ++i) {
    const vk::CoopmatTile& x = t[11 + i];
    EXPECT_EQ(x.name, local[i].name);
    EXPECT_EQ(x.label(), std::string(1, local[i].name));
    EXPECT_TRUE(x.dbuf && x.local && !x.touch && !x.prefetch) << x.label();
    EXPECT_EQ(x.bm, local[i].bm) << x.label();
    EXPECT_EQ(x.bn, local[i].bn) << x.label();
    EXPECT_EQ(x.wm, local[i].wm) << x.label();
    EXPECT_EQ(x.wn, local[i].wn) << x.label();
    EXPECT_EQ(x.subgroups(), local[i].subgroups) << x.label();
    EXPECT_EQ(x.constants()[11], 3u) << x.label();
    EXPECT_EQ(x.constants()[10], 0u) << x.label();
    EXPECT_FALSE(x.rule) << x.label();
  }
  // x, y, z: r, u, v with 16-byte weight loads (VEC 1).
  for (int i = 0; i < 3; ++i) {
    const vk::CoopmatTile& a = t[11 + i];
    const vk::CoopmatTile& x = t[14 + i];
    EXPECT_EQ(x.name, "xyz"[i]);
    EXPECT_TRUE(x.vec && x.local && !a.vec) << x.label();
    EXPECT_EQ(x.bm, a.bm);
    EXPECT_EQ(x.bn, a.bn);
    EXPECT_EQ(x.threads(), a.threads());
    EXPECT_EQ(x.shared_bytes(), a.shared_bytes());
    EXPECT_EQ(x.constants()[11], 3u);
    EXPECT_EQ(x.rule, x.name == 'z') << x.label();  // z: the rule's tile for vec types
  }
  // d, e, f, k: named accumulators (DBUF 4) on r's, x's, y's and l's shapes, forced only.
  const struct {
    char name;
    uint32_t bm, wm, wn;
    bool vec;
  } named[] = {{'d', 128, 64, 64, false},
               {'e', 128, 64, 64, true},
               {'f', 64, 32, 32, true},
               {'k', 128, 64, 32, true}};
  for (int i = 0; i < 4; ++i) {
    const vk::CoopmatTile& x = t[17 + i];
    EXPECT_EQ(x.label(), std::string(1, named[i].name));
    EXPECT_TRUE(x.named && x.local && x.dbuf) << x.label();
    EXPECT_EQ(x.rule, x.name == 'e' || x.name == 'k') << x.label();
    EXPECT_EQ(x.vec, named[i].vec) << x.label();
    EXPECT_EQ(x.bm, named[i].bm) << x.label();
    EXPECT_EQ(x.bn, named[i].bm) << x.label();
    EXPECT_EQ(x.wm, named[i].wm) << x.label();
    EXPECT_EQ(x.wn, named[i].wn) << x.label();
    EXPECT_EQ(x.constants()[11], 4u) << x.label();
  }
  EXPECT_EQ(t[20].threads(), 256u);
  EXPECT_EQ(t[20].shared_bytes(), 48u * 1024);
  // r: two buffers like b, inside the H200's 48 KB.
  EXPECT_EQ(t[11].shared_bytes(), 2u * 256 * 40 * 2 + 4 * 256 * 4);
  for (const vk::CoopmatTile& x : t) {
    EXPECT_EQ(x.bm % x.wm, 0u);
    EXPECT_EQ(x.bn % x.wn, 0u);
    EXPECT_EQ(x.wm % x.cm, 0u);
    EXPECT_EQ(x.wn % x.cn, 0u);
    const std::vector<uint32_t> c = x.constants();
    ASSERT_EQ(c.size(), 13u);
    EXPECT_EQ(c[12], x.vec ? 1u : 0u);
    EXPECT_EQ(c[0], x.threads());
    EXPECT_EQ(c[9], x.threads());
  }
  // lavapipe: 8x8x8, subgroup 8.
  const std::vector<vk::CoopmatTile> lvp = vk::coopmat_tiles(8, 8, 8, 8, 64 * 1024, 1024);
  ASSERT_EQ(lvp.size(), 21u);
  EXPECT_EQ(lvp[0].bm, 64u);
  EXPECT_EQ(lvp[0].threads(), 32u);
  EXPECT_EQ(lvp[4].bm, 64u);
  EXPECT_EQ(lvp[4].threads(), 64u);
  // Limits drop tiles: 24 KB of shared memory keeps c (24 KB), m, s, mp, u, v; 64 threads s, v.
  const std::vector<vk::CoopmatTile> small = vk::coopmat_tiles(16, 16, 16, 32, 24 * 1024, 1024);
  labels.clear();
  rule.clear();
  for (const vk::CoopmatTile& x : small) {
    labels += x.label() + " ";
    if (x.rule) rule += x.label() + " ";
  }
  EXPECT_EQ(labels, "c m s mp u v y z f ");
  EXPECT_EQ(rule, "s z ");
  const std::vector<vk::CoopmatTile> few = vk::coopmat_tiles(16, 16, 16, 32, 48 * 1024, 64);
  ASSERT_EQ(few.size(), 3u);
  EXPECT_EQ(few[0].name, 's');
  EXPECT_TRUE(few[0].rule);
  EXPECT_EQ(few[1].name, 'v');
  EXPECT_EQ(few[2].name, 'z');
  EXPECT_TRUE(few[2].rule);
  // A K that does not divide the 32-value step: no tiles.
  EXPECT_TRUE(vk::coopmat_tiles(16, 16, 24, 32, 48 * 1024, 1024).empty());
}

TEST(CoopmatTiles, RuleFillsTheGridWithTheLargestTile) {
  const std::vector<vk::CoopmatTile> t = vk::coopmat_tiles(16, 16, 16, 32, 48 * 1024, 1024);
  const uint32_t target = vk::coopmat_target_groups(132);
  EXPECT_EQ(target, 99u);
  EXPECT_EQ(vk::coopmat_target_groups(0), 64u);
  auto pick = [&](std::span<const vk::CoopmatTile> tiles, uint32_t n_out, uint32_t n_tok,
                  char forced = 0, GgmlType type = GgmlType::f32) {
    const vk::CoopmatTile* p = vk::pick_coopmat_tile(tiles, n_out, n_tok, target, forced, type);
    return p ? p->label() : std::string("none");
  };
  // The device's tiles: s for every shape, z for the types of coopmat_vec_rule.
  EXPECT_EQ(pick(t, 4096, 512), "s");
  EXPECT_EQ(pick(t, 14336, 512), "s");
  EXPECT_EQ(pick(t, 1024, 64), "s");
  // At 64 tokens or more every type but f16 / f32 takes a named 128 x 128 tile: k while the grid
  // is under 8/3 x 99 (4096 rows at 512 tokens: 32 x 4 = 128; 1024 x 64: 8), e above (14336
  // rows: 448); fewer tokens z or s.
  EXPECT_EQ(pick(t, 4096, 512, 0, GgmlType::q4_k), "k");
  EXPECT_EQ(pick(t, 1024, 64, 0, GgmlType::q4_k), "k");
  EXPECT_EQ(pick(t, 14336, 512, 0, GgmlType::q6_k), "e");
  EXPECT_EQ(pick(t, 4096, 63, 0, GgmlType::q4_k), "z");
  EXPECT_EQ(pick(t, 4096, 32, 0, GgmlType::q6_k), "s");
  EXPECT_EQ(pick(t, 4096, 512, 0, GgmlType::f16), "z");
  EXPECT_EQ(pick(t, 4096, 512, 'b', GgmlType::q4_k), "b");
  EXPECT_TRUE(vk::coopmat_named_rule(GgmlType::q8_0));
  EXPECT_FALSE(vk::coopmat_named_rule(GgmlType::f16));
  EXPECT_TRUE(vk::coopmat_vec_rule(GgmlType::q4_k));
  EXPECT_TRUE(vk::coopmat_vec_rule(GgmlType::f16));
  EXPECT_FALSE(vk::coopmat_vec_rule(GgmlType::q6_k));
  EXPECT_FALSE(vk::coopmat_vec_rule(GgmlType::q8_0));
  // Forced, and forced to a tile the device lacks (the rule then).
  EXPECT_EQ(pick(t, 4096, 512, 'b'), "b");
  EXPECT_EQ(pick(t, 14336, 512, 'L'), "lp");
  EXPECT_EQ(pick(t, 14336, 512, 'B'), "bn");
  EXPECT_EQ(pick(t, 14336, 512, 'q'), "s");
  EXPECT_EQ(pick({}, 4096, 512), "none");
  // The grid rule on other candidate sets (as coopmat_tiles marks them where s is missing):
  // b, h, w, c. 8B shapes at 512 tokens: 4096 and 14336 rows -> 32 x 4 = 128 and 112 x 4 = 448 b
  // tiles; 1024 rows (k/v) -> 8 x 4 = 32 b, 64 h, 64 w, 128 c.
  std::vector<vk::CoopmatTile> dbuf = t;
  for (vk::CoopmatTile& x : dbuf) x.rule = x.dbuf && x.touch && x.name != 'g';
  EXPECT_EQ(pick(dbuf, 4096, 512), "b");
  EXPECT_EQ(pick(dbuf, 14336, 512), "b");
  EXPECT_EQ(pick(dbuf, 1024, 512), "c");
  // 1B at 512: 2048 rows -> 64 b tiles < 99, 128 h tiles.
  EXPECT_EQ(pick(dbuf, 2048, 512), "h");
  // 1024 rows at 64 tokens: 8 b, 8 h, 16 w, 16 c: none fills, the most workgroups (w before c).
  EXPECT_EQ(pick(dbuf, 1024, 64), "w");
  EXPECT_EQ(pick(dbuf, 1024, 64, 0, GgmlType::q4_k), "w");  // no named or vec candidate
  // l, m, s with lp, mp (prefetch where n_out <= 8192).
  std::vector<vk::CoopmatTile> single = t;
  for (vk::CoopmatTile& x : single) x.rule = !x.dbuf;
  EXPECT_EQ(pick(single, 4096, 512), "lp");
  EXPECT_EQ(pick(single, 14336, 512), "l");
  EXPECT_EQ(pick(single, 2048, 512), "mp");
  EXPECT_EQ(pick(single, 1024, 64), "s");
  // What a span builds pipelines for: the rule's candidates, or only the forced tile.
  std::string reach, reach_vec, forced_b, reach_single;
  for (const vk::CoopmatTile& x : t) {
    if (vk::coopmat_tile_reachable(t, x, 0)) reach += x.label() + " ";
    if (vk::coopmat_tile_reachable(t, x, 0, GgmlType::q4_k)) reach_vec += x.label() + " ";
    if (vk::coopmat_tile_reachable(t, x, 'b')) forced_b += x.label() + " ";
  }
  for (const vk::CoopmatTile& x : single)
    if (vk::coopmat_tile_reachable(single, x, 'q')) reach_single += x.label() + " ";
  EXPECT_EQ(reach, "s ");
  EXPECT_EQ(reach_vec, "z e k ");
  EXPECT_EQ(forced_b, "b ");
  EXPECT_EQ(reach_single, "l m s lp mp ");
  // Where s is dropped: b, h, w, c are the candidates; without those, the single-buffered.
  std::string rule20;
  for (const vk::CoopmatTile& x : vk::coopmat_tiles(16, 16, 16, 32, 20 * 1024, 1024))
    rule20 += x.label() + (x.rule ? "+ " : "- ");
  EXPECT_EQ(rule20, "m- s+ mp- v- z+ ");
}

// The workgroup-scope tiles follow the device's flexible shapes (the H200 lists, as llama.cpp's
// check expects, 128 threads with granularity 32 x 16 x 16 and 256 with 32 x 32 x 16), are the
// rule's from kNamedMinTok tokens on (the largest that fills the grid without a token tile wider
// than the matmul), and an unavailable one (its pipeline rejected) is never picked.
// to_f16's grid (coopmat2's f16 B rows): one thread per 8 values in workgroups of 256, at most the
// device's limit (the shader strides over the rest): a 28,672-wide input of 8,192 tokens needs
// 114,688 workgroups, past NVIDIA's 65,535.
TEST(CoopmatTiles, HalfRowsGridStaysWithinTheDeviceLimit) {
  EXPECT_EQ(vk::half_groups(4096, 512, 65535), 1024u);
  EXPECT_EQ(vk::half_groups(4096, 1, 65535), 2u);  // 512 threads
  EXPECT_EQ(vk::half_groups(8, 1, 65535), 1u);
  EXPECT_EQ(vk::half_groups(14336, 8192, 65535), 57344u);
  EXPECT_EQ(vk::half_groups(28672, 8192, 65535), 65535u);
  EXPECT_EQ(vk::half_groups(28672, 8192, 0), 1u);  // a limit of 0 still dispatches
}

// FISH_VK_COOPMAT2_SCALES's words: unset 1 (the measured set), the off words 0, the on words 1,
// 2 (q6_k too); anything else an error naming the knob.
TEST(CoopmatTiles, Coopmat2ScalesKnobReadsItsLevels) {
  EXPECT_EQ(vk::VulkanOptions{}.coopmat2_scales, 1u);
  {
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->coopmat2_scales, 1u);
  }
  for (auto [word, level] : {std::pair<const char*, int>{"0", 0},
                             {"off", 0},
                             {"1", 1},
                             {"on", 1},
                             {"2", 2},
                             {"3", -1},
                             {"auto", -1}}) {
    test::ScopedEnv e("FISH_VK_COOPMAT2_SCALES", word);
    auto o = vk::VulkanOptions::from_env();
    ASSERT_EQ(o.ok(), level >= 0) << word;
    if (o.ok()) {
      EXPECT_EQ(o->coopmat2_scales, uint32_t(level)) << word;
    } else {
      EXPECT_NE(o.error().message.find("FISH_VK_COOPMAT2_SCALES"), std::string::npos);
    }
  }
}

TEST(CoopmatTiles, Coopmat2TilesFollowTheFlexibleShapes) {
  const vk::Coopmat2Shape h200[] = {{32, 16, 16, 128}, {32, 32, 16, 256}};
  std::vector<vk::CoopmatTile> t = vk::coopmat2_tiles(h200, 256, 1024, 32);
  std::string labels;
  for (const vk::CoopmatTile& x : t) labels += x.label() + " ";
  EXPECT_EQ(labels, "n nm o p q ");
  ASSERT_EQ(t.size(), 5u);
  const struct {
    uint32_t bm, bn, wg;
  } want[] = {{128, 128, 256}, {64, 64, 128}, {128, 256, 256}, {64, 256, 256}, {32, 256, 256}};
  for (size_t i = 0; i < t.size(); ++i) {
    const vk::CoopmatTile& x = t[i];
    // p and q are the rule's only with FISH_VK_COOPMAT2_WIDE=1 (below); listed, they can be
    // forced.
    EXPECT_TRUE(x.cm2 && x.rule == (x.name != 'p' && x.name != 'q') && !x.unavailable) << x.label();
    EXPECT_EQ(x.bm, want[i].bm) << x.label();
    EXPECT_EQ(x.bn, want[i].bn) << x.label();
    EXPECT_EQ(x.threads(), want[i].wg) << x.label();
    EXPECT_EQ(x.subgroups(), want[i].wg / 32) << x.label();
    EXPECT_EQ(x.shared_bytes(), 0u) << x.label();  // the driver's staging
    // matmul_cm2.comp.glsl's constants: WG, BM, BN, BK, KU, ACC, SCALES.
    EXPECT_EQ(x.constants(),
              (std::vector<uint32_t>{want[i].wg, want[i].bm, want[i].bn, 64, 4, 0, 0}))
        << x.label();
  }
  // FISH_VK_COOPMAT2_ACC's accumulation travels as ACC, the last constant; its f16 sums need the
  // device's f16 x f16 -> f16 shapes of the same thread counts too (none: no tiles; only the
  // 256-thread one: n and o).
  const vk::Coopmat2Shape with_f16[] = {
      {32, 16, 16, 128}, {32, 32, 16, 256}, {32, 16, 16, 128, true}, {32, 32, 16, 256, true}};
  const vk::Coopmat2Shape f16_256[] = {
      {32, 16, 16, 128}, {32, 32, 16, 256}, {32, 32, 16, 256, true}};
  for (uint32_t acc : {vk::kCoopmat2AccFold, vk::kCoopmat2AccF16}) {
    const std::vector<vk::CoopmatTile> f = vk::coopmat2_tiles(with_f16, 256, 1024, 32, acc);
    ASSERT_EQ(f.size(), 5u);
    for (const vk::CoopmatTile& x : f) EXPECT_EQ(x.constants()[5], acc) << x.label();
    EXPECT_TRUE(vk::coopmat2_tiles(h200, 256, 1024, 32, acc).empty());
    labels.clear();
    for (const vk::CoopmatTile& x : vk::coopmat2_tiles(f16_256, 256, 1024, 32, acc))
      labels += x.label() + " ";
    EXPECT_EQ(labels, "n o p q ");
  }
  // FISH_VK_COOPMAT2_SCALES travels as SCALES, the constant after ACC, at its level; the types
  // staged at each level.
  for (uint32_t level : {1u, 2u})
    for (const vk::CoopmatTile& x :
         vk::coopmat2_tiles(h200, 256, 1024, 32, vk::kCoopmat2AccF32, level))
      EXPECT_EQ(x.constants().back(), level) << x.label();
  EXPECT_EQ(vk::coopmat2_tiles(h200, 256, 1024, 32, vk::kCoopmat2AccF32, 1)[0].shared_bytes(),
            8u * 128 * 8);  // n's scales: 8 sub-blocks x 128 rows of vec2 (q6_k: 16 x 128 f32)
  EXPECT_TRUE(vk::coopmat2_stages_scales(GgmlType::q4_k, 1));
  EXPECT_TRUE(vk::coopmat2_stages_scales(GgmlType::fq3, 1));
  EXPECT_FALSE(vk::coopmat2_stages_scales(GgmlType::q6_k, 1));
  EXPECT_TRUE(vk::coopmat2_stages_scales(GgmlType::q6_k, 2));
  EXPECT_FALSE(vk::coopmat2_stages_scales(GgmlType::q8_0, 2));
  EXPECT_FALSE(vk::coopmat2_stages_scales(GgmlType::q4_k, 0));
  // f16 shapes alone admit no f32 tile.
  const vk::Coopmat2Shape only_f16[] = {{32, 32, 16, 256, true}};
  EXPECT_TRUE(vk::coopmat2_tiles(only_f16, 256, 1024, 32).empty());
  EXPECT_STREQ(vk::coopmat2_acc_name(vk::kCoopmat2AccF32), "f32");
  EXPECT_STREQ(vk::coopmat2_acc_name(vk::kCoopmat2AccFold), "fold");
  EXPECT_STREQ(vk::coopmat2_acc_name(vk::kCoopmat2AccF16), "f16");
  EXPECT_EQ(t[1].name, 'N');  // FISH_VK_COOPMAT_TILE=nm parses to 'N'
  // Limits: no 128-thread shape drops nm; a 128 maximum dimension drops o, p, q; a granularity
  // that does not divide 64 drops nm; a 128-thread workgroup limit keeps nm only; no shapes, no
  // tiles.
  const vk::Coopmat2Shape only256[] = {{32, 32, 16, 256}};
  labels.clear();
  for (const vk::CoopmatTile& x : vk::coopmat2_tiles(only256, 256, 1024, 32))
    labels += x.label() + " ";
  EXPECT_EQ(labels, "n o p q ");
  EXPECT_EQ(vk::coopmat2_tiles(h200, 128, 1024, 32).size(), 2u);
  const vk::Coopmat2Shape coarse[] = {{128, 16, 16, 128}, {32, 32, 16, 256}};
  EXPECT_EQ(vk::coopmat2_tiles(coarse, 256, 1024, 32).size(), 4u);
  const vk::Coopmat2Shape coarse256[] = {{32, 16, 16, 128}, {128, 32, 16, 256}};
  labels.clear();  // an M granularity of 128 at 256 threads drops p and q (64, 32 rows) alone
  for (const vk::CoopmatTile& x : vk::coopmat2_tiles(coarse256, 256, 1024, 32))
    labels += x.label() + " ";
  EXPECT_EQ(labels, "n nm o ");
  ASSERT_EQ(vk::coopmat2_tiles(h200, 256, 128, 32).size(), 1u);
  EXPECT_EQ(vk::coopmat2_tiles(h200, 256, 128, 32)[0].label(), "nm");
  EXPECT_TRUE(vk::coopmat2_tiles({}, 256, 1024, 32).empty());
  // Beside the KHR tiles, on 132 SMs (target 99 workgroups): o where its 128 x 256 grid fills
  // the target (the 8B's 14336-row matrices at 512 tokens: 224), else n (4096 rows: o has 64, n
  // 128), else nm (1024 rows: 128; or fewer than 128 tokens); none filling it, the one of most
  // workgroups; below kNamedMinTok tokens the KHR rule (s for f32 weights); forced, a tile is the
  // only reachable one; an unavailable one is skipped by both (the rule's tile instead).
  std::vector<vk::CoopmatTile> all = vk::coopmat_tiles(16, 16, 16, 32, 48 * 1024, 1024);
  all.insert(all.end(), t.begin(), t.end());
  const uint32_t target = vk::coopmat_target_groups(132);
  EXPECT_EQ(vk::pick_coopmat_tile(all, 4096, 512, target, 0)->label(), "n");
  EXPECT_EQ(vk::pick_coopmat_tile(all, 14336, 512, target, 0, GgmlType::q4_k)->label(), "o");
  EXPECT_EQ(vk::pick_coopmat_tile(all, 1024, 512, target, 0, GgmlType::q6_k)->label(), "nm");
  EXPECT_EQ(vk::pick_coopmat_tile(all, 14336, 200, target, 0)->label(), "n");  // o: 256 > 200
  EXPECT_EQ(vk::pick_coopmat_tile(all, 4096, 100, target, 0)->label(), "nm");
  EXPECT_EQ(vk::pick_coopmat_tile(all, 2048, 64, target, 0)->label(), "nm");  // 32 < 99: most
  EXPECT_EQ(vk::pick_coopmat_tile(all, 4096, vk::kNamedMinTok - 1, target, 0)->label(), "s");
  EXPECT_EQ(vk::pick_coopmat2_tile(t, 4096, 512, target)->label(), "n");
  {  // without nm, no grid fills the target at 100 tokens: o and n tie (32), the smaller wins
    std::vector<vk::CoopmatTile> no_nm = t;
    for (vk::CoopmatTile& x : no_nm) x.unavailable = x.name == 'N';
    EXPECT_EQ(vk::pick_coopmat2_tile(no_nm, 4096, 100, target)->label(), "n");
  }
  EXPECT_EQ(
      vk::pick_coopmat2_tile(vk::coopmat_tiles(16, 16, 16, 32, 48 * 1024, 1024), 4096, 512, target),
      nullptr);
  {  // FISH_VK_COOPMAT2_WIDE=1: o where it fills the target, else p (64 x 256: the 8B's 4096-row
     // matrices at 256+ tokens), else q (32 x 256: the 1B's 2048-row ones), else n / nm; the
     // 256-token tiles need 256 tokens
    const std::vector<vk::CoopmatTile> w =
        vk::coopmat2_tiles(h200, 256, 1024, 32, vk::kCoopmat2AccF32, 0, true);
    ASSERT_EQ(w.size(), 5u);
    EXPECT_TRUE(w[3].rule && w[4].rule);
    EXPECT_EQ(vk::pick_coopmat2_tile(w, 4096, 512, target)->label(), "p");
    EXPECT_EQ(vk::pick_coopmat2_tile(w, 4096, 300, target)->label(), "p");
    EXPECT_EQ(vk::pick_coopmat2_tile(w, 14336, 512, target)->label(), "o");
    EXPECT_EQ(vk::pick_coopmat2_tile(w, 2048, 512, target)->label(), "q");   // p 64 < 99
    EXPECT_EQ(vk::pick_coopmat2_tile(w, 1024, 512, target)->label(), "nm");  // q 64 < 99
    EXPECT_EQ(vk::pick_coopmat2_tile(w, 4096, 200, target)->label(), "nm");  // 256 > 200
    std::string wide_reach;
    for (const vk::CoopmatTile& x : w)
      if (vk::coopmat_tile_reachable(w, x, 0)) wide_reach += x.label() + " ";
    EXPECT_EQ(wide_reach, "n nm o p q ");
  }
  EXPECT_EQ(vk::pick_coopmat2_tile(t, 4096, 512, target)->label(), "n");  // p, q not the rule's
  EXPECT_EQ(vk::pick_coopmat2_tile(t, 2048, 512, target)->label(), "nm");
  EXPECT_EQ(vk::pick_coopmat_tile(all, 4096, 512, target, 'n')->label(), "n");
  EXPECT_EQ(vk::pick_coopmat_tile(all, 4096, 512, target, 'N')->label(), "nm");
  EXPECT_EQ(vk::pick_coopmat_tile(all, 4096, 512, target, 'o')->label(), "o");
  EXPECT_EQ(vk::pick_coopmat_tile(all, 4096, 512, target, 'p')->label(), "p");
  EXPECT_EQ(vk::pick_coopmat_tile(all, 2048, 512, target, 'q')->label(), "q");
  EXPECT_FALSE(vk::coopmat_tile_reachable(all, all.back(), 0));  // q, without the wide rule
  EXPECT_TRUE(vk::coopmat_tile_reachable(all, all.back(), 'q'));
  std::string reach;
  for (const vk::CoopmatTile& x : all)
    if (vk::coopmat_tile_reachable(all, x, 'n')) reach += x.label() + " ";
  EXPECT_EQ(reach, "n ");
  for (vk::CoopmatTile& x : all) x.unavailable = x.name == 'n';
  EXPECT_EQ(vk::pick_coopmat_tile(all, 4096, 512, target, 'n')->label(), "nm");
  reach.clear();
  for (const vk::CoopmatTile& x : all)
    if (vk::coopmat_tile_reachable(all, x, 'n')) reach += x.label() + " ";
  EXPECT_EQ(reach, "s nm o ");  // the rule's: s for f32 below kNamedMinTok, nm and o above
}

std::string g_no_coopmat;  // why coopmat_backend returned null

// Opens a backend with FISH_VK_COOPMAT_TILE = tile (0: the rule), FISH_VK_COOPMAT2_ACC = acc and
// FISH_VK_COOPMAT2_SCALES = scales (0 unless asked, whatever the default: the per-value decode
// of the scales keeps its coverage; check_token_counts asks for both); null when it has no tiles.
std::unique_ptr<vk::VulkanBackend> coopmat_backend(char tile, uint32_t acc = vk::kCoopmat2AccF32,
                                                   uint32_t scales = 0) {
  auto opt = vk::VulkanOptions::from_env();
  EXPECT_TRUE(opt.ok()) << opt.error().message;
  if (!opt.ok()) return nullptr;
  opt->coopmat_tile = tile;
  opt->coopmat2_acc = acc;
  opt->coopmat2_scales = scales;
  // Token counts up to FISH_MATVEC_MAX_TOK run the decode kernels: the f32 ones, whatever
  // FISH_VK_MATVEC or the device's auto rule says, because the bound here is f32 arithmetic's
  // (the integer-dot kernels round x to q8_1 and have their own: vulkan_matvec_idot_test.cpp).
  opt->matvec = vk::MatvecMode::fast;
  auto b = std::make_unique<vk::VulkanBackend>(opt);
  const Status s = b->open();
  EXPECT_TRUE(s.ok()) << s.error().message;
  if (!s.ok()) return nullptr;
  if (b->coopmat_tiles().empty()) {
    const vk::BackendInfo info = b->info();
    g_no_coopmat = info.device + ": " + info.features;
    return nullptr;
  }
  return b;
}

// Whether the opened device is a CPU implementation (lavapipe): the kernel tests then cover
// every type in b, h, w, c, s, r, u and v, x, y, z on the types with a 16-value loader and
// q4_1, the other tiles on q4_k only (lavapipe compiles each pipeline for seconds); a GPU runs
// every type in every tile.
bool cpu_device(vk::VulkanBackend& b) {
  for (const vk::DeviceEntry& e : b.info().devices)
    if (e.verdict == "selected") return e.type == "cpu";
  return false;
}

#define SKIP_WITHOUT_COOPMAT(b)                                                                 \
  if (!(b))                                                                                     \
  GTEST_SKIP() << "no cooperative matrices on " << g_no_coopmat                                 \
               << " (run under ~/.cache/fish/toolchain/bin/lvp-next: ctest -L vulkan_next, or " \
                  "on the GPU: scripts/device/gpu_prefill.sh)"

bool has_tile(vk::VulkanBackend& b, char name) {
  for (const vk::CoopmatTile& t : b.coopmat_tiles())
    if (t.name == name) return true;
  return false;
}

bool has_coopmat2_tile(vk::VulkanBackend& b) {
  for (const vk::CoopmatTile& t : b.coopmat_tiles())
    if (t.cm2) return true;
  return false;
}

#define SKIP_WITHOUT_COOPMAT2(b)                                                          \
  if (!(b) || !has_coopmat2_tile(*(b)))                                                   \
  GTEST_SKIP() << "no VK_NV_cooperative_matrix2 tiles on "                                \
               << ((b) ? (b)->info().device + ": " + (b)->info().features : g_no_coopmat) \
               << " (NVIDIA only; on the GPU: scripts/device/gpu_prefill.sh)"

MatrixView view(const std::vector<uint8_t>& data, GgmlType t, int64_t n_out, int64_t n_in,
                std::string name) {
  return MatrixView{data.data(), t, n_in, n_out, data.size(), std::move(name)};
}

// One matmul of n_tok random tokens by v (uploaded as h) against the CPU f32 reference; `kernel`
// names it in a failure.
// f16 sums (FISH_VK_COOPMAT2_ACC=fold|f16) round to f16 (unit roundoff u = 2^-11) at least once
// an MMA step. Taking a step as 8 values, a run of `run` values (256 folded, all of K unfolded)
// rounds at most run / 8 times, each within u of the run's sum |w x|: a worst case of
// (1 + run / 8 x u / 1e-3) times the seed's f32 bound, whose 1e-3 already covers the f16 inputs
// (the bound is the rows' mean sum |w x|; these random rows are alike). That worst case nears |y|
// for long unfolded runs, so the error's root mean square over the whole output must also stay
// within a random walk's: 4 sqrt(run / 8) u + 2e-3 of the reference's. A wrong tile or block or
// a lost fold errs by a large share of |y| itself.
struct F16AccCheck {
  double bound_scale = 1;  // of the per-element f32 bound
  double rms = 0;          // relative RMS error limit (0: none)
};
F16AccCheck f16_acc_check(uint32_t acc, int64_t n_in) {
  if (acc == vk::kCoopmat2AccF32) return {};
  const double run = acc == vk::kCoopmat2AccFold ? double(std::min<int64_t>(n_in, 256)) : n_in;
  const double u = std::ldexp(1.0, -11);
  return {1 + run / 8 * u / 1e-3, 4 * std::sqrt(run / 8) * u + 2e-3};
}

void expect_matmul_matches(vk::VulkanBackend& b, WeightHandle h, const MatrixView& v, int64_t n_tok,
                           const std::string& kernel, std::mt19937& rng,
                           const F16AccCheck& f16 = {}) {
  const std::vector<float> x = test::random_input(n_tok * v.n_in, rng);
  std::vector<float> y(size_t(n_tok * v.n_out), -1.0f);
  const Status s = b.matmul(h, x.data(), n_tok, y.data());
  ASSERT_TRUE(s.ok()) << s.error().message;
  test::Reference ref = test::reference_matmul(v, x.data(), n_tok);
  for (double& bound : ref.bound) bound *= f16.bound_scale;
  const std::string what =
      fmt::format("{} {} x {} n_tok {} ({})", v.name, v.n_out, v.n_in, n_tok, kernel);
  test::expect_close(ref, y, v.n_out, what);
  if (f16.rms > 0) {
    double err2 = 0, ref2 = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      err2 += (double(y[i]) - ref.y[i]) * (double(y[i]) - ref.y[i]);
      ref2 += ref.y[i] * ref.y[i];
    }
    EXPECT_LE(std::sqrt(err2 / ref2), f16.rms) << what << ": relative RMS error";
  }
}

// Every type in every tile: rows not a multiple of any tile (133), K an odd multiple of the block
// (and of the 32-value step), token counts that leave partial tiles (and one at the threshold).
TEST(VulkanCoopmat, EveryTileMatchesCpuReference) {
  auto probe = coopmat_backend(0);
  SKIP_WITHOUT_COOPMAT(probe);
  const std::vector<vk::CoopmatTile> tiles = probe->coopmat_tiles();
  const bool cpu = cpu_device(*probe);
  probe.reset();
  std::mt19937 rng(5);
  for (const vk::CoopmatTile& tile : tiles) {
    auto b = coopmat_backend(tile.name);
    ASSERT_TRUE(b);
    for (GgmlType t : kTypes) {
      // lavapipe: every type in b, h, w, c, s, r, u, v; x, y, z on the types with a 16-value
      // loader (q4_k, q5_k, fq3, f16, q6_k, q8_0, q4_0) and one without (q4_1); the others on
      // q4_k.
      const bool all_types = std::string_view("bhwcsruv").find(tile.name) != std::string_view::npos;
      const bool vec_types =
          tile.vec &&
          (t == GgmlType::f16 || t == GgmlType::q6_k || t == GgmlType::q8_0 ||
           t == GgmlType::q4_0 || t == GgmlType::q5_k || t == GgmlType::fq3 || t == GgmlType::q4_1);
      if (cpu && !all_types && !vec_types && t != GgmlType::q4_k) continue;
      const TypeInfo& ti = type_info(t);
      const int64_t n_in = ti.block_elems == 1 ? 100 : ti.block_elems == 32 ? 32 * 9 : 256 * 3;
      const int64_t n_out = 133;
      const std::vector<uint8_t> w = test::random_weights(t, n_out, n_in, rng);
      const MatrixView v = view(w, t, n_out, n_in, fmt::format("coopmat {}", ti.name));
      auto h = b->upload(v);
      ASSERT_TRUE(h.ok()) << h.error().message;
      for (int64_t n_tok : {int64_t(vk::kCoopmatMinTok), int64_t(37), int64_t(tile.bn + 3)}) {
        const std::string kernel = b->prefill_kernel(n_out, n_tok, t);
        ASSERT_NE(kernel.find(fmt::format("tile {} ", tile.label())), std::string::npos) << kernel;
        ASSERT_NE(kernel.find("coopmat"), std::string::npos) << kernel;
        expect_matmul_matches(*b, h.value(), v, n_tok, kernel, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
      b->release(h.value());
    }
    EXPECT_EQ(b->bytes_resident(), 0u);
  }
}

// Every token count `tile` (0: the rule) meets in spans and chunks, 1 .. 600, on rows fewer than
// one tile (7) and not a multiple of any (133): partial tiles on both sides, grids of one
// workgroup and of many, for the types of the 8B Q4_K_M file and q8_0, f16.
// With acc (FISH_VK_COOPMAT2_ACC fold or f16: f16_acc_check's bounds) longer rows: 768 values of
// the K-quants (three unrolled iterations, so a lost fold shows) and 352 of the others (5.5 steps
// of 64: the clamped loop's fold cadence and K tail), only the counts the coopmat2 tile takes.
// scales (FISH_VK_COOPMAT2_SCALES level, 2: every type it stages, coopmat2_stages_scales: q4_k,
// q5_k, fq3, q6_k) on rows of three super-blocks, so interior tiles refill the staged scales
// twice; q6_k's 210-byte blocks put odd super-blocks at 2-aligned bytes.
void check_token_counts(char tile, std::mt19937& rng, uint32_t acc = vk::kCoopmat2AccF32,
                        uint32_t scales = 0) {
  const int64_t kTok[] = {1, 4, 5, 15, 16, 17, 33, 64, 65, 127, 129, 255, 257, 511, 513, 600};
  auto b = coopmat_backend(tile, acc, scales);
  ASSERT_TRUE(b);
  const bool f16_sums = acc != vk::kCoopmat2AccF32;
  const std::vector<GgmlType> types =
      scales ? std::vector<GgmlType>{GgmlType::q4_k, GgmlType::q5_k, GgmlType::fq3, GgmlType::q6_k}
             : std::vector<GgmlType>{GgmlType::q4_k, GgmlType::q6_k, GgmlType::q8_0, GgmlType::f16};
  for (GgmlType t : types) {
    const TypeInfo& ti = type_info(t);
    // 32-value blocks: 5 K steps (160 values for the KHR tiles' 32; 320 for the coopmat2 tiles'
    // 64, kCoopmat2K, where 160 ran the clamped loop alone), so the interior tiles run one
    // unrolled iteration and a step after it.
    const bool cm2 = tile == 'n' || tile == 'N' || tile == 'o' || tile == 'p' || tile == 'q';
    const int64_t n_in = f16_sums || scales
                             ? (ti.block_elems == 256 ? 256 * 3 : vk::kCoopmat2K * 5 + 32)
                         : ti.block_elems == 256 ? 256
                                                 : (cm2 ? vk::kCoopmat2K : 32) * 5;
    const F16AccCheck f16 = f16_acc_check(acc, n_in);
    for (const int64_t n_out : {int64_t(7), int64_t(133)}) {
      const std::vector<uint8_t> w = test::random_weights(t, n_out, n_in, rng);
      const MatrixView v = view(w, t, n_out, n_in, fmt::format("tokens {}", ti.name));
      auto h = b->upload(v);
      ASSERT_TRUE(h.ok()) << h.error().message;
      for (const int64_t n_tok : kTok) {
        if ((f16_sums || scales) && n_tok < vk::kCoopmatMinTok) continue;  // checked before
        const std::string kernel = b->prefill_kernel(n_out, n_tok, t);
        if (n_tok >= vk::kCoopmatMinTok) {
          const std::string label = tile == 'N' ? "nm" : std::string(1, tile);
          ASSERT_NE(kernel.find(tile ? fmt::format("tile {} ", label) : "coopmat"),
                    std::string::npos)
              << kernel;
          if (scales) {
            ASSERT_NE(kernel.find("shared scales"), std::string::npos) << kernel;
          }
        }
        expect_matmul_matches(*b, h.value(), v, n_tok, kernel, rng, f16);
        if (::testing::Test::HasFatalFailure()) return;
      }
      b->release(h.value());
    }
  }
  EXPECT_EQ(b->bytes_resident(), 0u);
}

// Through the rule (matvec below 5, matvec8 to 8, the tiled kernel below 16, then the rule's
// tile) and through b, r, x forced.
TEST(VulkanCoopmat, TokenCountsOneToSixHundredMatchCpuReference) {
  auto probe = coopmat_backend(0);
  SKIP_WITHOUT_COOPMAT(probe);
  probe.reset();
  std::mt19937 rng(11);
  for (const char tile : {char(0), 'b', 'r', 'x'}) {
    check_token_counts(tile, rng);
    if (HasFatalFailure()) return;
  }
}

// The workgroup-scope tiles n, nm, o, p, q forced: clamped edge tiles (7 rows: less than one tile),
// the interior tiles' unrolled K loop (256 values: one iteration of 4 steps of 64; 320 values of
// the 32-value types: one and a step), grids of many; then n with f16 sums (FISH_VK_COOPMAT2_ACC
// fold and f16) within f16_acc_check's bounds; then each tile with the K-quant scales in shared
// memory (FISH_VK_COOPMAT2_SCALES=2) on q4_k, q5_k, fq3 and q6_k.
TEST(VulkanCoopmat, Coopmat2TokenCountsOneToSixHundredMatchCpuReference) {
  auto probe = coopmat_backend(0);
  SKIP_WITHOUT_COOPMAT2(probe);
  std::vector<char> tiles;
  for (const vk::CoopmatTile& t : probe->coopmat_tiles())
    if (t.cm2) tiles.push_back(t.name);
  probe.reset();
  std::mt19937 rng(13);
  for (const char tile : tiles) {
    check_token_counts(tile, rng);
    if (HasFatalFailure()) return;
  }
  if (std::find(tiles.begin(), tiles.end(), 'n') == tiles.end()) return;
  for (uint32_t acc : {vk::kCoopmat2AccFold, vk::kCoopmat2AccF16}) {
    SCOPED_TRACE(vk::coopmat2_acc_name(acc));
    check_token_counts('n', rng, acc);
    if (HasFatalFailure()) return;
  }
  for (const char tile : tiles) {
    SCOPED_TRACE("FISH_VK_COOPMAT2_SCALES=2");
    check_token_counts(tile, rng, vk::kCoopmat2AccF32, 2);
    if (HasFatalFailure()) return;
  }
}

// A device without VK_NV_cooperative_matrix2 (lavapipe), or FISH_VK_COOPMAT2=0: the device opens
// with no coopmat2 tile, a forced one falls back to the rule, and FISH_VK_COOPMAT2=1 fails to open
// naming the knob; on a device with it, 1 opens with the tiles.
TEST(VulkanCoopmat, Coopmat2AbsentOrOffLeavesTheOtherKernels) {
  auto opt = vk::VulkanOptions::from_env();
  ASSERT_TRUE(opt.ok()) << opt.error().message;
  bool has_cm2 = false;
  {
    vk::VulkanBackend b(opt);
    if (!b.open().ok()) GTEST_SKIP() << "no Vulkan device: " << b.status();
    has_cm2 = has_coopmat2_tile(b);
    EXPECT_EQ(has_cm2, b.info().features.find("coopmat2 (") != std::string::npos)
        << b.info().features;
  }
  {
    test::ScopedEnv off("FISH_VK_COOPMAT2", "0");
    test::ScopedEnv tile("FISH_VK_COOPMAT_TILE", "n");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->coopmat2, 0);
    EXPECT_EQ(o->coopmat_tile, 'n');
    vk::VulkanBackend b(o);
    ASSERT_TRUE(b.open().ok()) << b.status();
    EXPECT_FALSE(has_coopmat2_tile(b));
    EXPECT_EQ(b.info().features.find("coopmat2 ("), std::string::npos) << b.info().features;
    // The forced tile is absent: the rule's kernel (a KHR tile, or the f32 tiled kernel).
    const std::string k = b.prefill_kernel(4096, 512, GgmlType::q4_k);
    EXPECT_EQ(k.find("coopmat2"), std::string::npos) << k;
    EXPECT_EQ(k.find("tile n "), std::string::npos) << k;
  }
  {
    test::ScopedEnv on("FISH_VK_COOPMAT2", "1");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->coopmat2, 1);
    vk::VulkanBackend b(o);
    const Status s = b.open();
    if (has_cm2) {
      ASSERT_TRUE(s.ok()) << s.error().message;
      EXPECT_TRUE(has_coopmat2_tile(b));
    } else {
      ASSERT_FALSE(s.ok());
      EXPECT_NE(s.error().message.find("FISH_VK_COOPMAT2=1"), std::string::npos)
          << s.error().message;
    }
  }
  {
    test::ScopedEnv tile("FISH_VK_COOPMAT_TILE", "nm");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->coopmat_tile, 'N');
    test::ScopedEnv bad("FISH_VK_COOPMAT2", "2");
    EXPECT_FALSE(vk::VulkanOptions::from_env().ok());
  }
}

// A weight in several buffer parts and a matmul_group: each part's rows land at its y offset.
TEST(VulkanCoopmat, PartsAndGroupsMatchCpuReference) {
  auto probe = coopmat_backend(0);
  SKIP_WITHOUT_COOPMAT(probe);
  probe.reset();
  auto opt = vk::VulkanOptions::from_env();
  ASSERT_TRUE(opt.ok());
  opt->max_part_bytes = 20000;
  vk::VulkanBackend b(opt);
  ASSERT_TRUE(b.open().ok());
  std::mt19937 rng(9);
  const int64_t n_in = 512, n_tok = 45;
  const std::vector<uint8_t> a = test::random_weights(GgmlType::q4_k, 201, n_in, rng);
  const std::vector<uint8_t> c = test::random_weights(GgmlType::q8_0, 70, n_in, rng);
  const MatrixView va = view(a, GgmlType::q4_k, 201, n_in, "parts q4_k");
  const MatrixView vc = view(c, GgmlType::q8_0, 70, n_in, "group q8_0");
  auto ha = b.upload(va);
  auto hc = b.upload(vc);
  ASSERT_TRUE(ha.ok() && hc.ok());
  const std::vector<float> x = test::random_input(n_tok * n_in, rng);
  std::vector<float> ya(size_t(n_tok * 201)), yc(size_t(n_tok * 70));
  const ComputeBackend::MatmulOp ops[] = {{ha.value(), ya.data()}, {hc.value(), yc.data()}};
  ASSERT_TRUE(b.matmul_group(ops, x.data(), n_tok).ok());
  test::expect_close(test::reference_matmul(va, x.data(), n_tok), ya, 201, "parts q4_k");
  test::expect_close(test::reference_matmul(vc, x.data(), n_tok), yc, 70, "group q8_0");
  b.release(ha.value());
  b.release(hc.value());
}

// FISH_VK_COOPMAT=1 requires them: a device without fails to open naming the knob; one with
// opens with tiles. FISH_VK_COOPMAT=0 never enables them.
TEST(VulkanCoopmat, RequiredAndOffOptions) {
  const bool has_coopmat = coopmat_backend(0) != nullptr;
  test::ScopedEnv tile("FISH_VK_COOPMAT_TILE", "s");
  {
    test::ScopedEnv on("FISH_VK_COOPMAT", "1");
    auto opt = vk::VulkanOptions::from_env();
    ASSERT_TRUE(opt.ok()) << opt.error().message;
    EXPECT_EQ(opt->coopmat, 1);
    EXPECT_EQ(opt->coopmat_tile, 's');
    vk::VulkanBackend b(opt);
    const Status s = b.open();
    if (has_coopmat) {
      ASSERT_TRUE(s.ok()) << s.error().message;
      EXPECT_FALSE(b.coopmat_tiles().empty());
      EXPECT_NE(b.prefill_kernel(4096, 512, GgmlType::q4_k).find("tile s"), std::string::npos);
      EXPECT_NE(b.describe().find("prefill coopmat"), std::string::npos) << b.describe();
    } else {
      ASSERT_FALSE(s.ok());
      EXPECT_NE(s.error().message.find("FISH_VK_COOPMAT=1"), std::string::npos)
          << s.error().message;
    }
  }
  {
    test::ScopedEnv off("FISH_VK_COOPMAT", "0");
    auto opt = vk::VulkanOptions::from_env();
    ASSERT_TRUE(opt.ok());
    EXPECT_EQ(opt->coopmat, 0);
    vk::VulkanBackend b(opt);
    ASSERT_TRUE(b.open().ok());
    EXPECT_TRUE(b.coopmat_tiles().empty());
    EXPECT_EQ(b.prefill_kernel(4096, 512, GgmlType::q4_k), "tiled f32");
    EXPECT_EQ(b.prefill_kernel(4096, 15, GgmlType::q4_k), "tiled f32");
    EXPECT_EQ(b.prefill_kernel(4096, 4, GgmlType::q4_k), "matvec");
    EXPECT_EQ(b.prefill_kernel(4096, 8, GgmlType::q4_k), "matvec8");
    EXPECT_NE(b.describe().find("prefill tiled f32"), std::string::npos) << b.describe();
  }
  {
    test::ScopedEnv bad("FISH_VK_COOPMAT", "2");
    auto opt = vk::VulkanOptions::from_env();
    ASSERT_FALSE(opt.ok());
    EXPECT_NE(opt.error().message.find("FISH_VK_COOPMAT"), std::string::npos);
  }
}

// ---- span end to end -------------------------------------------------------------------------

constexpr int64_t kCtx = 128;

std::shared_ptr<const Model> synthetic_model(const char* arch, int64_t window) {
  const ModelShape shape{"test-coopmat",
                         arch,
                         "3-layer coopmat span test",
                         3,
                         512,
                         1024,
                         8,
                         2,
                         64,
                         2048,
                         window > 0,
                         512,
                         10000.0f,
                         1e-5f,
                         int(window)};
  return test::synthetic_q4_k_m(shape, {17, 3},
                                fmt::format("fish_coopmat_3l_{}_q4_k_m.gguf", arch));
}

// Logits at every position: a prefill of n_prefill tokens in one span forward, then one token at
// a time.
// The span's kernels line into *kernels where given.
std::vector<float> span_logits(std::shared_ptr<const Model> model, vk::VulkanBackend& b,
                               const std::vector<int32_t>& tokens, size_t n_prefill,
                               std::string* kernels = nullptr, int prefills = 1) {
  std::vector<float> all;
  std::shared_ptr<const GpuPlacement> pl = GpuPlacement::place_layers(
      *model, b, test::placement_request(-1, SpanRequest{kCtx, 128, 16}));
  EXPECT_TRUE(pl->span()) << pl->summary();
  if (kernels && pl->span()) *kernels = pl->span()->kernels();
  SessionOptions opt;
  opt.n_ctx = kCtx;
  opt.n_batch = 128;
  opt.act = ActMode::f32;
  opt.gpu = pl;
  auto s = Session::create(model, opt);
  EXPECT_TRUE(s.ok()) << s.error().message;
  if (!s.ok()) return all;
  EXPECT_TRUE(s.value()->span_active());
  const std::span<const int32_t> t(tokens);
  Result<std::span<const float>> lg = std::span<const float>{};
  for (int p = 0; p < prefills; ++p) {  // each prefill from position 0 again
    lg = s.value()->forward(t.subspan(0, n_prefill), 0, LogitsMode::all);
    EXPECT_TRUE(lg.ok()) << lg.error().message;
    if (!lg.ok()) return all;
    all.insert(all.end(), lg.value().begin(), lg.value().end());
  }
  for (size_t i = n_prefill; i < tokens.size(); ++i) {
    lg = s.value()->append(t.subspan(i, 1));
    EXPECT_TRUE(lg.ok()) << lg.error().message;
    if (!lg.ok()) return all;
    all.insert(all.end(), lg.value().begin(), lg.value().end());
  }
  EXPECT_EQ(s.value()->gpu_fallbacks(), 0);
  return all;
}

// Teacher-forced comparison of two spans' logits (a against b, b the reference): argmax equal at
// >= 99% of positions, every logit within 2% of b's largest |logit|; KL(b || a) printed.
void compare_logits(const std::vector<float>& a, const std::vector<float>& b, int64_t n_vocab,
                    size_t n_pos_expected, const std::string& what);

// The span with coopmat (the rule, or `tile` forced) against the f32 tiled span.
void check_span(const char* arch, int64_t window, const std::string& what, char tile = 0) {
  auto cm = coopmat_backend(tile);
  SKIP_WITHOUT_COOPMAT(cm);
  if (tile) {
    ASSERT_NE(cm->prefill_kernel(1024, 100, GgmlType::q4_k).find(fmt::format("tile {} ", tile)),
              std::string::npos)
        << cm->prefill_kernel(1024, 100, GgmlType::q4_k);
  }
  auto model = synthetic_model(arch, window);
  ASSERT_TRUE(model);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 104; ++i) tokens.push_back(int32_t((i * 41 + 7) % 2048));
  const std::vector<float> a = span_logits(model, *cm, tokens, 100);
  auto opt = vk::VulkanOptions::from_env();
  ASSERT_TRUE(opt.ok());
  opt->coopmat = 0;  // FISH_VK_COOPMAT=0: the f32 tiled kernel
  vk::VulkanBackend f32(opt);
  ASSERT_TRUE(f32.open().ok());
  ASSERT_TRUE(f32.coopmat_tiles().empty());
  ASSERT_EQ(f32.prefill_kernel(1024, 100, GgmlType::q4_k), "tiled f32");
  const std::vector<float> b = span_logits(model, f32, tokens, 100);
  compare_logits(a, b, model->params().n_vocab, tokens.size(),
                 what + ": coopmat span vs f32 tiled span");
}

void compare_logits(const std::vector<float>& a, const std::vector<float>& b, int64_t n_vocab,
                    size_t n_pos_expected, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), n_pos_expected * size_t(n_vocab));
  int64_t equal = 0;
  double kl_sum = 0, kl_max = 0, max_diff = 0, max_abs = 0;
  const int64_t n_pos = int64_t(n_pos_expected);
  for (int64_t p = 0; p < n_pos; ++p) {
    const float* ra = a.data() + p * n_vocab;
    const float* rb = b.data() + p * n_vocab;
    equal += (std::max_element(ra, ra + n_vocab) - ra) == (std::max_element(rb, rb + n_vocab) - rb);
    // KL(f32 tiled || coopmat) of the softmaxes, in nats.
    const double ma = *std::max_element(ra, ra + n_vocab), mb = *std::max_element(rb, rb + n_vocab);
    double za = 0, zb = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      za += std::exp(double(ra[i]) - ma);
      zb += std::exp(double(rb[i]) - mb);
    }
    double kl = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      const double la = double(ra[i]) - ma - std::log(za), lb = double(rb[i]) - mb - std::log(zb);
      kl += std::exp(lb) * (lb - la);
      max_diff = std::max(max_diff, std::fabs(double(ra[i]) - double(rb[i])));
      max_abs = std::max(max_abs, std::fabs(double(rb[i])));
    }
    kl_sum += kl;
    kl_max = std::max(kl_max, kl);
  }
  std::printf(
      "%s, %lld teacher-forced positions: argmax equal %lld "
      "(%.1f%%), KL mean %.3g max %.3g nats, max |dlogit| %.3g of %.3g\n",
      what.c_str(), (long long)n_pos, (long long)equal, 100.0 * double(equal) / double(n_pos),
      kl_sum / double(n_pos), kl_max, max_diff, max_abs);
  EXPECT_GE(double(equal), 0.99 * double(n_pos)) << what;
  EXPECT_LE(max_diff, 0.02 * max_abs) << what;
}

TEST(VulkanCoopmat, SpanMatchesTiledPathGqa) {
  check_span("llama", 0, "synthetic llama 8:2");
}

// The local-accumulator tile r (coopmat.h) through a whole span.
TEST(VulkanCoopmat, SpanMatchesTiledPathTileR) {
  check_span("llama", 0, "synthetic llama 8:2 tile r", 'r');
}

// x: r with 16-value weight units (load16_step: the span's Q4_K_M weights are q4_k and q6_k).
TEST(VulkanCoopmat, SpanMatchesTiledPathTileX) {
  check_span("llama", 0, "synthetic llama 8:2 tile x", 'x');
}

// A workgroup-scope coopmat2 tile forced through a whole span (q4_k and q6_k decode functions).
void check_cm2_span(char tile) {
  auto probe = coopmat_backend(0);
  SKIP_WITHOUT_COOPMAT2(probe);
  if (!has_tile(*probe, tile))
    GTEST_SKIP() << "no coopmat2 tile " << tile << ": " << probe->info().features;
  probe.reset();
  check_span("llama", 0, fmt::format("synthetic llama 8:2 tile {}", tile), tile);
}

// n: 128 x 128.
TEST(VulkanCoopmat, SpanMatchesTiledPathTileN) {
  check_cm2_span('n');
}

// p: 64 x 256 (FISH_VK_COOPMAT2_WIDE's; q, 32 x 256, runs in the token-count test).
TEST(VulkanCoopmat, SpanMatchesTiledPathTileP) {
  check_cm2_span('p');
}

// Two backends on the environment's device for an f16-copy span test: `ref` under the options
// `ref_set` leaves, `var` under `var_set`'s; false (with why) where the device has no Vulkan or
// no f16 copies under `var`.
template <class RefSet, class VarSet>
bool copy_backends(std::unique_ptr<vk::VulkanBackend>* ref, std::unique_ptr<vk::VulkanBackend>* var,
                   RefSet ref_set, VarSet var_set, std::string* why) {
  auto opt = vk::VulkanOptions::from_env();
  if (!opt.ok()) return *why = opt.error().message, false;
  ref_set(*opt);
  *ref = std::make_unique<vk::VulkanBackend>(opt);
  if (!(*ref)->open().ok()) return *why = "no Vulkan device", false;
  var_set(*opt);
  *var = std::make_unique<vk::VulkanBackend>(opt);
  if (!(*var)->open().ok()) return *why = "the variant did not open", false;
  const std::string pk = (*var)->prefill_kernel(1024, 100, GgmlType::q4_k);
  if (pk.find("f16 copies") == std::string::npos)
    return *why = "no f16 copies on this device (16-bit storage and f16 arithmetic): " + pk, false;
  return true;
}

// 104 teacher-forced tokens (a 100-token prefill, then 4 decode steps).
std::vector<int32_t> copy_tokens(int mul, int add) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < 104; ++i) tokens.push_back(int32_t((i * mul + add) % 2048));
  return tokens;
}

// FISH_VK_PREFILL_F16: the span's prefill chunk (100 tokens) runs every q4_k / q6_k matmul on
// f16 copies of the weights with the f16 kernel of the device's family (lavapipe: the tiled
// kernel; NVIDIA: a coopmat2 tile), against the same device's span without copies. The copies
// round each dequantised weight to f16, as the cooperative-matrix kernels' own decode does.
TEST(VulkanPrefillF16, SpanMatchesTheQuantisedKernels) {
  std::unique_ptr<vk::VulkanBackend> plain, f16;
  std::string why;
  if (!copy_backends(
          &plain, &f16, [](vk::VulkanOptions& o) { o.prefill_f16 = 0; },
          [](vk::VulkanOptions& o) { o.prefill_f16 = 1; }, &why))
    GTEST_SKIP() << why;
  auto model = synthetic_model("llama", 0);
  ASSERT_TRUE(model);
  const std::vector<int32_t> tokens = copy_tokens(29, 3);
  std::string with, without;
  const std::vector<float> a = span_logits(model, *f16, tokens, 100, &with);
  const std::vector<float> b = span_logits(model, *plain, tokens, 100, &without);
  EXPECT_NE(with.find("prefill matmuls on f16 weight copies from 9 tokens"), std::string::npos)
      << with;
  EXPECT_EQ(without.find("f16 weight copies"), std::string::npos) << without;
  compare_logits(a, b, model->params().n_vocab, tokens.size(),
                 fmt::format("synthetic llama 8:2: span on f16 copies ({}) vs without ({})",
                             f16->prefill_kernel(1024, 100, GgmlType::q4_k),
                             plain->prefill_kernel(1024, 100, GgmlType::q4_k)));
}

// FISH_VK_PREFILL_F16_AHEAD: each group's copies recorded beside the previous group's matmuls
// (two copy regions; 1 after their dispatches, 2 before them) instead of before its own: the
// same values into the same kernels, so the logits are bitwise those of the copies written in
// place, over two prefill chunks on lavapipe (64-token chunks) and decode steps after. With
// FISH_VK_PREFILL_F16_COPY_WG (settings 3 and 4: 3 workgroups and 1, far fewer than a copy's
// rows need, so each thread strides over many units) the same again: a grid that left units
// unwritten would leave stale or zero weights in the copy.
TEST(VulkanPrefillF16, CopiesAheadLeaveLogitsBitwiseEqual) {
  auto model = synthetic_model("llama", 0);
  ASSERT_TRUE(model);
  const std::vector<int32_t> tokens = copy_tokens(37, 11);
  struct Setting {
    int level;
    uint32_t copy_wg;
  };
  for (const Setting k : {Setting{1, 0}, Setting{2, 0}, Setting{2, 3}, Setting{1, 1}}) {
    SCOPED_TRACE(fmt::format("FISH_VK_PREFILL_F16_AHEAD={} FISH_VK_PREFILL_F16_COPY_WG={}", k.level,
                             k.copy_wg));
    std::unique_ptr<vk::VulkanBackend> here, ahead;
    std::string why;
    if (!copy_backends(
            &here, &ahead,
            [](vk::VulkanOptions& o) {
              o.prefill_f16 = 1;
              o.prefill_f16_ahead = 0;
            },
            [&](vk::VulkanOptions& o) {
              o.prefill_f16_ahead = k.level;
              o.prefill_f16_copy_wg = k.copy_wg;
            },
            &why))
      GTEST_SKIP() << why;
    std::string k_here, k_ahead;
    const std::vector<float> a = span_logits(model, *ahead, tokens, 100, &k_ahead);
    const std::vector<float> b = span_logits(model, *here, tokens, 100, &k_here);
    EXPECT_NE(k_ahead.find("each beside the previous group's matmuls"), std::string::npos)
        << k_ahead;
    EXPECT_EQ(k_ahead.find("ahead of them") != std::string::npos, k.level == 2) << k_ahead;
    EXPECT_EQ(
        k_ahead.find(fmt::format("at most {} workgroups a copy", k.copy_wg)) != std::string::npos,
        k.copy_wg > 0)
        << k_ahead;
    EXPECT_EQ(k_here.find("each beside"), std::string::npos) << k_here;
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
    EXPECT_EQ(differ, 0u) << "of " << a.size() << " logits";
  }
}

// FISH_VK_PREFILL_F16_RESIDENT: every copy in a place of its own, written by the first prefill
// chunk that runs on it; the first prefill's second chunk (lavapipe: 64 + 36 tokens) and a second
// prefill of the same session (from position 0 again) run no copies and read the resident ones.
// The logits of both prefills and the decode steps after are bitwise those of copies written
// before each group's matmuls (AHEAD=0, every chunk). Two groups' copies in one place (the
// regions the other settings share) would leave the later chunks reading another group's
// weights; a copy skipped before it was ever written, zeros.
TEST(VulkanPrefillF16, ResidentCopiesLeaveLogitsBitwiseEqual) {
  auto model = synthetic_model("llama", 0);
  ASSERT_TRUE(model);
  const std::vector<int32_t> tokens = copy_tokens(41, 5);
  for (const int level : {1, 0}) {
    SCOPED_TRACE(fmt::format("FISH_VK_PREFILL_F16_RESIDENT=1 FISH_VK_PREFILL_F16_AHEAD={}", level));
    std::unique_ptr<vk::VulkanBackend> here, resident;
    std::string why;
    if (!copy_backends(
            &here, &resident,
            [](vk::VulkanOptions& o) {
              o.prefill_f16 = 1;
              o.prefill_f16_ahead = 0;
            },
            [&](vk::VulkanOptions& o) {
              o.prefill_f16_ahead = level;
              o.prefill_f16_resident = true;
            },
            &why))
      GTEST_SKIP() << why;
    std::string k_here, k_resident;
    const std::vector<float> a = span_logits(model, *resident, tokens, 100, &k_resident, 2);
    const std::vector<float> b = span_logits(model, *here, tokens, 100, &k_here, 2);
    EXPECT_NE(k_resident.find("resident: each written by the first prefill that needs it"),
              std::string::npos)
        << k_resident;
    EXPECT_EQ(k_here.find("resident"), std::string::npos) << k_here;
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(a.size(), size_t(2 * 100 + 4) * size_t(model->params().n_vocab));
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
    EXPECT_EQ(differ, 0u) << "of " << a.size() << " logits";
  }
}

TEST(VulkanCoopmat, SpanMatchesTiledPathSlidingWindow) {
  check_span("gemma3", 64, "synthetic gemma3 window 64");
}

}  // namespace
}  // namespace fish
