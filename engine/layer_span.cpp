// rope_inv_freq and span_bytes_estimate (layer_span.h).
#include "engine/layer_span.h"

#include <algorithm>
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
  // FISH_SPAN_CHUNK_CM (512; 64 without cooperative matrices): the larger, up to max_tok.
  const int64_t kChunk = std::min<int64_t>(std::max<int64_t>(max_tok, 1), 512);
  const int64_t E = p.n_embd, Q = p.q_dim(), KV = p.kv_dim(), F = p.n_ff;
  const uint64_t kv = uint64_t(n_layers) * uint64_t(kv_positions) * uint64_t(KV) * 4;  // K+V f16
  // + the output head's logits (n_vocab for each of the 8 rows a verify's head takes) and the
  // host copy of one row, + a matmul input's f16 copy (the coopmat2 tiles' B rows).
  const uint64_t arena =
      4 * uint64_t(max_tok * E + kChunk * (2 * E + 2 * Q + 2 * KV + 2 * F) + 9 * p.n_vocab) +
      2 * uint64_t(kChunk) * uint64_t(std::max({E, Q, F}));
  const uint64_t host = 4 * uint64_t(max_tok * E);  // x staging
  const uint64_t params =
      4 * uint64_t(n_layers * (4 * E + 2 * p.head_dim + Q + 2 * KV) + 2 * n_ctx * p.n_rot);
  return kv + arena + host + params + (1u << 20);  // + alignment and allocation granularity
}

}  // namespace fish
