-- test_matmul.lua - matmul in every rank combination (as torch.matmul),
-- batched with broadcast batch dims, the mm alias, the module function,
-- dtypes, and non-contiguous operands, against Lua triple loops.
local h = dofile("helpers.lua")

-- f32 dot products of k terms: rel k * 1e-7 (inputs are positive, so there
-- is no cancellation and a relative bound is meaningful).
local function tol(k) return {rel = k * 1e-7 + 1e-7, abs = 1e-6} end

local function dot(a, b)
  local s = 0.0
  for i = 1, #a do s = s + a[i] * b[i] end
  return s
end

local function column(m, j)
  local c = {}
  for i = 1, #m do c[i] = m[i][j] end
  return c
end

local function mat_vec(m, v)
  local out = {}
  for i = 1, #m do out[i] = dot(m[i], v) end
  return out
end

local function vec_mat(v, m)
  local out = {}
  for j = 1, #m[1] do out[j] = dot(v, column(m, j)) end
  return out
end

-- Small exact cases.
h.test("Small exact cases", function()
  local a = tensor.new({{1, 2}, {3, 4}, {5, 6}})     -- [3, 2]
  local b = tensor.new({{7, 8, 9}, {10, 11, 12}})    -- [2, 3]
  local want = {{27, 30, 33}, {61, 68, 75}, {95, 106, 117}}
  h.check(a:float():matmul(b:float()), "f32", want)
  h.check(tensor.matmul(a:float(), b:float()), "f32", want)
  h.check(a:float():mm(b:float()), "f32", want)
  h.check(tensor.mm(a:float(), b:float()), "f32", want)
  -- integer matmul is exact and stays i64 (as torch.matmul)
  h.check(a:matmul(b), "i64", want)
  h.check(a:double():matmul(b:double()), "f64", want)
  -- 1-D . 1-D: a 0-dim dot product
  local d = tensor.new({1.0, 2, 3}):matmul(tensor.new({4.0, 5, 6}))
  assert(d:dim() == 0)
  h.check(d, "f32", 32)
  h.check(tensor.new({1, 2, 3}):matmul(tensor.new({4, 5, 6})), "i64", 32)
  -- 2-D @ 1-D and 1-D @ 2-D
  h.check(a:float():matmul(tensor.new({1.0, -1})), "f32", {-1, -1, -1})
  h.check(tensor.new({1.0, 0, -1}):matmul(a:float()), "f32", {-4, -4})
  -- identity
  h.check(tensor.eye(3):matmul(a:float()), "f32", {{1, 2}, {3, 4}, {5, 6}})
end)

-- Randomized 2-D: 17x33 @ 33x9 against a Lua triple loop.
local A = h.rand_list(101, {17, 33}, 0, 1)
local B = h.rand_list(102, {33, 9}, 0, 1)
h.test("randomized 2-D 17x33 @ 33x9", function()
  local ta, tb = tensor.new(A), tensor.new(B)
  local want = h.matmul2(A, B)
  h.check(ta:matmul(tb), "f32", want, tol(33))
  -- f64 gives double accuracy on the same (f32-valued) inputs
  h.check(ta:double():matmul(tb:double()), "f64", want, {rel = 1e-13, abs = 1e-13})
  -- transposed operands (non-contiguous views): (B^T A^T)^T = A B
  h.check(tb:t():matmul(ta:t()):t(), "f32", want, tol(33))
  -- a contiguous copy of a transposed operand
  local bt = tensor.new(B):t():contiguous()          -- [9, 33]
  h.check(ta:matmul(bt:t()), "f32", want, tol(33))
  -- narrowed operand: the first 20 columns of A times the first 20 rows of B
  local A20, B20 = {}, {}
  for i = 1, 17 do
    A20[i] = {}
    for p = 1, 20 do A20[i][p] = A[i][p] end
  end
  for p = 1, 20 do B20[p] = B[p] end
  h.check(ta:narrow(2, 1, 20):matmul(tb:narrow(1, 1, 20)), "f32", h.matmul2(A20, B20), tol(20))
  -- 1-D mixes with the random data
  local v = column(B, 1)                              -- [33]
  h.check(ta:matmul(tensor.new(v)), "f32", mat_vec(A, v), tol(33))
  h.check(tensor.new(A[1]):matmul(tb), "f32", vec_mat(A[1], B), tol(33))
  h.check(tensor.new(A[1]):matmul(tensor.new(v)), "f32", dot(A[1], v), tol(33))
end)

