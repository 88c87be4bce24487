// The registered GPU backend: the one piece of global mutable state of the offload path.
#include "engine/compute_backend.h"

#include <atomic>

namespace fish {
namespace {
std::atomic<ComputeBackend*> g_backend{nullptr};
}  // namespace

ComputeBackend* gpu_backend() {
  return g_backend.load(std::memory_order_acquire);
}

void set_gpu_backend(ComputeBackend* b) {
  g_backend.store(b, std::memory_order_release);
}

}  // namespace fish
