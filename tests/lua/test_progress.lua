-- test_progress.lua - the progress bar on a terminal keeps to one line: each
-- redraw is "\r", a line at most width - 1 columns wide, then
-- clear-to-end-of-line, whatever the width, description and postfix; the
-- width comes from opts.width or $COLUMNS (the pty case, TIOCGWINSZ, is
-- tests/cli/test_progress_terminal.sh).
local h = dofile("helpers.lua")
local progress = require "lazylua.progress"

-- A stream that keeps what is written.
local function capture()
  local parts = {}
  return {write = function(self, ...) for _, s in ipairs({...}) do parts[#parts + 1] = s end end,
          text = function() return table.concat(parts) end}
end

-- The redraws of a terminal bar's output: every one must be "\r" LINE
-- "\27[K", and nothing else may be written but the final "\n".
local function redraws(text)
  assert(text:sub(-1) == "\n" and not text:sub(1, -2):find("\n", 1, true),
         "one newline, at the end: " .. string.format("%q", text))
  local lines = {}
  local body = text:sub(1, -2)
  local position = 1
  while position <= #body do
    local stop = body:find("\27[K", position, true)
    assert(body:sub(position, position) == "\r" and stop, "a redraw is \\r LINE \\27[K")
    lines[#lines + 1] = body:sub(position + 1, stop - 1)
    position = stop + 3
  end
  return lines
end

-- Runs a bar of `total` steps, one second each, with a long postfix, and
-- returns its redraws.
local function run_bar(total, opts)
  local now = 0
  local out = capture()
  opts.stream, opts.terminal, opts.refresh = out, true, 0
  opts.clock = function() return now end
  local bar = progress.new(total, opts)
  for i = 1, total do
    now = now + 1
    bar:set_postfix{loss = 1 / i, accuracy = 0.5 + i / 1000, phase = "warm-up"}
    bar:update()
  end
  bar:close()
  return redraws(out:text())
end

h.test("every redraw fits width - 1, at any width", function()
  for _, width in ipairs({200, 100, 80, 60, 45, 30, 20, 10, 2}) do
    for _, description in ipairs({"", "epoch 12 of 40", "époque 3 — entraînement"}) do
      local lines = run_bar(25, {width = width, description = description})
      assert(#lines == 26, "a redraw per step and one at close: " .. #lines)
      for _, line in ipairs(lines) do
        assert(utf8.len(line) <= width - 1,
               string.format("width %d: %d columns: %s", width, utf8.len(line), line))
      end
      -- unknown totals too
      for _, line in ipairs(run_bar(3, {width = width, description = description})) do
        assert(utf8.len(line) <= width - 1, line)
      end
    end
  end
end)

h.test("60 columns: the bar shrinks, then the postfix goes; the counts stay", function()
  local lines = run_bar(469, {width = 60, description = "epoch 1"})
  local last = lines[#lines]
  -- "epoch 1 100%|" is 13 columns and "| 469/469 [07:49<00:00, 1.0 it/s]" 33:
  -- 59 - 13 - 33 = 13 cells of bar; the postfix (52 more columns) cannot fit.
  assert(last == "epoch 1 100%|" .. string.rep("█", 13) .. "| 469/469 [07:49<00:00, 1.0 it/s]",
         last)
  -- At 140 columns the postfix fits and the bar is at its widest, 40 cells.
  local wide = run_bar(4, {width = 140})
  assert(wide[#wide]:find("|" .. string.rep("█", 40) .. "|", 1, true) and
         wide[#wide]:find("accuracy=0.504, loss=0.25, phase=warm-up]", 1, true), wide[#wide])
  -- Half-way at 60 columns, no description: " 50%|" is 5 columns and
  -- "| 1/2 [00:01<00:01, 1.0 it/s]" 29, so 25 cells, 12.5 of them full.
  local half = run_bar(2, {width = 60})[1]
  assert(half == " 50%|" .. string.rep("█", 12) .. "▌" .. string.rep(" ", 12) ..
                 "| 1/2 [00:01<00:01, 1.0 it/s]", half)
end)

local function shell_quote(text)
  return "'" .. text:gsub("'", "'\\''") .. "'"
end

h.test("the width comes from $COLUMNS when stdout is not a terminal", function()
  local program = arg[-1]
  local script = [[
local progress = require "lazylua.progress"
local bar = progress.new(3, {terminal = true, refresh = 0, description = "columns"})
for i = 1, 3 do bar:set_postfix{note = string.rep("x", 50)}; bar:update() end
bar:close()]]
  for _, columns in ipairs({60, 35}) do
    local command = string.format("COLUMNS=%d LAZYLUA_PROGRESS=1 %s -e %s", columns,
                                  shell_quote(program), shell_quote(script))
    local pipe = assert(io.popen(command, "r"))
    local text = pipe:read("a")
    assert(pipe:close(), command)
    local lines = redraws(text)
    assert(#lines == 4, #lines)
    for _, line in ipairs(lines) do
      assert(utf8.len(line) <= columns - 1, columns .. ": " .. line)
    end
    -- The width was used, not the default 80: the last line fills it.
    assert(utf8.len(lines[4]) >= columns - 12, columns .. ": " .. lines[4])
  end
end)

h.test("bad widths fall back to 80", function()
  local lines = run_bar(2, {width = 0})
  for _, line in ipairs(lines) do assert(utf8.len(line) <= 79, line) end
end)

h.done("test_progress")
