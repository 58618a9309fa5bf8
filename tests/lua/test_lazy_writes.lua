-- test_lazy_writes.lua - lazy mode is indistinguishable from eager mode for
-- in-place writes through views, aliasing, syncs and barriers in the middle
-- of a computation, record-time errors, joins, and switching modes (the ops
-- themselves are in test_lazy_differential.lua). Each
-- case runs the same Lua function with tensor.set_eager(true) and in lazy
-- mode and compares everything it returns and observes (lazy_helpers.lua).
--
-- Tolerances: those of test_lazy_differential.lua (stated in
-- lazy_helpers.lua). When the process runs under LAZYLUA_EAGER=1 both
-- halves are eager.
local h = dofile("helpers.lua")
local lh = dofile("lazy_helpers.lua")

local EXACT, EW, TRANS, F64 = lh.EXACT, lh.EW, lh.TRANS, lh.F64
local CHAIN, REDUCE, SOFTMAX = lh.CHAIN, lh.REDUCE, lh.SOFTMAX

local diff, key = lh.differ(h), lh.key

-- ---------------------------------------------------------------------------
-- In-place writes through views reach the base

diff("in-place through views reaches the base", EXACT, function()
  local r = {}
  local function base() return tensor.arange(1, 13):reshape(3, 4):float() end
  local t = base()
  t:narrow(1, 2, 2):fill_(0)
  r.narrow_fill = t
  t = base()
  t[2] = 5
  r.index_assign = t
  t = base()
  t[{2, 3}] = -1
  r.index2_assign = t
  t = base()
  t[3] = tensor.new({9, 8, 7, 6})
  r.row_assign_tensor = t
  t = base()
  t[1] = tensor.new({{1, 1, 2, 2}})   -- leading extent 1 dropped
  r.row_assign_leading1 = t
  t = base()
  t[2] = tensor.new(4.5)
  r.row_assign_scalar_tensor = t
  t = base()
  t:t():add_(1)
  r.t_add = t
  t = base()
  t:select(2, 1):mul_(3)
  r.select_mul = t
  t = base()
  t:narrow(2, 2, 2):select(1, 3):add_(100)
  r.chain_narrow_select = t
  t = base()
  t:t():narrow(1, 2, 2):fill_(-7)
  r.chain_t_narrow = t
  t = base()
  local v = t:narrow(1, 2, 2)
  local w = v:t()
  w[1] = 9
  r.view_of_view_index = t
  r.view_of_view_v = v
  t = base()
  t:view(12):narrow(1, 3, 4):zero_()
  r.view_narrow_zero = t
  t = base()
  t:flatten()[5] = 42
  r.flatten_index = t
  t = base()
  t:unsqueeze(1):mul_(2)
  r.unsqueeze_mul = t
  t = base()
  t:narrow(1, 2, 1):squeeze(1):add_(tensor.new({1, 2, 3, 4}))
  r.squeeze_add = t
  t = base()
  t:reshape(2, 6)[2]:fill_(1)   -- contiguous: reshape is a view
  r.reshape_view_write = t
  t = base()
  t:t():reshape(12):fill_(1)    -- non-contiguous: reshape copied
  r.reshape_copy_write = t
  local u = tensor.arange(24):reshape(2, 3, 4):float()
  u:permute(3, 1, 2)[2]:narrow(2, 2, 2):sub_(50)
  r.permute_index_narrow = u
  u = tensor.arange(24):reshape(2, 3, 4):float()
  u:transpose(1, 3)[{4, 2}]:copy_(tensor.new({-1, -2}))
  r.transpose_index2_copy = u
  return r
end)

