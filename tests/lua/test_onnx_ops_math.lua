-- test_onnx_ops_math.lua - the ONNX math ops (stdlib/onnx_ops_math.lua)
-- called directly, with hand-built tensors and attribute tables. Expected
-- values are by hand or from NumPy 1.24 / PyTorch 1.13 in float64 (pasted).
-- The ops run through the op registry of the onnx module (onnx.ops).
local h = dofile("helpers.lua")
local onnx = require "onnx"
local ops = onnx.ops

local inf, nan = math.huge, 0 / 0
local T, F = true, false

-- A context as the runtime gives one: opset, node, error/unsupported/host.
local function context(op_type, opset)
  local ctx = {opset = opset or 17, node = {op_type = op_type, name = "n1"}}
  function ctx:error(fmt, ...) error("onnx: " .. op_type .. ": " .. string.format(fmt, ...), 0) end
  function ctx:unsupported(fmt, ...) error("onnx: " .. op_type .. ": unsupported: " .. string.format(fmt, ...), 0) end
  function ctx:host(t) local v = t:reshape(-1):tolist() return type(v) == "table" and v or {v} end
  return ctx
end

-- ops[op_type](ctx, inputs, attrs) with the inputs as a list (nil for an
-- omitted one; `n` = the number of slots).
local function run(op_type, inputs, attrs, opset)
  inputs.n = inputs.n or #inputs
  return ops[op_type](context(op_type, opset), inputs, attrs or {})
end

local function f64(values) return tensor.new(values, {dtype = "f64"}) end
local function i64(values) return tensor.new(values, {dtype = "i64"}) end

-- ---------------------------------------------------------------------------
h.test("registry: the math ops are in onnx.ops", function()
  for _, op_type in ipairs({"Abs", "Relu", "Add", "Mod", "Clip", "Cast", "Gemm", "Softmax", "ReduceSum",
                            "ArgMax", "CumSum", "TopK", "Einsum", "NegativeLogLikelihoodLoss",
                            "SoftmaxCrossEntropyLoss", "MatMulInteger"}) do
    assert(type(ops[op_type]) == "function", op_type .. " is missing")
  end
end)

h.test("unary and activations: NumPy's values", function()
  local x = f64({-2.0, -0.5, 0.0, 0.5, 3.0})
  h.near(run("Elu", {x}), {-0.8646647167633873, -0.3934693402873666, 0.0, 0.5, 3.0}, h.F64, "f64")
  h.near(run("Selu", {x}), {-1.5201664733475926, -0.6917581899652426, 0.0, 0.5253505110740662,
                             3.152103066444397}, h.F64)
  h.near(run("Celu", {x}, {alpha = 2.0}), {-1.2642411176571153, -0.44239843385719024, 0.0, 0.5, 3.0}, h.F64)
  h.near(run("Softplus", {x}), {0.1269280110429725, 0.4740769841801067, 0.6931471805599453,
                                 0.9740769841801067, 3.048587351573742}, h.F64)
  h.near(run("Mish", {x}), {-0.2525014826957089, -0.22074377465173, 0.0, 0.3752452113048951,
                             2.986535004967957}, h.F64)
  h.near(run("HardSwish", {x}), {-1 / 3, -0.20833333333333334, 0.0, 0.2916666666666667, 3.0}, h.F64)
  h.near(run("HardSigmoid", {x}), {0.1, 0.4, 0.5, 0.6, 1.0}, h.F64)
  h.near(run("LeakyRelu", {x}), {-0.02, -0.005, 0, 0.5, 3}, h.F64)
  h.near(run("ThresholdedRelu", {x}, {alpha = 0.5}), {0, 0, 0, 0, 3}, h.F64)
  h.near(run("Softsign", {x}), {-2 / 3, -1 / 3, 0, 1 / 3, 0.75}, h.F64)
  h.near(run("Shrink", {x}, {lambd = 1.0, bias = 0.5}), {-1.5, 0, 0, 0, 2.5}, h.F64)
  h.near(run("PRelu", {f64({{-1, 2}, {-3, 4}}), f64({0.5, 0.25})}), {{-0.5, 2}, {-1.5, 4}}, h.F64)
  -- opset 6: one slope per channel (dim 2)
  h.near(run("PRelu", {f64({{{-1, -2}, {-3, 4}}}), f64({0.5, 0.25})}, {}, 6), {{{-0.5, -1}, {-0.75, 4}}}, h.F64)
  -- Shrink keeps an integer input's type.
  h.check(run("Shrink", {tensor.new({-3, 1, 4}, {dtype = "i32"})}, {lambd = 1.5, bias = 1.5}), "i32",
          {-1, 0, 2})
end)

