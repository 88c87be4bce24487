// KvCache: see kv_cache.h.
#include "engine/kv_cache.h"

#include <cassert>

namespace fish {

KvCache::KvCache(int64_t n_layer, int64_t n_ctx, int64_t kv_dim)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      kv_dim_(kv_dim),
      data_(new float[size_t(2 * n_layer * n_ctx * kv_dim)]) {  // uninitialised on purpose
  assert(n_layer > 0 && n_ctx > 0 && kv_dim > 0);
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
