// AMX checks: see amx.h. Palette fields: Intel SDM vol. 2A, CPUID leaf 1DH; permission:
// Linux Documentation/arch/x86/xstate.rst.
#include "kernels/amx.h"

#include <cerrno>
#include <cstring>

#include "base/env_knobs.h"
#include "kernels/cpu_features.h"

#if defined(__x86_64__) && defined(__linux__) && !defined(FISH_SCALAR_ONLY)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define FISH_AMX_PROBE 1
#endif

namespace fish {
namespace {

std::string probe_amx() {
#ifndef FISH_AMX_PROBE
  return "not built (FISH_SCALAR_ONLY or not x86-64 Linux)";
#else
  // Through the knob table (commands refuse a bad value before they start: base/env_knobs.h).
  if (const Result<bool> on = env_switch("FISH_AMX", true); !on.ok() || !on.value())
    return on.ok() ? "off (FISH_AMX)" : "off (" + on.error().message + ")";
  const CpuFeatures& f = cpu_features();
  if (!f.amx_tile || !f.amx_int8) return "CPU or XCR0 lacks AMX-TILE/AMX-INT8";
  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid(0, a, b, c, d);
  if (a < 0x1d) return "CPUID has no tile-information leaf 0x1D";
  __cpuid_count(0x1d, 0, a, b, c, d);
  if (a < 1) return "CPUID 0x1D reports no palette 1";
  __cpuid_count(0x1d, 1, a, b, c, d);
  const unsigned bytes_per_row = b & 0xffff;
  const unsigned max_names = b >> 16;
  const unsigned max_rows = c & 0xffff;
  if (bytes_per_row < 64 || max_names < 4 || max_rows < 16) {
    return "palette 1 is smaller than 4 tiles of 16 x 64 bytes";
  }
  constexpr long kArchReqXcompPerm = 0x1023;  // asm/prctl.h
  constexpr long kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    return std::string("no tile permission: arch_prctl: ") + std::strerror(errno);
  }
  return "ok";
#endif
}

}  // namespace

const std::string& amx_status() {
  static const std::string s = probe_amx();
  return s;
}

bool amx_int8_usable() {
  return amx_status() == "ok";
}

}  // namespace fish
