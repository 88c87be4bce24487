// The backend's loading, device selection and budget behaviour: start-up registration and
// FISH_GPU, lazy open, failures that unregister with a reason, CPU implementations only with
// FISH_GPU=cpu, FISH_VRAM_BUDGET_MB refusals that leave the backend usable, memory back to zero
// after release. Runs on lavapipe (ctest sets FISH_GPU=cpu; vulkan.RegistrationWithFishGpuOff
// reruns StartupRegistration.* with FISH_GPU=0).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "engine/vulkan/vulkan_backend.h"
#include "engine/vulkan/vulkan_device.h"
#include "engine/vulkan/vulkan_shaders.h"
#include "vulkan_test_util.h"

namespace fish {
namespace {

using test::ScopedEnv;

TEST(StartupRegistration, FollowsFishGpu) {
  const char* v = std::getenv("FISH_GPU");
  if (vk::gpu_disabled_by(v)) {
    EXPECT_EQ(gpu_backend(), nullptr);
    EXPECT_EQ(vk::startup_backend(), nullptr);
    EXPECT_NE(gpu::vulkan_status().find("disabled by FISH_GPU="), std::string::npos)
        << gpu::vulkan_status();
  } else {
    ASSERT_NE(vk::startup_backend(), nullptr);
    EXPECT_EQ(gpu_backend(), vk::startup_backend());
    // Registration alone touches no driver: nothing in this process has queried it yet.
    EXPECT_NE(gpu::vulkan_status().find("not opened yet"), std::string::npos)
        << gpu::vulkan_status();
  }
}

TEST(VulkanOptions, FishGpuOffValues) {
  for (const char* v : {"0", "off", "OFF", "false", "no", "No"})
    EXPECT_TRUE(vk::gpu_disabled_by(v)) << v;
  for (const char* v : {"1", "cpu", "", "on"}) EXPECT_FALSE(vk::gpu_disabled_by(v)) << v;
  EXPECT_FALSE(vk::gpu_disabled_by(nullptr));
}

TEST(VulkanOptions, MalformedValuesAreErrorsNamingTheVariable) {
  {
    ScopedEnv e("FISH_GPU_DEVICE", "first");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_FALSE(o.ok());
    EXPECT_NE(o.error().message.find("FISH_GPU_DEVICE='first'"), std::string::npos)
        << o.error().message;
  }
  {
    ScopedEnv e("FISH_VRAM_BUDGET_MB", "12x");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_FALSE(o.ok());
    EXPECT_NE(o.error().message.find("FISH_VRAM_BUDGET_MB"), std::string::npos)
        << o.error().message;
  }
  {
    ScopedEnv e("FISH_VK_QUEUE", "graphics");
    EXPECT_FALSE(vk::VulkanOptions::from_env().ok());
  }
  {
    ScopedEnv e("FISH_VK_MATVEC", "old");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_FALSE(o.ok());
    EXPECT_NE(o.error().message.find("FISH_VK_MATVEC='old'"), std::string::npos)
        << o.error().message;
  }
  {
    ScopedEnv e("FISH_VK_MATVEC", "1");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->matvec, vk::MatvecMode::generic);
  }
  for (auto [value, want] : {std::pair<const char*, int>{"auto", -1}, {"0", 0}, {"7", 7}}) {
    ScopedEnv e("FISH_VK_ATTN_SPLIT", value);
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->attn_split, want) << value;
  }
  for (const char* bad : {"65", "-1", "on"}) {
    ScopedEnv e("FISH_VK_ATTN_SPLIT", bad);
    auto o = vk::VulkanOptions::from_env();
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.error().message.find(fmt::format("FISH_VK_ATTN_SPLIT='{}'", bad)),
              std::string::npos)
        << o.error().message;
  }
  {
    ScopedEnv a("FISH_GPU", "cpu"), b("FISH_GPU_DEVICE", "2"), c("FISH_VRAM_BUDGET_MB", "300"),
        d("FISH_VK_QUEUE", "universal"), e("FISH_VK_MATVEC", nullptr);
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_TRUE(o->allow_cpu);
    EXPECT_EQ(o->device, 2u);
    EXPECT_EQ(o->budget_bytes, uint64_t(300) << 20);
    EXPECT_TRUE(o->universal_queue);
    EXPECT_EQ(o->matvec, vk::MatvecMode::automatic);
    EXPECT_EQ(o->attn_split, -1);
  }
}

TEST(VulkanBackend, EveryKernelIsEmbedded) {
  for (const char* op : {"matvec", "matvec1", "matmul"})
    for (GgmlType t : {GgmlType::f32, GgmlType::f16, GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0,
                       GgmlType::q5_1, GgmlType::q8_0, GgmlType::q4_k, GgmlType::q5_k,
                       GgmlType::q6_k, GgmlType::fq3}) {
      const auto code = vk::embedded_shader(fmt::format("{}_{}", op, type_name(t)));
      ASSERT_GT(code.size(), 5u) << op << " " << type_name(t);
      EXPECT_EQ(code[0], 0x07230203u) << "SPIR-V magic";
    }
  EXPECT_GT(vk::embedded_shader("copy_u4").size(), 5u);
}

