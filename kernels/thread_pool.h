// A persistent pool of worker threads for data-parallel kernels (matmul rows, attention heads).
//
// Decode calls parallel_for ~200 times per token on small matrices, so dispatch must cost
// microseconds: idle workers spin on an atomic generation counter for a short while (~50 us)
// before sleeping on a condition variable, and the calling thread runs a share of the work itself.
// The split is static and deterministic: thread t of T gets [n*t/T, n*(t+1)/T), so results never
// depend on timing. One job at a time; parallel_for is not re-entrant (calling it from inside a
// job is a bug and asserts).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace fish {

// Threads to use when none is asked for: env FISH_THREADS if set (>= 1), else the number of
// hardware threads.
int default_thread_count();

class ThreadPool {
 public:
  // n_threads counts the calling thread: ThreadPool(1) runs everything inline, no workers.
  // n_threads <= 0 means default_thread_count().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread_idx) on each non-empty slice of [0, n); returns when all are done.
  template <typename Fn>
  void parallel_for(int64_t n, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(
        n, [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<F*>(ctx))(b, e, t); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Untyped form of parallel_for.
  using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end, int thread_idx);
  void run(int64_t n, RangeFn fn, void* ctx);

 private:
  void worker_main(int idx);
  void run_slice(int idx);

  int n_threads_ = 1;
  std::vector<std::thread> workers_;

  // The current job, written by run() before the generation bump (release) that publishes it.
  RangeFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  int64_t job_n_ = 0;

  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};   // workers still running the current job
  alignas(64) std::atomic<int> sleepers_{0};  // workers blocked (or about to block) on cv_
  std::atomic<bool> in_job_{false};
  std::atomic<bool> stop_{false};  // set (before a generation bump) by the destructor
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace fish
