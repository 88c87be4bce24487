// The registered GPU backend: the one piece of global mutable state of the offload path.
#include "engine/compute_backend.h"

#include <atomic>
#include <mutex>
#include <utility>

namespace fish {
namespace {
std::atomic<ComputeBackend*> g_backend{nullptr};
constexpr const char* kNoneRegistered =
    "no GPU backend registered (a build without Vulkan: configure with -DFISH_VULKAN=ON)";
std::mutex g_why_mu;
std::string& why_none() {  // guarded by g_why_mu; a function static: set during static init
  static std::string why = kNoneRegistered;
  return why;
}
}  // namespace

ComputeBackend* gpu_backend() {
  return g_backend.load(std::memory_order_acquire);
}

void set_gpu_backend(ComputeBackend* b) {
  {
    std::lock_guard lock(g_why_mu);
    why_none() = kNoneRegistered;
  }
  g_backend.store(b, std::memory_order_release);
}

void set_gpu_backend_off(std::string why) {
  std::lock_guard lock(g_why_mu);
  why_none() = std::move(why);
  g_backend.store(nullptr, std::memory_order_release);
}

std::string gpu_backend_status() {
  if (ComputeBackend* b = gpu_backend()) return b->status();
  std::lock_guard lock(g_why_mu);
  return why_none();
}

}  // namespace fish
