// The f32 key/value cache of one session: per layer, n_ctx rows of kv_dim floats for K and for V.
//
// Row p of layer il holds position p's keys (n_head_kv heads of head_dim, head g at g*head_dim),
// after RoPE; the values likewise. Positions are filled in order; n_past() counts the valid ones.
// The memory is allocated uninitialised, so pages are only touched as positions are written.
#pragma once

#include <cstdint>
#include <memory>

namespace fish {

class KvCache {
 public:
  // Layers [0, n_alloc_layers) get storage (-1: all); the others live elsewhere (a GPU layer
  // span holds its own f16 KV) until allocate_all().
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t kv_dim, int64_t n_alloc_layers = -1);

  int64_t n_layer() const { return n_layer_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t kv_dim() const { return kv_dim_; }
  int64_t n_past() const { return n_past_; }
  size_t bytes() const { return size_t(2 * n_alloc_ * n_ctx_ * kv_dim_) * sizeof(float); }
  int64_t n_alloc_layers() const { return n_alloc_; }
  // Storage for every layer (a span fell back to the CPU); the new layers' rows are unwritten.
  void allocate_all();

  // Row 0 of layer il (rows are kv_dim floats apart). Precondition il < n_alloc_layers().
  float* k(int64_t il) { return data_.get() + size_t((2 * il) * n_ctx_ * kv_dim_); }
  float* v(int64_t il) { return data_.get() + size_t((2 * il + 1) * n_ctx_ * kv_dim_); }
  const float* k(int64_t il) const { return data_.get() + size_t((2 * il) * n_ctx_ * kv_dim_); }
  const float* v(int64_t il) const { return data_.get() + size_t((2 * il + 1) * n_ctx_ * kv_dim_); }

  // Positions [0, n) stay valid; later ones are dropped (n >= n_past() changes nothing).
  // Precondition n >= 0.
  void truncate(int64_t n);
  // Marks positions [0, n) as written (after a forward pass filled them).
  void set_n_past(int64_t n);
  void clear() { n_past_ = 0; }

 private:
  int64_t n_layer_, n_ctx_, kv_dim_, n_alloc_;
  int64_t n_past_ = 0;
  std::unique_ptr<float[]> data_;
};

}  // namespace fish
