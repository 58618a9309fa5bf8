-- failure.lua CASE [PIDFILE] - one rank fails while the others wait in a
-- collective (test_failure.sh checks that the job ends, quickly, with a
-- clear message). Every rank first does a collective, so all have joined;
-- then rank 1 fails as CASE says, and the others wait in an all-reduce
-- that rank 1 never joins.
local dist = require "dist"
local case, pidfile = arg[1], arg[2]
local r = dist.rank()
local function pid()
  local stat = assert(io.open("/proc/self/stat")):read("*l")
  return stat:match("^(%d+)")
end

-- A first step every rank completes.
local sum = dist.all_reduce(tensor.ones(4) * (r + 1)):sum():item()
io.stdout:write(string.format("rank %d ready (sum %g)\n", r, sum))
io.stdout:flush()

-- Not a failure: a collective whose result only rank 0 reads, at the end
-- of the script. The other ranks run it as they end (the lazylua program
-- runs a rank's unsynced collectives before it exits).
if case == "read_on_rank_0" then
  local total = dist.all_reduce(tensor.ones(2) * (r + 1))
  if r == 0 then print(string.format("rank 0 reads %g", total:sum():item())) end
  return
end

if r == 1 then
  if case == "kill_self" then
    os.execute("kill -9 " .. pid())
  elseif case == "killed_by_driver" then
    local file = assert(io.open(pidfile, "w"))
    file:write(pid(), "\n")
    file:close()
    while true do tensor.ones(1000):sum():item() end  -- busy until killed
  elseif case == "lua_error" then
    local model = {}
    error("rank 1 failed on purpose: " .. model.missing_field.weight)
  elseif case == "os_exit" then
    os.exit(3)
  elseif case == "abort" then
    dist.abort(4)
  elseif case == "return_early" then
    return  -- the script ends normally, with a collective still to make
  elseif case == "exit_zero" then
    os.exit(0)
  end
end

-- The others wait here; in lazy mode the item() is the sync that runs it.
local waiting = dist.all_reduce(tensor.ones(1000) * (r + 1))
print(string.format("rank %d passed the collective: %g (must not happen)", r, waiting:sum():item()))
