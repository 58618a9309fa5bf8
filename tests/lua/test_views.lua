-- test_views.lua - reshape/view/transpose/t/permute/narrow/select/t[i]/
-- squeeze/unsqueeze/expand/expand_as/flatten: shapes, values, and that views
-- share storage with their base (writes through a view reach the base, and
-- writes to the base are seen by views).
local h = dofile("helpers.lua")

local arange_list = h.counting

-- 2x3 i64 base: {{0, 1, 2}, {3, 4, 5}}
local function base() return tensor.arange(6):reshape(2, 3) end

-- reshape / view: shapes, -1 inference, varargs or a table.
h.test("reshape / view: shapes, -1 inference, varargs or a table", function()
  local t = tensor.arange(24)
  h.check(t:reshape(2, 3, 4):narrow(1, 2, 1):reshape(3, 4), "i64",
          {{12, 13, 14, 15}, {16, 17, 18, 19}, {20, 21, 22, 23}})
  h.shape(t:reshape(4, -1), {4, 6})
  h.shape(t:reshape({-1, 8}), {3, 8})
  h.shape(t:reshape(2, -1, 3), {2, 4, 3})
  h.shape(t:view(6, 4), {6, 4})
  h.shape(t:view({2, 12}), {2, 12})
  h.shape(t:view(-1), {24})
  h.shape(t:view(2, 3, -1), {2, 3, 4})
  h.check(base(), "i64", {{0, 1, 2}, {3, 4, 5}})
  h.check(base():reshape(3, 2), "i64", {{0, 1}, {2, 3}, {4, 5}})
  h.check(base():view(6), "i64", {0, 1, 2, 3, 4, 5})
  h.check(tensor.reshape(base(), 6), "i64", {0, 1, 2, 3, 4, 5})
  h.check(tensor.new({7}):reshape({}), "i64", 7)        -- to 0-dim
  h.check(tensor.new(7):reshape(1, 1), "i64", {{7}})
end)

-- reshape of a contiguous tensor is a view: writes reach the base.
h.test("reshape of a contiguous tensor is a view: writes reach th...", function()
  local t = base()
  t:reshape(6):narrow(1, 2, 3):fill_(-1)
  h.check(t, "i64", {{0, -1, -1}, {-1, 4, 5}})
  t:view(3, 2)[3] = 9
  h.check(t, "i64", {{0, -1, -1}, {-1, 9, 9}})
end)

-- reshape of a non-contiguous tensor copies: writes do not reach the base;
-- view of it is an error.
h.test("reshape of a non-contiguous tensor copies: writes do not ...", function()
  local t = base()
  local r = t:t():reshape(6)
  h.check(r, "i64", {0, 3, 1, 4, 2, 5})
  r:fill_(100)
  h.check(t, "i64", {{0, 1, 2}, {3, 4, 5}})
  h.err(function() t:t():view(6) end)
  -- a view is still possible when the strides allow it (split of a dim)
  local tt = tensor.arange(24):reshape(2, 3, 4):transpose(1, 2)     -- [3, 2, 4]
  local v = tt:view(3, 2, 2, 2)
  h.shape(v, {3, 2, 2, 2})
  v:fill_(0)
  h.check(tt:sum(), "i64", 0)
end)

-- transpose, t(), permute.
h.test("transpose, t(), permute", function()
  local t = base()
  h.check(t:t(), "i64", {{0, 3}, {1, 4}, {2, 5}})
  h.check(t:transpose(1, 2), "i64", {{0, 3}, {1, 4}, {2, 5}})
  h.check(t:transpose(-1, -2), "i64", {{0, 3}, {1, 4}, {2, 5}})
  h.check(t:transpose(2, 2), "i64", {{0, 1, 2}, {3, 4, 5}})
  h.check(tensor.t(t), "i64", {{0, 3}, {1, 4}, {2, 5}})
  h.check(tensor.transpose(t, 1, 2), "i64", {{0, 3}, {1, 4}, {2, 5}})
  h.check(t:t():t(), "i64", {{0, 1, 2}, {3, 4, 5}})
  -- 3-D permute against Lua loops
  local v = {}
  for i = 1, 2 do
    v[i] = {}
    for j = 1, 3 do
      v[i][j] = {}
      for k = 1, 4 do v[i][j][k] = 100 * i + 10 * j + k end
    end
  end
  local x = tensor.new(v)
  local p = x:permute(2, 3, 1)                 -- [3, 4, 2]: p[j][k][i] = v[i][j][k]
  h.shape(p, {3, 4, 2})
  local want = {}
  for j = 1, 3 do
    want[j] = {}
    for k = 1, 4 do
      want[j][k] = {}
      for i = 1, 2 do want[j][k][i] = v[i][j][k] end
    end
  end
  h.check(p, "i64", want)
  h.check(x:permute({2, 3, 1}), "i64", want)
  h.check(x:permute(-2, -1, -3), "i64", want)
  h.check(x:permute(1, 2, 3), "i64", v)
  local want13 = {}
  for k = 1, 4 do
    want13[k] = {}
    for j = 1, 3 do
      want13[k][j] = {}
      for i = 1, 2 do want13[k][j][i] = v[i][j][k] end
    end
  end
  h.check(x:transpose(1, 3), "i64", want13)
  h.check(x:permute(3, 2, 1), "i64", want13)
end)

