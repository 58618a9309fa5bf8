-- example.lua - a tour of lazylua's tensors: run it with `lazylua scripts/example.lua`.
tensor.manual_seed(7)

-- Least squares by gradient descent: recover w_true from noisy samples.
local samples, features = 512, 4
local w_true = tensor.new({{2.0}, {-1.0}, {0.5}, {3.0}})
local x = tensor.randn(samples, features)
local y = x:matmul(w_true) + tensor.randn(samples, 1) * 0.01

local w = tensor.zeros(features, 1)
local learning_rate = 0.1
for step = 1, 200 do
  local residual = x:matmul(w) - y
  local gradient = x:t():matmul(residual) * (2 / samples)
  w:sub_(gradient * learning_rate)
  tensor.mark_step() -- one graph a step (lazylua-lint reports a loop without it)
  if step % 50 == 0 then
    print(string.format("step %3d  loss %.6f", step, (residual ^ 2):mean():item()))
  end
end
print("recovered weights:")
print(w:t())

-- Softmax over the rows of a small matrix, and the most likely column.
local logits = tensor.new({{1, 2, 3}, {3, 1, 0}}):float()
local probabilities = logits:softmax(2)
print(probabilities)
local _, best = probabilities:max(2)
print("best column per row: " .. table.concat(best:tolist(), " "))
