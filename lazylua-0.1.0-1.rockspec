-- lazylua-0.1.0-1.rockspec - builds the Lua C module lazylua.so with CMake,
-- for `luarocks make` from a checkout. The stdlib is built into it:
-- `require "lazylua.nn"` (lazylua.optim, lazylua.data ...) needs no Lua file.
-- Only lazylua.so is installed, into LIBDIR (luarocks deploys it to
-- lib/lua/5.4): not the program, nor liblazylua, its headers, CMake or
-- pkg-config files, which `cmake --install` puts under a prefix instead.
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
when a value is observed or at tensor.mark_step(). Its standard library
comes as require "lazylua.nn", "lazylua.optim", "lazylua.data",
"lazylua.plot" and "lazylua.progress".]],
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
    LAZYLUA_TESTS = "OFF",
    LAZYLUA_INSTALL_PROGRAM = "OFF",
    LAZYLUA_INSTALL_DEVELOPMENT = "OFF",
  },
}