-- narrow, select, t[i], t[{i, j}] (1-based, negative from the end).
h.test("narrow, select, t[i], t[{i, j}] (1-based, negative from t...", function()
  local t = base()
  h.check(t:narrow(2, 2, 2), "i64", {{1, 2}, {4, 5}})
  h.check(t:narrow(1, 2, 1), "i64", {{3, 4, 5}})
  h.check(t:narrow(-1, 1, 1), "i64", {{0}, {3}})
  h.check(t:narrow(2, 1, 0), "i64", {{}, {}}, nil, {2, 0})
  h.check(t:select(1, 2), "i64", {3, 4, 5})
  h.check(t:select(2, 1), "i64", {0, 3})
  h.check(t:select(2, -1), "i64", {2, 5})
  h.check(t:select(1, -2), "i64", {0, 1, 2})
  h.check(t[1], "i64", {0, 1, 2})
  h.check(t[2], "i64", {3, 4, 5})
  h.check(t[-1], "i64", {3, 4, 5})
  h.check(t[2][3], "i64", 5)                   -- a 0-dim tensor for a 1-D t
  assert(t[2][3]:dim() == 0)
  assert(t[2][3]:item() == 5)
  h.check(t[{2, 3}], "i64", 5)
  h.check(t[{1}], "i64", {0, 1, 2})
  h.check(t[{-1, -3}], "i64", 3)
  h.check(tensor.select(t, 1, 1), "i64", {0, 1, 2})
  h.check(tensor.narrow(t, 2, 3, 1), "i64", {{2}, {5}})
  -- chains
  h.check(t:t()[3], "i64", {2, 5})
  h.check(t:narrow(2, 2, 2):t()[2], "i64", {2, 5})
  local x = tensor.arange(24):reshape(2, 3, 4)
  h.check(x[2][3], "i64", {20, 21, 22, 23})
  h.check(x[{2, 3, 4}], "i64", 23)
  h.check(x:select(3, 2), "i64", {{1, 5, 9}, {13, 17, 21}})
  h.check(x:narrow(3, 2, 2):select(1, 1), "i64", {{1, 2}, {5, 6}, {9, 10}})
end)

-- squeeze, unsqueeze.
h.test("squeeze, unsqueeze", function()
  local t = tensor.zeros(1, 3, 1, 2)
  h.shape(t:squeeze(), {3, 2})
  h.shape(t:squeeze(1), {3, 1, 2})
  h.shape(t:squeeze(3), {1, 3, 2})
  h.shape(t:squeeze(-2), {1, 3, 2})
  h.shape(t:squeeze(2), {1, 3, 1, 2})          -- extent 3: unchanged, as PyTorch
  h.shape(tensor.zeros(1, 1):squeeze(), {})
  local u = tensor.new({1, 2, 3})
  h.check(u:unsqueeze(1), "i64", {{1, 2, 3}})
  h.check(u:unsqueeze(2), "i64", {{1}, {2}, {3}})
  h.check(u:unsqueeze(-1), "i64", {{1}, {2}, {3}})
  h.check(u:unsqueeze(-2), "i64", {{1, 2, 3}})
  h.shape(tensor.zeros(2, 3):unsqueeze(3), {2, 3, 1})
  h.shape(tensor.zeros(2, 3):unsqueeze(2), {2, 1, 3})
  h.shape(tensor.zeros(2, 3):unsqueeze(-1), {2, 3, 1})
  h.check(tensor.new(5):unsqueeze(1), "i64", {5})
  h.check(tensor.unsqueeze(u, 1):squeeze(1), "i64", {1, 2, 3})
  h.check(tensor.squeeze(tensor.new({{4}})), "i64", 4)
end)

