// W4A8: the activation quantiser, the scalar reference tile kernel, variant dispatch and the
// matmul driver (see w4a8.h for the arithmetic and kernels of each variant).
#include "kernels/w4a8.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/amx.h"
#include "kernels/cpu_features.h"
#include "quant/f16.h"

namespace fish {

void quantize_w4a8_acts(const float* x, int64_t n_tok, int64_t n_in, int group_size,
                        W4A8Acts& out) {
  assert(is_valid_int4_group_size(group_size) && n_in % group_size == 0);
  const int64_t groups = n_in / group_size;
  const int64_t padded = (n_tok + kInt4TileRows - 1) / kInt4TileRows * kInt4TileRows;
  out.n_tok = n_tok;
  out.n_in = n_in;
  out.group_size = group_size;
  out.qs.assign(size_t(padded * n_in), 0);
  out.scales.resize(size_t(n_tok * groups));
  out.sums.resize(size_t(n_tok * groups));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + t * n_in + g * group_size;
      int8_t* q = out.qs.data() + t * n_in + g * group_size;
      float amax = 0.0f;
      for (int i = 0; i < group_size; ++i) amax = std::max(amax, std::fabs(xg[i]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      int sum = 0;
      for (int i = 0; i < group_size; ++i) {
        q[i] = int8_t(std::nearbyint(xg[i] * id));
        sum += q[i];
      }
      out.scales[size_t(t * groups + g)] = d;
      out.sums[size_t(t * groups + g)] = d * float(sum);
    }
  }
}

void w4a8_tile_ref(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                   const uint8_t* zeros, const uint16_t* mins, const int8_t* aq,
                   const float* a_scales, const float* a_sums, float* out16) {
  const int64_t groups = n_in / group_size;
  for (int r = 0; r < kInt4TileRows; ++r) {
    float acc = 0.0f;
    float corr = 0.0f;
    for (int64_t g = 0; g < groups; ++g) {
      int32_t idot = 0;
      for (int64_t k = g * group_size; k < (g + 1) * group_size; ++k) {
        const uint8_t byte = qs[(k / 8) * 64 + r * 4 + (k % 4)];
        const int q = (k % 8) < 4 ? byte & 0xF : byte >> 4;
        idot += q * aq[k];
      }
      const size_t at = size_t(g * kInt4TileRows + r);
      const float s = f16_to_f32(scales[at]);
      acc += (s * a_scales[g]) * float(idot);
      if (mins != nullptr) {  // fp: w = s q + m
        acc += f16_to_f32(mins[at]) * a_sums[g];
        continue;
      }
      const int z = zeros != nullptr ? zeros[at] : kInt4SymZero;
      corr += (s * float(z)) * a_sums[g];
    }
    out16[r] = acc - corr;
  }
}

std::string_view w4a8_isa_name(W4A8Isa isa) {
  switch (isa) {
    case W4A8Isa::scalar:
      return "scalar";
    case W4A8Isa::avx2:
      return "avx2";
    case W4A8Isa::avx_vnni:
      return "avx_vnni";
    case W4A8Isa::avx512_vnni:
      return "avx512_vnni";
    case W4A8Isa::amx:
      return "amx";
  }
  return "?";
}

std::optional<W4A8Isa> parse_w4a8_isa(std::string_view s) {
  for (int i = 0; i < kW4A8IsaCount; ++i) {
    if (w4a8_isa_name(W4A8Isa(i)) == s) return W4A8Isa(i);
  }
  return std::nullopt;
}

bool w4a8_isa_supported(W4A8Isa isa) {
  switch (isa) {
    case W4A8Isa::scalar:
      return true;
    case W4A8Isa::avx2:
      return isa_supported(Isa::avx2);
    case W4A8Isa::avx_vnni:
      return isa_supported(Isa::avx2) && cpu_features().avx_vnni;
    case W4A8Isa::avx512_vnni:
      return isa_supported(Isa::avx512);
    case W4A8Isa::amx:
      return isa_supported(Isa::avx512) && amx_int8_usable();
  }
  return false;
}

W4A8Isa w4a8_best_isa() {
  static const W4A8Isa best = [] {
    const Isa level = best_isa();  // FISH_ISA lowers this; scalar under FISH_SCALAR_ONLY
    if (level == Isa::avx512) {
      return w4a8_isa_supported(W4A8Isa::amx) ? W4A8Isa::amx : W4A8Isa::avx512_vnni;
    }
    if (level == Isa::avx2) {
      return w4a8_isa_supported(W4A8Isa::avx_vnni) ? W4A8Isa::avx_vnni : W4A8Isa::avx2;
    }
    return W4A8Isa::scalar;
  }();
  return best;
}

W4A8TileFn w4a8_tile_kernel(W4A8Isa isa) {
  assert(w4a8_isa_supported(isa));
  switch (isa) {
    case W4A8Isa::scalar:
      return w4a8_tile_ref;
    case W4A8Isa::avx2:
      return w4a8_tile_avx2;
    case W4A8Isa::avx_vnni:
      return w4a8_tile_avxvnni;
    case W4A8Isa::avx512_vnni:
    case W4A8Isa::amx:
      return w4a8_tile_avx512;
  }
  return w4a8_tile_ref;
}

void w4a8_tiles(const Int4Vnni16& w, const W4A8Acts& x, int64_t t0, int64_t t1, float* y,
                W4A8Isa isa) {
  const W4A8TileFn tile_fn = w4a8_tile_kernel(isa);
  const int64_t groups = w.groups_per_row();
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t rows = std::min<int64_t>(kInt4TileRows, w.n_out - t * kInt4TileRows);
    for (int64_t tok = 0; tok < x.n_tok; ++tok) {
      float out[kInt4TileRows];
      tile_fn(w.n_in, w.fmt.group_size, w.tile_qs(t), w.tile_scales(t), w.tile_zeros(t),
              w.tile_mins(t), x.qs.data() + tok * w.n_in, x.scales.data() + tok * groups,
              x.sums.data() + tok * groups, out);
      std::copy(out, out + rows, y + tok * w.n_out + t * kInt4TileRows);
    }
  }
}