diff("every in-place op through a view", TRANS, function()
  local g = lh.gen(71)
  local r = {}
  local data = g:table({3, 4}, "pos")
  local function base() return lh.make(data) end
  local other = lh.make(g:table({2}, "f"))
  for _, op in ipairs({"exp_", "log_", "sqrt_", "tanh_", "sigmoid_", "relu_", "abs_", "neg_",
                       "zero_"}) do
    local t = base()
    local view = t:t():narrow(1, 2, 2):select(2, 3)
    view[op](view)
    r[op] = t
  end
  for _, op in ipairs({"add_", "sub_", "mul_", "div_", "pow_"}) do
    local t = base()
    local view = t:narrow(2, 3, 2):select(1, 2)
    view[op](view, other)
    r[op .. " tensor"] = t
    t = base()
    t:t()[3][op](t:t()[3], 1.5)
    r[op .. " number"] = t
    t = base()
    t[op](t, t:narrow(1, 1, 1))   -- operand overlaps the target
    r[op .. " overlap"] = t
  end
  local t = base()
  t:narrow(1, 1, 2):clamp_(1, 2)
  r.clamp_ = t
  t = base()
  t:narrow(2, 1, 2):fill_(0.5)
  r.fill_ = t
  t = base()
  t:t():narrow(2, 2, 2):copy_(lh.make({{1, 2}, {3, 4}, {5, 6}, {7, 8}}))
  r.copy_ = t
  t = base()
  t:narrow(2, 1, 3):copy_(lh.make({1, 2, 3}))           -- broadcast source
  r.copy_broadcast = t
  t = base()
  t:select(1, 2):copy_(lh.make({true, false, true, false}))   -- converted source
  r.copy_convert = t
  local i = lh.make({{1, 2, 3}, {4, 5, 6}})
  i:t()[2]:add_(10)
  r.int_view = i
  r.int_bad = pcall(function() i:narrow(1, 1, 1):add_(0.5) end)
  r.returns_self = rawequal(t:add_(0), t) and rawequal(t:narrow(1, 1, 1):fill_(0):size(1), 1)
  return r
end)

diff("in-place on overlapping views, self aliasing and expanded targets", EXACT, function()
  local r = {}
  local a = tensor.arange(1, 10):reshape(3, 3):float()
  a:add_(a:t())
  r.add_transpose = a
  local b = tensor.new({1, 2, 3, 4, 5})
  b:narrow(1, 2, 4):copy_(b:narrow(1, 1, 4))
  r.shift_right = b
  local c = tensor.new({1, 2, 3, 4, 5})
  c:narrow(1, 1, 4):copy_(c:narrow(1, 2, 4))
  r.shift_left = c
  local d = tensor.arange(1, 5):float()
  d:mul_(d)
  r.square_self = d
  local e = tensor.arange(1, 7):reshape(2, 3):float()
  e[1]:add_(e[2])
  e[2]:add_(e[1])
  r.rows = e
  local f = tensor.arange(1, 4):float()
  local ok, msg = pcall(function() f:narrow(1, 1, 1):expand(3):add_(1) end)
  r.expand_error = {ok, (msg or ""):match("expand") ~= nil}
  r.f_after = f
  return r
end)

diff("writes through expanded views whose target does not overlap", EXACT, function()
  -- an expand that repeats nothing, or a selection of one copy along the
  -- expanded dim, leaves a target without shared elements: eager mode
  -- writes through it into the base
  local r = {}
  local x = tensor.new({1, 2})
  local ok = pcall(function() x:unsqueeze(1):expand(3, 2)[2]:add_(10) end)
  r.select_of_expanded = {ok, x}
  local y = tensor.new({{1}, {2}})
  ok = pcall(function() y:expand(2, 3):select(2, 3):fill_(7) end)
  r.select_column_of_expanded = {ok, y}
  local z = tensor.new({{1, 2, 3}})
  ok = pcall(function() z:expand(1, 3):mul_(2) end)
  r.identity_expand = {ok, z}
  local w = tensor.new({5.0})
  ok = pcall(function() w:expand(1):sub_(0.25) end)
  r.identity_expand_1d = {ok, w}
  local u = tensor.new({{1, 2}, {3, 4}})
  ok = pcall(function() u:expand(2, 2):flatten()[3] = 0 end)
  r.identity_expand_flatten = {ok, u}
  local v = tensor.new({1, 2, 3})
  ok = pcall(function() v:narrow(1, 2, 1):expand(4):narrow(1, 2, 1):fill_(9) end)
  r.narrow_one_of_expanded = {ok, v}
  -- an expanded view with no element at all: nothing shares memory (lazy
  -- mode, which sees the view after the unsqueeze with contiguous strides,
  -- allowed it while eager mode refused)
  local z = tensor.new({{{1}, {0}}, {{1}, {1}}}):unsqueeze(2):narrow(3, 3, 0)
  ok = pcall(function() z:expand(-1, 3, -1, 1):unsqueeze(1):copy_(z) end)
  local ok_fill = pcall(function() z:expand(-1, 3, -1, 1):fill_(1) end)
  assert(ok and ok_fill, "writing nothing through an empty expanded view was refused")
  r.empty_expanded = {ok, ok_fill, z}
  -- a real overlap is an error in both modes
  local o = tensor.new({1, 2})
  ok = pcall(function() o:unsqueeze(1):expand(3, 2):add_(1) end)
  r.overlapping = {ok, o}
  return r
end)

