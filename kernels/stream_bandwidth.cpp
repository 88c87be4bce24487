// Streaming-read bandwidth; see stream_bandwidth.h.
#include "kernels/stream_bandwidth.h"

#include <chrono>
#include <vector>

namespace fish {

StreamBuffer::StreamBuffer(size_t n_bytes)
    : n_(n_bytes / sizeof(uint64_t) > 0 ? n_bytes / sizeof(uint64_t) : 1) {
  buf_.reset(new uint64_t[n_]);
  for (size_t i = 0; i < n_; ++i) buf_[i] = uint64_t(i) * 0x9E3779B97F4A7C15ull;
}

double StreamBuffer::read_pass(ThreadPool& pool) {
  std::vector<uint64_t> partial(size_t(pool.size()) * 8);  // 64 bytes apart: no false sharing
  const uint64_t* s = buf_.get();
  const auto t0 = std::chrono::steady_clock::now();
  pool.parallel_for(int64_t(n_), [&](int64_t b, int64_t e, int t) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t i = b;
    for (; i + 4 <= e; i += 4) {
      a0 += s[size_t(i)];
      a1 += s[size_t(i + 1)];
      a2 += s[size_t(i + 2)];
      a3 += s[size_t(i + 3)];
    }
    for (; i < e; ++i) a0 += s[size_t(i)];
    partial[size_t(t) * 8] = a0 + a1 + a2 + a3;
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t sum = 0;
  for (uint64_t p : partial) sum += p;
  sink_ = sum;
  return double(n_bytes()) / secs;
}

}  // namespace fish