void matmul_w4a8_preq(const Int4Vnni16& w, const W4A8Acts& x, float* y, ThreadPool& pool,
                      W4A8Isa isa) {
  assert(x.n_in == w.n_in && x.group_size == w.fmt.group_size);
  assert(w4a8_isa_supported(isa));
  const int64_t n_out = w.n_out;
  const int64_t n_tok = x.n_tok;
  if (isa == W4A8Isa::amx && n_tok > kW4A8AmxMinTokens) {
    const uint8_t* zeros = w.zeros.empty() ? nullptr : w.zeros.data();
    const uint16_t* mins = w.mins.empty() ? nullptr : w.mins.data();
    thread_local std::vector<float> scratch;  // per thread: slices run on distinct threads
    pool.parallel_for(w.tiles(), [&](int64_t t0, int64_t t1, int) {
      if (scratch.size() < size_t(n_tok * kInt4TileRows))
        scratch.resize(size_t(n_tok * kInt4TileRows));
      w4a8_tiles_amx(w.qs.data(), w.scales.data(), zeros, mins, w.n_in, w.fmt.group_size, n_out, t0,
                     t1, x.qs.data(), x.scales.data(), x.sums.data(), n_tok, y, scratch.data());
    });
    return;
  }
  pool.parallel_for(w.tiles(),
                    [&](int64_t t0, int64_t t1, int) { w4a8_tiles(w, x, t0, t1, y, isa); });
}

void matmul_w4a8(const Int4Vnni16& w, const float* x, int64_t n_tok, float* y, ThreadPool& pool,
                 W4A8Isa isa) {
  thread_local W4A8Acts acts;
  quantize_w4a8_acts(x, n_tok, w.n_in, w.fmt.group_size, acts);
  matmul_w4a8_preq(w, acts, y, pool, isa);
}

}  // namespace fish
