// ThreadPool: spin-then-sleep workers; see thread_pool.h for the contract.
#include "kernels/thread_pool.h"

#include <cassert>
#include <chrono>
#include <cstdlib>

namespace fish {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();  // SSE2 (x86-64 baseline): eases the spin loop on the sibling thread
#endif
}

// Spin iterations before a worker sleeps: a pause is ~30-140 cycles (Skylake+ made it longer), so
// this is a few tens of microseconds, longer than the gap between two matmuls of one decode step.
constexpr int kSpinIters = 2000;

}  // namespace

int default_thread_count() {
  if (const char* env = std::getenv("FISH_THREADS"); env != nullptr && *env != '\0') {
    const int n = std::atoi(env);
    if (n >= 1) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

ThreadPool::ThreadPool(int n_threads) {
  n_threads_ = n_threads <= 0 ? default_thread_count() : n_threads;
  workers_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_seq_cst);
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_slice(int idx) {
  const int64_t b = job_n_ * idx / n_threads_;
  const int64_t e = job_n_ * (idx + 1) / n_threads_;
  if (b < e) job_fn_(job_ctx_, b, e, idx);
}

void ThreadPool::run(int64_t n, RangeFn fn, void* ctx) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(ctx, 0, n, 0);
    return;
  }
  const bool was_in_job = in_job_.exchange(true, std::memory_order_acquire);
  assert(!was_in_job && "ThreadPool::run is not re-entrant");
  (void)was_in_job;
  job_fn_ = fn;
  job_ctx_ = ctx;
  job_n_ = n;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  // seq_cst pairs with the worker's seq_cst sleepers_ increment: either the worker sees the new
  // generation before it sleeps, or we see it counted and notify under the mutex (no lost wakeup).
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lk(mu_); }
    cv_.notify_all();
  }
  run_slice(0);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIters) {
      cpu_relax();
    } else {
      std::this_thread::yield();  // oversubscribed machine: let the workers have the core
    }
  }
  in_job_.store(false, std::memory_order_release);
}

void ThreadPool::worker_main(int idx) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; i < kSpinIters && gen == seen; ++i) {
      cpu_relax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      cv_.wait(lk, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      gen = generation_.load(std::memory_order_acquire);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = gen;
    run_slice(idx);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace fish