// matvec_<type> is matvec_fast.comp.glsl (a module of its own, not the generic matvec1_<type>)
// for the bandwidth-bound types (shaders/CMakeLists.txt FISH_VK_FAST_MATVEC_TYPES), so the
// per-type matvec tests exercise the fast kernels; the others alias the generic source.
TEST(VulkanBackend, FastMatvecTypesHaveTheirOwnKernel) {
  auto same = [](GgmlType t) {
    const auto fast = vk::embedded_shader(fmt::format("matvec_{}", type_name(t)));
    const auto generic = vk::embedded_shader(fmt::format("matvec1_{}", type_name(t)));
    return std::equal(fast.begin(), fast.end(), generic.begin(), generic.end());
  };
  for (GgmlType t : {GgmlType::f16, GgmlType::q4_0, GgmlType::q8_0, GgmlType::q4_k, GgmlType::q5_k,
                     GgmlType::q6_k, GgmlType::fq3})
    EXPECT_FALSE(same(t)) << type_name(t);
  for (GgmlType t : {GgmlType::f32, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1})
    EXPECT_TRUE(same(t)) << type_name(t);
}

TEST(VulkanBackend, OpensLavapipeWithFishGpuCpu) {
  ScopedEnv e("FISH_GPU", "cpu");
  vk::VulkanBackend b(vk::VulkanOptions::from_env());
  const Status s = b.open();
  ASSERT_TRUE(s.ok()) << s.error().message;
  const vk::BackendInfo info = b.info();
  EXPECT_TRUE(info.open);
  int selected = 0;
  for (const vk::DeviceEntry& d : info.devices) selected += d.verdict == "selected";
  EXPECT_EQ(selected, 1);
  EXPECT_NE(info.status.find(info.device), std::string::npos) << info.status;
  EXPECT_GT(b.memory_free(), 0u);
  EXPECT_EQ(b.bytes_resident(), 0u);
}

TEST(VulkanBackend, CpuImplementationNeedsFishGpuCpu) {
  ScopedEnv e("FISH_GPU", nullptr);
  vk::VulkanBackend b(vk::VulkanOptions::from_env());
  const Status s = b.open();
  if (s.ok()) {
    // A machine with a real GPU: whatever was picked is not a CPU implementation.
    for (const vk::DeviceEntry& d : b.info().devices) {
      if (d.verdict == "selected") {
        EXPECT_NE(d.type, "cpu") << d.name;
      }
    }
  } else {
    EXPECT_NE(s.error().message.find("FISH_GPU=cpu"), std::string::npos) << s.error().message;
    EXPECT_NE(b.status().find("vulkan: off: "), std::string::npos) << b.status();
    EXPECT_FALSE(b.supports(GgmlType::q4_k));
    EXPECT_EQ(b.memory_free(), 0u);
  }
}

TEST(VulkanBackend, FailedOpenUnregistersWithReason) {
  ScopedEnv e("FISH_GPU_DEVICE", "999");
  vk::VulkanBackend b(vk::VulkanOptions::from_env());
  ComputeBackend* before = gpu_backend();
  set_gpu_backend(&b);
  EXPECT_FALSE(b.supports(GgmlType::q4_k));  // the first query opens, fails, unregisters
  EXPECT_EQ(gpu_backend(), nullptr);
  EXPECT_NE(b.status().find("FISH_GPU_DEVICE=999"), std::string::npos) << b.status();
  std::vector<uint8_t> w(18 * 4);
  auto h = b.upload(MatrixView{w.data(), GgmlType::q4_0, 32, 4, w.size(), "w"});
  EXPECT_FALSE(h.ok());
  set_gpu_backend(before);
}

TEST(VulkanBackend, BudgetRefusalLeavesBackendUsableAndMemoryReturns) {
  ScopedEnv e("FISH_VRAM_BUDGET_MB", "1");
  vk::VulkanBackend b(vk::VulkanOptions::from_env());
  ASSERT_TRUE(b.open().ok());
  std::mt19937 rng(1);
  // 2048 x 1024 q8_0 = 2.2 MB: over the 1 MB ceiling.
  const std::vector<uint8_t> big = test::random_weights(GgmlType::q8_0, 2048, 1024, rng);
  auto hb = b.upload(MatrixView{big.data(), GgmlType::q8_0, 1024, 2048, big.size(), "big.weight"});
  ASSERT_FALSE(hb.ok());
  EXPECT_NE(hb.error().message.find("big.weight"), std::string::npos) << hb.error().message;
  EXPECT_NE(hb.error().message.find("FISH_VRAM_BUDGET_MB"), std::string::npos)
      << hb.error().message;
  EXPECT_EQ(b.bytes_resident(), 0u);
  EXPECT_LE(b.memory_free(), uint64_t(1) << 20);

  // A small one still fits and computes correctly.
  const std::vector<uint8_t> small = test::random_weights(GgmlType::q4_k, 64, 512, rng);
  const MatrixView sv{small.data(), GgmlType::q4_k, 512, 64, small.size(), "small.weight"};
  const uint64_t free_before = b.memory_free();
  auto hs = b.upload(sv);
  ASSERT_TRUE(hs.ok()) << hs.error().message;
  EXPECT_GE(b.bytes_resident(), small.size());
  EXPECT_LT(b.memory_free(), free_before);
  const std::vector<float> x = test::random_input(512, rng);
  std::vector<float> y(64);
  ASSERT_TRUE(b.matmul(hs.value(), x.data(), 1, y.data()).ok());
  test::expect_close(test::reference_matmul(sv, x.data(), 1), y, 64, "small.weight under budget");
  b.release(hs.value());
  EXPECT_EQ(b.bytes_resident(), 0u);
}