-- expand, expand_as: broadcast views (stride 0).
h.test("expand, expand_as: broadcast views (stride 0)", function()
  local r = tensor.new({1, 2, 3})
  h.check(r:expand(2, 3), "i64", {{1, 2, 3}, {1, 2, 3}})
  h.check(r:expand({2, 3}), "i64", {{1, 2, 3}, {1, 2, 3}})
  local c = tensor.new({{1}, {2}})
  h.check(c:expand(2, 4), "i64", {{1, 1, 1, 1}, {2, 2, 2, 2}})
  h.check(c:expand(-1, 3), "i64", {{1, 1, 1}, {2, 2, 2}})
  h.check(c:expand(3, -1, 2), "i64", {{{1, 1}, {2, 2}}, {{1, 1}, {2, 2}}, {{1, 1}, {2, 2}}})
  h.check(r:expand_as(tensor.zeros(2, 3)), "i64", {{1, 2, 3}, {1, 2, 3}})
  h.check(tensor.new(7):expand(2), "i64", {7, 7})
  h.check(tensor.expand(r, 1, 3), "i64", {{1, 2, 3}})
  -- expanded operands compute like their materialized form
  h.check(c:expand(2, 3) + r, "i64", {{2, 3, 4}, {3, 4, 5}})
  h.check(c:expand(2, 3):sum(1), "i64", {3, 3, 3})
  h.check(c:expand(2, 3):contiguous(), "i64", {{1, 1, 1}, {2, 2, 2}})
  -- the base sees writes to it through an earlier expand
  local b = tensor.new({1.0, 2.0})
  local e = b:expand(3, 2)
  b:add_(10)
  h.check(e, "f32", {{11, 12}, {11, 12}, {11, 12}})
end)

-- flatten([start, end]).
h.test("flatten([start, end])", function()
  local x = tensor.arange(24):reshape(2, 3, 4)
  h.shape(x:flatten(), {24})
  h.shape(x:flatten(2), {2, 12})
  h.shape(x:flatten(1, 2), {6, 4})
  h.shape(x:flatten(2, 3), {2, 12})
  h.shape(x:flatten(-2, -1), {2, 12})
  h.shape(x:flatten(2, 2), {2, 3, 4})
  h.check(x:flatten(1, 2)[5], "i64", {16, 17, 18, 19})
  local want = {}
  for i = 0, 23 do want[i + 1] = i end
  h.check(x:flatten(), "i64", want)
  h.check(tensor.flatten(x), "i64", want)
  -- flattening a transposed tensor follows the view's order
  h.check(base():t():flatten(), "i64", {0, 3, 1, 4, 2, 5})
  h.check(tensor.new(3):flatten(), "i64", {3})
end)

