-- test_explain.lua - tensor.explain(), tensor.report() and tensor.pending():
-- each kind of recompile a user meets is made on purpose at a known line,
-- and the explanation must name the cause, the lines on both sides and the
-- values that differ. Expected lines come from Lua's own debug.getinfo,
-- expected values from the script's own numbers. In eager mode nothing is
-- recorded: no graphs, no explanations.
local h = dofile("helpers.lua")
local EAGER = tensor.is_eager()

local function line_here() return debug.getinfo(2, "l").currentline end
local function line_of(place) return tonumber(place:match(":(%d+)$")) end

-- The explanations made since `before` explanations existed (tensor.explain
-- keeps the last 32).
local function explanations_since(count_before)
  local all = tensor.explain()
  local new = {}
  for k = count_before + 1, #all do new[#new + 1] = all[k] end
  return new
end

-- The explanations made, which must be `count` with `reason`; none in
-- eager mode (then nil: the caller stops).
local function explained(count, reason)
  local e = tensor.explain()
  if EAGER then
    assert(#e == 0, "eager mode records no graphs")
    return nil
  end
  assert(#e == count, string.format("%d explanations, expected %d", #e, count))
  for _, x in ipairs(e) do h.eq(x.reason, reason) end
  return e
end

local function fresh()
  tensor.mark_step()
  tensor.reset_metrics()
  assert(#tensor.explain() == 0, "reset_metrics clears the explanations")
end

h.test("a last short batch: an input's shape changed", function()
  fresh()
  local X = tensor.new(h.map({{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}}, function(v) return v end))
  tensor.mark_step()
  local w = tensor.ones(2, 1)
  local batch_line, step_line
  for first = 1, 5, 2 do -- batches of 2, 2, then 1
    local x = X:narrow(1, first, math.min(2, 5 - first + 1))
    -- A view enters the graph, and gets its line, where it is first used.
    w = w - x:t():matmul(x:matmul(w)) * 0.001; batch_line = line_here()
    tensor.mark_step(); step_line = line_here()
  end
  local e = explained(1, "input_shape") -- the batch of 1
  if not e then return end
  e = e[1]
  h.eq(e.cause, "barrier")
  h.eq(line_of(e.site), step_line)
  h.eq(e.graphs_at_site, 2)
  h.eq(line_of(e.new_line), batch_line)
  h.eq(line_of(e.cached_line), batch_line)
  assert(e.message:find("[1, 2]", 1, true) and e.message:find("[2, 2]", 1, true), e.message)
  assert(e.hint:find("drop_last", 1, true), e.hint)
  assert(e.text:find("the 2nd there", 1, true), e.text)
end)

h.test("a dtype changed", function()
  fresh()
  local made_line, step_line
  for k = 1, 2 do
    local x = k == 1 and tensor.ones(3) or tensor.ones(3):double(); made_line = line_here()
    local y = (x * 3):exp()
    tensor.mark_step(); step_line = line_here()
  end
  local e = explained(1, "dtype")
  if not e then return end
  h.eq(line_of(e[1].site), step_line)
  assert(e[1].message:find("f64", 1, true) and e[1].message:find("f32", 1, true), e[1].message)
end)

h.test("0 and 1 are baked constants, other numbers inputs", function()
  fresh()
  local w = tensor.ones(4)
  local scale_line
  for scale = 0, 3 do -- 0 and 1 are constants; 2 and 3 are the same graph
    local y = w * scale; scale_line = line_here()
    tensor.mark_step()
  end
  local e = explained(2, "constant") -- graphs for 0, 1 and "a number"
  if not e then return end
  for _, x in ipairs(e) do h.eq(line_of(x.new_line), scale_line) end
  assert(e[1].message:find("the constant 1", 1, true), e[1].message)
  assert(e[2].message:find("a number input", 1, true), e[2].message)
end)

h.test("a branch in Lua: a different op, with both lines", function()
  fresh()
  local x = tensor.ones(5)
  local exp_line, log_line
  for k = 1, 4 do
    local y
    if k % 2 == 1 then
      y = x:exp(); exp_line = line_here()
    else
      y = x:log(); log_line = line_here()
    end
    tensor.mark_step()
  end
  local e = explained(1, "different_op") -- the second branch is new once
  if not e then return end
  h.eq(line_of(e[1].new_line), log_line)
  h.eq(line_of(e[1].cached_line), exp_line)
  assert(e[1].message:find("log", 1, true) and e[1].message:find("exp", 1, true), e[1].message)
end)

h.test("more ops on some steps", function()
  fresh()
  local x = tensor.ones(2)
  local extra_line
  for k = 1, 2 do
    local y = x * 2
    if k == 2 then y = y:neg(); extra_line = line_here() end
    tensor.mark_step()
  end
  local e = explained(1, "op_count")
  if not e then return end
  h.eq(line_of(e[1].new_line), extra_line)
end)

h.test("values still pending from the setup make the first step's graph different", function()
  fresh()
  local w = tensor.ones(4) * 3; local setup_line = line_here() -- pending until the first step
  for k = 1, 3 do
    w = (w * 0.5):tanh()
    tensor.mark_step()
  end
  local e = explained(1, "op_count")
  if not e then return end
  h.eq(line_of(e[1].cached_line), setup_line)
  assert(e[1].message:find("the cached graph also computed 1 op that this one does not", 1, true),
         e[1].message)
  assert(e[1].hint:find("call tensor.mark_step() after setting up", 1, true), e[1].hint)
end)

h.test("a tensor kept alive on some steps: other outputs", function()
  fresh()
  local x = tensor.ones(3)
  local kept = {}
  local kept_line
  for k = 1, 3 do
    local z
    do -- y is out of scope at the barrier unless the table keeps it
      local y = x + 2
      z = y * 3
      if k == 2 then kept.value = y; kept_line = line_here() end
    end
    if k == 3 then kept.value = nil end
    tensor.mark_step()
  end
  -- k = 1: z only (y is not reachable); k = 2: y too; k = 3: z only again.
  local e = explained(1, "outputs")
  if not e then return end
  h.eq(line_of(e[1].new_line), kept_line - 2) -- the value kept: y, made two lines up
  assert(e[1].hint:find("kept alive", 1, true), e[1].hint)
end)

h.test("a view of a computed value bakes its offset", function()
  fresh()
  local x = tensor.ones(6) * 2 -- pending: its views are nodes, not inputs
  local view_line
  for start = 1, 2 do
    local v = x:narrow(1, start, 3)
    tensor.sync(v + 1); view_line = line_here()
  end
  local e = explained(1, "view_offset")
  if not e then return end
  h.eq(e[1].cause, "explicit_sync")
  h.eq(line_of(e[1].new_line), view_line)
  assert(e[1].message:find("start 2", 1, true) and e[1].message:find("start 1", 1, true),
         e[1].message)
end)

h.test("report: sites with more than two graphs, lines that sync often", function()
  fresh()
  local x = tensor.ones(4)
  local item_line, step_line
  for n = 1, 5 do
    local y = tensor.ones(n) + x:narrow(1, 1, 1)
    local s = y:sum():item(); item_line = line_here()
    tensor.mark_step(); step_line = line_here()
  end
  local report = tensor.report()
  if EAGER then return h.eq(report, "") end
  assert(report:find(":" .. step_line .. " (barrier): 5 graphs", 1, true) or
         report:find(":" .. item_line .. " (item): 5 graphs", 1, true), report)
  assert(report:find(":" .. item_line .. ": item synced 5 times (once a step)", 1, true), report)
  assert(report:find("log every N steps", 1, true), report)
end)

h.test("known graphs make no explanations", function()
  fresh()
  local w = tensor.ones(3)
  for k = 1, 20 do
    w = w * 0.5 + 0.25
    tensor.mark_step()
  end
  h.eq(#tensor.explain(), 0)
  h.eq(tensor.report(), "")
end)

h.test("explain(n) and its errors", function()
  fresh()
  local x = tensor.ones(2)
  for n = 1, 4 do
    local y = tensor.ones(n) * 3
    tensor.mark_step()
  end
  local all = tensor.explain()
  h.eq(#all, EAGER and 0 or 3)
  h.eq(#tensor.explain(2), EAGER and 0 or 2)
  if not EAGER then h.eq(tensor.explain(1)[1].text, all[3].text) end
  h.eq(#tensor.explain(0), 0)
  h.err(function() tensor.explain(-1) end, "tensor.explain: n must be >= 0")
  h.err(function() tensor.explain("many") end, "number expected")
  h.still_works()
end)

h.test("pending lists the ops a barrier would run, with lines", function()
  tensor.mark_step()
  h.eq(#tensor.pending(), 0)
  local x = tensor.ones(2, 3)
  local y = (x * 2):sum(2); local y_line = line_here()
  local p = tensor.pending()
  if EAGER then return h.eq(#p, 0) end
  assert(#p >= 2, #p)
  local last = p[#p]
  h.eq(last.op, "sum")
  h.eq(line_of(last.line), y_line)
  h.eq(last.shape, {2})
  h.eq(last.dtype, "f32")
  tensor.mark_step()
  h.eq(#tensor.pending(), 0)
end)

-- tensor.pending lists the pending tensors' ops while it builds Lua tables,
-- and a collection then may release a pending tensor nothing else holds:
-- the list must still be right (under AddressSanitizer, reading a released
-- node fails the test).
h.test("pending holds its tensors while a collection runs during the listing", function()
  tensor.mark_step()
  local x = tensor.ones(4)
  for i = 1, 200 do local _ = x * i end -- unreferenced: garbage, but still pending until collected
  local kept = x + 1
  local pause = collectgarbage("setpause", 0) -- collect continuously while pending() allocates
  local ok, p = pcall(tensor.pending)
  collectgarbage("setpause", pause)
  assert(ok, p)
  if EAGER then return h.eq(#p, 0) end
  assert(#p >= 1 and #p <= 201, #p)
  h.eq(p[#p].op, "add")
  for _, op in ipairs(p) do assert(op.op == "mul" or op.op == "add", op.op) end
  h.check(kept, "f32", {2, 2, 2, 2})
  tensor.mark_step()
end)

h.done("test_explain")
