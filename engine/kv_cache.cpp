// KvCache: see kv_cache.h.
#include "engine/kv_cache.h"

#include <algorithm>
#include <cassert>

namespace fish {

KvCache::KvCache(int64_t n_ctx, int64_t kv_dim, std::vector<int64_t> layer_rows,
                 int64_t n_alloc_layers)
    : n_ctx_(n_ctx),
      kv_dim_(kv_dim),
      n_alloc_(n_alloc_layers < 0 ? int64_t(layer_rows.size()) : n_alloc_layers),
      rows_(std::move(layer_rows)) {
  assert(!rows_.empty() && n_ctx > 0 && kv_dim > 0 && n_alloc_ <= n_layer());
  off_.assign(rows_.size() + 1, 0);
  for (size_t il = 0; il < rows_.size(); ++il) {
    assert(rows_[il] >= 1 && rows_[il] <= n_ctx);
    off_[il + 1] = off_[il] + 2 * rows_[il] * kv_dim;
  }
  // uninitialised on purpose; at least one float so k(0) is a valid pointer
  data_.reset(new float[size_t(std::max<int64_t>(1, off_[size_t(n_alloc_)]))]);
}

int64_t KvCache::first_held(int64_t il) const {
  return std::max<int64_t>(0, written_end_ - rows(il));
}

void KvCache::allocate_all() {
  if (n_alloc_ == n_layer()) return;
  std::unique_ptr<float[]> d(new float[size_t(off_.back())]);
  std::copy(data_.get(), data_.get() + off_[size_t(n_alloc_)], d.get());
  data_ = std::move(d);
  n_alloc_ = n_layer();
}

void KvCache::truncate(int64_t n) {
  assert(n >= 0);
  if (n < n_past_) n_past_ = n;
  // Rows of positions past n stay physically there, so first_held() keeps counting them; an
  // empty cache starts over.
  if (n == 0) written_end_ = 0;
}

void KvCache::set_n_past(int64_t n) {
  assert(n >= 0 && n <= n_ctx_);
  n_past_ = n;
  written_end_ = std::max(written_end_, n);
}

}  // namespace fish
