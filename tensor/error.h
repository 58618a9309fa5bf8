// error.h - the two kinds of error in lazylua's tensor library.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace lazylua {

// A user error: bad arguments, shapes that do not fit, an index out of range,
// memory that cannot be had. The Lua binding turns it into a Lua error whose
// message is exactly what() (the binding adds the Lua position).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// An internal invariant: a failure is a bug in lazylua, never the user's fault.
[[noreturn]] void internal_error(const char* file, int line, const char* condition);

}  // namespace lazylua

#define LAZYLUA_ASSERT(condition) \
  ((condition) ? (void)0 : ::lazylua::internal_error(__FILE__, __LINE__, #condition))