TEST(VulkanBackend, UploadRejectsUnsupportedTypesAndBadSizes) {
  vk::VulkanBackend b(vk::VulkanOptions::from_env());
  ASSERT_TRUE(b.open().ok());
  std::vector<uint8_t> w(1024);
  auto h = b.upload(MatrixView{w.data(), GgmlType::q3_k, 256, 2, 2 * 110, "blk.0.attn_q.weight"});
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.error().message.find("blk.0.attn_q.weight"), std::string::npos) << h.error().message;
  EXPECT_NE(h.error().message.find("q3_k"), std::string::npos) << h.error().message;
  auto h2 = b.upload(MatrixView{w.data(), GgmlType::q4_0, 40, 2, 90, "odd"});  // 40 % 32 != 0
  EXPECT_FALSE(h2.ok());
  auto h3 = b.upload(MatrixView{w.data(), GgmlType::q4_0, 32, 2, 35, "short"});  // 2 x 18 expected
  EXPECT_FALSE(h3.ok());
  EXPECT_EQ(b.bytes_resident(), 0u);
}

TEST(VulkanBackend, DescribeListsResidentWeightsByType) {
  vk::VulkanBackend b(vk::VulkanOptions::from_env());
  ASSERT_TRUE(b.open().ok());
  std::mt19937 rng(2);
  const std::vector<uint8_t> w = test::random_weights(GgmlType::q6_k, 16, 256, rng);
  auto h = b.upload(MatrixView{w.data(), GgmlType::q6_k, 256, 16, w.size(), "w"});
  ASSERT_TRUE(h.ok());
  EXPECT_NE(b.describe().find("1 x q6_k"), std::string::npos) << b.describe();
  b.release(h.value());
}

// What this process holds of the operating system: open file descriptors and threads.
struct ProcessHoldings {
  size_t fds = 0, threads = 0;
};

ProcessHoldings process_holdings() {
  ProcessHoldings h;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
    ++h.fds;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) h.threads = std::stoul(line.substr(8));
  return h;
}

// A test binary (and a fish run sweep) opens and closes a backend per case: each close must give
// back the driver's file descriptors and threads, or a process that opens enough of them cannot
// create another instance (on the H200 the NVIDIA driver answered VK_ERROR_INCOMPATIBLE_DRIVER
// from the middle of the coopmat suite on). The first open pays the loader's one-time costs.
TEST(VulkanBackend, OpenAndCloseGivesBackFileDescriptorsAndThreads) {
  std::mt19937 rng(3);
  const std::vector<uint8_t> w = test::random_weights(GgmlType::q4_k, 64, 512, rng);
  const MatrixView v{w.data(), GgmlType::q4_k, 512, 64, w.size(), "w"};
  const std::vector<float> x = test::random_input(512 * 40, rng);
  auto cycle = [&] {
    vk::VulkanBackend b(vk::VulkanOptions::from_env());
    const Status s = b.open();
    ASSERT_TRUE(s.ok()) << s.error().message;
    auto h = b.upload(v);
    ASSERT_TRUE(h.ok()) << h.error().message;
    std::vector<float> y(64 * 40);
    for (int64_t n_tok : {1, 40}) ASSERT_TRUE(b.matmul(h.value(), x.data(), n_tok, y.data()).ok());
    b.release(h.value());
  };
  cycle();
  const ProcessHoldings before = process_holdings();
  for (int i = 0; i < 6; ++i) cycle();
  // A driver's worker threads may still be exiting when the close returns (seen on a loaded
  // machine with lavapipe): wait up to 2 s for the counts to settle. A leak does not settle.
  ProcessHoldings after = process_holdings();
  for (int i = 0; i < 40 && (after.fds != before.fds || after.threads != before.threads); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = process_holdings();
  }
  EXPECT_EQ(after.fds, before.fds) << "file descriptors after 6 more opens and closes";
  EXPECT_EQ(after.threads, before.threads) << "threads after 6 more opens and closes";
}

}  // namespace
}  // namespace fish
