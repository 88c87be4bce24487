// Fault injection for tests of the exception boundaries (the `fish` command boundary in main, the
// cell boundary of `fish run`): FISH_FAULT=KIND@SITE[:N] throws KIND the N-th time (default the
// first) this process reaches SITE. Unset, inject_fault() is one getenv per call at sites that
// run once per model load or session, never per token.
//   KIND: bad_alloc (std::bad_alloc) | runtime_error (std::runtime_error)
//   SITE: model_load (Model::load) | session_create (Session::create)
// e.g. FISH_FAULT=bad_alloc@session_create:2 fails the second session of a sweep.
// FISH_VK_FAULT=lost:N|timeout:N is the Vulkan device's own: its grammar is here, beside
// FISH_FAULT's, so the knob table checks both; engine/vulkan/vk_context.h injects it.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/result.h"

namespace fish {

// Throws when FISH_FAULT names `site` and this is its N-th call. Precondition: site is a SITE.
void inject_fault(std::string_view site);

// Checks a FISH_FAULT value: "FISH_FAULT='x': expected KIND@SITE[:N] with KIND bad_alloc or
// runtime_error, SITE model_load or session_create, N >= 1".
Status check_fault_spec(std::string_view value);

// An injected device fault (FISH_VK_FAULT): the at-th compute submit fails as `kind`.
enum class DeviceFaultKind { none, lost, timeout };
struct DeviceFault {
  DeviceFaultKind kind = DeviceFaultKind::none;
  uint64_t at = 0;  // 1-based count of compute submits since the device opened
};
// "lost:N" / "timeout:N"; errors name the variable and the accepted forms.
Result<DeviceFault> parse_device_fault(std::string_view value);
Status check_device_fault_spec(std::string_view value);

}  // namespace fish