-- Batched: 3-D @ 3-D.
local function batch(seed, shape) return h.rand_list(seed, shape, 0, 1) end
h.test("batched 3-D", function()
  local X = batch(201, {4, 5, 6})
  local Y = batch(202, {4, 6, 3})
  local want = {}
  for i = 1, 4 do want[i] = h.matmul2(X[i], Y[i]) end
  h.check(tensor.new(X):matmul(tensor.new(Y)), "f32", want, tol(6))
  h.check(tensor.matmul(tensor.new(X), tensor.new(Y)), "f32", want, tol(6))
  -- 3-D @ 2-D: the matrix broadcasts over the batch
  local W = batch(203, {6, 2})
  local want2 = {}
  for i = 1, 4 do want2[i] = h.matmul2(X[i], W) end
  h.check(tensor.new(X):matmul(tensor.new(W)), "f32", want2, tol(6))
  -- 2-D @ 3-D
  local Z = batch(204, {3, 5})
  local want3 = {}
  for i = 1, 4 do want3[i] = h.matmul2(Z, X[i]) end
  h.check(tensor.new(Z):matmul(tensor.new(X)), "f32", want3, tol(5))
  -- 3-D @ 1-D: [4, 5, 6] @ [6] -> [4, 5]
  local v = batch(205, {6})
  local want4 = {}
  for i = 1, 4 do want4[i] = mat_vec(X[i], v) end
  h.check(tensor.new(X):matmul(tensor.new(v)), "f32", want4, tol(6))
  -- 1-D @ 3-D: [5] @ [4, 5, 6] -> [4, 6]
  local u = batch(206, {5})
  local want5 = {}
  for i = 1, 4 do want5[i] = vec_mat(u, X[i]) end
  h.check(tensor.new(u):matmul(tensor.new(X)), "f32", want5, tol(5))
end)

-- Broadcast batch dims: [2, 1, 3, 4] @ [1, 5, 4, 2] -> [2, 5, 3, 2],
-- and [3, 4] @ [2, 2, 4, 5] -> [2, 2, 3, 5], [2, 3, 4] @ [1, 4, 2] -> [2, 3, 2].
h.test("Broadcast batch dims: [2, 1, 3, 4] @ [1, 5, 4, 2] -> [2, ...", function()
  local P = batch(301, {2, 1, 3, 4})
  local Q = batch(302, {1, 5, 4, 2})
  local got = tensor.new(P):matmul(tensor.new(Q))
  h.shape(got, {2, 5, 3, 2})
  local want = {}
  for i = 1, 2 do
    want[i] = {}
    for j = 1, 5 do want[i][j] = h.matmul2(P[i][1], Q[1][j]) end
  end
  h.check(got, "f32", want, tol(4))

  local M = batch(303, {3, 4})
  local R = batch(304, {2, 2, 4, 5})
  local want2 = {}
  for i = 1, 2 do
    want2[i] = {}
    for j = 1, 2 do want2[i][j] = h.matmul2(M, R[i][j]) end
  end
  h.check(tensor.new(M):matmul(tensor.new(R)), "f32", want2, tol(4))

  local S = batch(305, {2, 3, 4})
  local T = batch(306, {1, 4, 2})
  local want3 = {}
  for i = 1, 2 do want3[i] = h.matmul2(S[i], T[1]) end
  h.check(tensor.new(S):matmul(tensor.new(T)), "f32", want3, tol(4))
  -- 4-D @ 1-D
  local v = batch(307, {4})
  local want4 = {}
  for i = 1, 2 do want4[i] = {mat_vec(P[i][1], v)} end
  h.check(tensor.new(P):matmul(tensor.new(v)), "f32", want4, tol(4))
  -- an expanded (stride 0) batch operand
  local E = tensor.new(T[1]):expand(2, 4, 2)
  h.check(tensor.new(S):matmul(E), "f32", want3, tol(4))
end)