---------------------------------------------------------------------------
-- Writes through views reach the base.
---------------------------------------------------------------------------
h.test("-- narrow", function()
  -- narrow
  local t = tensor.new(arange_list(3, 4))
  t:narrow(2, 2, 2):fill_(0)
  h.check(t, "i64", {{0, 0, 0, 3}, {4, 0, 0, 7}, {8, 0, 0, 11}})
  -- t[i] = number sets a row
  t[2] = 5
  h.check(t, "i64", {{0, 0, 0, 3}, {5, 5, 5, 5}, {8, 0, 0, 11}})
  -- t:t():add_(1)
  t:t():add_(1)
  h.check(t, "i64", {{1, 1, 1, 4}, {6, 6, 6, 6}, {9, 1, 1, 12}})
  -- select/transpose chains
  t:transpose(1, 2):select(1, 1):fill_(-7)           -- column 1
  h.check(t, "i64", {{-7, 1, 1, 4}, {-7, 6, 6, 6}, {-7, 1, 1, 12}})
  t:select(2, 4):mul_(10)                            -- column 4
  h.check(t, "i64", {{-7, 1, 1, 40}, {-7, 6, 6, 60}, {-7, 1, 1, 120}})
  t:t():narrow(1, 2, 2):select(2, 3):fill_(0)        -- t[3][2..3]
  h.check(t, "i64", {{-7, 1, 1, 40}, {-7, 6, 6, 60}, {-7, 0, 0, 120}})
  t[1][2] = 99                                       -- t[i] is a view: its write reaches t
  h.check(t, "i64", {{-7, 99, 1, 40}, {-7, 6, 6, 60}, {-7, 0, 0, 120}})
  t[{2, 3}]:fill_(33)
  h.check(t, "i64", {{-7, 99, 1, 40}, {-7, 6, 33, 60}, {-7, 0, 0, 120}})
  t:flatten():narrow(1, 1, 2):zero_()
  h.check(t, "i64", {{0, 0, 1, 40}, {-7, 6, 33, 60}, {-7, 0, 0, 120}})
  t:unsqueeze(1)[1][3]:fill_(1)
  h.check(t, "i64", {{0, 0, 1, 40}, {-7, 6, 33, 60}, {1, 1, 1, 1}})
  h.check(t:view(2, 6)[2], "i64", {33, 60, 1, 1, 1, 1})
  t:view(2, 6)[2]:narrow(1, 1, 2):copy_(tensor.new({5, 6}))   -- elements 7 and 8 of t
  h.check(t, "i64", {{0, 0, 1, 40}, {-7, 6, 5, 6}, {1, 1, 1, 1}})
  t:permute(2, 1)[4]:fill_(2)                        -- column 4 again
  h.check(t, "i64", {{0, 0, 1, 2}, {-7, 6, 5, 2}, {1, 1, 1, 2}})
  t:squeeze():narrow(1, 1, 1):squeeze(1):add_(3)     -- row 1
  h.check(t, "i64", {{3, 3, 4, 5}, {-7, 6, 5, 2}, {1, 1, 1, 2}})
end)

-- A write through a view of a view of a 3-D base, then a read of another view.
h.test("A write through a view of a view of a 3-D base, then a re...", function()
  local x = tensor.zeros(2, 3, 4)
  x:permute(3, 1, 2)[2]:narrow(2, 2, 2):fill_(1)     -- x[i][j][2] for j in 2..3
  local want = {}
  for i = 1, 2 do
    want[i] = {}
    for j = 1, 3 do
      want[i][j] = {}
      for k = 1, 4 do want[i][j][k] = (k == 2 and j >= 2) and 1 or 0 end
    end
  end
  h.check(x, "f32", want)
  h.check(x:select(3, 2), "f32", {{0, 1, 1}, {0, 1, 1}})
end)

-- Views share storage: writes to the base (or a sibling view) are seen by
-- views taken earlier.
h.test("Views share storage: writes to the base (or a sibling vie...", function()
  local t = tensor.zeros(2, 3)
  local row = t[1]
  local col = t:select(2, 2)
  local tr = t:t()
  local flat = t:view(6)
  t:fill_(3)
  h.check(row, "f32", {3, 3, 3})
  h.check(col, "f32", {3, 3})
  row:fill_(5)
  h.check(col, "f32", {5, 3})
  h.check(tr, "f32", {{5, 3}, {5, 3}, {5, 3}})
  h.check(flat, "f32", {5, 5, 5, 3, 3, 3})
  tr[3]:add_(1)                                    -- column 3 of t
  h.check(t, "f32", {{5, 5, 6}, {3, 3, 4}})
  h.check(row, "f32", {5, 5, 6})
  h.check(flat, "f32", {5, 5, 6, 3, 3, 4})
  t[2] = tensor.new({7, 8, 9})
  h.check(col, "f32", {5, 8})
  h.check(flat, "f32", {5, 5, 6, 7, 8, 9})
  -- a clone does not share
  local c = t:clone()
  t:zero_()
  h.check(c, "f32", {{5, 5, 6}, {7, 8, 9}})
  h.check(row, "f32", {0, 0, 0})
end)

-- Views keep working after their base variable is gone.
h.test("Views keep working after their base variable is gone", function()
  local v
  do
    local t = tensor.arange(6):reshape(2, 3)
    v = t:t()
  end
  collectgarbage()
  h.check(v, "i64", {{0, 3}, {1, 4}, {2, 5}})
  v[1]:fill_(8)
  h.check(v, "i64", {{8, 8}, {1, 4}, {2, 5}})
end)

h.done("test_views")