diff("fill_ and t[i] = v convert a fractional number to bool as ~= 0", EXACT, function()
  local r = {}
  local b = tensor.new({false, false, true})
  b:fill_(0.25)
  r.fill = b
  local c = tensor.new({{false, false}, {false, false}})
  c[1] = 0.5
  c[{2, 2}] = -0.5
  r.index = c
  local d = tensor.new({false, true})
  d:narrow(1, 1, 1):fill_(1e-3)
  r.view_fill = d
  local i = tensor.new({1, 2, 3})
  i:fill_(2.75)      -- integers truncate
  r.int_fill = i
  local j = tensor.new({1, 2, 3})
  j[2] = -1.5
  r.int_index = j
  return r
end)

-- ---------------------------------------------------------------------------
-- Aliasing: values are snapshots, views are live

diff("aliasing: results are values, views follow their base", EXACT, function(obs)
  local r = {}
  local a = tensor.new({{1, 2}, {3, 4}}):float()
  local b = a + 2
  a:add_(1)
  r.b_old = b
  r.b_print = obs(tostring(b))
  r.a_new = a
  local c = a:clone()
  a:zero_()
  r.clone_kept = c
  local base = tensor.arange(6):reshape(2, 3):float()
  local view = base:narrow(2, 2, 2)
  local tview = base:t()
  base:mul_(10)
  r.view_after_base_write = view
  r.tview_after_base_write = tview
  base[1] = -1
  r.view_after_index_write = view
  local copied = base:t():reshape(6)      -- non-contiguous: a copy
  local viewed = base:reshape(6)          -- contiguous: a view
  base:add_(1000)
  r.reshape_copy_frozen = copied
  r.reshape_view_live = viewed
  local contig_copy = base:t():contiguous()
  local contig_same = base:contiguous()
  base:fill_(3)
  r.contiguous_copy_frozen = contig_copy
  r.contiguous_same_live = contig_same
  local same_type = base:float()          -- same dtype: the same tensor
  local other_type = base:double()        -- a copy
  base:fill_(5)
  r.to_same_live = same_type
  r.to_other_frozen = other_type
  local n = tensor.new(base)
  base:fill_(6)
  r.new_copy_frozen = n
  -- writes through one view seen through another
  local m = tensor.zeros(3, 3)
  local row = m[2]
  local col = m:select(2, 2)
  row:fill_(1)
  col:add_(5)
  r.row = row
  r.col = col
  r.m = m
  -- a view of a view taken before the write
  local vv = m:t():narrow(1, 2, 2)
  m:narrow(1, 3, 1):fill_(9)
  r.vv = vv
  -- a result computed from a view before a write keeps the old values
  local from_view = vv * 1
  m:zero_()
  r.from_view = from_view
  r.vv_zero = vv
  return r
end)

