-- test_lazy_donation.lua - buffer donation at barriers: a parameter whose
-- old value nothing can read again (the `w:add_(...)` of an optimizer step)
-- lends its memory to the graph's outputs. Donation must never be visible:
-- every case here compares lazy mode with eager mode, with the cases that
-- must *not* donate (another tensor, a view, a pending value or an eager
-- view still needs the old value) alongside. Under LAZYLUA_COMPILE=sync the
-- native executor runs every graph, and the test also checks that donation
-- happened where it should.
local h = dofile("helpers.lua")
local lh = dofile("lazy_helpers.lua")

local EXACT, EW, CHAIN = lh.EXACT, lh.EW, lh.CHAIN
local diff = lh.differ(h)
local NATIVE = lh.LAZY and os.getenv("LAZYLUA_COMPILE") == "sync"

local function donated_during(f)
  local before = tensor.metrics().donated_buffers
  f()
  return tensor.metrics().donated_buffers - before
end

-- An SGD-with-momentum loop: w and its momentum buffer are updated in place
-- step after step; closed form checked by hand in plain Lua numbers.
h.test("momentum updates computed into donated buffers", function()
  local n = 4096
  local w = tensor.arange(n):float()
  local m = tensor.zeros(n)
  local want_w, want_m = {}, {}
  for i = 1, n do want_w[i], want_m[i] = i - 1, 0 end
  local donated = donated_during(function()
    for _ = 1, 6 do
      m:mul_(0.5):add_(w * 0.25)
      w:sub_(m * 0.5)
      tensor.mark_step()
      for i = 1, n do
        want_m[i] = h.f32(h.f32(want_m[i] * 0.5) + h.f32(want_w[i] * 0.25))
        want_w[i] = h.f32(want_w[i] - h.f32(want_m[i] * 0.5))
      end
    end
  end)
  h.near(w, want_w, {rel = 1e-6, abs = 1e-6})
  h.near(m, want_m, {rel = 1e-6, abs = 1e-6})
  -- From the second step on both w and m are donated.
  if NATIVE then assert(donated >= 8, "expected donations, got " .. donated) end
end)

diff("no donation while another tensor holds the old value", EW, function(obs)
  local w = tensor.arange(16):float()
  local old = w:clone()
  tensor.mark_step()
  local keep = w                -- the same tensor: sees the update
  local snapshot = w * 1.0      -- a pending value computed from the old w
  w:add_(100)
  tensor.mark_step()
  return w, keep, snapshot, old
end)

diff("a view of the donor sees the new value, not stale memory", EXACT, function()
  local w = tensor.arange(12):float():reshape(3, 4)
  tensor.mark_step()
  local row = w:select(1, 2)
  local col = w:narrow(2, 2, 2)
  w:mul_(2):add_(1)
  tensor.mark_step()
  return row, col, w
end)

diff("an eager view shares the buffer: never donated", EW, function()
  local w
  local before = tensor.is_eager()
  tensor.set_eager(true)
  local base = tensor.arange(8):float()
  local alias = base:narrow(1, 3, 4)  -- shares base's memory in eager mode
  tensor.set_eager(before)
  base:add_(10)
  tensor.mark_step()
  w = base
  return w, alias
end)

diff("a partial sync does not donate; the next barrier may", CHAIN(3), function(obs)
  local w = tensor.linspace(-1, 1, 64)
  tensor.mark_step()
  local other = w * 3         -- pending, not part of the first sync
  w:add_(0.5)
  obs(w:sum())                -- a sync of w alone: other still needs old w
  local later = other + w
  tensor.mark_step()
  return w, other, later
end)

diff("donor read at other elements in the same step is not overwritten early", CHAIN(2), function()
  local w = tensor.arange(10):float()
  tensor.mark_step()
  local flipped = w:narrow(1, 2, 9)   -- w shifted by one element
  local new = w:narrow(1, 1, 9) + flipped
  w:narrow(1, 1, 9):copy_(new)
  tensor.mark_step()
  return w
end)

diff("a donor read transposed by the kernel that writes over it", EW, function()
  tensor.manual_seed(3)
  local w = tensor.rand(64, 64)  -- data, not a view: the kernel writes it directly
  w:copy_(w:t() * 2)
  tensor.mark_step()
  return w
end)

diff("a donor read after the kernel that could take it over", CHAIN(3), function()
  local w = tensor.linspace(0, 1, 32)
  local v = tensor.linspace(1, 2, 32)
  tensor.mark_step()
  w:mul_(2)
  local uses_old_v = v:sum() * w   -- reads v in a reduction
  v:add_(w)
  tensor.mark_step()
  return w, v, uses_old_v
end)

diff("a later step reads the donor's old value", CHAIN(2), function()
  local v = tensor.linspace(0, 1, 32)
  local x = tensor.zeros(32) * 1   -- pending before everything below: extracted first
  tensor.mark_step()
  x = x * 1
  local s = v:sum()                -- the old v, in a reduction
  v:add_(1)
  x:copy_(v)                       -- so the new v is computed before the sum
  tensor.mark_step()
  return x, s, v
end)

diff("a donor that comes after a constant output in the graph", EW, function()
  -- The gradient (a broadcast constant) is pending before the update of
  -- p, so the graph starts with the constant and the donated parameter
  -- comes later: the output that takes its memory is planned first.
  local p = tensor.new({1.5, 2}, {dtype = "f64"}):requires_grad(true)
  tensor.mark_step()
  p:sum():backward()
  tensor.no_grad(function() p:sub_(p:grad() * 0.5) end)
  tensor.mark_step()
  return p:detach(), p:grad()
end)

diff("integer division that may fail never overwrites its inputs", EXACT, function(obs)
  local a = tensor.arange(1, 9)
  local b = tensor.new({1, 2, 0, 4, 5, 6, 7, 8})
  tensor.mark_step()
  local ok = pcall(function()
    a:copy_(a // b)
    tensor.mark_step()
  end)
  obs(ok)
  -- the failed value keeps its error; b is untouched
  return b
end)

h.test("a training-style loop donates at every step after the first", function()
  if not NATIVE then return end
  local w = tensor.randn(64, 32)
  local x = tensor.randn(16, 64)
  local before = tensor.metrics()
  for _ = 1, 5 do
    local y = x:matmul(w)
    local g = x:t():matmul(y) * 1e-3
    w:sub_(g)
    tensor.mark_step()
  end
  local after = tensor.metrics()
  assert(after.donated_buffers - before.donated_buffers >= 4,
         "donations: " .. (after.donated_buffers - before.donated_buffers))
end)

h.done("test_lazy_donation")
