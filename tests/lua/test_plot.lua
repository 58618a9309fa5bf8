-- test_plot.lua - plot.sparkline's exact characters, and plot.svg /
-- plot.line_chart: well-formed XML (checked by a small parser here, and by
-- xmllint when installed) with one polyline or dot per run of finite points.
local h = dofile("helpers.lua")
local plot = require "plot"

h.test("sparkline: exact characters", function()
  assert(plot.sparkline({1, 2, 3, 4, 5, 6, 7, 8}) == "▁▂▃▄▅▆▇█")
  -- levels round to the nearest eighth: (v - 0) / 7 * 7 for 0..7, and 3.5 -> ▅
  assert(plot.sparkline({0, 7, 3.5, 3.4}) == "▁█▅▄", plot.sparkline({0, 7, 3.5, 3.4}))
  assert(plot.sparkline({5, 5, 5}) == "▄▄▄", "a constant series is mid-height")
  assert(plot.sparkline({1, 0 / 0, 3, math.huge, 2}) == "▁ █ ▅", "non-finite values are gaps")
  assert(plot.sparkline({}) == "")
  assert(plot.sparkline(tensor.new({3.0, 1.0, 2.0})) == "█▁▅", "1-D tensors work")
  h.err(function() plot.sparkline({1, "x"}) end, "values[2] is a string, not a number")
  h.err(function() plot.sparkline(tensor.zeros(2, 2)) end, "must be a 1-D tensor")
  h.err(function() plot.sparkline(5) end, "must be a list of numbers or a 1-D tensor")
end)

-- A minimal XML well-formedness check: every tag closes in order, attributes
-- are quoted, only the five predefined entities appear. Returns the element
-- names in document order.
local function parse_xml(text)
  local elements, stack = {}, {}
  local position = 1
  text = text:gsub("^<%?xml[^?]*%?>%s*", "")
  while position <= #text do
    local open_at = text:find("<", position, true)
    local chunk = text:sub(position, (open_at or #text + 1) - 1)
    for entity in chunk:gmatch("&([^;]*);") do
      assert(({amp = 1, lt = 1, gt = 1, quot = 1, apos = 1})[entity], "unknown entity &" .. entity)
    end
    assert(not chunk:gsub("&%a+;", ""):find("[&<>]"), "bare & or > in text: " .. chunk)
    if not open_at then break end
    local close_at = assert(text:find(">", open_at, true), "unterminated tag")
    local tag = text:sub(open_at + 1, close_at - 1)
    if tag:sub(1, 1) == "/" then
      local name = tag:sub(2)
      assert(stack[#stack] == name, "closing </" .. name .. "> does not match <" ..
             tostring(stack[#stack]) .. ">")
      stack[#stack] = nil
    else
      local self_closing = tag:sub(-1) == "/"
      if self_closing then tag = tag:sub(1, -2) end
      local name, rest = tag:match("^([%a_][%w_:%-]*)(.*)$")
      assert(name, "bad tag <" .. tag .. ">")
      local leftover = rest:gsub('%s+[%a_][%w_:%-]*="[^"<]*"', "")
      assert(leftover:match("^%s*$"), "bad attributes in <" .. tag .. ">")
      elements[#elements + 1] = name
      if not self_closing then stack[#stack + 1] = name end
    end
    position = close_at + 1
  end
  assert(#stack == 0, "unclosed <" .. tostring(stack[#stack]) .. ">")
  return elements
end

local function count(list, name)
  local n = 0
  for _, v in ipairs(list) do if v == name then n = n + 1 end end
  return n
end

h.test("svg: series, gaps, single points, constant series", function()
  local text = plot.svg({
    {name = "loss <train>", values = {2.3, 1.1, 0.7, 0 / 0, 0.5, 0.45, 0.4}},
    {name = "accuracy & more", x = {1, 4, 7}, values = {0.5, 0.8, 0.87}},
    {name = "one point", values = {0.9}},
    {name = "constant", values = {0.8, 0.8, 0.8}},
  }, {title = "Fashion <MNIST> & co", x_label = "epoch", y_label = "value"})
  local elements = parse_xml(text)
  assert(elements[1] == "svg")
  -- loss: two runs split by the NaN; accuracy: one; constant: one; one point: a dot
  assert(count(elements, "polyline") == 4, "polylines: " .. count(elements, "polyline"))
  assert(count(elements, "circle") == 1)
  local runs = {}
  for points in text:gmatch('<polyline[^>]-points="([^"]*)"') do
    local n = 0
    for _ in points:gmatch("[%d.-]+,[%d.-]+") do n = n + 1 end
    runs[#runs + 1] = n
  end
  h.eq(runs, {3, 3, 3, 3})
  assert(text:find("Fashion &lt;MNIST&gt; &amp; co", 1, true), "title escaped")
  assert(text:find(">loss &lt;train&gt;</text>", 1, true), "legend entry escaped")
  assert(text:find(">accuracy &amp; more</text>", 1, true))
  -- the y data spans 0.4 .. 2.3: ticks every 0.5, from 0.5 to 2.0
  for _, label in ipairs({"0.5", "1.0", "1.5", "2.0"}) do
    assert(text:find(">" .. label .. "</text>", 1, true), "tick label " .. label)
  end
  assert(not text:find(">2.5</text>", 1, true), "no tick beyond the data")
  -- the highest point (2.3) sits at the top of the plot area, the lowest at the bottom
  local first = text:match('points="[%d.]+,([%d.]+)')
  assert(math.abs(tonumber(first) - 40) < 0.01, "top of the plot area: " .. first)
end)

h.test("svg: degenerate inputs still give a valid chart", function()
  for _, series in ipairs({
    {},
    {{name = "empty", values = {}}},
    {{name = "nan only", values = {0 / 0, math.huge}}},
    {{name = "zeros", values = {0, 0}}},
    {{name = "single", values = {1e-9}}},
    {{name = "huge", values = {1e12, 2e12, -3e12}}},
  }) do
    local elements = parse_xml(plot.svg(series))
    assert(elements[1] == "svg")
  end
  h.err(function() plot.svg({{values = {1}, x = {1, 2}}}) end, "has 2 x values for 1 values")
  h.err(function() plot.svg({{values = "no"}}) end, "series[1].values must be a list")
  h.err(function() plot.svg("no") end, "series must be a list")
end)

h.test("line_chart writes the file; xmllint agrees it is well-formed", function()
  local path = os.tmpname()
  plot.line_chart(path, {{name = "loss", values = tensor.new({3.0, 2.0, 1.5})}}, {title = "t"})
  local f = assert(io.open(path, "r"))
  local text = f:read("a")
  f:close()
  assert(text == plot.svg({{name = "loss", values = {3.0, 2.0, 1.5}}}, {title = "t"}))
  if os.execute("command -v xmllint > /dev/null 2>&1") then
    assert(os.execute("xmllint --noout " .. path), "xmllint rejects the SVG")
  end
  os.remove(path)
  h.err(function() plot.line_chart("/nonexistent/dir/x.svg", {}) end, "cannot write")
end)

h.done("test_plot")
