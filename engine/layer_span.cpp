// rope_inv_freq and span_bytes_estimate (layer_span.h).
#include "engine/layer_span.h"

#include <cmath>

namespace fish {

std::vector<double> rope_inv_freq(const Model& m, int variant) {
  const ModelParams& p = m.params();
  const std::vector<float>& ff = m.rope_freq_factors();
  const double base = variant == 0 ? p.rope_base : p.rope_base_swa;
  const double scale = variant == 0 ? p.rope_scale : 1.0;
  std::vector<double> f(size_t(p.n_rot / 2));
  for (int64_t i = 0; i < p.n_rot / 2; ++i) {
    f[size_t(i)] = scale * std::pow(base, -2.0 * double(i) / double(p.n_rot));
    if (!ff.empty()) f[size_t(i)] /= double(ff[size_t(i)]);
  }
  return f;
}

uint64_t span_bytes_estimate(const ModelParams& p, int64_t n_layers, int64_t kv_positions,
                             int64_t max_tok, int64_t n_ctx) {
  constexpr int64_t kChunk = 64;  // FISH_SPAN_CHUNK
  const int64_t E = p.n_embd, Q = p.q_dim(), KV = p.kv_dim(), F = p.n_ff;
  const uint64_t kv = uint64_t(n_layers) * uint64_t(kv_positions) * uint64_t(KV) * 4;  // K+V f16
  const uint64_t arena = 4 * uint64_t(max_tok * E + kChunk * (2 * E + 2 * Q + 2 * KV + 2 * F));
  const uint64_t host = 4 * uint64_t(max_tok * E);  // x staging
  const uint64_t params =
      4 * uint64_t(n_layers * (4 * E + 2 * p.head_dim + Q + 2 * KV) + 2 * n_ctx * p.n_rot);
  return kv + arena + host + params + (1u << 20);  // + alignment and allocation granularity
}

}  // namespace fish
