// CPU feature probe (CPUID + XGETBV) and the ISA level the kernels dispatch to.
//
// A feature counts as present only when the CPU reports it AND the OS saves the register state
// it needs (XCR0: YMM for AVX2, ZMM/opmask for AVX-512, tile data for AMX); otherwise the first
// instruction would fault. The build is x86-64 baseline; SIMD code lives in *_avx2.cpp /
// *_avx512.cpp files and runs only after this probe says so.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fish {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx_vnni = false;  // VEX-encoded vpdpbusd (Alder Lake / Sapphire Rapids)
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;
  std::string brand;  // CPUID brand string, e.g. "Intel(R) Xeon(R) Platinum 8480+"
};

// Probed once, then cached. Not affected by FISH_ISA.
const CpuFeatures& cpu_features();

// Kernel ISA levels, ordered: a higher level needs every feature of the lower ones.
//   avx2:   AVX2 + FMA + F16C (Haswell and later)
//   avx512: avx2 level + AVX-512 F/BW/VL/DQ + VNNI (Cascade Lake, Ice Lake, Zen 4, SPR)
enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };
inline constexpr int kIsaCount = 3;

std::string_view isa_name(Isa isa);  // "scalar", "avx2", "avx512"
std::optional<Isa> parse_isa_name(std::string_view name);
bool isa_supported(Isa isa);  // the CPU+OS can run it (false for SIMD under FISH_SCALAR_ONLY)

// The level kernels use by default: the highest supported level, lowered by env
// FISH_ISA=scalar|avx2|avx512 (a request above what the CPU supports is clamped down; an
// unknown value is ignored with a message on stderr). Always scalar when built with
// FISH_SCALAR_ONLY. Evaluated once.
Isa best_isa();

// The rule behind best_isa(), exposed for tests: `supported` is the highest level the CPU runs,
// env_value the FISH_ISA string (nullptr or "" when unset).
Isa resolve_isa(Isa supported, const char* env_value);

// One line for logs and result context: "avx512 (avx2 fma f16c avx512f ... amx_int8)".
std::string cpu_features_summary();

}  // namespace fish
