// A persistent pool of worker threads for data-parallel kernels (matmul rows, attention heads).
//
// Decode calls parallel_for ~140 times per token on small matrices (SmolLM2-135M: ~40 us of work
// per call), so dispatch must cost microseconds and must not wait on a thread that is not running.
// A job is cut into T fixed slices, slice t = [n*t/T, n*(t+1)/T) (T = size()), so results never
// depend on timing. Slices are claimed, not assigned: the calling thread and every awake worker
// take the next unclaimed slice until none is left, and the call returns once every slice is done.
// A worker that wakes late (a futex wake-up on a VM costs 50-100 us) or is descheduled (more
// runnable threads than cores) loses its slice to the caller instead of stalling it. fn receives
// the slice index, which is unique among slices running at the same time, so it can index
// per-slice scratch. Idle workers spin on an atomic generation counter for a while (kSpinTime in
// thread_pool.cpp) before sleeping on a condition variable. One job at a time; parallel_for is not
// re-entrant (calling it from inside a job is a bug and asserts).
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
  // n_threads <= 0 means default_thread_count(). At most kMaxThreads.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  static constexpr int kMaxThreads = 1 << 16;  // slice index field of the claim word

  int size() const { return n_threads_; }

  // Calls fn(begin, end, slice) on each non-empty slice of [0, n); returns when all are done.
  template <typename Fn>
  void parallel_for(int64_t n, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(
        n, [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<F*>(ctx))(b, e, t); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Untyped form of parallel_for.
  using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end, int slice);
  void run(int64_t n, RangeFn fn, void* ctx);

 private:
  void worker_main();
  // Claims and runs slices of the current job until none is left.
  void run_slices();

  int n_threads_ = 1;
  std::vector<std::thread> workers_;

  // The current job, written by run() before the claim_ store (release) that publishes it.
  RangeFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  int64_t job_n_ = 0;

  // (job number << 16) | next unclaimed slice. A claim is a CAS that keeps the job number, so a
  // thread still looking at a finished job can never take a slice of the next one.
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<int> done_{0};  // slices of the current job finished
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int> sleepers_{0};  // workers blocked (or about to block) on cv_
  uint64_t jobs_ = 0;                         // jobs started; only run() touches it
  std::atomic<bool> in_job_{false};
  std::atomic<bool> stop_{false};  // set (before a generation bump) by the destructor
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace fish
