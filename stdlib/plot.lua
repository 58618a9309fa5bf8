-- plot.lua - charts without dependencies: an SVG line chart a browser opens,
-- and a one-line sparkline for the terminal.
--
--   local plot = require "plot"
--   plot.line_chart("loss.svg", {
--     {name = "train loss", values = losses},             -- x = 1, 2, 3 ...
--     {name = "test loss", x = {1, 2, 3}, values = {0.9, 0.6, 0.5}},
--   }, {title = "Fashion-MNIST", x_label = "epoch", y_label = "loss"})
--   print(plot.sparkline(losses))   --> ▇█▆▅▃▃▂▂▁▁
--
-- Values may be Lua lists or 1-D tensors. NaN and infinite values are left
-- out: the line breaks there. A run of one point is drawn as a dot.
local native = require "stdlib.native"
local options_check = require("lazylua.options").check
local tensor = require "tensor"

local plot = {}

local BLOCKS = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"}
-- Colours of matplotlib's "tab10" cycle: distinct and readable.
local COLOURS = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                 "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

local function is_finite(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
end

local function as_list(values, function_name, what)
  if tensor.is_tensor(values) then
    if values:dim() ~= 1 then
      error(string.format("%s: %s must be a 1-D tensor", function_name, what), 3)
    end
    return values:double():tolist()
  end
  if type(values) ~= "table" then
    error(string.format("%s: %s must be a list of numbers or a 1-D tensor, got %s",
                        function_name, what, type(values)), 3)
  end
  for i = 1, #values do
    if type(values[i]) ~= "number" then
      error(string.format("%s: %s[%d] is a %s, not a number", function_name, what, i,
                          type(values[i])), 3)
    end
  end
  return values
end

-- One character per value: the lowest finite value is ▁, the highest █,
-- the rest in between by rounding to the nearest of eight levels; a
-- constant series is all ▄, NaN and infinities are spaces.
function plot.sparkline(values)
  values = as_list(values, "plot.sparkline", "values")
  local low, high = math.huge, -math.huge
  for _, v in ipairs(values) do
    if is_finite(v) then
      low, high = math.min(low, v), math.max(high, v)
    end
  end
  local out = {}
  for i, v in ipairs(values) do
    if not is_finite(v) then
      out[i] = " "
    elseif high == low then
      out[i] = BLOCKS[4]
    else
      out[i] = BLOCKS[math.floor((v - low) / (high - low) * 7 + 0.5) + 1]
    end
  end
  return table.concat(out)
end

-- Tick positions for [low, high]: about `count` steps of 1, 2 or 5 times a
-- power of ten.
local function nice_ticks(low, high, count)
  local raw = (high - low) / count
  local magnitude = 10 ^ math.floor(math.log(raw, 10))
  local step = magnitude * 10
  for _, factor in ipairs({1, 2, 5, 10}) do
    if raw <= factor * magnitude then
      step = factor * magnitude
      break
    end
  end
  local ticks = {}
  local first = math.ceil(low / step - 1e-9)
  local last = math.floor(high / step + 1e-9)
  for k = first, last do ticks[#ticks + 1] = k * step end
  return ticks, step
end

local function tick_label(value, step)
  if math.abs(value) < step * 1e-6 then value = 0 end
  local digits = math.max(0, -math.floor(math.log(step, 10) + 1e-9))
  if math.abs(value) >= 1e6 or (value ~= 0 and math.abs(value) < 1e-4) then
    return string.format("%.2g", value)
  end
  return string.format("%." .. digits .. "f", value)
end

local function escape(text)
  return (tostring(text):gsub("[&<>\"']", {
    ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&apos;",
  }))
end

-- The range to draw for these values: padded when all equal, [0, 1] when
-- there are none.
local function axis_range(low, high)
  if low > high then return 0, 1 end
  if low == high then
    local pad = math.abs(low) * 0.1
    if pad == 0 then pad = 1 end
    return low - pad, high + pad
  end
  return low, high
end

-- The SVG text of a line chart. series: a list of {name =, values =, x =}
-- (x defaults to 1..#values). opts: title, x_label, y_label, width (720),
-- height (420).
local SVG_OPTIONS = {"title", "x_label", "y_label", "width", "height"}

function plot.svg(series, opts)
  opts = options_check("plot.svg", opts, SVG_OPTIONS, 2)
  if type(series) ~= "table" then
    error("plot.svg: series must be a list of {name =, values =} tables", 2)
  end
  local width, height = opts.width or 720, opts.height or 420
  local left, right, top, bottom = 70, 20, opts.title and 40 or 20, 55
  local plot_width, plot_height = width - left - right, height - top - bottom

  -- Points of each series, and the data range over all of them.
  local x_low, x_high, y_low, y_high = math.huge, -math.huge, math.huge, -math.huge
  local prepared = {}
  for index, s in ipairs(series) do
    if type(s) ~= "table" then error(string.format("plot.svg: series[%d] must be a table", index), 2) end
    options_check(string.format("plot.svg: series[%d]", index), s, {"name", "values", "x"}, 2)
    local values = as_list(s.values, "plot.svg", string.format("series[%d].values", index))
    local xs = s.x and as_list(s.x, "plot.svg", string.format("series[%d].x", index))
    if xs and #xs ~= #values then
      error(string.format("plot.svg: series[%d] has %d x values for %d values", index, #xs,
                          #values), 2)
    end
    local points = {}
    for i, y in ipairs(values) do
      local x = xs and xs[i] or i
      if is_finite(x) and is_finite(y) then
        x_low, x_high = math.min(x_low, x), math.max(x_high, x)
        y_low, y_high = math.min(y_low, y), math.max(y_high, y)
      end
      points[i] = {x, y}
    end
    prepared[index] = {name = s.name or ("series " .. index), points = points,
                       colour = COLOURS[(index - 1) % #COLOURS + 1]}
  end
  x_low, x_high = axis_range(x_low, x_high)
  y_low, y_high = axis_range(y_low, y_high)
  local function sx(x) return left + (x - x_low) / (x_high - x_low) * plot_width end
  local function sy(y) return top + (y_high - y) / (y_high - y_low) * plot_height end

  local out = {}
  local function add(...) out[#out + 1] = string.format(...) end
  add('<?xml version="1.0" encoding="UTF-8"?>\n')
  add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" ' ..
      'font-family="sans-serif" font-size="12">\n', width, height, width, height)
  add('<rect x="0" y="0" width="%d" height="%d" fill="white"/>\n', width, height)
  if opts.title then
    add('<text class="title" x="%.1f" y="24" text-anchor="middle" font-size="16">%s</text>\n',
        width / 2, escape(opts.title))
  end

  -- Grid lines and tick labels.
  local x_ticks, x_step = nice_ticks(x_low, x_high, 6)
  local y_ticks, y_step = nice_ticks(y_low, y_high, 5)
  add('<g class="grid" stroke="#e0e0e0" stroke-width="1">\n')
  for _, x in ipairs(x_ticks) do
    add('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>\n', sx(x), top, sx(x), top + plot_height)
  end
  for _, y in ipairs(y_ticks) do
    add('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>\n', left, sy(y), left + plot_width, sy(y))
  end
  add('</g>\n<g class="ticks" fill="#333">\n')
  for _, x in ipairs(x_ticks) do
    add('<text x="%.1f" y="%d" text-anchor="middle">%s</text>\n', sx(x), top + plot_height + 16,
        tick_label(x, x_step))
  end
  for _, y in ipairs(y_ticks) do
    add('<text x="%d" y="%.1f" text-anchor="end">%s</text>\n', left - 6, sy(y) + 4,
        tick_label(y, y_step))
  end
  add('</g>\n')
  add('<rect class="axes" x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>\n',
      left, top, plot_width, plot_height)
  if opts.x_label then
    add('<text x="%.1f" y="%d" text-anchor="middle">%s</text>\n', left + plot_width / 2,
        height - 12, escape(opts.x_label))
  end
  if opts.y_label then
    add('<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>\n',
        top + plot_height / 2, top + plot_height / 2, escape(opts.y_label))
  end

  -- Each series: one polyline per run of finite points, a dot for a run of one.
  for _, s in ipairs(prepared) do
    add('<g class="series" stroke="%s" fill="%s">\n', s.colour, s.colour)
    local run = {}
    local function flush()
      if #run == 1 then
        add('<circle cx="%s" r="3"/>\n', run[1]:gsub(",", '" cy="'))
      elseif #run > 1 then
        add('<polyline fill="none" stroke-width="2" points="%s"/>\n', table.concat(run, " "))
      end
      run = {}
    end
    for _, point in ipairs(s.points) do
      local x, y = point[1], point[2]
      if is_finite(x) and is_finite(y) then
        run[#run + 1] = string.format("%.2f,%.2f", sx(x), sy(y))
      else
        flush()
      end
    end
    flush()
    add('</g>\n')
  end

  -- Legend, top right inside the plot area.
  if #prepared > 0 then
    local longest = 0
    for _, s in ipairs(prepared) do longest = math.max(longest, utf8.len(s.name) or #s.name) end
    local box_width = 40 + longest * 7
    local x0 = left + plot_width - box_width - 8
    add('<g class="legend">\n<rect x="%d" y="%d" width="%d" height="%d" fill="white" ' ..
        'fill-opacity="0.85" stroke="#999"/>\n', x0, top + 8, box_width, 8 + 18 * #prepared)
    for i, s in ipairs(prepared) do
      local y = top + 8 + 18 * i - 4
      add('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>\n', x0 + 6, y - 4,
          x0 + 26, y - 4, s.colour)
      add('<text x="%d" y="%d">%s</text>\n', x0 + 32, y, escape(s.name))
    end
    add('</g>\n')
  end
  add('</svg>\n')
  return table.concat(out)
end

-- Writes plot.svg(series, opts) to `path`, through the safe writer
-- (interp/file_bytes.h: a FIFO or a device is refused, the file is whole or
-- not there). Not in an embedding sandbox, which writes no files (plot.svg
-- gives the text to the host instead).
if native.write_file then
  function plot.line_chart(path, series, opts)
    if type(path) ~= "string" then
      error("plot.line_chart: expected a file path, got " .. type(path), 2)
    end
    options_check("plot.line_chart", opts, SVG_OPTIONS, 2)
    native.write_file(path, plot.svg(series, opts), "plot.line_chart")
  end
end

return plot
