// W4A16: activation preparation, the scalar reference (full blocks and the tail), variant
// dispatch, the panel dequantisers and the decode / prefill driver (see w4a16.h).
#include "kernels/w4a16.h"

#include <algorithm>
#include <cassert>

#include "kernels/cpu_features.h"
#include "kernels/w4a16_gemm.h"
#include "quant/f16.h"

namespace fish {
namespace {

// The tail channels (T = n_out % 64, h = ceil(T/2) bytes per k) x one token, scalar in every
// variant: out[c] for c < T.
void w4a16_tail_ref(const Int4Blocks64& w, const float* x_f32, const float* x_gsum, float* out) {
  const int64_t t_ch = w.tail_channels();
  const int64_t h = w.tail_half();
  const int64_t c0 = w.full_blocks() * kInt4BlockChannels;
  const int gs = w.fmt.group_size;
  const uint8_t* qs = w.tail();
  for (int64_t c = 0; c < t_ch; ++c) {
    float acc = 0.0f;
    for (int64_t g = 0; g < w.n_in / gs; ++g) {
      float gsum = 0.0f;
      for (int64_t k = g * gs; k < (g + 1) * gs; ++k) {
        const uint8_t byte = qs[k * h + c % h];
        gsum += float(c < h ? byte & 0xF : byte >> 4) * x_f32[k];
      }
      const float s = f16_to_f32(w.scales[size_t(g * w.n_out + c0 + c)]);
      acc += s * gsum;
      if (!w.mins.empty()) {
        acc += f16_to_f32(w.mins[size_t(g * w.n_out + c0 + c)]) * x_gsum[g];
      } else {
        acc -= (s * float(w.zero(g, c0 + c))) * x_gsum[g];
      }
    }
    out[c] = acc;
  }
}

// Plain f32 GEMM for builds / CPUs without AVX2 (panel layouts as gemm_f32_panel_avx2).
void gemm_panel_scalar(const float* x, int64_t m, int64_t k, const float* panel, int64_t n,
                       bool channel_major, float* y, int64_t ldy) {
  const int64_t c_stride = channel_major ? k : 1;
  const int64_t k_stride = channel_major ? 1 : n;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < n; ++c) {
      float acc = 0.0f;
      for (int64_t j = 0; j < k; ++j) acc += x[i * k + j] * panel[c * c_stride + j * k_stride];
      y[i * ldy + c] = acc;
    }
  }
}

}  // namespace

void prepare_w4a16_acts(const float* x, int64_t n_tok, int64_t n_in, int group_size,
                        W4A16Acts& out) {
  assert(group_size > 0 && n_in % group_size == 0);
  const int64_t groups = n_in / group_size;
  out.n_tok = n_tok;
  out.n_in = n_in;
  out.group_size = group_size;
  out.bf16.resize(size_t(n_tok * n_in));
  out.f32.resize(size_t(n_tok * n_in));
  out.gsum.resize(size_t(n_tok * groups));
  for (int64_t i = 0; i < n_tok * n_in; ++i) {
    out.bf16[size_t(i)] = f32_to_bf16(x[i]);
    out.f32[size_t(i)] = bf16_to_f32(out.bf16[size_t(i)]);
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t g = 0; g < groups; ++g) {
      float s = 0.0f;
      for (int64_t k = g * group_size; k < (g + 1) * group_size; ++k)
        s += out.f32[size_t(t * n_in + k)];
      out.gsum[size_t(t * groups + g)] = s;
    }
  }
}

void w4a16_block_ref(int64_t n_in, int group_size, const uint8_t* qs, const uint16_t* scales,
                     const uint8_t* zeros, const uint16_t* mins, int64_t scale_stride,
                     const uint16_t* x_bf16, const float* x_f32, const float* x_gsum,
                     float* out64) {
  (void)x_bf16;
  for (int c = 0; c < kInt4BlockChannels; ++c) {
    float acc = 0.0f;
    for (int64_t g = 0; g < n_in / group_size; ++g) {
      float gsum = 0.0f;
      for (int64_t k = g * group_size; k < (g + 1) * group_size; ++k) {
        const uint8_t byte = qs[k * 32 + c % 32];
        gsum += float(c < 32 ? byte & 0xF : byte >> 4) * x_f32[k];
      }
      const float s = f16_to_f32(scales[g * scale_stride + c]);
      acc += s * gsum;
      if (mins != nullptr) {
        acc += f16_to_f32(mins[g * scale_stride + c]) * x_gsum[g];
        continue;
      }
      const int z = zeros != nullptr ? zeros[g * scale_stride + c] : kInt4SymZero;
      acc -= (s * float(z)) * x_gsum[g];
    }
    out64[c] = acc;
  }
}