-- A transposed batch operand: X:transpose(2, 3) @ Y.
h.test("A transposed batch operand: X:transpose(2, 3) @ Y", function()
  local X = batch(401, {3, 6, 5})     -- transposed to [3, 5, 6]
  local Y = batch(402, {3, 6, 4})
  local want = {}
  for i = 1, 3 do
    local xt = {}
    for r = 1, 5 do
      xt[r] = {}
      for c = 1, 6 do xt[r][c] = X[i][c][r] end
    end
    want[i] = h.matmul2(xt, Y[i])
  end
  h.check(tensor.new(X):transpose(2, 3):matmul(tensor.new(Y)), "f32", want, tol(6))
end)

-- Products of at most 8 rows (matmul.cpp's small_rows_product and, for a B
-- read transposed, small_rows_dot_product: lazylua's own loops rather than
-- OpenBLAS; 9 rows and more take OpenBLAS again), with remainders of the
-- 64-, 32-, 16- and 8-column blocks, of the 3-, 4- and 8-column blocks, of
-- the 4-row blocks and of the 8 lanes over k, a transposed A, a transposed B
-- and views with gaps between rows.
local function exact_list(seed, rows, cols)
  -- small integers: every partial sum is exact, so any order of the sums
  -- gives the loop's value bit for bit
  local out, x = {}, seed
  for i = 1, rows do
    out[i] = {}
    for j = 1, cols do
      x = (x * 1103515245 + 12345) % 2147483648
      out[i][j] = x % 9 - 4
    end
  end
  return out
end
-- Checks [m, k] x [k, n] on integer inputs, plain, with A read transposed
-- ([k, m] stored), with B read transposed ([n, k] stored, as nn.Linear keeps
-- its weight) and with gaps between the rows of A and of B.
local function check_small_product(m, n, k)
  local seed = m * 10000 + n * 100 + k
  local A, B = exact_list(seed, m, k), exact_list(seed + 1, k, n)
  local want = h.matmul2(A, B)
  local what = string.format("[%d, %d] x [%d, %d]: ", m, k, k, n)
  local function check(t)
    local ok, message = pcall(h.check, t, "f32", want, h.EXACT)
    if not ok then error(what .. tostring(message), 3) end
  end
  check(tensor.new(A):float():matmul(tensor.new(B):float()))
  local At = {}
  for p = 1, k do
    At[p] = {}
    for i = 1, m do At[p][i] = A[i][p] end
  end
  check(tensor.new(At):float():t():matmul(tensor.new(B):float()))
  local Bt = {}
  for j = 1, n do
    Bt[j] = {}
    for p = 1, k do Bt[j][p] = B[p][j] end
  end
  check(tensor.new(A):float():matmul(tensor.new(Bt):float():t()))
  local wide_bt = tensor.zeros(n, k + 6)
  wide_bt:narrow(2, 4, k):copy_(tensor.new(Bt):float())
  check(tensor.new(A):float():matmul(wide_bt:narrow(2, 4, k):t()))
  local wide_a = tensor.zeros(m, k + 3)
  wide_a:narrow(2, 2, k):copy_(tensor.new(A):float())
  local wide_b = tensor.zeros(k, n + 5)
  wide_b:narrow(2, 3, n):copy_(tensor.new(B):float())
  check(wide_a:narrow(2, 2, k):matmul(wide_b:narrow(2, 3, n)))
end

-- The sweep runs eagerly in every mode: each shape is a graph of its own,
-- and compiling 800 of them took minutes, while every tier calls the same
-- product. A few shapes run in the test's own mode.
h.test("products of 1 to 9 rows: every column remainder, exact and random", function()
  local was_eager = tensor.is_eager()
  tensor.set_eager(true)
  local ok, message = pcall(function()
    for _, m in ipairs({1, 2, 3, 4, 5, 7, 8, 9}) do
      for _, n in ipairs({1, 7, 8, 9, 17, 31, 33, 63, 64, 65, 130}) do
        for _, k in ipairs({1, 5, 67}) do check_small_product(m, n, k) end
      end
    end
  end)
  tensor.set_eager(was_eager)
  if not ok then error(message, 0) end
  check_small_product(3, 65, 5)
  check_small_product(8, 17, 64)
  for _, m in ipairs({1, 4, 8, 9}) do
    local A, B = h.rand_list(500 + m, {m, 70}, -1, 1), h.rand_list(600 + m, {70, 45}, -1, 1)
    h.check(tensor.new(A):matmul(tensor.new(B)), "f32", h.matmul2(A, B), {rel = 1e-5, abs = 1e-5})
    h.check(tensor.new(A):matmul(tensor.new(B):t():contiguous():t()), "f32", h.matmul2(A, B),
            {rel = 1e-5, abs = 1e-5})
  end
end)

