-- lazylua-0.1.0-1.rockspec - builds the Lua C module lazylua.so (and the
-- stdlib Lua modules) with CMake, for `luarocks make` from a checkout.
-- The build needs the Debian packages of tools/setup.sh (a C++20 compiler,
-- OpenBLAS, protobuf, fmt, readline, zlib, libdeflate).
rockspec_format = "3.0"
package = "lazylua"
version = "0.1.0-1"
source = {
  url = "git+https://example.invalid/lazylua.git",
  tag = "v0.1.0",
}
description = {
  summary = "Lazy tensors for Lua 5.4, fused and compiled to native code",
  detailed = [[
require "lazylua" gives the tensor module of the lazylua interpreter:
tensor operations are recorded into a graph and compiled into native code
when a value is observed or at tensor.mark_step().]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    LAZYLUA_LUA_CMOD_DIR = "$(LIBDIR)",
    LAZYLUA_LUA_LMOD_DIR = "$(LUADIR)",
    LAZYLUA_TESTS = "OFF",
    LAZYLUA_INSTALL_PROGRAM = "OFF",
  },
}
