// KvCache: see kv_cache.h.
#include "engine/kv_cache.h"

#include <algorithm>
#include <cassert>

namespace fish {

KvCache::KvCache(int64_t n_layer, int64_t n_ctx, int64_t kv_dim, int64_t n_alloc_layers)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      kv_dim_(kv_dim),
      n_alloc_(n_alloc_layers < 0 ? n_layer : n_alloc_layers),
      // uninitialised on purpose; at least one float so k(0) is a valid pointer
      data_(new float[size_t(std::max<int64_t>(1, 2 * n_alloc_ * n_ctx * kv_dim))]) {
  assert(n_layer > 0 && n_ctx > 0 && kv_dim > 0 && n_alloc_ <= n_layer);
}

void KvCache::allocate_all() {
  if (n_alloc_ == n_layer_) return;
  std::unique_ptr<float[]> d(new float[size_t(2 * n_layer_ * n_ctx_ * kv_dim_)]);
  std::copy(data_.get(), data_.get() + size_t(2 * n_alloc_ * n_ctx_ * kv_dim_), d.get());
  data_ = std::move(d);
  n_alloc_ = n_layer_;
}

void KvCache::truncate(int64_t n) {
  assert(n >= 0);
  if (n < n_past_) n_past_ = n;
}

void KvCache::set_n_past(int64_t n) {
  assert(n >= 0 && n <= n_ctx_);
  n_past_ = n;
}

}  // namespace fish
