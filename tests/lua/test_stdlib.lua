-- test_stdlib.lua - the embedded standard library: require finds the
-- modules built into the binary from any directory and ahead of
-- package.path, chunk names point at the real files, and an unknown module
-- still gets Lua's own "module not found" message.
local h = dofile("helpers.lua")
local lfs = require "lfs"

local MODULES = {"data", "plot", "progress"}

h.test("the embedded searcher sits right after the preload searcher", function()
  local found = package.searchers[2]
  assert(type(found) == "function")
  local loader, origin = found("plot")
  assert(type(loader) == "function" and origin == "stdlib/plot.lua", tostring(origin))
  -- silent about names it does not know: require's message stays lua5.4's
  assert(select("#", found("no_such_module")) == 0)
end)

h.test("require works from any directory, ahead of package.path", function()
  local here = lfs.currentdir()
  local dir = os.tmpname()
  os.remove(dir)
  assert(lfs.mkdir(dir))
  -- a decoy plot.lua on package.path must not win
  local decoy = assert(io.open(dir .. "/plot.lua", "w"))
  decoy:write("return {decoy = true}\n")
  decoy:close()
  local saved_path = package.path
  package.path = dir .. "/?.lua"
  assert(lfs.chdir(dir))
  local ok, message = pcall(function()
    for _, name in ipairs(MODULES) do
      package.loaded[name] = nil
      local module = require(name)
      assert(type(module) == "table", name)
      assert(not module.decoy, name .. " came from package.path")
    end
  end)
  lfs.chdir(here)
  package.path = saved_path
  os.remove(dir .. "/plot.lua")
  lfs.rmdir(dir)
  assert(ok, message)
end)

h.test("chunk names are the stdlib file names", function()
  local plot = require "plot"
  local info = debug.getinfo(plot.sparkline, "S")
  assert(info.source == "@stdlib/plot.lua" and info.short_src == "stdlib/plot.lua", info.source)
  -- an error raised inside a module names the file and line
  local ok, message = pcall(require("progress").new, 1, {clock = function() error("tick") end})
  assert(not ok and message:find("tick"), message)
  local _, traceback = xpcall(require("progress").new, debug.traceback, 1,
                              {clock = function() error("tick") end})
  assert(traceback:find("stdlib/progress.lua:%d+:"), traceback)
end)

h.test("an unknown module gives Lua's own message, without a line of ours", function()
  local ok, message = pcall(require, "no_such_module_xyz")
  assert(not ok)
  assert(message:find("module 'no_such_module_xyz' not found:\n\tno field package.preload['no_such_module_xyz']\n\tno file '", 1, true), message)
  assert(not message:find("embedded", 1, true), message)
  assert(message:find("no file '", 1, true), "the path searchers still ran: " .. message)
  -- require still works afterwards
  assert(require("plot").sparkline({1, 2}) == "▁█")
end)

h.test("the native helpers are reachable", function()
  local native = require "stdlib.native"
  assert(type(native.isatty(1)) == "boolean")
  local t0 = native.monotonic_seconds()
  assert(type(t0) == "number" and native.monotonic_seconds() >= t0)
end)

h.done("test_stdlib")