-- An element's bits do not depend on the block that computes it, so not on
-- the thread count either (the threads take bands of columns): the same row
-- in a product of 3 rows and of 8, the same column among 19 and among 200.
h.test("a small product's bits do not depend on its row and column counts", function()
  local A = tensor.new(h.rand_list(701, {8, 96}, -1, 1))
  local B = tensor.new(h.rand_list(702, {96, 200}, -1, 1))
  local all = A:matmul(B)
  local three_rows = A:narrow(1, 4, 3):matmul(B)
  local some_columns = A:matmul(B:narrow(2, 38, 19))
  local function bits(t)
    local out = {}
    for i, row in ipairs(t:tolist()) do
      for j, x in ipairs(row) do out[#out + 1] = string.pack("<f", x) end
    end
    return table.concat(out)
  end
  assert(bits(three_rows) == bits(all:narrow(1, 4, 3)), "rows 4..6 differ from the 8-row product's")
  assert(bits(some_columns) == bits(all:narrow(2, 38, 19)), "columns 38..56 differ from the 200-column product's")
  -- The same with B read transposed: the weight of a linear layer at batch
  -- 8, 1000 outputs (OpenBLAS's bits changed with where the threads' bands
  -- cut these columns).
  local W = tensor.new(h.rand_list(703, {1000, 1283}, -1, 1))
  local X = tensor.new(h.rand_list(704, {8, 1283}, -1, 1))
  local linear = X:matmul(W:t())
  assert(bits(X:narrow(1, 2, 1):matmul(W:t())) == bits(linear:narrow(1, 2, 1)),
         "row 2 alone differs from the 8-row product's (B transposed)")
  assert(bits(X:matmul(W:narrow(1, 500, 37):t())) == bits(linear:narrow(2, 500, 37)),
         "columns 500..536 differ from the 1000-column product's (B transposed)")
end)

-- A batch of products too small to cut runs several products to a task on
-- the threads (matmul.cpp, blas_matmul): every product exact, and each one's
-- bits those of the same product alone, with B plain or read transposed.
h.test("a batch of small products on the threads", function()
  for _, shape in ipairs({{600, 8, 8, 8}, {40, 64, 32, 64}, {9, 96, 32, 40}}) do
    local batches, m, k, n = table.unpack(shape)
    local A, B = {}, {}
    for i = 1, batches do
      A[i] = exact_list(i * 7 + m, m, k)
      B[i] = exact_list(i * 13 + n, k, n)
    end
    local a, b = tensor.new(A):float(), tensor.new(B):float()
    local product = a:matmul(b)
    local transposed = a:matmul(b:transpose(2, 3):contiguous():transpose(2, 3))
    for _, i in ipairs({1, batches // 2, batches}) do
      local want = h.matmul2(A[i], B[i])
      h.check(product:narrow(1, i, 1):squeeze(1), "f32", want, h.EXACT)
      h.check(transposed:narrow(1, i, 1):squeeze(1), "f32", want, h.EXACT)
    end
  end
  local a = tensor.new(h.rand_list(801, {300, 16, 24}, -1, 1))
  local b = tensor.new(h.rand_list(802, {300, 24, 20}, -1, 1))
  local all = a:matmul(b)
  for _, i in ipairs({1, 150, 300}) do
    local alone = a:narrow(1, i, 1):matmul(b:narrow(1, i, 1))
    assert(all:narrow(1, i, 1):eq(alone):all():item(), "product " .. i .. " differs from itself alone")
  end
end)

-- Degenerate sizes: k = 0 gives zeros, n = 0 gives an empty result.
h.test("Degenerate sizes: k = 0 gives zeros, n = 0 gives an empty...", function()
  h.check(tensor.zeros(2, 0):matmul(tensor.zeros(0, 3)), "f32", {{0, 0, 0}, {0, 0, 0}})
  h.shape(tensor.zeros(0, 4):matmul(tensor.zeros(4, 3)), {0, 3})
  h.check(tensor.ones(1, 1):matmul(tensor.full({1, 1}, 2.5)), "f32", {{2.5}})
end)

h.done("test_matmul")
