// Streaming-read bandwidth: the yardstick decode GB/s is reported against (bench/decode_bench and
// the harness's context line measure it the same way, in the same process as the numbers it
// scales).
//
// One pass sums a buffer of uint64 with 4 accumulators per thread, the buffer's rows split over
// the pool like a matmul's, so it reads memory the way the matvec kernels do. The buffer should be
// much larger than the last-level cache (1 GiB in the bench) so the reads come from DRAM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/thread_pool.h"

namespace fish {

class StreamBuffer {
 public:
  // n_bytes is rounded down to whole uint64 (at least one). Filled once with a fixed pattern so
  // every page is resident before the first timed pass.
  explicit StreamBuffer(size_t n_bytes);
  size_t n_bytes() const { return n_ * sizeof(uint64_t); }

  // Reads the whole buffer once over `pool`; returns bytes/s of that pass.
  double read_pass(ThreadPool& pool);

 private:
  std::unique_ptr<uint64_t[]> buf_;
  size_t n_;
  volatile uint64_t sink_ = 0;  // keeps the sums alive
};

}  // namespace fish