std::string_view w4a16_isa_name(W4A16Isa isa) {
  switch (isa) {
    case W4A16Isa::scalar:
      return "scalar";
    case W4A16Isa::avx2:
      return "avx2";
    case W4A16Isa::avx512:
      return "avx512";
    case W4A16Isa::avx512_bf16:
      return "avx512_bf16";
  }
  return "?";
}

std::optional<W4A16Isa> parse_w4a16_isa(std::string_view s) {
  for (int i = 0; i < kW4A16IsaCount; ++i) {
    if (w4a16_isa_name(W4A16Isa(i)) == s) return W4A16Isa(i);
  }
  return std::nullopt;
}

bool w4a16_isa_supported(W4A16Isa isa) {
  switch (isa) {
    case W4A16Isa::scalar:
      return true;
    case W4A16Isa::avx2:
      return isa_supported(Isa::avx2);
    case W4A16Isa::avx512:
      return isa_supported(Isa::avx512);
    case W4A16Isa::avx512_bf16:
      return isa_supported(Isa::avx512) && cpu_features().avx512bf16;
  }
  return false;
}

W4A16Isa w4a16_best_isa() {
  static const W4A16Isa best = [] {
    const Isa level = best_isa();
    if (level == Isa::avx512) {
      return w4a16_isa_supported(W4A16Isa::avx512_bf16) ? W4A16Isa::avx512_bf16 : W4A16Isa::avx512;
    }
    return level == Isa::avx2 ? W4A16Isa::avx2 : W4A16Isa::scalar;
  }();
  return best;
}

W4A16BlockFn w4a16_block_kernel(W4A16Isa isa) {
  assert(w4a16_isa_supported(isa));
  switch (isa) {
    case W4A16Isa::scalar:
      return w4a16_block_ref;
    case W4A16Isa::avx2:
      return w4a16_block_avx2;
    case W4A16Isa::avx512:
      return w4a16_block_avx512;
    case W4A16Isa::avx512_bf16:
      return w4a16_block_avx512bf16;
  }
  return w4a16_block_ref;
}

W4A16Weights make_w4a16_weights(Int4Blocks64 packed, const W4A16Options& opt) {
  W4A16Weights w;
  w.packed = std::move(packed);
  if (opt.prefill_dequant && (!opt.direct_dequant || !w.packed.supports_direct_dequant())) {
    w.duplicate = int4_rows_from_blocks64(w.packed);
  }
  return w;
}

void dequantize_w4a16_panel_direct(const Int4Blocks64& w, int64_t c0, int64_t n, float* panel) {
  assert(w.supports_direct_dequant() && c0 % kInt4BlockChannels == 0 && n == kInt4BlockChannels);
  (void)n;
  const int gs = w.fmt.group_size;
  const uint8_t* qs = w.block(c0 / kInt4BlockChannels);
  float s[kInt4BlockChannels];
  float z[kInt4BlockChannels];  // zero points, or the fp offsets m
  const bool fp = !w.mins.empty();
  for (int64_t g = 0; g < w.n_in / gs; ++g) {
    for (int c = 0; c < kInt4BlockChannels; ++c) {
      s[c] = f16_to_f32(w.scales[size_t(g * w.n_out + c0 + c)]);
      z[c] = fp ? f16_to_f32(w.mins[size_t(g * w.n_out + c0 + c)]) : float(w.zero(g, c0 + c));
    }
    // The deinterleave: byte d of k holds channel d (low nibble) and d + 32 (high nibble).
    for (int64_t k = g * gs; k < (g + 1) * gs; ++k) {
      const uint8_t* row = qs + k * 32;
      float* out = panel + k * kInt4BlockChannels;
      if (fp) {
        for (int d = 0; d < 32; ++d) {
          out[d] = float(row[d] & 0xF) * s[d] + z[d];
          out[d + 32] = float(row[d] >> 4) * s[d + 32] + z[d + 32];
        }
        continue;
      }
      for (int d = 0; d < 32; ++d) {
        out[d] = s[d] * (float(row[d] & 0xF) - z[d]);
        out[d + 32] = s[d + 32] * (float(row[d] >> 4) - z[d + 32]);
      }
    }
  }
}

