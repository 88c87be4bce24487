// Error values for untrusted input (STYLE.md, errors tier 2).
//
// A function that reads bytes, JSON or a command line returns Result<T>: either a value or an
// Error whose message names the file, field or offset and says expected vs found, e.g.
//   "gguf: model.gguf: tensor blk.3.ffn_up: data ends at 9.1 GB, file is 4.6 GB".
// Bugs are asserts, not Errors.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace fish {

struct Error {
  std::string message;
};

// Builds an Error from a fmt format string: return make_error("gguf: {}: bad magic", path);
template <typename... Args>
Error make_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }
  Error&& take_error() {
    assert(!ok());
    return std::get<1>(std::move(v_));
  }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design
  static Status success() { return Status(); }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }
  Error&& take_error() {
    assert(!ok_);
    return std::move(error_);
  }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace fish

// Propagates an error from a Status or Result expression: FISH_TRY(write_all(f, buf));
#define FISH_TRY(expr)                                      \
  do {                                                      \
    auto&& fish_try_r_ = (expr);                            \
    if (!fish_try_r_.ok()) return fish_try_r_.take_error(); \
  } while (0)

#define FISH_CONCAT_INNER_(a, b) a##b
#define FISH_CONCAT_(a, b) FISH_CONCAT_INNER_(a, b)
// Declares `lhs` from a Result expression or returns its error:
//   FISH_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
#define FISH_ASSIGN_OR_RETURN(lhs, expr)                                                          \
  auto FISH_CONCAT_(fish_r_, __LINE__) = (expr);                                                  \
  if (!FISH_CONCAT_(fish_r_, __LINE__).ok()) return FISH_CONCAT_(fish_r_, __LINE__).take_error(); \
  lhs = std::move(FISH_CONCAT_(fish_r_, __LINE__)).value()
