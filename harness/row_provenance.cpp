// Provenance of results rows; see row_provenance.h.
#include "harness/row_provenance.h"

#include <set>

#include <fmt/format.h>

#include "base/env_knobs.h"

namespace fish {
namespace {

using nlohmann::json;

std::string text(const json& c, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string joined(std::initializer_list<std::string> parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts)
    if (!p.empty()) out += out.empty() ? p : fmt::format("{}{}", sep, p);
  return out;
}

}  // namespace

std::map<std::string, std::string> provenance_fields(const json& c, const std::string& file) {
  std::map<std::string, std::string> f;
  std::string commit = text(c, "commit").substr(0, 12);
  if (c.value("dirty", json()).is_boolean() && c["dirty"].get<bool>())
    commit += joined({"-dirty", text(c, "dirty_diff_sha256").substr(0, 8)}, ".");
  f["commit"] = commit;
  f["build"] = joined({text(c, "build_type"), text(c, "build_flags")}, " ");
  f["compiler"] = text(c, "compiler");
  const std::string n_cpus = text(c, "n_cpus"), vulkan = text(c, "vulkan");
  f["cpu"] = joined({text(c, "cpu"), n_cpus.empty() ? "" : fmt::format("({} CPUs)", n_cpus)}, " ");
  const std::string gpu = joined({text(c, "gpu"), text(c, "gpu_driver"),
                                  vulkan.empty() ? "" : fmt::format("Vulkan {}", vulkan)},
                                 ", ");
  f["gpu"] = gpu.empty() ? "none" : gpu;
  auto env = c.find("env");
  if (env == c.end() || !env->is_object()) {
    f["knobs"] = fmt::format("unrecorded ({})", file);
    return f;
  }
  for (const auto& [name, value] : env->items())
    if (knob_affects_measurement(name))
      f[name] = value.is_string() ? value.get<std::string>() : value.dump();
  return f;
}

std::string provenance_key(const std::map<std::string, std::string>& fields) {
  return json(fields).dump();
}

std::string provenance_difference(const std::map<std::string, std::string>& a,
                                  const std::map<std::string, std::string>& b) {
  std::set<std::string> names;
  for (const auto& [k, v] : a) names.insert(k);
  for (const auto& [k, v] : b) names.insert(k);
  std::string out;
  for (const std::string& n : names) {
    auto ia = a.find(n), ib = b.find(n);
    const std::string va = ia == a.end() ? "unset" : ia->second;
    const std::string vb = ib == b.end() ? "unset" : ib->second;
    if (va != vb) out += fmt::format("{}{} {} vs {}", out.empty() ? "" : ", ", n, va, vb);
  }
  return out;
}

}  // namespace fish
