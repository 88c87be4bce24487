// The f32 key/value cache of one session: per layer, rows(il) rows of kv_dim floats for K and for
// V.
//
// Position p of layer il lives in row p % rows(il). A full layer has n_ctx rows (row p); a ring
// layer (Gemma 3's sliding-window layers, whose queries only see the last `window` positions)
// has fewer and reuses them round-robin. A row holds one position's keys (n_head_kv heads of
// head_dim, head g at g*head_dim) after RoPE; the values likewise. Memory: one block, layer by
// layer, each layer's K rows then its V rows (layer il starts at 2 * kv_dim * sum of rows(j < il)
// floats), so layers [0, n_alloc_layers) are a prefix of the all-layers block.
// Positions are filled in order; n_past() counts the valid ones, and a ring layer still holds
// positions [first_held(il), n_past()). The memory is allocated uninitialised, so pages are only
// touched as rows are written.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace fish {

class KvCache {
 public:
  // layer_rows[il]: rows of layer il, 1 <= rows <= n_ctx (n_ctx: a full layer). Layers
  // [0, n_alloc_layers) get storage (-1: all); the others live elsewhere (a GPU layer span holds
  // its own f16 KV) until allocate_all().
  KvCache(int64_t n_ctx, int64_t kv_dim, std::vector<int64_t> layer_rows,
          int64_t n_alloc_layers = -1);

  int64_t n_layer() const { return int64_t(rows_.size()); }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t kv_dim() const { return kv_dim_; }
  int64_t n_past() const { return n_past_; }
  int64_t rows(int64_t il) const { return rows_[size_t(il)]; }
  bool is_ring(int64_t il) const { return rows_[size_t(il)] < n_ctx_; }
  // The row of position pos in layer il.
  int64_t row(int64_t il, int64_t pos) const { return pos % rows_[size_t(il)]; }
  // The oldest position whose row layer il still holds (0 for a full layer): writing position p
  // overwrote p - rows(il).
  int64_t first_held(int64_t il) const;
  // Allocated bytes (K and V of the layers with storage).
  size_t bytes() const { return size_t(off_[size_t(n_alloc_)]) * sizeof(float); }
  // What bytes() would be with storage for every layer.
  size_t bytes_all_layers() const { return size_t(off_.back()) * sizeof(float); }
  int64_t n_alloc_layers() const { return n_alloc_; }
  // Storage for every layer (a span fell back to the CPU); the new layers' rows are unwritten.
  void allocate_all();

  // Row 0 of layer il (rows are kv_dim floats apart). Precondition il < n_alloc_layers().
  float* k(int64_t il) { return data_.get() + off_[size_t(il)]; }
  float* v(int64_t il) { return k(il) + rows(il) * kv_dim_; }
  const float* k(int64_t il) const { return data_.get() + off_[size_t(il)]; }
  const float* v(int64_t il) const { return k(il) + rows(il) * kv_dim_; }

  // Positions [0, n) stay valid; later ones are dropped (n >= n_past() changes nothing). A ring
  // layer keeps only positions from first_held(): the caller checks that what it will read is
  // still there. Precondition n >= 0.
  void truncate(int64_t n);
  // Marks positions [0, n) as written (after a forward pass filled them). Precondition n <= n_ctx.
  void set_n_past(int64_t n);
  void clear() { truncate(0); }

 private:
  int64_t n_ctx_, kv_dim_, n_alloc_;
  std::vector<int64_t> rows_;
  std::vector<int64_t> off_;  // off_[il]: float offset of layer il; off_[n_layer]: the total
  int64_t n_past_ = 0;
  int64_t written_end_ = 0;  // highest position written + 1 since the cache was last emptied
  std::unique_ptr<float[]> data_;
};

}  // namespace fish