-- The same aliasing facts against literal values (in this process's mode),
-- so that a wrong answer shared by both modes is caught too.
h.test("aliasing: literal expectations", function()
  local a = tensor.new({{1, 2}, {3, 4}}):float()
  local b = a + 2
  a:add_(1)
  assert(tostring(b) == tostring(tensor.new({{3, 4}, {5, 6}}):float()),
         "print(b) after a:add_(1):\n" .. tostring(b))
  h.check(b, "f32", {{3, 4}, {5, 6}})
  local c = a:clone()
  a:zero_()
  h.check(c, "f32", {{2, 3}, {4, 5}})
  h.check(a, "f32", {{0, 0}, {0, 0}})
  local base = tensor.arange(6):reshape(2, 3)
  local view = base:narrow(2, 2, 2)
  local copied = base:t():reshape(6)
  local viewed = base:reshape(6)
  base:mul_(10)
  h.check(view, "i64", {{10, 20}, {40, 50}})
  h.check(copied, "i64", {0, 3, 1, 4, 2, 5})
  h.check(viewed, "i64", {0, 10, 20, 30, 40, 50})
  view[2] = -1
  h.check(base, "i64", {{0, 10, 20}, {30, -1, -1}})
  h.check(viewed, "i64", {0, 10, 20, 30, -1, -1})
  h.check(copied, "i64", {0, 3, 1, 4, 2, 5})
  base:t():narrow(1, 1, 1):fill_(7)
  h.check(base, "i64", {{7, 10, 20}, {7, -1, -1}})
  base:select(2, 3):mul_(3)
  h.check(view, "i64", {{10, 60}, {-1, -3}})
  assert(tensor.is_tensor(view) and not tensor.is_tensor({}) and not tensor.is_tensor(3))
end)

-- A clone shares its source's node until one of them is written; writes
-- that lazy mode does eagerly (through an expanded view, or in eager mode
-- after tensor.set_eager) change the source's memory: later ops must read
-- the new values, the clone the old ones. (The node bound to the clone's
-- copy once stood for the source too, so `a + 100` read the old value.)
h.test("a clone, then an eager write into its source", function()
  local before = tensor.is_eager()
  local a = tensor.new({-4, 6}, {dtype = "i32"})
  local c = a:clone()
  a:narrow(1, 1, 1):expand(1):sub_(a:narrow(1, 1, 1))
  h.check(a + 100, "i32", {100, 106})
  h.check(c, "i32", {-4, 6})
  local d = a:clone()
  h.check(d, "i32", {0, 6})  -- syncs d: its copy is bound to the shared node
  tensor.set_eager(true)
  a:add_(1)
  tensor.set_eager(before)
  h.check(a * 2, "i32", {2, 14})
  h.check(d, "i32", {0, 6})
  h.check(c, "i32", {-4, 6})
end)

diff("aliasing with results of earlier syncs", EXACT, function(obs)
  local a = tensor.arange(4):float()
  local b = a * 2
  obs(b:tolist())          -- b is now data
  local v = b:narrow(1, 2, 2)
  b:add_(1)
  obs(v)
  v:fill_(0)
  obs(b)
  tensor.mark_step()
  local w = b:t()
  b:mul_(3)
  return a, b, v, w
end)

-- ---------------------------------------------------------------------------
-- Syncs and barriers in the middle

diff("syncs (item, print, tolist, comparison, sync) between ops", CHAIN(6), function(obs)
  local g = lh.gen(81)
  local a = lh.make(g:table({3, 4}, "f"))
  local b = a * 2 + 1
  obs(b:sum():item())
  b:add_(a)
  obs(tostring(b:floor()))
  local c = b:t() - a:t()
  obs(c:tolist())
  c:mul_(2)
  obs(c[2][3]:item())
  tensor.sync(c)
  local d = c:narrow(1, 2, 2)
  d:add_(1)
  obs(a:max() < c:max())
  obs(c == c:clone())
  local e = d:sum(1)
  tensor.sync(e, a)
  obs(#e, e:size(), e:dtype())
  local f = (e * a:narrow(2, 1, 3)):sum()
  obs(f:item())
  a:add_(f)
  return a, b, c, d, e, f
end)

diff("mark_step in the middle, pending views, in-place after barriers", CHAIN(8), function(obs)
  local g = lh.gen(82)
  local w = lh.make(g:table({4, 3}, "f"))
  local x = lh.make(g:table({2, 4}, "f"))
  local view = w:narrow(1, 2, 2)
  local y = x:matmul(w):relu()
  tensor.mark_step()
  view:mul_(0.5)
  local z = y:sum(2)
  tensor.mark_step()
  tensor.mark_step()   -- nothing pending
  w:t():add_(1)
  obs(view)
  local y2 = x:matmul(w)
  tensor.mark_step()
  y:add_(y2)
  obs(y:max(2))
  return w, x, view, y, z, y2
end)

diff("observations of views and 0-dim tensors", EXACT, function(obs)
  local a = tensor.arange(1, 7):reshape(2, 3)
  local s = a:sum()
  obs(s:item(), s:tolist(), tostring(s))
  local v = a:t()
  obs(v:tolist(), tostring(v))
  obs(a[2][3]:item(), a[{1, 2}]:tolist())
  a[{1, 1}] = 100
  obs(v[1][1]:item(), a:max():item(), a:eq(100):any():item())
  local f = a:float() / 4
  obs(f:numel(), f[1]:tolist(), f[2][2]:item())
  obs(pcall(function() return a:item() end))
  return a, v, s
end)

-- ---------------------------------------------------------------------------
-- Joins and indexing

diff("cat stack gather index_select", EXACT, function()
  local g = lh.gen(91)
  local r = {}
  local a = lh.make(g:table({2, 3}, "f"))
  local b = lh.make(g:table({1, 3}, "f"))
  local c = lh.make(g:table({2, 2}, "f"))
  local i = lh.make(g:table({2, 3}, "i"))
  r.cat1 = tensor.cat({a, b})
  r.cat1_explicit = tensor.cat({a, b, a}, 1)
  r.cat2 = tensor.cat({a, c}, 2)
  r.cat_neg = tensor.cat({a, c, a}, -1)
  r.cat_promote = tensor.cat({a, i})
  r.cat_views = tensor.cat({a:t(), c:t(), b:t()}, 2)
  r.cat_one = tensor.cat({a})
  r.cat_3d = tensor.cat({a:unsqueeze(1), a:unsqueeze(1) * 2}, 1)
  r.cat_bad = pcall(function() return tensor.cat({a, c}, 1) end)
  r.stack1 = tensor.stack({a, a * 2, a * 3})
  r.stack2 = tensor.stack({a, i:float()}, 2)
  r.stack3 = tensor.stack({a, a}, 3)
  r.stack_neg = tensor.stack({a, a}, -1)
  r.stack_bad = pcall(function() return tensor.stack({a, b}) end)
  local idx2 = lh.make({{1, 2, 1}, {2, 2, 1}})
  local idx1 = lh.make({{3, 1}, {2, 2}})
  r.gather1 = a:gather(1, idx2)
  r.gather2 = a:gather(2, idx1)
  r.gather_neg = a:gather(-1, idx1)
  r.gather_i32 = a:gather(2, idx1:int())
  r.gather_module = tensor.gather(i, 2, idx1)
  r.gather_of_view = a:t():gather(1, lh.make({{2, 1}, {1, 1}, {2, 2}}))
  r.gather_3d = lh.make(g:table({2, 3, 4}, "i")):gather(3, lh.make(g:table({2, 3, 2}, "small")) + 1)
  local sel = lh.make({3, 1, 3, 2})
  r.index_select1 = a:index_select(2, sel)
  r.index_select0 = a:index_select(1, lh.make({2, 2, 1}))
  r.index_select_i32 = a:index_select(2, sel:int())
  r.index_select_module = tensor.index_select(i, 1, lh.make({2}))
  r.index_select_view = a:t():index_select(1, sel)
  r.index_select_computed = a:index_select(2, (sel % 3) + 1)
  return r
end)

-- ---------------------------------------------------------------------------
-- Record-time errors: the same message in both modes (shapes and dtypes are
-- inferred at record time)

diff("record-time errors are identical", EXACT, function()
  local a = tensor.zeros(2, 3)
  local b = tensor.zeros(4)
  local r = {}
  local function try(f) local ok, msg = pcall(f); return {ok, msg} end
  r.add = try(function() return a + b end)
  r.matmul = try(function() return a:matmul(a) end)
  r.view = try(function() return a:t():view(6) end)
  r.narrow = try(function() return a:narrow(2, 3, 2) end)
  r.select = try(function() return a:select(1, 3) end)
  r.index = try(function() return a[3] end)
  r.reshape = try(function() return a:reshape(4, 2) end)
  r.expand = try(function() return a:expand(3, 3) end)
  r.inplace_broadcast = try(function() return b:add_(a) end)
  r.inplace_dtype = try(function() return tensor.zeros({2}, {dtype = "i64"}):add_(0.5) end)
  r.cat = try(function() return tensor.cat({a, b}) end)
  r.gather = try(function() return a:gather(2, tensor.zeros({2, 3}, {dtype = "f32"})) end)
  r.where = try(function() return tensor.where(a:gt(0), a, b) end)
  r.dim = try(function() return a:sum(3) end)
  r.permute = try(function() return a:permute(1, 1) end)
  r.squeeze = try(function() return a:squeeze(1) end)
  r.after = a + 1   -- recording still works after the errors
  return r
end)

-- ---------------------------------------------------------------------------
-- A longer mixed program (a tiny MLP step written out by hand)

diff("a small training step written out", REDUCE(16, 4), function(obs)
  local g = lh.gen(101)
  local x = lh.make(g:table({4, 3}, "f"))
  local y = lh.make({1, 3, 2, 1})
  local w1 = lh.make(g:table({3, 5}, "f")) * 0.5
  local w2 = lh.make(g:table({5, 3}, "f")) * 0.5
  for step = 1, 3 do
    local hdn = x:matmul(w1):tanh()
    local logits = hdn:matmul(w2)
    local logp = logits:log_softmax(2)
    local loss = -(logp:gather(2, y:unsqueeze(2)):mean())
    obs(loss:item())
    local p = logp:exp()
    local onehot = tensor.zeros(4, 3)
    for i = 1, 4 do onehot[{i, y[i]:item()}] = 1 end
    local dlogits = (p - onehot) / 4
    local dw2 = hdn:t():matmul(dlogits)
    local dh = dlogits:matmul(w2:t()) * (1 - hdn * hdn)
    local dw1 = x:t():matmul(dh)
    w1:sub_(dw1 * (0.1 / step))
    w2:sub_(dw2 * (0.1 / step))
    tensor.mark_step()
  end
  local _, pred = x:matmul(w1):tanh():matmul(w2):max(2)
  return w1, w2, pred
end)

-- ---------------------------------------------------------------------------
-- Switching modes with live tensors: a tensor made in one mode keeps its
-- meaning in the other (literal expectations, not a comparison of halves).

local function with_mode_restored(f)
  return function()
    local before = tensor.is_eager()
    local ok, msg = pcall(f)
    tensor.set_eager(before)
    if not ok then error(msg, 0) end
  end
end

h.test("switching modes: a view made in eager mode, written in lazy mode, reaches its base",
       with_mode_restored(function()
  tensor.set_eager(true)
  local a = tensor.new({{1, 2}, {3, 4}})
  local v = a:narrow(1, 2, 1)
  tensor.set_eager(false)
  v:fill_(0)
  h.check(a, "i64", {{1, 2}, {0, 0}})
end))

h.test("switching modes: a view made in eager mode sees lazy writes to its base",
       with_mode_restored(function()
  tensor.set_eager(true)
  local a = tensor.new({{1, 2}, {3, 4}})
  local v = a:narrow(1, 2, 1)
  tensor.set_eager(false)
  a:add_(1)
  h.check(v, "i64", {{4, 5}})
  a[2] = 0
  h.check(v, "i64", {{0, 0}})
end))

h.test("switching modes: lazy tensors and lazy views used in eager mode",
       with_mode_restored(function()
  tensor.set_eager(false)
  local a = tensor.new({{1, 2}, {3, 4}})
  local b = a * 10
  local c = a + 1
  local w = c:t()
  tensor.set_eager(true)
  h.check(b, "i64", {{10, 20}, {30, 40}})
  w[1] = 7
  h.check(c, "i64", {{7, 3}, {7, 5}})
  c:mul_(2)
  h.check(w, "i64", {{14, 14}, {6, 10}})
  a:add_(1)
  h.check(b, "i64", {{10, 20}, {30, 40}})
end))

h.test("switching modes: a view made in eager mode of a lazily made tensor, written lazily",
       with_mode_restored(function()
  tensor.set_eager(false)
  local c = tensor.new({{1, 2}, {3, 4}}) * 2
  tensor.set_eager(true)
  local u = c:select(2, 2)
  tensor.set_eager(false)
  u:add_(100)
  h.check(c, "i64", {{2, 104}, {6, 108}})
  h.check(u, "i64", {104, 108})
end))

-- The lazy halves really were lazy: ops were recorded and graphs ran.
h.test("the lazy halves recorded and executed graphs", function()
  local m = tensor.metrics()
  if lh.LAZY then
    assert(m.ops_recorded > 200, "ops_recorded " .. m.ops_recorded)
    assert(m.graphs_executed > 20, "graphs_executed " .. m.graphs_executed)
  end
end)

h.done("test_lazy_writes")
