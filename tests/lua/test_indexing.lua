-- test_indexing.lua - tensor.cat, tensor.stack, gather, index_select (1-based
-- index tensors, i64 or i32), against Lua loops.
local h = dofile("helpers.lua")

-- cat: dim defaults to 1; negative dims; more than two inputs.
h.test("cat: dim defaults to 1; negative dims; more than two inputs", function()
  local a = tensor.new({{1, 2}, {3, 4}})
  local b = tensor.new({{5, 6}})
  local c = tensor.new({{7, 8}, {9, 10}, {11, 12}})
  h.check(tensor.cat({a, b}), "i64", {{1, 2}, {3, 4}, {5, 6}})
  h.check(tensor.cat({a, b}, 1), "i64", {{1, 2}, {3, 4}, {5, 6}})
  h.check(tensor.cat({a, b, c}, 1), "i64", {{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}})
  local d = tensor.new({{0}, {-1}})
  h.check(tensor.cat({a, d}, 2), "i64", {{1, 2, 0}, {3, 4, -1}})
  h.check(tensor.cat({d, a, d}, -1), "i64", {{0, 1, 2, 0}, {-1, 3, 4, -1}})
  h.check(tensor.cat({tensor.new({1, 2}), tensor.new({3})}), "i64", {1, 2, 3})
  h.check(tensor.cat({tensor.new({1.5})}), "f32", {1.5})
  -- an empty input along the cat dim is fine
  h.check(tensor.cat({tensor.new({1, 2}), tensor.zeros(0, {dtype = "i64"})}), "i64", {1, 2})
  -- non-contiguous inputs
  h.check(tensor.cat({a:t(), a:t()}, 2), "i64", {{1, 3, 1, 3}, {2, 4, 2, 4}})
  -- 3-D along the middle dim, random f32 data against Lua loops
  local X = h.rand_list(61, {2, 3, 4}, -1, 1)
  local Y = h.rand_list(62, {2, 5, 4}, -1, 1)
  local want = {}
  for i = 1, 2 do
    want[i] = {}
    for j = 1, 3 do want[i][j] = X[i][j] end
    for j = 1, 5 do want[i][3 + j] = Y[i][j] end
  end
  h.check(tensor.cat({tensor.new(X), tensor.new(Y)}, 2), "f32", want)
  -- the result is new storage: writing it does not reach the inputs
  local r = tensor.cat({a, b})
  r:fill_(0)
  h.check(a, "i64", {{1, 2}, {3, 4}})
end)

-- stack: a new dim at any position.
h.test("stack: a new dim at any position", function()
  local a, b = tensor.new({1, 2, 3}), tensor.new({4, 5, 6})
  h.check(tensor.stack({a, b}), "i64", {{1, 2, 3}, {4, 5, 6}})
  h.check(tensor.stack({a, b}, 1), "i64", {{1, 2, 3}, {4, 5, 6}})
  h.check(tensor.stack({a, b}, 2), "i64", {{1, 4}, {2, 5}, {3, 6}})
  h.check(tensor.stack({a, b}, -1), "i64", {{1, 4}, {2, 5}, {3, 6}})
  h.check(tensor.stack({a, b, a}, 1), "i64", {{1, 2, 3}, {4, 5, 6}, {1, 2, 3}})
  local m = tensor.new({{1, 2}, {3, 4}})
  local n = tensor.new({{5, 6}, {7, 8}})
  h.check(tensor.stack({m, n}, 1), "i64", {{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}})
  h.check(tensor.stack({m, n}, 2), "i64", {{{1, 2}, {5, 6}}, {{3, 4}, {7, 8}}})
  h.check(tensor.stack({m, n}, 3), "i64", {{{1, 5}, {2, 6}}, {{3, 7}, {4, 8}}})
  h.check(tensor.stack({tensor.new(1.5), tensor.new(2.5)}), "f32", {1.5, 2.5})
  h.check(tensor.stack({m:t(), n}, 1), "i64", {{{1, 3}, {2, 4}}, {{5, 6}, {7, 8}}})
end)

