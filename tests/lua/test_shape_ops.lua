-- test_shape_ops.lua - chunk, split, unbind, tril/triu, diag, diagonal,
-- trace, outer, mv, bmm, addmm, baddbmm, addmv, einsum, roll, repeat,
-- tile, pad, meshgrid and cross: values against Lua loops, hand-computed
-- tables or PyTorch 1.13 output pasted as constants; gradients against
-- finite differences (f64); and the errors bad arguments raise.
local h = dofile("helpers.lua")
local gh = dofile("grad_helpers.lua")(h)

local counting = h.counting

-- The checks of a group are collected and run after one mark_step, so a
-- group's results are one graph (a compile each in the native mode, where
-- every new graph is a C compile): expect() records, group() runs them.
local expected = {}
local function expect(t, dtype, want, tol, label)
  local line = debug.getinfo(2, "l").currentline
  expected[#expected + 1] = {t, dtype, want, tol, label or ("line " .. line)}
end
local function group(name, body)
  h.test(name, function()
    expected = {}
    body()
    tensor.mark_step()
    for _, e in ipairs(expected) do
      local ok, msg = pcall(h.check, e[1], e[2], e[3], e[4])
      if not ok then error(e[5] .. ": " .. msg, 0) end
    end
  end, 3)
end

-- Nested table element at a list of 1-based indices.
local function at(t, index)
  for _, i in ipairs(index) do t = t[i] end
  return t
end

-- ---- chunk, split, unbind ----

group("chunk: sizes as torch.chunk, values, views of the base", function()
  local t = tensor.arange(12):reshape(3, 4)
  local parts = t:chunk(2, 2)
  assert(#parts == 2)
  expect(parts[1], "i64", {{0, 1}, {4, 5}, {8, 9}})
  expect(parts[2], "i64", {{2, 3}, {6, 7}, {10, 11}})
  -- ceil(6 / 4) = 2 per chunk: 3 chunks (torch.arange(6).chunk(4))
  local sizes = {}
  for i, p in ipairs(tensor.arange(6):chunk(4)) do sizes[i] = p:size(1) end
  h.eq(sizes, {2, 2, 2})
  sizes = {}
  for i, p in ipairs(tensor.arange(5):chunk(3)) do sizes[i] = p:size(1) end
  h.eq(sizes, {2, 2, 1})
  -- an empty dim gives `chunks` empty parts
  local empty = tensor.zeros(0, 2):chunk(3)
  assert(#empty == 3)
  h.shape(empty[3], {0, 2})
  -- dim defaults to 1; negative dims count from the end
  expect(t:chunk(3)[2], "i64", {{4, 5, 6, 7}})
  expect(t:chunk(2, -1)[1], "i64", {{0, 1}, {4, 5}, {8, 9}})
  -- a chunk is a view: a write through it reaches the base
  local base = tensor.zeros(2, 4)
  base:chunk(2, 2)[2]:fill_(7)
  expect(base, "f32", {{0, 0, 7, 7}, {0, 0, 7, 7}})
  expect(tensor.chunk(tensor.arange(4), 2)[2], "i64", {2, 3})
end)

group("split: a size or a table of sizes; unbind", function()
  local parts = tensor.arange(5):split(2)
  assert(#parts == 3)
  expect(parts[1], "i64", {0, 1})
  expect(parts[3], "i64", {4})
  local t = tensor.arange(12):reshape(3, 4)
  parts = t:split({1, 3}, 2)
  expect(parts[1], "i64", {{0}, {4}, {8}})
  expect(parts[2], "i64", {{1, 2, 3}, {5, 6, 7}, {9, 10, 11}})
  parts = tensor.split(t, {2, 0, 1})
  h.shape(parts[2], {0, 4})
  expect(parts[3], "i64", {{8, 9, 10, 11}})
  local rows = t:unbind()
  assert(#rows == 3)
  expect(rows[2], "i64", {4, 5, 6, 7})
  local cols = t:unbind(2)
  assert(#cols == 4)
  expect(cols[4], "i64", {3, 7, 11})
  -- views: writes reach the base
  local base = tensor.zeros(2, 3)
  base:unbind(2)[3]:fill_(1)
  base:split(1)[1]:add_(2)
  expect(base, "f32", {{2, 2, 3}, {0, 0, 1}})
end)

-- ---- triangles and diagonals ----

-- The triangle by its definition: (i, j) kept when j - i <= k (lower) or
-- >= k (upper).
local function tri(m, k, lower)
  local out = {}
  for i = 1, #m do
    out[i] = {}
    for j = 1, #m[1] do
      local keep = lower and (j - i <= k) or (not lower and j - i >= k)
      out[i][j] = keep and m[i][j] or 0
    end
  end
  return out
end

group("tril / triu: every k, rectangular and batched", function()
  local m = counting(3, 5, 1)
  local t = tensor.new(m)
  for k = -3, 5 do
    expect(t:tril(k), "i64", tri(m, k, true))
    expect(t:triu(k), "i64", tri(m, k, false))
  end
  expect(t:tril(), "i64", tri(m, 0, true))
  -- hand-written: the main diagonal and below of a 3x3
  expect(tensor.tril(tensor.ones(3, 3)), "f32", {{1, 0, 0}, {1, 1, 0}, {1, 1, 1}})
  expect(tensor.triu(tensor.ones(2, 3), 1), "f32", {{0, 1, 1}, {0, 0, 1}})
  -- batched: each matrix of the batch
  local b = tensor.arange(24):reshape(2, 3, 4):double()
  local got = b:triu(-1)
  for i = 1, 2 do expect(got[i], "f64", tri(b[i]:tolist(), -1, false)) end
  expect(tensor.new({{true, true}, {true, true}}):tril(), "bool", {{true, false}, {true, true}})
end)

group("diag: vector to matrix and back, with offsets", function()
  local v = tensor.new({1, 2, 3})
  expect(tensor.diag(v), "i64", {{1, 0, 0}, {0, 2, 0}, {0, 0, 3}})
  expect(v:diag(1), "i64", {{0, 1, 0, 0}, {0, 0, 2, 0}, {0, 0, 0, 3}, {0, 0, 0, 0}})
  expect(v:diag(-2), "i64",
          {{0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {1, 0, 0, 0, 0}, {0, 2, 0, 0, 0}, {0, 0, 3, 0, 0}})
  local m = tensor.new(counting(3, 4))
  expect(m:diag(), "i64", {0, 5, 10})
  expect(m:diag(1), "i64", {1, 6, 11})
  expect(m:diag(2), "i64", {2, 7})
  expect(m:diag(-1), "i64", {4, 9})
  expect(m:diag(4), "i64", {})
  expect(m:diagonal(math.mininteger), "i64", {})
  expect(tensor.diag(tensor.new({2.5}):float()), "f32", {{2.5}})
end)

group("diagonal and trace", function()
  local m = tensor.new(counting(3, 4))
  expect(m:diagonal(), "i64", {0, 5, 10})
  expect(m:diagonal(-2), "i64", {8})
  expect(m:diagonal(1, 2, 1), "i64", {4, 9})  -- dims swapped: the transposed matrix's
  -- 3-D: x[a][b][c] with the diagonal of dims 1 and 3 as the last dim
  local x = tensor.arange(24):reshape(2, 3, 4)
  local want = {}
  local xs = x:tolist()
  for b = 1, 3 do
    want[b] = {}
    for i = 1, 2 do want[b][i] = xs[i][b][i + 1] end
  end
  expect(x:diagonal(1, 1, 3), "i64", want)
  expect(x:diagonal(0, -2, -1), "i64", {{0, 5, 10}, {12, 17, 22}})
  expect(m:trace(), "i64", 15)
  expect(tensor.trace(tensor.new({{1.5, 2}, {3, 4}})), "f32", 5.5)
end)

-- ---- products ----

group("outer, mv, bmm", function()
  expect(tensor.outer(tensor.new({1, 2}), tensor.new({3, 4, 5})), "i64",
          {{3, 4, 5}, {6, 8, 10}})
  expect(tensor.new({1.5, 2}):outer(tensor.new({2.0})), "f32", {{3}, {4}})
  expect(tensor.new({{1.0, 2}, {3, 4}, {5, 6}}):mv(tensor.new({1.0, -1})), "f32", {-1, -1, -1})
  local A = h.rand_list(1, {2, 3, 4}, -1, 1)
  local B = h.rand_list(2, {2, 4, 2}, -1, 1)
  local got = tensor.bmm(tensor.new(A), tensor.new(B))
  expect(got, "f32", {h.matmul2(A[1], B[1]), h.matmul2(A[2], B[2])}, h.REDUCE(4))
end)

group("addmm, baddbmm, addmv: beta and alpha", function()
  local C = {{1.0, 2}, {3, 4}}
  local A = {{1.0, 2, 3}, {4, 5, 6}}
  local B = {{1.0, 0}, {0, 1}, {1, 1}}
  local AB = h.matmul2(A, B)  -- {{4, 5}, {10, 11}}
  local c, a, b = tensor.new(C), tensor.new(A), tensor.new(B)
  expect(tensor.addmm(c, a, b), "f32", h.bmap(C, AB, function(x, y) return x + y end))
  expect(tensor.addmm(c, a, b, {beta = 0.5, alpha = -2}), "f32",
          h.bmap(C, AB, function(x, y) return 0.5 * x - 2 * y end))
  -- c broadcasts (a bias row)
  expect(c[1]:addmm(a, b), "f32", {{5, 7}, {11, 13}})
  -- beta = 0 ignores c, NaN included (as PyTorch)
  local nan = tensor.full({2, 2}, 0 / 0)
  expect(tensor.addmm(nan, a, b, {beta = 0}), "f32", AB)
  local batch = tensor.stack({a, a * 2})
  local bb = tensor.stack({b, b})
  expect(tensor.baddbmm(tensor.ones(2, 2), batch, bb, {alpha = 2}), "f32",
          {{{9, 11}, {21, 23}}, {{17, 21}, {41, 45}}})
  expect(tensor.addmv(tensor.new({1.0, 1}), a, tensor.new({1.0, 1, 1}), {beta = 3}), "f32",
          {9, 18})
end)

-- ---- einsum ----

-- The reference: for every assignment of the labels, the product of the
-- operands' elements, summed into the output's element (plain loops over
-- nested tables).
local function einsum_ref(equation, ...)
  local tables = {...}
  local lhs, out_term = equation:match("^(.*)%->(.*)$")
  local terms = {}
  for term in (lhs .. ","):gmatch("([^,]*),") do terms[#terms + 1] = term end
  local size, labels = {}, {}
  for k, term in ipairs(terms) do
    local shape = h.shape_of(tables[k])
    for i = 1, #term do
      local c = term:sub(i, i)
      if not size[c] then labels[#labels + 1] = c end
      size[c] = shape[i]
    end
  end
  local out_shape = {}
  for i = 1, #out_term do out_shape[i] = size[out_term:sub(i, i)] end
  local function zeros(d)
    if d > #out_shape then return 0.0 end
    local t = {}
    for i = 1, out_shape[d] do t[i] = zeros(d + 1) end
    return t
  end
  local result = zeros(1)
  local value = {}
  local function index_of(term)
    local idx = {}
    for i = 1, #term do idx[i] = value[term:sub(i, i)] end
    return idx
  end
  local function loop(n)
    if n > #labels then
      local p = 1.0
      for k, term in ipairs(terms) do p = p * at(tables[k], index_of(term)) end
      if #out_term == 0 then
        result = result + p
      else
        local idx = index_of(out_term)
        local row = at(result, {table.unpack(idx, 1, #idx - 1)})
        row[idx[#idx]] = row[idx[#idx]] + p
      end
      return
    end
    for i = 1, size[labels[n]] do
      value[labels[n]] = i
      loop(n + 1)
    end
  end
  loop(1)
  return result
end

group("einsum: explicit equations against loops", function()
  local A = h.rand_list(3, {3, 4}, -1, 1)
  local B = h.rand_list(4, {4, 2}, -1, 1)
  local S = h.rand_list(5, {3, 3}, -1, 1)
  local X = h.rand_list(6, {2, 3, 4}, -1, 1)
  local Y = h.rand_list(7, {2, 4, 5}, -1, 1)
  local u = h.rand_list(8, {4}, -1, 1)
  local v = h.rand_list(9, {4}, -1, 1)
  local T = tensor.new
  local cases = {
    {"ij,jk->ik", A, B},
    {"ij,jk->ki", A, B},
    {"bij,bjk->bik", X, Y},
    {"bij,bjk->bk", X, Y},
    {"ii->i", S},
    {"ii->", S},
    {"ij->ji", A},
    {"ij->j", A},
    {"i,i->", u, v},
    {"i,j->ij", u, v},
    {"bij,j->bi", X, u},
    {"ij,jk,kl->il", A, B, h.rand_list(10, {2, 3}, -1, 1)},
    {"bij,bij->b", X, X},
    {"iij->ij", h.rand_list(11, {2, 2, 3}, -1, 1)},
    {"ab,cd,bd->ac", A, h.rand_list(12, {2, 5}, -1, 1), h.rand_list(13, {4, 5}, -1, 1)},
    {"i,i,i->i", u, v, u},
    {"bij,bkj->bki", X, h.rand_list(14, {2, 5, 4}, -1, 1)},
  }
  for _, case in ipairs(cases) do
    local tensors = {}
    for i = 2, #case do tensors[i - 1] = T(case[i]) end
    local got = tensor.einsum(case[1], table.unpack(tensors))
    expect(got, "f32", einsum_ref(case[1], table.unpack(case, 2)), h.REDUCE(20), case[1])
  end
  -- operands as one table; spaces are ignored
  expect(tensor.einsum("i j , j k -> i k", {T(A), T(B)}), "f32", h.matmul2(A, B), h.REDUCE(4))
end)

group("einsum: implicit output, ellipsis, broadcasting (PyTorch 1.13 values)", function()
  local a = tensor.arange(6):reshape(2, 3):double()
  local b = tensor.arange(12):reshape(3, 4):double()
  -- torch.einsum('ij,jk', a, b)
  expect(tensor.einsum("ij,jk", a, b), "f64", {{20, 23, 26, 29}, {56, 68, 80, 92}})
  -- implicit: letters in alphabetical order, so 'ba' transposes
  expect(tensor.einsum("ba", a), "f64", {{0, 3}, {1, 4}, {2, 5}})
  expect(tensor.einsum("ii", tensor.arange(9):reshape(3, 3)), "i64", 12)
  -- torch.einsum('...ij,...jk->...ik', x, y) with x [2, 2, 3] and y [3, 4]
  local x = tensor.arange(12):reshape(2, 2, 3):double()
  expect(tensor.einsum("...ij,jk->...ik", x, b), "f64",
          {{{20, 23, 26, 29}, {56, 68, 80, 92}},
           {{92, 113, 134, 155}, {128, 158, 188, 218}}})
  -- an ellipsis absent from the output is summed: torch.einsum('...i->i', x)
  expect(tensor.einsum("...i->i", x), "f64", {18, 22, 26})
  -- implicit output with an ellipsis keeps its dims first: torch.einsum('i...->...', x)
  expect(tensor.einsum("i...->...", x), "f64", {{6, 8, 10}, {12, 14, 16}})
  -- a dim of size 1 broadcasts: torch.einsum('ij,ij->ij', ones(1, 3), a)
  expect(tensor.einsum("ij,ij->ij", tensor.ones(1, 3):double(), a), "f64", {{0, 1, 2}, {3, 4, 5}})
  -- 0-dim operands: ',->' multiplies two scalars
  expect(tensor.einsum(",->", tensor.new(3.0), tensor.new(4.0)), "f32", 12)
  -- integers stay integers
  expect(tensor.einsum("i,i->", tensor.new({1, 2, 3}), tensor.new({4, 5, 6})), "i64", 32)
end)

-- ---- roll, repeat, tile ----

group("roll (PyTorch 1.13 values)", function()
  local t = tensor.arange(12):reshape(3, 4)
  -- torch.roll(t, (1, -1), (0, 1))
  expect(t:roll({1, -1}, {1, 2}), "i64", {{9, 10, 11, 8}, {1, 2, 3, 0}, {5, 6, 7, 4}})
  -- torch.roll(t, 5): the flattened tensor, shape kept
  expect(t:roll(5), "i64", {{7, 8, 9, 10}, {11, 0, 1, 2}, {3, 4, 5, 6}})
  expect(tensor.roll(tensor.new({1, 2, 3}), -4, 1), "i64", {2, 3, 1})
  expect(tensor.roll(tensor.new({1, 2, 3}), 3, 1), "i64", {1, 2, 3})
end)

group("repeat and tile (PyTorch 1.13 values)", function()
  local t = tensor.arange(6):reshape(2, 3)
  -- torch.arange(6).reshape(2, 3).repeat(2, 1, 2)
  expect(t:repeat_tensor(2, 1, 2), "i64",
          {{{0, 1, 2, 0, 1, 2}, {3, 4, 5, 3, 4, 5}}, {{0, 1, 2, 0, 1, 2}, {3, 4, 5, 3, 4, 5}}})
  expect(tensor["repeat"](t, {2, 1}), "i64", {{0, 1, 2}, {3, 4, 5}, {0, 1, 2}, {3, 4, 5}})
  -- tile pads short sizes with leading ones: tile(2) repeats the last dim
  expect(t:tile(2), "i64", {{0, 1, 2, 0, 1, 2}, {3, 4, 5, 3, 4, 5}})
  expect(tensor.tile(tensor.new({1.5}), 2, 3), "f32", {{1.5, 1.5, 1.5}, {1.5, 1.5, 1.5}})
  h.shape(t:repeat_tensor(0, 1), {0, 3})
  -- a loop reference on a 3-D tensor
  local x = tensor.arange(8):reshape(2, 2, 2)
  local xs, got = x:tolist(), x:repeat_tensor(3, 1, 2):tolist()
  for i = 1, 6 do
    for j = 1, 2 do
      for k = 1, 4 do
        assert(got[i][j][k] == xs[(i - 1) % 2 + 1][j][(k - 1) % 2 + 1])
      end
    end
  end
end)

-- ---- pad ----

group("pad: constant, crops, reflect, replicate, circular (PyTorch 1.13 values)", function()
  local x = tensor.arange(12):reshape(3, 4):float()
  expect(tensor.pad(x, {1, 2}), "f32",
          {{0, 0, 1, 2, 3, 0, 0}, {0, 4, 5, 6, 7, 0, 0}, {0, 8, 9, 10, 11, 0, 0}})
  expect(x:pad({1, -1, -1, 1}, {value = 9}), "f32",
          {{9, 4, 5, 6}, {9, 8, 9, 10}, {9, 9, 9, 9}})
  -- F.pad(x, (2, 1), mode='reflect')
  expect(x:pad({2, 1}, {mode = "reflect"}), "f32",
          {{2, 1, 0, 1, 2, 3, 2}, {6, 5, 4, 5, 6, 7, 6}, {10, 9, 8, 9, 10, 11, 10}})
  -- F.pad(x, (-1, 2), mode='reflect'): the crop comes first
  expect(x:pad({-1, 2}, {mode = "reflect"}), "f32",
          {{1, 2, 3, 2, 1}, {5, 6, 7, 6, 5}, {9, 10, 11, 10, 9}})
  -- F.pad(x, (1, 2, 2, 1), mode='replicate')
  expect(x:pad({1, 2, 2, 1}, {mode = "replicate"}), "f32",
          {{0, 0, 1, 2, 3, 3, 3}, {0, 0, 1, 2, 3, 3, 3}, {0, 0, 1, 2, 3, 3, 3},
           {4, 4, 5, 6, 7, 7, 7}, {8, 8, 9, 10, 11, 11, 11}, {8, 8, 9, 10, 11, 11, 11}})
  -- F.pad(x, (1, -2, 2, -1), mode='circular')
  expect(x:pad({1, -2, 2, -1}, {mode = "circular"}), "f32",
          {{1, 0, 1}, {5, 4, 5}, {1, 0, 1}, {5, 4, 5}})
  -- integer tensors, batched dims untouched
  expect(tensor.pad(tensor.ones(2, 1, 2, 2):long(), {0, 0, 1, 0}):select(1, 2), "i64",
          {{{0, 0}, {1, 1}, {1, 1}}})
end)

-- ---- meshgrid, cross ----

group("meshgrid and cross", function()
  local gx, gy = table.unpack(tensor.meshgrid(tensor.new({1, 2}), tensor.new({3, 4, 5})))
  expect(gx, "i64", {{1, 1, 1}, {2, 2, 2}})
  expect(gy, "i64", {{3, 4, 5}, {3, 4, 5}})
  local xs = tensor.meshgrid({tensor.new({1, 2}), tensor.new({3, 4, 5})}, {indexing = "xy"})
  expect(xs[1], "i64", {{1, 2}, {1, 2}, {1, 2}})
  expect(xs[2], "i64", {{3, 3}, {4, 4}, {5, 5}})
  expect(tensor.cross(tensor.new({1.0, 0, 0}), tensor.new({0.0, 1, 0})), "f32", {0, 0, 1})
  local a = {{1.0, 2, 3}, {-1, 0.5, 2}}
  local b = {{4.0, 5, 6}, {3, 1, -2}}
  local want = {}
  for i = 1, 2 do
    local p, q = a[i], b[i]
    want[i] = {p[2] * q[3] - p[3] * q[2], p[3] * q[1] - p[1] * q[3], p[1] * q[2] - p[2] * q[1]}
  end
  expect(tensor.new(a):cross(tensor.new(b)), "f32", want)
  expect(tensor.cross(tensor.new(a):t(), tensor.new(b):t(), 1):t(), "f32", want)
  -- broadcast: one vector against a batch
  expect(tensor.cross(tensor.new({1.0, 0, 0}), tensor.new(b)), "f32", {{0, -6, 5}, {0, 2, 1}})
end)

-- ---- gradients (f64 central differences) ----
-- Each check joins several ops' results into one vector (flatten and cat),
-- so every op's derivative is checked while the forward graph is one graph.

local function joined(list)
  local flat = {}
  for i, t in ipairs(list) do flat[i] = t:flatten() end
  return tensor.cat(flat)
end

gh.gradcheck("grad: split, chunk, tril, triu, diagonal, trace, pad, roll, repeat", function(x)
  local parts = x:split({1, 2}, 2)
  return joined({
    parts[1] * 2, parts[2]:sum(2, true), x:chunk(2, 3)[2],
    x:tril(-1), x:triu(1) * 3, x:diagonal(1, 1, 3), x[1]:trace(),
    x:pad({2, 1, 1, -1}, {mode = "reflect"}), x:pad({2, 1, 1, -1}, {value = 1}),
    x:pad({1, 2}, {mode = "replicate"}):roll(2, 3), x:repeat_tensor(2, 1, 1),
    x:pad({1, 0}, {mode = "circular"}),
  })
end, {gh.values({2, 3, 3}, -1, 1)})

gh.gradcheck("grad: einsum, addmm, diag, cross, outer", function(z)
  -- one input (each input's gradient is a sync of its own)
  local x, y, c, v = z:narrow(1, 1, 2), z:narrow(1, 3, 2), z[1][1], z[2][2]
  return joined({
    tensor.einsum("bij,bjk->bik", x, y), tensor.einsum("ii,j->ij", x[1], v),
    tensor.einsum("...ij->...", x),
    tensor.addmm(c, x[2], y[1], {beta = 0.5, alpha = 2}),
    tensor.diag(v, 1), tensor.cross(x[1], y[2]:t()), tensor.outer(v, c),
  })
end, {gh.values({4, 3, 3}, -1, 1)})

-- ---- errors ----

local m = tensor.ones(2, 3)
h.bad(function() tensor.bmm(m, m) end, "bmm", "3-D", "[2, 3]")
h.bad(function() tensor.bmm(tensor.ones(2, 2, 3), tensor.ones(3, 3, 2)) end, "bmm", "batch")
h.bad(function() tensor.bmm(tensor.ones(2, 2, 3), tensor.ones(2, 2, 2)) end, "bmm",
      "cannot be multiplied")
h.bad(function() tensor.addmm(tensor.ones(3, 3), m, m:t()) end, "addmm", "do not broadcast")
h.bad(function() tensor.addmm(m, m, m) end, "addmm", "cannot be multiplied")
h.bad(function() tensor.addmm(m, m, m:t(), {gamma = 1}) end, "addmm", "unknown option 'gamma'")
h.bad(function() tensor.mv(m, tensor.ones(2)) end, "mv", "cannot multiply a vector of length 2")
h.bad(function() tensor.outer(m, m) end, "outer", "1-D")
h.bad(function() tensor.einsum("ij,jk->ik", m) end, "einsum", "2 input terms but 1 operands")
h.bad(function() tensor.einsum("ij,jk->ik", m, m) end, "einsum", "subscript 'j' has size 2")
h.bad(function() tensor.einsum("ijk->i", m) end, "einsum", "operand 1 has 2 dimensions")
h.bad(function() tensor.einsum("ij->ix", m) end, "einsum", "'x'", "appears in no input")
h.bad(function() tensor.einsum("ij->ii", m) end, "einsum", "more than once")
h.bad(function() tensor.einsum("i1->i", m) end, "einsum", "invalid character '1'")
h.bad(function() tensor.einsum("i..j->i", m) end, "einsum", "ellipsis")
h.bad(function() tensor.einsum("ii->i", m) end, "einsum", "subscript 'i' has size 3")
h.bad(function() tensor.einsum("iij->j", tensor.ones(1, 3, 2)) end, "einsum", "repeated",
      "sizes 1 and 3")
h.bad(function() tensor.einsum(m, m) end, "einsum", "equation string")
h.bad(function() m:chunk(0) end, "chunk", "must be > 0")
h.bad(function() m:split({1, 2}) end, "split", "add up to 3", "has 2 elements")
h.bad(function() m:split({1, 1}, 2) end, "split", "add up to 2", "dim 2 has 3")
h.bad(function() m:split(0) end, "split", "> 0")
h.bad(function() tensor.ones(3):tril() end, "tril", "at least 2 dimensions")
h.bad(function() tensor.ones(2, 2, 2):diag() end, "diag", "1-D or 2-D")
h.bad(function() m:diagonal(0, 1, 1) end, "diagonal", "same dim")
h.bad(function() m:diagonal(0, 1, 3) end, "diagonal")
h.bad(function() tensor.ones(2, 2, 2):trace() end, "trace", "2-D")
h.bad(function() m:roll({1, 2}, 1) end, "roll", "2 shifts for 1 dims")
h.bad(function() m:repeat_tensor(2) end, "repeat", "1 sizes for a tensor of 2 dimensions")
h.bad(function() m:repeat_tensor(-1, 1) end, "repeat", ">= 0")
h.bad(function() m:tile(math.maxinteger) end, "tile", "too large")
h.bad(function() m:pad({1}) end, "pad", "pairs")
h.bad(function() m:pad({1, 1, 1, 1, 1, 1}) end, "pad", "3 pairs", "2 dimensions")
h.bad(function() m:pad({3, 0}, {mode = "reflect"}) end, "pad", "reflect padding of 3", "size 3")
h.bad(function() m:pad({4, 0}, {mode = "circular"}) end, "pad", "circular")
h.bad(function() m:pad({1, 1}, {mode = "mirror"}) end, "pad", "unknown mode 'mirror'")
h.bad(function() m:pad({-2, -2}) end, "pad", "negative size")
h.bad(function() m:pad({1, 1}, {mode = "reflect", value = 3}) end, "pad", "constant")
h.bad(function() m:pad({1e15, 0}, {mode = "replicate"}) end, "pad", "too many elements")
h.bad(function() m:pad({1e15, 0}) end, "too many elements")
h.bad(function()
  tensor.einsum("abcde,fghij->abcdefghij", tensor.ones(1, 1, 1, 1, 1), tensor.ones(1, 1, 1, 1, 1))
end, "einsum", "10 dimensions")
h.bad(function() tensor.diag(tensor.ones(3), math.mininteger) end, "diag", "too far out")
h.bad(function() tensor.meshgrid(m) end, "meshgrid", "0-D or 1-D")
h.bad(function() tensor.meshgrid(tensor.ones(2), {indexing = "yx"}) end, "meshgrid", "indexing")
h.bad(function() tensor.cross(tensor.ones(2), tensor.ones(2)) end, "cross", "3 elements")

h.done("test_shape_ops")