h.test("IsInf, IsNaN, Not, Round (half to even)", function()
  local x = f64({-inf, -1, 0, inf, nan})
  h.check(run("IsInf", {x}), "bool", {T, F, F, T, F})
  h.check(run("IsInf", {x}, {detect_negative = 0}), "bool", {F, F, F, T, F})
  h.check(run("IsInf", {x}, {detect_positive = 0}), "bool", {T, F, F, F, F})
  h.check(run("IsNaN", {x}), "bool", {F, F, F, F, T})
  h.check(run("Not", {tensor.new({true, false})}), "bool", {F, T})
  h.check(run("Round", {f64({0.5, 1.5, 2.5, -0.5, -1.5, 2.4})}), "f64", {0, 2, 2, 0, -2, 2})
end)

h.test("binary: integer Div truncates, Mod both signs, Pow keeps the base type", function()
  local a, b = i64({7, -7, 7, -7, 6}), i64({2, 2, -2, -2, 3})
  h.check(run("Div", {a, b}), "i64", {3, -3, -3, 3, 2})
  h.check(run("Mod", {a, b}), "i64", {1, 1, -1, -1, 0})               -- sign of the divisor
  h.check(run("Mod", {a, b}, {fmod = 1}), "i64", {1, -1, 1, -1, 0})   -- sign of the dividend
  h.near(run("Mod", {f64({5.5, -5.5, 5.5}), f64({2, 2, -2})}, {fmod = 1}), {1.5, -1.5, 1.5}, h.F64)
  h.check(run("Pow", {tensor.new({1, 2, 3}, {dtype = "i32"}), tensor.new({4.0, 5.0, 6.0})}), "i32", {1, 32, 729})
  h.check(run("BitShift", {i64({16, 4, 1}), i64({1, 2, 3})}, {direction = "LEFT"}), "i64", {32, 16, 8})
  h.check(run("BitShift", {i64({16, 4, 1}), i64({1, 2, 3})}, {direction = "RIGHT"}), "i64", {8, 1, 0})
  h.check(run("LessOrEqual", {i64({1, 2, 3}), i64({2})}), "bool", {T, T, F})
  h.check(run("Xor", {tensor.new({T, T, F}), tensor.new({T, F, F})}), "bool", {F, T, F})
  -- Before opset 7: broadcast = 1 with axis aligns B at that axis of A.
  local legacy = run("Add", {f64({{1, 2, 3}, {4, 5, 6}}), f64({10, 20})}, {broadcast = 1, axis = 0}, 6)
  h.check(legacy, "f64", {{11, 12, 13}, {24, 25, 26}})
end)

h.test("variadic, Where, Clip in both opset forms", function()
  local a, b, c = f64({1, 5, 3}), f64({4, 2, 6}), f64({0, 9, 3})
  h.check(run("Max", {a, b, c}), "f64", {4, 9, 6})
  h.check(run("Min", {a, b, c}), "f64", {0, 2, 3})
  h.check(run("Sum", {a, b, c}), "f64", {5, 16, 12})
  h.near(run("Mean", {a, b, c}), {5 / 3, 16 / 3, 4}, h.F64)
  h.check(run("Max", {a}), "f64", {1, 5, 3})
  h.check(run("Where", {tensor.new({T, F, T}), a, b}), "f64", {1, 2, 3})
  local x = f64({-3, 0, 3})
  h.check(run("Clip", {x}, {min = -1.0, max = 2.0}, 6), "f64", {-1, 0, 2})
  h.check(run("Clip", {x, f64(-1), f64(2)}, {}, 13), "f64", {-1, 0, 2})
  h.check(run("Clip", {x, nil, f64(2), n = 3}, {}, 13), "f64", {-3, 0, 2})
  h.check(run("Clip", {tensor.new({-100, 5, 100}, {dtype = "i32"}), tensor.new(-10, {dtype = "i32"})}, {}, 13),
          "i32", {-10, 5, 100})
end)