-- gather(dim, index): out[i][j] = t[index[i][j]][j] (dim 1) or t[i][index[i][j]] (dim 2).
h.test("gather(dim, index): out[i][j] = t[index[i][j]][j] (dim 1)...", function()
  local T = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}
  local t = tensor.new(T)
  local I2 = {{3, 1}, {2, 2}, {1, 3}}
  local want2 = {}
  for i = 1, 3 do
    want2[i] = {}
    for j = 1, 2 do want2[i][j] = T[i][I2[i][j]] end
  end
  h.check(t:gather(2, tensor.new(I2)), "i64", want2)
  h.check(tensor.gather(t, 2, tensor.new(I2)), "i64", want2)
  h.check(t:gather(-1, tensor.new(I2)), "i64", want2)
  h.check(t:gather(2, tensor.new(I2, {dtype = "i32"})), "i64", want2)
  local I1 = {{3, 1, 2}, {1, 1, 1}}
  local want1 = {}
  for i = 1, 2 do
    want1[i] = {}
    for j = 1, 3 do want1[i][j] = T[I1[i][j]][j] end
  end
  h.check(t:gather(1, tensor.new(I1)), "i64", want1)
  -- 1-D
  h.check(tensor.new({10, 20, 30}):gather(1, tensor.new({3, 3, 1, 2})), "i64", {30, 30, 10, 20})
  -- floats and a non-contiguous source
  local f = tensor.new({{0.5, 1.5}, {2.5, 3.5}})
  h.check(f:t():gather(2, tensor.new({{2}, {1}})), "f32", {{2.5}, {1.5}})
  -- random 3-D gather along dim 3 against Lua loops
  local X = h.rand_list(71, {2, 3, 5}, 0, 1)
  tensor.manual_seed(72)
  local idx = tensor.randint(1, 6, 2, 3, 4)
  local I = idx:tolist()
  local want = {}
  for a = 1, 2 do
    want[a] = {}
    for b = 1, 3 do
      want[a][b] = {}
      for c = 1, 4 do want[a][b][c] = X[a][b][I[a][b][c]] end
    end
  end
  h.check(tensor.new(X):gather(3, idx), "f32", want)
end)

-- index_select(dim, index): whole slices at the given positions.
h.test("index_select(dim, index): whole slices at the given posit...", function()
  local T = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}}
  local t = tensor.new(T)
  h.check(t:index_select(1, tensor.new({4, 1, 1})), "i64", {T[4], T[1], T[1]})
  h.check(t:index_select(1, tensor.new({2}, {dtype = "i32"})), "i64", {T[2]})
  h.check(t:index_select(2, tensor.new({3, 1})), "i64",
          {{3, 1}, {6, 4}, {9, 7}, {12, 10}})
  h.check(t:index_select(-1, tensor.new({2, 2})), "i64", {{2, 2}, {5, 5}, {8, 8}, {11, 11}})
  h.check(tensor.index_select(t, 1, tensor.new({3})), "i64", {T[3]})
  h.check(t:t():index_select(1, tensor.new({3})), "i64", {{3, 6, 9, 12}})
  h.check(tensor.new({1.5, 2.5, 3.5}):index_select(1, tensor.new({3, 1})), "f32", {3.5, 1.5})
  -- an index computed by an op (argmax gives 1-based positions)
  local pos = tensor.new({{0.1, 0.9}, {0.8, 0.2}}):argmax(2)       -- {2, 1}
  h.check(tensor.new({{10, 20}, {30, 40}}):index_select(2, pos), "i64", {{20, 10}, {40, 30}})
  -- randperm as an index: a permutation of the rows
  tensor.manual_seed(5)
  local p = tensor.randperm(4)
  local P = p:tolist()
  h.check(t:index_select(1, p), "i64", {T[P[1]], T[P[2]], T[P[3]], T[P[4]]})
  -- the result does not share storage with the source
  local r = t:index_select(1, tensor.new({1}))
  r:fill_(0)
  h.check(t, "i64", T)
end)

h.done("test_indexing")
