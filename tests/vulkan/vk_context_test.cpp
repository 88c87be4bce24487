// The device layer's submission policy (engine/vulkan/vk_context.h) on lavapipe: a fence wait
// that times out is an error and nothing is read back (VK_TIMEOUT is a positive VkResult that
// FISH_VK_CHECK would let through), a lost device fails the call and every later one with the
// first reason and unregisters the backend, and FISH_VK_FAULT injects either at the N-th compute
// submit (uploads do not count).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/compute_backend.h"
#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_options.h"
#include "fish_vk_span.h"
#include "vulkan_test_util.h"

namespace fish {
namespace {

using test::ScopedEnv;

std::unique_ptr<vk::VulkanBackend> open_backend() {
  auto b = std::make_unique<vk::VulkanBackend>(vk::VulkanOptions::from_env());
  const Status s = b->open();
  EXPECT_TRUE(s.ok()) << s.error().message;
  return b;
}

bool has(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

// A q8_0 weight of 40 x 64 and its upload.
struct SmallWeight {
  std::vector<uint8_t> bytes;
  MatrixView view;
};
SmallWeight small_weight() {
  std::mt19937 rng(5);
  SmallWeight w;
  w.bytes = test::random_weights(GgmlType::q8_0, 40, 64, rng);
  w.view = MatrixView{w.bytes.data(), GgmlType::q8_0, 64, 40, w.bytes.size(), "fault.w"};
  return w;
}

TEST(VkFault, ParsesLostAndTimeoutAtAPositiveSubmit) {
  auto f = parse_device_fault("lost:3");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->kind, DeviceFaultKind::lost);
  EXPECT_EQ(f->at, 3u);
  f = parse_device_fault("timeout:1");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->kind, DeviceFaultKind::timeout);
  for (const char* bad : {"lost", "lost:0", "lost:x", "hang:2", "timeout:2:3", ""}) {
    auto r = parse_device_fault(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(has(r.error().message, "expected lost:N or timeout:N")) << r.error().message;
  }
  ScopedEnv e("FISH_VK_FAULT", "hang:2");
  auto o = vk::VulkanOptions::from_env();
  ASSERT_FALSE(o.ok());
  EXPECT_TRUE(has(o.error().message, "FISH_VK_FAULT='hang:2'")) << o.error().message;
}

// span_add over n = 300 random floats: c = a + b in one arena, and its dispatch.
struct AddOp {
  static constexpr uint32_t n = 300;
  std::vector<float> arena = std::vector<float>(3 * n), params = std::vector<float>(4);
  std::vector<uint32_t> kv = std::vector<uint32_t>(4);
  vk::SpanPush pc{};
  uint32_t gx = (n + FISH_SPAN_WG - 1) / FISH_SPAN_WG;
  explicit AddOp(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d;
    for (float& v : arena) v = d(rng);
    pc.n = n;
    pc.rows = 1;
    pc.a_off = 0;
    pc.b_off = n;
    pc.c_off = 2 * n;
    pc.a_stride = pc.b_stride = pc.c_stride = n;
  }
  // Runs it on b over `a` (a copy of arena).
  Status run(vk::VulkanBackend& b, std::vector<float>& a) {
    return b.run_span_op("span_add", pc, gx, 1, a, params, kv);
  }
};

// The fence of the span-op submit "never signals": the call fails naming VK_TIMEOUT and the
// host copy of the arena keeps its old values although the device wrote the sum.
TEST(VkContext, TimedOutFenceIsAnErrorAndNothingIsReadBack) {
  auto b = open_backend();
  AddOp op(3);
  const std::vector<float>& arena = op.arena;
  {  // the op works, and writes c
    std::vector<float> a = arena;
    ASSERT_TRUE(op.run(*b, a).ok());
    EXPECT_NE(a, arena);
  }
  b->inject_fault(DeviceFaultKind::timeout, 1);
  std::vector<float> a = arena;
  const Status s = op.run(*b, a);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(has(s.error().message, "VK_TIMEOUT")) << s.error().message;
  EXPECT_TRUE(has(s.error().message, "span ops")) << s.error().message;
  EXPECT_EQ(a, arena) << "a timed-out submit must not read back";
  EXPECT_TRUE(has(b->status(), "vulkan: off:")) << b->status();
  EXPECT_TRUE(has(b->status(), "treated as hung")) << b->status();
  // Every later call fails at once with the same reason.
  const Status again = op.run(*b, a);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(has(again.error().message, "VK_TIMEOUT")) << again.error().message;
  EXPECT_EQ(a, arena);
}

// FISH_VK_FENCE_SPIN_US: submits that poll their fence first give the blocking wait's result, and
// an injected timeout still fails as one (the poll is skipped there, so the work is waited for).
TEST(VkContext, PolledFenceWaitGivesTheSameResultsAndTimeoutsStillFail) {
  AddOp op(4);
  const std::vector<float>& arena = op.arena;
  const uint32_t n = AddOp::n;
  std::vector<float> blocking = arena;
  ASSERT_TRUE(op.run(*open_backend(), blocking).ok());
  ScopedEnv e("FISH_VK_FENCE_SPIN_US", "2000");
  ASSERT_EQ(vk::VulkanOptions::from_env()->fence_spin_us, 2000u);
  auto b = open_backend();
  std::vector<float> polled = arena;
  ASSERT_TRUE(op.run(*b, polled).ok());
  EXPECT_EQ(polled, blocking);
  for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(polled[2 * n + i], arena[i] + arena[n + i]) << i;
  b->inject_fault(DeviceFaultKind::timeout, 1);
  std::vector<float> a = arena;
  const Status s = op.run(*b, a);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(has(s.error().message, "VK_TIMEOUT")) << s.error().message;
  EXPECT_EQ(a, arena);
  ScopedEnv bad("FISH_VK_FENCE_SPIN_US", "20000");
  EXPECT_FALSE(vk::VulkanOptions::from_env().ok());
}

// A lost device during a matmul: the call fails, y is untouched, the registered backend
// unregisters itself, later matmuls fail with the first reason, and memory still returns.
TEST(VkContext, LostDeviceFailsEveryLaterCallAndUnregisters) {
  auto b = open_backend();
  ComputeBackend* registered = gpu_backend();
  set_gpu_backend(b.get());
  SmallWeight w = small_weight();
  auto h = b->upload(w.view);
  ASSERT_TRUE(h.ok()) << h.error().message;
  std::vector<float> x(64, 0.5f), y(40, -7.0f);
  ASSERT_TRUE(b->matmul(h.value(), x.data(), 1, y.data()).ok());
  std::fill(y.begin(), y.end(), -7.0f);
  b->inject_fault(DeviceFaultKind::lost, 1);
  const Status s = b->matmul(h.value(), x.data(), 1, y.data());
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(has(s.error().message, "VK_ERROR_DEVICE_LOST")) << s.error().message;
  EXPECT_TRUE(has(s.error().message, "injected by FISH_VK_FAULT")) << s.error().message;
  EXPECT_EQ(y, std::vector<float>(40, -7.0f));
  EXPECT_EQ(gpu_backend(), nullptr) << "a lost device unregisters the backend";
  EXPECT_TRUE(has(b->status(), "vulkan: off: matmul:")) << b->status();
  const Status again = b->matmul(h.value(), x.data(), 1, y.data());
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(has(again.error().message, "VK_ERROR_DEVICE_LOST")) << again.error().message;
  b->release(h.value());
  EXPECT_EQ(b->bytes_resident(), 0u);
  set_gpu_backend(registered);
}

// FISH_VK_FAULT=lost:2 from the environment: the upload's transfers do not count, the first
// matmul works, the second fails.
TEST(VkContext, FishVkFaultFailsTheNthComputeSubmit) {
  ScopedEnv e("FISH_VK_FAULT", "lost:2");
  auto b = open_backend();
  SmallWeight w = small_weight();
  auto h = b->upload(w.view);
  ASSERT_TRUE(h.ok()) << h.error().message;
  std::vector<float> x(64, 0.25f), y(40);
  EXPECT_TRUE(b->matmul(h.value(), x.data(), 1, y.data()).ok());
  const Status s = b->matmul(h.value(), x.data(), 1, y.data());
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(has(s.error().message, "at compute submit 2")) << s.error().message;
  b->release(h.value());
}

}  // namespace
}  // namespace fish
