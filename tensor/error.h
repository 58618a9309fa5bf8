// error.h - the two kinds of error in lazylua's tensor library: the user's
// (Error) and lazylua's own (InternalError).
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

// A bug in lazylua (a broken invariant, LAZYLUA_ASSERT), never the user's
// fault. Not an Error: nothing may take it for a user error, retry the work
// another way or run interpreted instead; it reaches the user (as a Lua
// error naming the op and graph where one is known).
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

[[noreturn]] void internal_error(const char* file, int line, const char* condition);

}  // namespace lazylua

#define LAZYLUA_ASSERT(condition) \
  ((condition) ? (void)0 : ::lazylua::internal_error(__FILE__, __LINE__, #condition))
