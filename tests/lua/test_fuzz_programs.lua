-- test_fuzz_programs.lua - the differential fuzzer: seeded random programs
-- of four families, each generated eagerly, then replayed eagerly and in
-- this process's mode, which must agree (fuzz_common.lua says how):
--   alias     in-place writes through chains of views, overlapping
--             operands, reads of every alias (fuzz_alias.lua)
--   autograd  random differentiable expressions, backward, gradients, an
--             SGD step and a second round (fuzz_autograd.lua)
--   scan      tensor.scan with random bodies, with and without gradients
--             (fuzz_scan.lua)
--   viewchain in-place writes through a permute of extent-1 dims and a
--             flattening, then reads of the views and their bases
--             (fuzz_viewchain.lua)
-- Shapes are often hostile: 0 extents, runs of 1 that broadcast, and large
-- tensors. ctest runs this file lazily (a graph runs interpreted until its
-- native code is ready), with LAZYLUA_COMPILE=sync (every graph compiled)
-- and under LAZYLUA_EAGER=1 (both replays eager: generation and replay
-- agree), each from the same fixed seeds; tools/fuzz.sh runs more, from
-- random seeds.
--
-- Environment: LAZYLUA_FUZZ_SEED (first program's seed; program i has seed
-- SEED + i - 1, so one failing program replays alone with
-- LAZYLUA_FUZZ_SEED=<its seed> LAZYLUA_FUZZ_PROGRAMS=1),
-- LAZYLUA_FUZZ_PROGRAMS (how many), LAZYLUA_FUZZ_FAMILY (only one family),
-- LAZYLUA_FUZZ_VERBOSE=1 (print each program), LAZYLUA_FUZZ_TRACE=1 (each
-- seed on stderr as it starts).
local h = dofile("helpers.lua")
local lh = dofile("lazy_helpers.lua")
local fc = dofile("fuzz_common.lua")(h, lh)

local FAMILIES = {
  dofile("fuzz_alias.lua")(fc),
  dofile("fuzz_autograd.lua")(fc),
  dofile("fuzz_scan.lua")(fc),
  dofile("fuzz_viewchain.lua")(fc),
}

local SEED = math.tointeger(tonumber(os.getenv("LAZYLUA_FUZZ_SEED") or "")) or 1
-- The fixed budget: together the three ctest runs of this file take a bit
-- over a minute on a 2-core machine (sync mode compiles every graph), and
-- as much again in .ci/run's sanitizer build.
local default_programs = os.getenv("LAZYLUA_COMPILE") == "sync" and 100 or 200
local PROGRAMS = math.tointeger(tonumber(os.getenv("LAZYLUA_FUZZ_PROGRAMS") or ""))
                 or default_programs
local ONLY = os.getenv("LAZYLUA_FUZZ_FAMILY")
local VERBOSE = os.getenv("LAZYLUA_FUZZ_VERBOSE")
-- tools/fuzz.sh: each seed on stderr before its program runs, so that a
-- crash or a hang names the program
local TRACE = os.getenv("LAZYLUA_FUZZ_TRACE")

local families = {}
for _, f in ipairs(FAMILIES) do
  if not ONLY or ONLY == f.name then families[#families + 1] = f end
end
assert(#families > 0, "no fuzz family named " .. tostring(ONLY))

local mode = tensor.is_eager() and "eager" or
             ("lazy, LAZYLUA_COMPILE=" .. (os.getenv("LAZYLUA_COMPILE") or "background"))
local before = tensor.is_eager()
local counts = {steps = 0, errors_kept = 0}
for i = 1, PROGRAMS do
  local seed = SEED + i - 1
  math.randomseed(seed)
  local family = families[seed % #families + 1]
  counts[family.name] = (counts[family.name] or 0) + 1
  if TRACE then io.stderr:write("fuzz: seed ", seed, "\n") end
  h.test(string.format("%s program, seed %d", family.name, seed), function()
    tensor.set_eager(true)
    local generated, program = pcall(family.generate, seed)
    tensor.set_eager(before)
    tensor.mark_step()
    if not generated then
      print(string.format("FUZZ FAIL seed=%d family=%s (generation)", seed, family.name))
      error(string.format("generating the %s program of seed %d failed: %s", family.name, seed,
                          tostring(program)), 0)
    end
    counts.steps = counts.steps + #program.steps
    counts.errors_kept = counts.errors_kept + (program.errors_kept or 0)
    if VERBOSE then print(program:text()) end
    local eager = fc.replay(program, true)
    local lazy = fc.replay(program, before)
    tensor.set_eager(before)
    collectgarbage()
    local ok, msg
    if eager.error then
      -- generation ran these steps eagerly: a replay that fails is a bug too
      ok, msg = false, "the eager replay failed: " .. eager.error
    else
      ok, msg = fc.compare(program, eager, lazy)
    end
    if not ok then
      print(string.format("FUZZ FAIL seed=%d family=%s mode=%s", seed, family.name, mode))
      error(string.format("%s\n%s\nreplay: cd tests/lua && LAZYLUA_FUZZ_SEED=%d " ..
                          "LAZYLUA_FUZZ_PROGRAMS=1 [LAZYLUA_COMPILE=sync] lazylua %s",
                          msg, program:text(), seed, "test_fuzz_programs.lua"), 0)
    end
  end)
end
tensor.set_eager(before)

h.test("the programs covered every family", function()
  if PROGRAMS < 3 * #families then return end
  for _, f in ipairs(families) do
    assert((counts[f.name] or 0) >= PROGRAMS // #families, f.name .. ": " .. tostring(counts[f.name]))
  end
  -- programs are not trivially short
  assert(counts.steps >= 8 * PROGRAMS, "only " .. counts.steps .. " steps")
end)

print(string.format("fuzz: %d programs from seed %d (%s), %d steps, %d expected errors", PROGRAMS,
                    SEED, mode, counts.steps, counts.errors_kept))
h.done("test_fuzz_programs")