h.test("Cast and CastLike", function()
  local x = f64({1.7, -2.2, 0})
  h.check(run("Cast", {x}, {to = 7}), "i64", {1, -2, 0})
  h.check(run("Cast", {x}, {to = 9}), "bool", {T, T, F})
  h.check(run("Cast", {x}, {to = "FLOAT"}, 5), "f32", {h.f32(1.7), h.f32(-2.2), 0})
  h.check(run("CastLike", {x, tensor.new({1}, {dtype = "i32"})}), "i32", {1, -2, 0})
  -- the narrow integer types wrap, held in i32 (UINT32 in i64)
  h.check(run("Cast", {i64({300, -1, 255, 128})}, {to = 2}), "i32", {44, 255, 255, 128})
  h.check(run("Cast", {i64({300, -1, 255, 128})}, {to = 3}), "i32", {44, -1, -1, -128})
  h.check(run("Cast", {i64({70000, -1})}, {to = 5}), "i32", {4464, -1})
  h.check(run("Cast", {i64({-1, 5})}, {to = 12}), "i64", {4294967295, 5})
  h.check(run("Cast", {f64({3.7, 200.2})}, {to = 2}), "i32", {3, 200})
  h.err(function() run("Cast", {x}, {to = 10}) end, "unsupported", "FLOAT16")
  h.err(function() run("Cast", {x}, {to = 8}) end, "unsupported", "STRING")
end)

h.test("MatMul, Gemm, MatMulInteger, Einsum", function()
  local a, b = f64({{1, 2}, {3, 4}}), f64({{5, 6}, {7, 8}})
  h.check(run("MatMul", {a, b}), "f64", {{19, 22}, {43, 50}})
  -- alpha A^T B^T + beta C, C a row broadcast
  h.check(run("Gemm", {a, b, f64({1, 2})}, {alpha = 2.0, beta = 3.0, transA = 1, transB = 1}), "f64",
          {{2 * 23 + 3, 2 * 31 + 6}, {2 * 34 + 3, 2 * 46 + 6}})
  h.check(run("Gemm", {a, b}), "f64", {{19, 22}, {43, 50}})
  -- (A - [1, 2] per row) @ (B - 1)
  h.check(run("MatMulInteger", {tensor.new({{3, 4}, {5, 6}}, {dtype = "i32"}),
                                tensor.new({{2, 1}, {1, 3}}, {dtype = "i32"}),
                                tensor.new({1, 2}, {dtype = "i32"}), tensor.new(1, {dtype = "i32"})}),
          "i32", {{2, 6}, {3, 8}})
  h.check(run("Einsum", {a, b}, {equation = "ij,jk->ik"}), "f64", {{19, 22}, {43, 50}})
  h.check(run("Einsum", {a}, {equation = "ii"}), "f64", 5)
  h.err(function() run("Gemm", {f64({1, 2}), b}) end, "2-d")
end)

h.test("Det: pivoting, singular and batched matrices (NumPy's values)", function()
  h.near(run("Det", {f64({{0, 2, 1}, {1, 1, 1}, {2, 0, 3}})}), -4, h.F64)   -- a zero first pivot
  local m4 = f64({{2, -1, 0, 3}, {1, 0.5, 4, -2}, {0, 3, 1, 1}, {5, 2, -1, 0}})
  h.near(run("Det", {m4}), 255.5, {rel = 1e-12, abs = 1e-12})
  h.near(run("Det", {f64({{{1, 2}, {2, 4}}, {{0, 1}, {1, 0}}})}), {0, -1}, h.F64)
  h.near(run("Det", {f64({{0, 0}, {0, 0}})}), 0, h.F64)
  h.near(run("Det", {tensor.new({{3.5}})}), 3.5, h.F32, "f32")
  h.err(function() run("Det", {f64({1, 2})}) end, "square matrices")
  h.err(function() run("Det", {i64({{1}})}) end, "float tensor")
end)

h.test("Softmax, LogSoftmax, Hardmax: 2-d coercion before opset 13, one axis after", function()
  local x = tensor.arange(8):to("f64"):reshape(2, 2, 2)
  local p = 0.03205860328008499
  local q, r, s = 0.08714431874203257, 0.23688281808991016, 0.6439142598879724
  h.near(run("Softmax", {x}, {axis = 1}, 11), {{{p, q}, {r, s}}, {{p, q}, {r, s}}}, h.F64)
  local u, v = 0.11920292202211755, 0.8807970779778823
  h.near(run("Softmax", {x}, {axis = 1}, 13), {{{u, u}, {v, v}}, {{u, u}, {v, v}}}, h.F64)
  h.near(run("LogSoftmax", {x}, {axis = 1}, 13), {{{math.log(u), math.log(u)}, {math.log(v), math.log(v)}},
                                                  {{math.log(u), math.log(u)}, {math.log(v), math.log(v)}}}, h.F64)
  -- the first maximum wins
  h.check(run("Hardmax", {f64({{3, 1, 3}, {0, 2, 1}})}, {}, 13), "f64", {{1, 0, 0}, {0, 1, 0}})
  h.check(run("Hardmax", {f64({{3, 1}, {0, 5}})}, {axis = 0}, 11), "f64", {{0, 0}, {0, 1}})
  h.err(function() run("Softmax", {x}, {axis = 3}, 13) end, "axis 3 is outside [-3, 2]")
end)

