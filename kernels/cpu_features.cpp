// CPUID / XGETBV probe. Leaf numbers and bit positions: Intel SDM vol. 2A, CPUID, tables 3-8
// and 3-10; XCR0 bits: SDM vol. 1, 13.3.
#include "kernels/cpu_features.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define FISH_X86 1
#endif

namespace fish {
namespace {

#ifdef FISH_X86
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}

// XGETBV(0) = XCR0, the state components the OS saves on context switch. Only valid when
// CPUID.1:ECX.OSXSAVE is set; the instruction is emitted as bytes so no -mxsave is needed.
unsigned long long xgetbv0() {
  unsigned eax, edx;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}
#endif

bool bit(unsigned v, int i) {
  return (v >> i) & 1u;
}

CpuFeatures probe() {
  CpuFeatures f;
#ifdef FISH_X86
  const unsigned max_leaf = cpuid(0, 0).a;
  if (max_leaf < 1) return f;
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.c, 27);
  const unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_ymm = (xcr0 & 0x6) == 0x6;              // bits 1 (SSE) + 2 (AVX/YMM upper)
  const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;  // bits 5..7: opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;      // bits 17, 18: XTILECFG, XTILEDATA
  const bool avx = bit(l1.c, 28) && os_ymm;
  f.fma = avx && bit(l1.c, 12);
  f.f16c = avx && bit(l1.c, 29);
  if (max_leaf >= 7) {
    const Regs l7 = cpuid(7, 0);
    f.avx2 = avx && bit(l7.b, 5);
    f.avx512f = os_zmm && bit(l7.b, 16);
    f.avx512dq = f.avx512f && bit(l7.b, 17);
    f.avx512bw = f.avx512f && bit(l7.b, 30);
    f.avx512vl = f.avx512f && bit(l7.b, 31);
    f.avx512vnni = f.avx512f && bit(l7.c, 11);
    f.amx_bf16 = os_amx && bit(l7.d, 22);
    f.amx_tile = os_amx && bit(l7.d, 24);
    f.amx_int8 = os_amx && bit(l7.d, 25);
    if (l7.a >= 1) {
      const Regs l71 = cpuid(7, 1);
      f.avx_vnni = avx && bit(l71.a, 4);
      f.avx512bf16 = f.avx512f && bit(l71.a, 5);
    }
  }
  const unsigned max_ext = cpuid(0x80000000u, 0).a;
  if (max_ext >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002u + i, 0);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    f.brand = brand;
    while (!f.brand.empty() && f.brand.front() == ' ') f.brand.erase(0, 1);
  }
#endif
  return f;
}

Isa compute_best_isa() {
#ifdef FISH_SCALAR_ONLY
  return Isa::scalar;
#else
  Isa supported = Isa::scalar;
  if (isa_supported(Isa::avx512)) {
    supported = Isa::avx512;
  } else if (isa_supported(Isa::avx2)) {
    supported = Isa::avx2;
  }
  return resolve_isa(supported, std::getenv("FISH_ISA"));
#endif
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = probe();
  return f;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

std::optional<Isa> parse_isa_name(std::string_view name) {
  for (int i = 0; i < kIsaCount; ++i) {
    if (isa_name(static_cast<Isa>(i)) == name) return static_cast<Isa>(i);
  }
  return std::nullopt;
}

bool isa_supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::scalar:
      return true;
#ifdef FISH_SCALAR_ONLY
    case Isa::avx2:
    case Isa::avx512:
      return false;
#else
    case Isa::avx2:
      return f.avx2 && f.fma && f.f16c;
    case Isa::avx512:
      return f.avx2 && f.fma && f.f16c && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq &&
             f.avx512vnni;
#endif
  }
  return false;
}

Isa resolve_isa(Isa supported, const char* env_value) {
  if (env_value == nullptr || *env_value == '\0') return supported;
  const std::optional<Isa> want = parse_isa_name(env_value);
  if (!want) {
    std::fprintf(stderr, "fish: FISH_ISA=%s is not one of scalar|avx2|avx512; using %s\n",
                 env_value, std::string(isa_name(supported)).c_str());
    return supported;
  }
  return static_cast<int>(*want) < static_cast<int>(supported) ? *want : supported;
}

Isa best_isa() {
  static const Isa isa = compute_best_isa();
  return isa;
}

std::string cpu_features_summary() {
  const CpuFeatures& f = cpu_features();
  std::string s(isa_name(best_isa()));
  s += " (";
  const std::pair<const char*, bool> flags[] = {{"avx2", f.avx2},
                                                {"fma", f.fma},
                                                {"f16c", f.f16c},
                                                {"avx512f", f.avx512f},
                                                {"avx512bw", f.avx512bw},
                                                {"avx512vl", f.avx512vl},
                                                {"avx512dq", f.avx512dq},
                                                {"avx512vnni", f.avx512vnni},
                                                {"avx512bf16", f.avx512bf16},
                                                {"avx_vnni", f.avx_vnni},
                                                {"amx_tile", f.amx_tile},
                                                {"amx_int8", f.amx_int8},
                                                {"amx_bf16", f.amx_bf16}};
  bool first = true;
  for (const auto& [name, on] : flags) {
    if (!on) continue;
    if (!first) s += ' ';
    s += name;
    first = false;
  }
  s += ')';
  return s;
}

}  // namespace fish
