// ThreadPool: claimed slices, spin-then-sleep workers; see thread_pool.h for the contract.
#include "kernels/thread_pool.h"

#include <cassert>
#include <chrono>
#include <cstdlib>

#include "base/env_knobs.h"

#if defined(__linux__)
#include <sched.h>
#endif

namespace fish {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();  // SSE2 (x86-64 baseline): eases the spin loop on the sibling thread
#endif
}

using Clock = std::chrono::steady_clock;

// How long an idle worker spins before sleeping: longer than the gap between two decode matmuls
// (5-15 us), so a worker keeps up with a decode step without sleeping, and short, because a
// spinning worker on an oversubscribed machine takes CPU time from the caller. Measured on the
// 2-vCPU dev VM (SmolLM2-135M, 2 threads): with a busy-loop process on the other vCPU, 20/50/300/
// 1000 us gave 0.95/0.9/0.8/0.7x the 1-thread tok/s; idle, 50 and 300 us are equal within noise,
// and 20 us sleeps ~30 times a token. Measured in time, not iterations: a pause is 10-140 cycles.
constexpr auto kSpinTime = std::chrono::microseconds(50);
// Pauses between clock reads while spinning (a read is ~20 ns; 64 pauses are 0.3-4.5 us).
constexpr int kPausesPerClockRead = 64;
// The caller waits only for slices a worker is running; after this many pauses it yields.
constexpr int kCallerSpinIters = 2000;

constexpr int kSliceBits = 16;
constexpr uint64_t kSliceMask = (uint64_t(1) << kSliceBits) - 1;

}  // namespace

int default_thread_count() {
  // Through the knob table (commands refuse a bad value before they start: base/env_knobs.h).
  if (auto n = env_int("FISH_THREADS"); n.ok() && n.value()) return int(*n.value());
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

ThreadPool::ThreadPool(int n_threads) {
  n_threads_ = n_threads <= 0 ? default_thread_count() : n_threads;
  assert(n_threads_ <= kMaxThreads);
  workers_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_main(); });
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

void ThreadPool::run_slices() {
  const uint64_t T = uint64_t(n_threads_);
  uint64_t w = claim_.load(std::memory_order_acquire);
  while ((w & kSliceMask) < T) {
    // acquire: a successful claim sees the job fields stored before claim_ was published.
    if (!claim_.compare_exchange_weak(w, w + 1, std::memory_order_acquire,
                                      std::memory_order_acquire))
      continue;
    const int64_t t = int64_t(w & kSliceMask);
    const int64_t b = job_n_ * t / int64_t(T);
    const int64_t e = job_n_ * (t + 1) / int64_t(T);
    if (b < e) job_fn_(job_ctx_, b, e, int(t));
    // release: the slice's writes are visible to the caller once it counts T done slices.
    done_.fetch_add(1, std::memory_order_release);
    w = claim_.load(std::memory_order_acquire);
  }
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
  done_.store(0, std::memory_order_relaxed);
  // Every slice of the previous job was claimed and done, so no thread can still claim from it
  // or count into done_; the release publishes the job fields and the done_ reset.
  claim_.store(++jobs_ << kSliceBits, std::memory_order_release);
  // seq_cst pairs with the worker's seq_cst sleepers_ increment: either the worker sees the new
  // generation before it sleeps, or we see it counted and notify under the mutex (no lost wakeup).
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lk(mu_); }
    cv_.notify_all();
  }
  run_slices();
  // Left: slices that workers claimed and are running now.
  for (int spins = 0; done_.load(std::memory_order_acquire) != n_threads_; ++spins) {
    if (spins < kCallerSpinIters) {
      cpu_relax();
    } else {
      std::this_thread::yield();  // the worker running the last slice may need this core
    }
  }
  in_job_.store(false, std::memory_order_release);
}

void ThreadPool::worker_main() {
#if defined(__linux__)
  // SCHED_BATCH (same nice 0 share, no wake-up preemption): a worker woken by run() no longer
  // preempts the caller when both land on one core (the other core busy with another process);
  // the caller keeps claiming slices. 2-vCPU dev VM, SmolLM2-135M at 2 threads with a busy-loop
  // process beside it: 0.85x -> 1.1x the 1-thread tok/s; no change when idle. Best effort.
  sched_param param{};
  (void)sched_setscheduler(0, SCHED_BATCH, &param);  // pid 0: this thread
#endif
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    if (gen == seen) {
      const Clock::time_point give_up = Clock::now() + kSpinTime;
      for (int i = 1; gen == seen; ++i) {
        cpu_relax();
        gen = generation_.load(std::memory_order_acquire);
        if (i % kPausesPerClockRead == 0 && Clock::now() > give_up) break;
      }
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
    run_slices();
  }
}

}  // namespace fish
