// matmul_module / matmul_grid (device_weight.h).
#include "engine/vulkan/device_weight.h"

#include <algorithm>

#include <fmt/format.h>

namespace fish::vk {

std::string matmul_module(GgmlType type, int64_t n_tok, bool generic) {
  const bool vec = n_tok <= FISH_MATVEC_MAX_TOK;
  return fmt::format("{}_{}", vec ? (generic ? "matvec1" : "matvec") : "matmul", type_name(type));
}

MatmulGrid matmul_grid(const DeviceWeight& w, const DeviceWeight::Part& part, uint32_t n_tok,
                       uint32_t x_stride, uint32_t y_stride, uint32_t y_offset,
                       uint32_t max_groups_x, const CoopmatTile* cm) {
  MatmulGrid g;
  g.pc.n_in = w.n_in_pad;
  g.pc.n_out = part.n_rows;
  g.pc.n_tok = n_tok;
  g.pc.row_bytes = w.row_bytes;
  g.pc.x_stride = x_stride;
  g.pc.y_stride = y_stride;
  g.pc.y_offset = y_offset;
  if (n_tok <= FISH_MATVEC_MAX_TOK) {  // FISH_MATVEC_ROWS rows a workgroup, 2-D past the limit
    g.pc.n_groups = (part.n_rows + FISH_MATVEC_ROWS - 1) / FISH_MATVEC_ROWS;
    g.pc.groups_x = std::min(g.pc.n_groups, max_groups_x);
    g.gx = g.pc.groups_x;
    g.gy = (g.pc.n_groups + g.gx - 1) / g.gx;
  } else if (cm) {  // the cooperative-matrix tile
    g.gx = (part.n_rows + cm->bm - 1) / cm->bm;
    g.gy = (n_tok + cm->bn - 1) / cm->bn;
    g.pc.groups_x = g.gx;
    g.pc.n_groups = g.gx * g.gy;
  } else {  // FISH_TILE_ROWS x FISH_TILE_TOK tiles
    g.gx = (part.n_rows + FISH_TILE_ROWS - 1) / FISH_TILE_ROWS;
    g.gy = (n_tok + FISH_TILE_TOK - 1) / FISH_TILE_TOK;
    g.pc.groups_x = g.gx;
    g.pc.n_groups = g.gx * g.gy;
  }
  return g;
}

}  // namespace fish::vk
