-- progress.lua - progress display for long loops (the DataLoader uses it).
--
--   local progress = require "progress"
--   local bar = progress.new(#items, {description = "epoch 1"})
--   for i = 1, #items do work(i); bar:set_postfix{loss = l}; bar:update() end
--   bar:close()
--
-- On a terminal: one line redrawn in place (at most every `refresh` seconds)
--   epoch 1  45%|██████████▌             | 212/469 [00:03<00:04, 62.1 it/s, loss=0.352]
-- never wider than the terminal's width - 1 (so it never wraps, and "\r"
-- plus clear-to-end-of-line redraws it on one line): the width is read at
-- every redraw (TIOCGWINSZ, then $COLUMNS, then 80); the bar shrinks first,
-- then the postfix goes, then the line is cut.
-- Otherwise (a pipe, a log file): a plain line at every 10% of the total
--   epoch 1: 47/469 (10%), 62.1 it/s, elapsed 00:01, eta 00:07, loss=0.352
-- LAZYLUA_PROGRESS=0 in the environment, or {enabled = false}, turns it off.
local native = require "stdlib.native"
local options_check = require("lazylua.options").check
local tensor = require "tensor"

local progress = {}

local Bar = {}
Bar.__index = Bar

-- Whether the environment allows progress output at all.
-- Seconds on a monotonic clock (for timing loops: differences only).
progress.now = native.monotonic_seconds

-- os.getenv, or nil where there is none (an embedding sandbox).
local function getenv(name)
  return os and os.getenv and os.getenv(name)
end

function progress.enabled_by_environment()
  local setting = getenv("LAZYLUA_PROGRESS")
  return not (setting == "0" or setting == "false" or setting == "off")
end

-- mm:ss, or h:mm:ss past an hour; "?" when unknown.
function progress.format_duration(seconds)
  if seconds == nil or seconds ~= seconds or seconds == math.huge or seconds < 0 then
    return "?"
  end
  local total = math.floor(seconds + 0.5)
  local hours, minutes, secs = total // 3600, total % 3600 // 60, total % 60
  if hours > 0 then return string.format("%d:%02d:%02d", hours, minutes, secs) end
  return string.format("%02d:%02d", minutes, secs)
end

local function format_rate(count, elapsed)
  if elapsed <= 0 or count == 0 then return "? it/s" end
  local rate = count / elapsed
  if rate >= 1 then return string.format("%.1f it/s", rate) end
  return string.format("%.2f s/it", 1 / rate)
end

local function format_value(value)
  if tensor.is_tensor(value) then value = value:item() end  -- syncs only when drawn
  if math.type(value) == "float" then return string.format("%.4g", value) end
  return tostring(value)
end

-- opts: description, enabled, terminal (default: is stdout a terminal),
-- stream (anything with :write; default io.stdout), width (columns),
-- refresh (seconds between terminal redraws, 0.1), every (fraction of the
-- total between plain lines, 0.1), clock (a function giving seconds).
progress.option_names = {"description", "enabled", "terminal", "stream", "width", "refresh", "every", "clock"}

function progress.new(total, opts)
  opts = options_check("progress.new", opts, progress.option_names, 2)
  if total ~= nil and (math.type(total) ~= "integer" or total < 0) then
    error("progress.new: total must be a non-negative integer or nil", 2)
  end
  local self = setmetatable({}, Bar)
  self.total = total
  self.count = 0
  self.description = opts.description or ""
  -- An embedding sandbox has no io: without a stream the bar stays silent.
  local stdout = io and io.stdout
  self.stream = opts.stream or stdout
  self.clock = opts.clock or native.monotonic_seconds
  self.enabled = opts.enabled ~= false and self.stream ~= nil and
                 progress.enabled_by_environment()
  if opts.terminal ~= nil then
    self.terminal = opts.terminal
  else
    self.terminal = stdout ~= nil and self.stream == stdout and native.isatty(1)
  end
  self.fixed_width = opts.width
  self.refresh = opts.refresh or 0.1
  self.every = opts.every or 0.1
  self.postfix = {}
  self.start = self.clock()
  self.last_draw = -math.huge
  self.plain_step = 1  -- the next multiple of `every` that gets a plain line
  self.closed = false
  return self
end

-- Fields shown after the rate, in name order: bar:set_postfix{loss = 0.35}.
-- Values may be numbers, strings or tensors (a tensor is read only when the
-- line is drawn, so a lazy loss does not force a sync every step).
function Bar:set_postfix(fields)
  self.postfix = fields or {}
end