h.test("reductions: axes, keepdims, noop_with_empty_axes, integer types", function()
  local s = f64({{{1, 2}, {0.5, -1}, {3, 0}}, {{0, 0}, {1, 1}, {-2, 2}}})
  h.check(run("ReduceSum", {s, i64({1})}, {keepdims = 0}, 13), "f64", {{4.5, 1}, {-1, 3}})
  h.check(run("ReduceSum", {s, i64({-1, 0})}, {}, 13), "f64", {{{3}, {1.5}, {3}}})
  h.check(run("ReduceSum", {s}, {keepdims = 0}, 13), "f64", 7.5)
  h.check(run("ReduceSum", {s, i64({})}, {noop_with_empty_axes = 1}, 13), "f64",
          {{{1, 2}, {0.5, -1}, {3, 0}}, {{0, 0}, {1, 1}, {-2, 2}}})
  h.check(run("ReduceSum", {s}, {axes = {1}, keepdims = 0}, 11), "f64", {{4.5, 1}, {-1, 3}})
  h.check(run("ReduceMax", {s}, {axes = {0, 2}, keepdims = 0}), "f64", {2, 1, 3})
  h.check(run("ReduceMin", {s}, {axes = {2}}), "f64", {{{1}, {-1}, {0}}, {{0}, {1}, {-2}}})
  h.check(run("ReduceProd", {s}, {axes = {1}, keepdims = 0}), "f64", {{1.5, 0}, {0, 0}})
  h.near(run("ReduceMean", {s}, {axes = {0, 1}, keepdims = 0}), {3.5 / 6, 4 / 6}, h.F64)
  h.near(run("ReduceLogSumExp", {s}, {axes = {0, 2}, keepdims = 0}),
         {2.4938117090722383, 2.0086386897003337, 3.353753801129306}, h.F64)
  h.near(run("ReduceL2", {s}, {axes = {1}, keepdims = 0}),
         {{3.2015621187164243, 2.23606797749979}, {2.23606797749979, 2.23606797749979}}, h.F64)
  h.check(run("ReduceL1", {s}, {axes = {1}, keepdims = 0}), "f64", {{4.5, 3}, {3, 3}})
  h.check(run("ReduceSumSquare", {s}, {axes = {2}, keepdims = 0}), "f64", {{5, 1.25, 9}, {0, 2, 8}})
  h.near(run("ReduceLogSum", {f64({1, 2, 3})}, {keepdims = 0}), math.log(6), h.F64)
  -- integers keep their type; an integer mean truncates as NumPy's cast back
  h.check(run("ReduceSum", {tensor.new({{1, 2}, {3, 4}}, {dtype = "i32"})}, {keepdims = 0}, 11), "i32", 10)
  h.check(run("ReduceMean", {tensor.new({1, 2}, {dtype = "i32"})}, {keepdims = 0}), "i32", 1)
  h.err(function() run("ReduceMax", {s}, {axes = {1, -2}}) end, "given twice")
end)

h.test("ArgMax, ArgMin: keepdims and select_last_index, 0-based i64", function()
  local x = f64({{2, 5, 5}, {7, 1, 7}})
  h.check(run("ArgMax", {x}, {axis = 1}), "i64", {{1}, {0}})
  h.check(run("ArgMax", {x}, {axis = 1, select_last_index = 1}), "i64", {{2}, {2}})
  h.check(run("ArgMax", {x}, {axis = 0, keepdims = 0}), "i64", {1, 0, 1})
  h.check(run("ArgMin", {x}, {axis = -1, keepdims = 0}), "i64", {0, 1})
  h.check(run("ArgMin", {f64({{1, 1, 3}})}, {axis = 1, keepdims = 0, select_last_index = 1}), "i64", {1})
end)

