// Exception text for the command and cell boundaries; see cell_guard.h.
#include "harness/cell_guard.h"

#include <exception>
#include <new>
#include <stdexcept>
#include <typeinfo>

#include <fmt/format.h>

namespace fish {
namespace {

std::string type_of(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return "std::bad_alloc";
  if (dynamic_cast<const std::length_error*>(&e)) return "std::length_error";
  if (dynamic_cast<const std::out_of_range*>(&e)) return "std::out_of_range";
  if (dynamic_cast<const std::invalid_argument*>(&e)) return "std::invalid_argument";
  if (dynamic_cast<const std::runtime_error*>(&e)) return "std::runtime_error";
  if (dynamic_cast<const std::logic_error*>(&e)) return "std::logic_error";
  return typeid(e).name();  // mangled, but names the type
}

}  // namespace

std::string describe_current_exception() {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return "out of memory (std::bad_alloc) (hint: a smaller n_ctx or n_batch, fewer threads, "
           "or the memory estimate's ceiling FISH_RAM_BUDGET_MB below what this machine has)";
  } catch (const std::exception& e) {
    return fmt::format("unexpected exception ({}): {}", type_of(e), e.what());
  } catch (...) {
    return "unexpected exception of a type that is not a std::exception";
  }
}

}  // namespace fish