function Bar:postfix_text()
  local names = {}
  for name in pairs(self.postfix) do names[#names + 1] = tostring(name) end
  table.sort(names)
  local parts = {}
  for i, name in ipairs(names) do
    parts[i] = name .. "=" .. format_value(self.postfix[name])
  end
  return table.concat(parts, ", ")
end

-- Columns of the terminal: opts.width, the terminal's own size, $COLUMNS,
-- or 80. Asked at each redraw, so a resized window is followed.
function Bar:columns()
  local width = self.fixed_width or native.terminal_width() or tonumber(getenv("COLUMNS"))
  if math.type(width) == "float" then width = math.floor(width) end
  if width == nil or width < 1 then width = 80 end
  return width
end

-- Columns `text` takes (one per UTF-8 character; bytes if not UTF-8).
local function display_width(text)
  return utf8.len(text) or #text
end

-- `text` cut to at most `columns` columns.
local function cut(text, columns)
  if display_width(text) <= columns then return text end
  if columns <= 0 then return "" end
  if not utf8.len(text) then return text:sub(1, columns) end
  return text:sub(1, utf8.offset(text, columns + 1) - 1)
end

local EIGHTHS = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}

-- The bar itself, `cells` characters wide.
local function bar_cells(fraction, cells)
  local eighths = math.floor(fraction * cells * 8)
  local full = eighths // 8
  local text = string.rep("█", full)
  if cells > 0 and full < cells then
    text = text .. EIGHTHS[eighths % 8 + 1] .. string.rep(" ", cells - full - (eighths % 8 > 0 and 1 or 0))
  end
  return text
end

-- The terminal line, at most `columns` - 1 columns wide (the last column
-- stays free: a terminal that wraps on it would stack the redraws).
function Bar:terminal_line(columns)
  local limit = (columns or self:columns()) - 1
  local elapsed = self.clock() - self.start
  local postfix = self:postfix_text()
  local rate = format_rate(self.count, elapsed)
  local prefix = self.description ~= "" and self.description .. " " or ""
  local with_postfix = postfix ~= "" and ", " .. postfix or ""
  if not self.total then
    local line = string.format("%s%d [%s, %s%s]", prefix, self.count,
                               progress.format_duration(elapsed), rate, with_postfix)
    return cut(line, limit)
  end
  local fraction = self.total > 0 and math.min(self.count / self.total, 1) or 1
  local eta = self.count > 0 and elapsed / self.count * (self.total - self.count) or nil
  local function right_part(extra)
    return string.format("| %d/%d [%s<%s, %s%s]", self.count, self.total,
                         progress.format_duration(elapsed), progress.format_duration(eta), rate,
                         extra)
  end
  local left = string.format("%s%3d%%|", prefix, math.floor(fraction * 100))
  local right = right_part(with_postfix)
  local room = limit - display_width(left) - display_width(right)
  if room < 10 and with_postfix ~= "" then
    -- The bar matters more than the postfix on a narrow terminal.
    right = right_part("")
    room = limit - display_width(left) - display_width(right)
  end
  local cells = math.min(40, room)
  if cells < 10 then cells = math.max(0, math.min(10, room)) end
  return cut(left .. bar_cells(fraction, cells) .. right, limit)
end

function Bar:plain_line()
  local elapsed = self.clock() - self.start
  local postfix = self:postfix_text()
  local prefix = self.description ~= "" and self.description .. ": " or ""
  local text
  if self.total then
    local percent = self.total > 0 and math.floor(self.count / self.total * 100) or 100
    local eta = self.count > 0 and elapsed / self.count * (self.total - self.count) or nil
    text = string.format("%s%d/%d (%d%%), %s, elapsed %s, eta %s", prefix, self.count, self.total,
                         percent, format_rate(self.count, elapsed),
                         progress.format_duration(elapsed), progress.format_duration(eta))
  else
    text = string.format("%s%d, %s, elapsed %s", prefix, self.count,
                         format_rate(self.count, elapsed), progress.format_duration(elapsed))
  end
  return text .. (postfix ~= "" and ", " .. postfix or "")
end

function Bar:draw_terminal()
  self.stream:write("\r", self:terminal_line(), "\27[K")
  if self.stream.flush then self.stream:flush() end
  self.last_draw = self.clock()
end

function Bar:write_plain()
  self.stream:write(self:plain_line(), "\n")
  if self.stream.flush then self.stream:flush() end
  self.last_plain_count = self.count
end

-- Marks `n` more items done (default 1) and redraws when it is time.
function Bar:update(n)
  if self.closed then return end
  self.count = self.count + (n or 1)
  if not self.enabled then return end
  if self.terminal then
    if self.clock() - self.last_draw >= self.refresh or self.count == self.total then
      self:draw_terminal()
    end
  elseif self.total and self.total > 0 then
    -- one line each time the count crosses a multiple of `every` * total
    local crossed = false
    while self.plain_step * self.every <= 1 + 1e-9 and
          self.count >= math.ceil(self.plain_step * self.every * self.total - 1e-9) do
      self.plain_step = self.plain_step + 1
      crossed = true
    end
    if crossed then self:write_plain() end
  end
end

-- Ends the display: the final state stays on screen. Safe to call twice.
function Bar:close()
  if self.closed then return end
  self.closed = true
  if not self.enabled then return end
  if self.terminal then
    self:draw_terminal()
    self.stream:write("\n")
  elseif self.last_plain_count ~= self.count then
    self:write_plain()
  end
end

return progress
