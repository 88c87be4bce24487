// Whether AMX-INT8 tile instructions may run in this process, and the one-time setup they need.
//
// All of these must hold, or the first tile instruction faults (SIGILL): the CPU reports AMX-TILE
// and AMX-INT8 (CPUID 7.0:EDX bits 24, 25) and the OS enables tile state in XCR0 (bits 17, 18)
// (both via cpu_features()); CPUID leaf 0x1D palette 1 offers >= 4 tiles of 16 rows x 64 bytes
// (what w4a8_amx.cpp configures); and Linux grants this process tile-data permission
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), kernel >= 5.16), requested once per
// process on the first call. Each thread must still load a tile configuration before its first
// tile instruction (w4a8_tiles_amx does, on every call). Env FISH_AMX=0 (off/false/no) turns every
// AMX path off (W4A8 prefill, the x16 K-quant prefill): the status then says so.
#pragma once

#include <string>

namespace fish {

// Evaluated once (thread-safe); false under FISH_SCALAR_ONLY.
bool amx_int8_usable();
// "ok", or the first check that failed, e.g. "no tile permission: arch_prctl: Invalid argument".
const std::string& amx_status();

}  // namespace fish