void dequantize_w4a16_panel_rows(const Int4Rows& w, int64_t c0, int64_t n, float* panel) {
  const int64_t groups = w.groups_per_row();
  const int gs = w.fmt.group_size;
  for (int64_t o = c0; o < c0 + n; ++o, panel += w.n_in) {
    const uint8_t* q = w.qs.data() + o * w.n_in / 2;
    for (int64_t g = 0; g < groups; ++g) {
      const float s = f16_to_f32(w.scales[size_t(o * groups + g)]);
      if (!w.mins.empty()) {
        const float m = f16_to_f32(w.mins[size_t(o * groups + g)]);
        for (int64_t k = g * gs; k < (g + 1) * gs; k += 32) {
          const uint8_t* chunk = q + k / 2;
          for (int j = 0; j < 16; ++j) {
            panel[k + j] = float(chunk[j] & 0xF) * s + m;
            panel[k + j + 16] = float(chunk[j] >> 4) * s + m;
          }
        }
        continue;
      }
      const float z = float(w.zero(o, g));
      for (int64_t k = g * gs; k < (g + 1) * gs; k += 32) {
        const uint8_t* chunk = q + k / 2;
        for (int j = 0; j < 16; ++j) {
          panel[k + j] = s * (float(chunk[j] & 0xF) - z);
          panel[k + j + 16] = s * (float(chunk[j] >> 4) - z);
        }
      }
    }
  }
}

void matmul_w4a16(const W4A16Weights& w, const float* x, int64_t n_tok, float* y, ThreadPool& pool,
                  const W4A16Options& opt, W4A16Isa isa) {
  const Int4Blocks64& p = w.packed;
  const int64_t n_out = p.n_out;
  const int64_t n_in = p.n_in;
  const int64_t panels = (n_out + kInt4BlockChannels - 1) / kInt4BlockChannels;
  if (opt.prefill_dequant && n_tok > opt.dequant_threshold) {
    const bool direct = opt.direct_dequant && p.supports_direct_dequant();
    assert(direct || w.duplicate.has_value());
    // The GEMM multiplies what a bf16 model would: x rounded to bf16.
    thread_local std::vector<float> xr_buf;  // the caller's; workers see it through xr
    std::vector<float>& xr = xr_buf;
    xr.resize(size_t(n_tok * n_in));
    for (int64_t i = 0; i < n_tok * n_in; ++i) xr[size_t(i)] = bf16_to_f32(f32_to_bf16(x[i]));
    const bool simd = isa != W4A16Isa::scalar;
    pool.parallel_for(panels, [&](int64_t b0, int64_t b1, int) {
      thread_local std::vector<float> panel;
      panel.resize(size_t(kInt4BlockChannels * n_in));
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t c0 = b * kInt4BlockChannels;
        const int64_t n = std::min<int64_t>(kInt4BlockChannels, n_out - c0);
        if (direct) {
          dequantize_w4a16_panel_direct(p, c0, n, panel.data());
        } else {
          dequantize_w4a16_panel_rows(*w.duplicate, c0, n, panel.data());
        }
        if (simd) {
          gemm_f32_panel_avx2(xr.data(), n_tok, n_in, panel.data(), n, !direct, y + c0, n_out);
        } else {
          gemm_panel_scalar(xr.data(), n_tok, n_in, panel.data(), n, !direct, y + c0, n_out);
        }
      }
    });
    return;
  }
  thread_local W4A16Acts acts_buf;  // the caller's; workers see it through acts
  W4A16Acts& acts = acts_buf;
  prepare_w4a16_acts(x, n_tok, n_in, p.fmt.group_size, acts);
  pool.parallel_for(panels,
                    [&](int64_t b0, int64_t b1, int) { w4a16_blocks(p, acts, b0, b1, y, isa); });
}

void w4a16_blocks(const Int4Blocks64& p, const W4A16Acts& acts, int64_t b0, int64_t b1, float* y,
                  W4A16Isa isa) {
  const int64_t n_in = p.n_in;
  const int64_t n_out = p.n_out;
  const int64_t groups = n_in / p.fmt.group_size;
  const W4A16BlockFn block_fn = w4a16_block_kernel(isa);
  const uint8_t* zeros = p.zeros.empty() ? nullptr : p.zeros.data();
  const uint16_t* mins = p.mins.empty() ? nullptr : p.mins.data();
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t c0 = b * kInt4BlockChannels;
    for (int64_t t = 0; t < acts.n_tok; ++t) {
      const float* xf = acts.f32.data() + t * n_in;
      const float* xs = acts.gsum.data() + t * groups;
      float out[kInt4BlockChannels];
      if (b < p.full_blocks()) {
        block_fn(n_in, p.fmt.group_size, p.block(b), p.scales.data() + c0,
                 zeros != nullptr ? zeros + c0 : nullptr, mins != nullptr ? mins + c0 : nullptr,
                 n_out, acts.bf16.data() + t * n_in, xf, xs, out);
        std::copy(out, out + kInt4BlockChannels, y + t * n_out + c0);
      } else {
        w4a16_tail_ref(p, xf, xs, out);
        std::copy(out, out + p.tail_channels(), y + t * n_out + c0);
      }
    }
  }
}

}  // namespace fish
