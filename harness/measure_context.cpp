// The context line of a results file; see measure_context.h.
#include "harness/measure_context.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>

#include "base/build_info.h"
#include "base/env_knobs.h"
#include "kernels/cpu_features.h"

namespace fish {
namespace {

// stdout of a shell command with stderr dropped; empty when it fails.
std::string capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (::pclose(p) != 0) return std::string();
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// The value after "key = " in vulkaninfo --summary's first matching line.
std::string summary_value(const std::string& text, const std::string& key) {
  size_t pos = 0;
  while ((pos = text.find(key, pos)) != std::string::npos) {
    const size_t eq = text.find('=', pos);
    const size_t end = text.find('\n', pos);
    if (eq != std::string::npos && (end == std::string::npos || eq < end)) {
      std::string v = text.substr(eq + 1, end == std::string::npos ? end : end - eq - 1);
      v.erase(0, v.find_first_not_of(' '));
      return v;
    }
    pos += key.size();
  }
  return "";
}

nlohmann::json or_null(const std::string& s) {
  return s.empty() ? nlohmann::json() : nlohmann::json(s);
}

std::string os_name() {
  std::ifstream f("/etc/os-release");
  std::string line, pretty;
  while (std::getline(f, line))
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      pretty = line.substr(12);
      if (pretty.size() >= 2 && pretty.front() == '"') pretty = pretty.substr(1, pretty.size() - 2);
    }
  struct utsname u;
  if (::uname(&u) == 0)
    pretty += std::string(pretty.empty() ? "" : " ") + u.sysname + " " + u.release;
  return pretty;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string new_run_id() {
  std::random_device rd;
  const uint64_t x = (uint64_t(rd()) << 32) ^ uint64_t(rd()) ^
                     uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  return fmt::format("{:016x}", x);
}

nlohmann::json run_context(const Experiment& e, const RunIdentity& id) {
  nlohmann::json c;
  c["kind"] = "context";
  c["schema"] = "fish-results/1";
  c["harness_version"] = std::string(kHarnessVersion);
  c["run_id"] = id.run_id;
  c["experiment"] = e.name;
  c["experiment_file"] = e.file_path;
  c["experiment_sha256"] = e.file_sha256;
  c["n_cells"] = id.n_cells;
  c["shard"] = {{"index", id.shard_index}, {"count", id.shard_count}};
  c["started_utc"] = utc_now();
  // The visiting order of the cells (measure.order; the seed only where it drew the order).
  c["order"] = e.measure.order;
  c["order_seed"] =
      e.measure.order == "shuffle" ? nlohmann::json(e.measure.seed) : nlohmann::json();

  // Provenance from the binary itself (base/build_info.h), whatever directory it runs in.
  const BuildInfo& b = build_info();
  c["commit"] = std::string(b.commit);
  c["dirty"] = b.dirty < 0 ? nlohmann::json() : nlohmann::json(b.dirty == 1);
  if (b.dirty == 1) c["dirty_diff_sha256"] = std::string(b.diff_sha256);
  c["build_type"] = std::string(b.build_type);
  c["build_flags"] = std::string(b.build_flags);
  c["compiler"] = std::string(b.compiler);
  c["env"] = env_knobs_json([](const char* n) { return std::getenv(n); });
  c["cpu"] = cpu_features().brand;
  c["cpu_features"] = cpu_features_summary();
  c["n_cpus"] = int64_t(::sysconf(_SC_NPROCESSORS_ONLN));

  std::string gpu, driver, vulkan;
  const std::string vk = capture("vulkaninfo --summary");
  if (!vk.empty()) {
    gpu = summary_value(vk, "deviceName");
    driver = summary_value(vk, "driverInfo");
    vulkan = summary_value(vk, "apiVersion");
  }
  if (gpu.empty()) {
    const std::string nv =
        capture("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader");
    const size_t comma = nv.find(',');
    if (comma != std::string::npos) {
      gpu = nv.substr(0, comma);
      driver = nv.substr(comma + 1);
      driver.erase(0, driver.find_first_not_of(' '));
      driver = driver.substr(0, driver.find('\n'));
    }
  }
  c["gpu"] = or_null(gpu);
  c["gpu_driver"] = or_null(driver);
  c["vulkan"] = or_null(vulkan);
  c["os"] = os_name();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  c["host"] = host;
  return c;
}

}  // namespace fish