h.test("CumSum: exclusive, reverse; TopK: largest, smallest, opset 1 k", function()
  local x = f64({1, 2, 3, 4})
  h.check(run("CumSum", {x, i64(0)}), "f64", {1, 3, 6, 10})
  h.check(run("CumSum", {x, i64(0)}, {exclusive = 1}), "f64", {0, 1, 3, 6})
  h.check(run("CumSum", {x, i64(0)}, {reverse = 1}), "f64", {10, 9, 7, 4})
  h.check(run("CumSum", {x, i64(0)}, {reverse = 1, exclusive = 1}), "f64", {9, 7, 4, 0})
  h.check(run("CumSum", {i64({{1, 2}, {3, 4}}), tensor.new(-1, {dtype = "i32"})}), "i64", {{1, 3}, {3, 7}})
  local y = f64({{3, 1, 4, 1}, {5, 9, 2, 6}})
  local values, indices = run("TopK", {y, i64({2})}, {}, 11)
  h.check(values, "f64", {{4, 3}, {9, 6}})
  h.check(indices, "i64", {{2, 0}, {1, 3}})
  values, indices = run("TopK", {y, i64({2})}, {largest = 0, axis = 1}, 11)
  h.check(values, "f64", {{1, 1}, {2, 5}})
  h.check(indices, "i64", {{1, 3}, {2, 0}})
  values, indices = run("TopK", {y}, {k = 1, axis = 0}, 1)
  h.check(values, "f64", {{5, 9, 4, 6}})
  h.check(indices, "i64", {{1, 1, 0, 1}})
end)

h.test("losses: PyTorch's values, weights, ignore_index, reductions", function()
  local s = f64({{{1, 2}, {0.5, -1}, {3, 0}}, {{0, 0}, {1, 1}, {-2, 2}}})   -- N 2, C 3, d 2
  local target, weight = i64({{0, 2}, {1, -1}}), f64({0.2, 0.3, 0.5})
  local attrs = {reduction = "none", ignore_index = -1}
  local loss, log_prob = run("SoftmaxCrossEntropyLoss", {s, target, weight}, attrs)
  h.near(loss, {{0.4393468193839234, 1.0849230097781428}, {0.1047036650304559, 0.0}}, h.F64)
  local lp = {-2.196734096919617, -0.16984601955628548, -2.696734096919617, -3.1698460195562856,
              -0.19673409691961713, -2.1698460195562856, -1.3490122167681864, -2.4076059644443806,
              -0.34901221676818633, -1.4076059644443804, -3.349012216768186, -0.4076059644443804}
  h.near(log_prob:reshape(-1), lp, h.F64)
  h.near(run("SoftmaxCrossEntropyLoss", {s, target, weight}, {ignore_index = -1}), 1.628973494192522, h.F64)
  h.check(run("NegativeLogLikelihoodLoss", {s, i64({{0, 2}, {1, 0}})}, {reduction = "sum"}), "f64", -2.0)
  -- mean without weights: over the kept targets only
  h.near(run("NegativeLogLikelihoodLoss", {s, target}, {ignore_index = -1}), -(1 + 0 + 1) / 3, h.F64)
  h.err(function() run("NegativeLogLikelihoodLoss", {s, target}, {reduction = "max"}) end, "reduction")
  h.err(function() run("NegativeLogLikelihoodLoss", {s, i64({0, 1})}) end, "target must have 2 dims")
end)

h.test("gradients flow through the ops", function()
  local x = f64({{1, -2}, {3, 0.5}})
  x:requires_grad(true)
  local y = run("ReduceSum", {run("Mul", {run("LeakyRelu", {x}, {alpha = 0.5}), x})}, {keepdims = 0}, 11)
  y:backward()
  -- d/dx of x * leaky(x): 2x where x > 0, 2 * 0.5 * x where x < 0
  h.near(x:grad(), {{2, -2}, {6, 1}}, h.F64)
  local w = f64({{1, 2}, {3, 4}})
  w:requires_grad(true)
  run("Gemm", {f64({{1, 1}}), w}, {alpha = 3.0}):sum():backward()
  h.check(w:grad(), "f64", {{3, 3}, {3, 3}})
end)

h.test("bad models: missing inputs and attributes name the problem", function()
  h.err(function() run("Add", {f64({1}), nil, n = 2}) end, "input 2 is required")
  h.err(function() run("Cast", {f64({1})}, {}) end, "'to' is required")
  h.err(function() run("BitShift", {i64({1}), i64({1})}, {direction = "UP"}) end, "LEFT or RIGHT")
  h.err(function() run("Mod", {f64({1}), f64({2})}) end, "fmod = 1")
  h.err(function() run("Einsum", {f64({1})}) end, "'equation' is required")
  h.err(function() run("ArgMax", {f64({1, 2})}, {axis = 1}) end, "axis 1 is outside")
  h.still_works()
end)

h.done("test_onnx_ops_math")
