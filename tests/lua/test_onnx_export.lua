-- test_onnx_export.lua - tensor.graph and onnx.export: the Fashion-MNIST
-- MLP and CNN (their definitions read from the scripts) and a function using
-- many IR ops are exported, checked by libonnx (build/onnx_check, Debian's
-- checker and strict shape inference: a consumer lazylua did not write),
-- re-imported with onnx.load and compared with the Lua model.
local h = dofile("helpers.lua")
local nn = require "nn"
local onnx = require "onnx"
local native = require "stdlib.native"
local optim = require "optim"

local build_dir = arg[-1]:match("^(.*)/[^/]*$") or "."
local checker = build_dir .. "/onnx_check"
local tmp = os.tmpname()
os.remove(tmp)
local function temp_path(name) return tmp .. "_" .. name .. ".onnx" end
local this_file = "test_onnx_export.lua"

-- Runs libonnx's checker on a file: passes, or fails with its message.
local function check_with_libonnx(path)
  local pipe = io.popen(string.format("%q %q 2>&1", checker, path))
  local text = pipe:read("a")
  local ok = pipe:close()
  if not ok then error("onnx_check failed: " .. text, 2) end
  assert(text:match("^ok: "), text)
end

-- Lists of strings (h.eq compares numbers and booleans).
local function same_strings(got, want)
  local a, b = table.concat(got, "|"), table.concat(want, "|")
  if a ~= b or #got ~= #want then error(string.format("got {%s}, expected {%s}", a, b), 2) end
end

local function decode(path) return native.onnx_decode_model(h.read_bytes(path)) end

-- The model function of a Fashion-MNIST script (its spec's `model`), read
-- without running the training: the script's dofile of fashion_common.lua
-- gets a stand-in whose run keeps the spec.
local function script_model(script)
  local spec
  local env = setmetatable({
    arg = {[0] = "../../scripts/" .. script},
    dofile = function() return {run = function(s) spec = s end} end,
  }, {__index = _G})
  local chunk = assert(loadfile("../../scripts/" .. script, "t", env))
  chunk()
  return spec
end

h.test("tensor.graph lists ops, leaves, attrs and lines", function()
  local was_eager = tensor.is_eager()
  tensor.set_eager(false)  -- eager mode records nothing: a result is one data leaf
  local x = tensor.new({{1.5, -2}, {3, 4}})
  local y = (x * 2.5):sum(2) + 1  -- line of the ops
  local op_line = debug.getinfo(1, "l").currentline - 1
  local g = tensor.graph(y)
  h.eq(#g.outputs, 1)
  local by_name = {}
  for _, n in ipairs(g.nodes) do by_name[n.name] = n end
  local param, mul, sum, add = by_name.parameter, by_name.mul, by_name.sum, by_name.add
  h.eq(param.kind, "parameter")
  h.eq(param.data:tolist(), {{1.5, -2}, {3, 4}})
  h.eq(by_name.scalar.value, 2.5)
  h.eq(by_name.constant.value, 1)
  h.eq(mul.op, "binary")
  h.eq(mul.compute_dtype, "f32")
  h.eq(g.nodes[mul.inputs[1]].name, "parameter")
  h.eq(sum.op, "reduce")
  h.eq(sum.attrs, {1, 0})  -- dim 1 (0-based), no keepdim
  h.eq(sum.shape, {2})
  h.eq(add.dtype, "f32")
  h.eq(g.nodes[g.outputs[1]].name, "add")
  assert(add.location:sub(-#this_file - #tostring(op_line) - 1) == this_file .. ":" .. op_line, add.location)
  h.eq(add.line, op_line)
  -- a data tensor is one leaf; views of one buffer share its storage
  local leaf = tensor.graph(x).nodes[1]
  local row = tensor.graph(x:select(1, 2)).nodes
  h.eq(#tensor.graph(x).nodes, 1)
  h.eq(leaf.kind, "parameter")
  h.eq(row[#row].storage, leaf.storage)
  h.eq(row[#row].offset, 2)
  h.eq(row[#row].shape, {2})
  tensor.set_eager(was_eager)
  local computed = tensor.graph(x * 2).nodes
  h.eq(#computed, was_eager and 1 or 3)
  h.err(function() tensor.graph() end, "graph", "at least one tensor")
  h.err(function() tensor.graph(5) end, "graph")
  h.still_works()
end)

h.test("the Fashion-MNIST MLP exports, passes libonnx and re-imports", function()
  tensor.manual_seed(3)
  local spec = script_model("fashion_mnist.lua")
  local model = spec.model(nn)
  -- one training step, so the file holds updated parameters
  local opt = optim.SGD(model:parameters(), {lr = 0.1})
  local xb, yb = tensor.rand(8, 784), tensor.randint(1, 11, 8)
  nn.CrossEntropyLoss()(model(xb), yb):backward()
  opt:step()
  tensor.mark_step()
  local x = tensor.rand(4, 784)
  local path = temp_path("mlp")
  onnx.export(model, x, path)
  check_with_libonnx(path)
  local m = decode(path)
  h.eq(m.opset[""], 17)
  local names = {}
  for _, init in ipairs(m.graph.initializers) do names[#names + 1] = init.name end
  same_strings(names, {"1.weight", "1.bias", "3.weight", "3.bias", "5.weight", "5.bias"})
  h.eq(m.graph.inputs[1].name, "input")
  h.eq(m.graph.inputs[1].shape, {4, 784})
  h.eq(m.graph.outputs[1].name, "output")
  h.eq(m.graph.outputs[1].shape, {4, 10})
  h.eq(m.graph.outputs[1].elem_type, "f32")
  local ops = {}
  for _, node in ipairs(m.graph.nodes) do
    ops[#ops + 1] = node.op_type
    -- the script's own folder: no path before the file name
    assert(node.doc_string:match("^test_onnx_export%.lua:%d+$"), node.doc_string)
  end
  same_strings(ops, {"Transpose", "MatMul", "Add", "Relu", "Transpose", "MatMul", "Add", "Relu", "Transpose",
    "MatMul", "Add", "Identity"})
  local imported = onnx.load(path)
  local want = tensor.no_grad(function() return model(x) end)
  h.near(imported(x), want:tolist(), {rel = 1e-5, abs = 1e-5})
  -- the initializers hold the trained values
  h.near(m.graph.initializers[1].tensor, model:parameters()[1]:tolist(), h.EXACT)
  os.remove(path)
end)

h.test("the Fashion-MNIST CNN exports with a dynamic batch", function()
  tensor.manual_seed(4)
  local model = script_model("fashion_cnn.lua").model(nn)
  local x = tensor.rand(3, 1, 28, 28)
  local path = temp_path("cnn")
  onnx.export(model, {x}, path, {dynamic_batch = true})
  check_with_libonnx(path)
  local m = decode(path)
  h.eq(m.graph.inputs[1].shape[1], "batch")
  h.eq({table.unpack(m.graph.inputs[1].shape, 2)}, {1, 28, 28})
  h.eq(m.graph.outputs[1].shape[1], "batch")
  h.eq(m.graph.outputs[1].shape[2], 10)
  local conv
  for _, node in ipairs(m.graph.nodes) do if node.op_type == "Conv" then conv = conv or node end end
  h.eq(conv.attributes.pads, {1, 1, 1, 1})
  h.eq(conv.attributes.kernel_shape, {3, 3})
  h.eq(conv.inputs[2], "1.weight")
  local imported = onnx.load(path)
  for _, batch in ipairs({3, 5}) do
    local xb = tensor.rand(batch, 1, 28, 28)
    local want = tensor.no_grad(function() return model(xb) end)
    h.near(imported(xb), want:tolist(), {rel = 1e-5, abs = 1e-5})
  end
  os.remove(path)
end)

h.test("many IR ops export and re-import with the same values", function()
  local w = tensor.new({{0.5, -1.0, 2.0}, {1.5, 0.25, -0.75}})
  local index = tensor.new({3, 1})
  local function f(x, y)
    local s = x:softmax(2) + x:log_softmax(1):exp() * 0.5
    local r = x:sum(2, true) + x:mean(2, true) - x:max(2, true)
    local c = tensor.cat({x:narrow(2, 2, 2), x:select(2, 1):unsqueeze(2)}, 2)
    local g = x:gather(2, index:view(2, 1)) + x:index_select(2, index):sum(2, true)
    local k = tensor.where(x:gt(0), x, y:expand(2, 3)):clamp(-1.5, 1.75)
    local m = x:matmul(w:t()):tanh():sigmoid() + x:abs():sqrt():cumsum(2):sum(2, true)
    local a = x:argmax(2):to("f32"):unsqueeze(2) + (x:le(0.5)):to("f32")
    local p = (x:neg():exp() + 2):pow(2):log()
    return s + r + c + g + k + a + p + (x / 3 - 1) * 2, m
  end
  local x = tensor.new({{0.3, -1.2, 2.5}, {1.1, 0.4, -0.7}})
  local y = tensor.new({{-0.25, 0.5, 0.75}})
  local path = temp_path("ops")
  onnx.export(f, {x, y}, path)
  check_with_libonnx(path)
  local m = decode(path)
  h.eq(#m.graph.inputs, 2)
  h.eq(m.graph.inputs[2].name, "input_1")
  h.eq(m.graph.outputs[2].name, "output_1")
  local seen = {}
  for _, node in ipairs(m.graph.nodes) do seen[node.op_type] = true end
  for _, op_type in ipairs({"Softmax", "LogSoftmax", "ReduceSum", "ReduceMean", "ReduceMax", "Concat",
      "Slice", "Gather", "GatherElements", "Where", "Expand", "Clip", "MatMul", "CumSum", "ArgMax",
      "LessOrEqual", "Greater", "Pow", "Cast"}) do
    assert(seen[op_type], op_type .. " missing from the export")
  end
  local imported = onnx.load(path)
  local got1, got2 = imported(x, y)
  local want1, want2 = f(x, y)
  h.near(got1, want1:tolist(), {rel = 1e-5, abs = 1e-5})
  h.near(got2, want2:tolist(), {rel = 1e-5, abs = 1e-5})
  os.remove(path)
end)

-- Exports f, checks the file with libonnx, re-imports it and compares every
-- output (dtype and values) with f's.
local function round_trip(name, f, inputs)
  local path = temp_path(name)
  onnx.export(f, inputs, path)
  check_with_libonnx(path)
  local imported = onnx.load(path)
  local got, want = table.pack(imported(table.unpack(inputs))), table.pack(f(table.unpack(inputs)))
  h.eq(got.n, want.n)
  for k = 1, want.n do
    h.check(got[k], want[k]:dtype(), want[k]:tolist(), {rel = 1e-5, abs = 1e-5}, want[k]:size())
  end
  os.remove(path)
end

h.test("integer, boolean, composed and shape ops round-trip", function()
  local x = tensor.new({{0.3, -1.2, 2.5}, {1.1, 0.4, -0.7}})
  local xi = tensor.new({{3, -7, 5}, {10, 4, -2}})
  round_trip("ints", function(a)
    return a * 3 + 1, a % 4, a // 3, (-a) // 4, a:abs(), a:relu(), a:max(2), a:sum()
  end, {xi})
  round_trip("mixed", function(a, b) return a + b, a / b, a:gt(b), a:to("f32") * 0.5 end, {xi, x})
  round_trip("bools", function(a)
    local m = a:gt(0)
    return m:logical_and(a:lt(1)), m:any(2), m:all(), m:logical_not(), tensor.where(m, a, 0.5)
  end, {x})
  round_trip("composed", function(a)
    return a:gelu(), a:square(), a:rsqrt():isnan(), a:expm1(), a:log1p():isfinite(), a:log2():isinf(),
      a:exp2(), a:erfc(), a % 0.7, a // 0.4
  end, {x})
  round_trip("shape", function(a)
    return a:t():reshape(3, 2, 1):expand(3, 2, 4):permute(3, 1, 2), a:flip(2), a:select(1, 2),
      tensor.stack({a, a}, 1)
  end, {x})
  round_trip("identity", function(a) return a, a:cumsum(1) end, {x})
  round_trip("scatter", function(a)
    return a:scatter_add(2, tensor.new({{1, 3}, {2, 1}}), a:narrow(2, 1, 2))
  end, {x})
  round_trip("reductions", function(a)
    local b = a:reshape(1, 2, 3)
    return b:softmax(3), b:log_softmax(2), b:mean(3), b:prod(2), b:min(3), b:argmin(2, true), b:argmax()
  end, {x})
  round_trip("f64", function(a) local d = a:double(); return d * 2 + 1, d:exp() end, {x})
  -- opset 13: the same mapping, checked against opset 13's schemas
  local cnn = script_model("fashion_cnn.lua").model(nn)
  local path = temp_path("opset13")
  local written = onnx.export(cnn, {tensor.rand(2, 1, 28, 28)}, path, {opset = 13})
  h.eq(written.opset[""], 13)
  check_with_libonnx(path)
  h.eq(decode(path).opset[""], 13)
  onnx.export(function(a) return a:relu() end, {tensor.new({-3, 4})}, path, {opset = 13})
  check_with_libonnx(path)  -- integer Relu is opset 14's: Max(x, 0) before
  h.eq(onnx.load(path)(tensor.new({-3, 4})):tolist(), {0, 4})
  os.remove(path)
end)

h.test("a module is traced in evaluation mode; inputs may be views", function()
  tensor.manual_seed(5)
  local model = nn.Sequential(nn.Linear(4, 6), nn.Dropout(0.5), nn.ReLU(), nn.Sequential(nn.Linear(6, 2)))
  model:get(4):eval()  -- a child in another mode than its parent keeps it
  local base = tensor.rand(5, 3, 4)
  local x = base:select(2, 2)  -- a strided view: the file must not bake base in
  local path = temp_path("modes")
  onnx.export(model, {x}, path)
  h.eq(model.training, true)
  h.eq(model:get(2).training, true)
  h.eq(model:get(4).training, false)
  check_with_libonnx(path)
  local m = decode(path)
  h.eq(#m.graph.initializers, 4)  -- the weights and biases; no data tensor
  local imported = onnx.load(path)
  model:eval()
  local y = tensor.rand(5, 4)
  h.near(imported(y), model(y):tolist(), {rel = 1e-5, abs = 1e-5})
  os.remove(path)
end)

h.test("an op with no ONNX form is an error naming it and its line", function()
  local path = temp_path("bad")
  local function f(x) return x:atan2(x + 1) end
  local line = debug.getinfo(f, "S").linedefined
  h.err(function() onnx.export(f, {tensor.rand(2, 2)}, path) end, "onnx.export", "atan2",
    this_file .. ":" .. line)
  h.err(function() onnx.export(function(x) return x:argsort(1) end, {tensor.rand(3)}, path) end,
    "'argsort' has no ONNX form")
  h.err(function() onnx.export(42, {tensor.rand(3)}, path) end, "expected a function or an nn module")
  h.err(function() onnx.export(function(x) return x end, {}, path) end, "example_inputs")
  h.err(function() onnx.export(function(x) return x end, {tensor.rand(3)}, path, {batch = 1}) end,
    "unknown option 'batch'")
  h.err(function() onnx.export(function(x) return 3 end, {tensor.rand(3)}, path) end, "not a tensor")
  h.err(function() onnx.export(function(x) return x end, {tensor.rand(3)}, path, {opset = 12}) end,
    "opts.opset must be an integer from 13 to 17")
  h.err(function()
    onnx.export(function(x) return x:scatter_add(1, tensor.new({1, 1}), x) end, {tensor.rand(2)}, path, {opset = 13})
  end, "scatter_add needs opset 16")
  local same = tensor.rand(3)
  h.err(function() onnx.export(function(a, b) return a + b end, {same, same}, path) end,
    "example inputs 1 and 2 are the same tensor")
  h.err(function() onnx.export(function(x) return x end, {tensor.rand(3)}, "/nonexistent/dir/m.onnx") end,
    "cannot write")
  -- dynamic_batch refuses an op that would fix the batch extent
  h.err(function()
    onnx.export(function(x) return x:reshape(3, 2) end, {tensor.rand(2, 3)}, path, {dynamic_batch = true})
  end, "dynamic_batch", "reshape")
  h.err(function()
    onnx.export(function(x) return x:sum(1) end, {tensor.rand(2, 3)}, path, {dynamic_batch = true})
  end, "dynamic_batch", "sum")
  h.err(function()
    onnx.export(function(x) return x * 2 end, {tensor.rand(1, 3)}, path, {dynamic_batch = true})
  end, "dynamic_batch", "batch of 2 or more")
  assert(not tensor.is_eager() == (os.getenv("LAZYLUA_EAGER") ~= "1"), "eager mode restored")
  os.remove(path)
  h.still_works()
end)

h.test("embedding, attention and an encoder layer export with a dynamic batch", function()
  local path = temp_path("dynamic")
  local function check(name, fn, example, others)
    onnx.export(fn, {example}, path, {dynamic_batch = true})
    local proc = io.popen(checker .. " " .. path .. " 2>&1")
    local checked = proc:read("a")
    proc:close()
    assert(checked:match("^ok"), name .. ": " .. checked)
    local m = decode(path)
    h.eq(m.graph.inputs[1].shape[1], "batch")
    h.eq(m.graph.outputs[1].shape[1], "batch")
    local imported = onnx.load(path)
    for _, x in ipairs(others) do
      local want = tensor.no_grad(function() return fn(x) end)
      local got = imported(x)
      h.eq(got:size(), want:size())
      h.near(got, want:tolist(), {rel = 1e-5, abs = 1e-5})
    end
  end
  local embedding = nn.Embedding(10, 4)
  local function ids(batch) return tensor.randint(1, 11, {batch, 3}, {dtype = "i64"}) end
  check("Embedding", function(x) return embedding(x) end, ids(2), {ids(3), ids(1)})
  -- [B*T] inside: a factor of the batch the reshape back removes
  local m = decode(path)
  local flat
  for _, info in ipairs(m.graph.value_info) do
    if info.shape[1] == "batch*3" then flat = info end
  end
  assert(flat, "no value of extent batch*3")
  local attention = nn.MultiheadAttention(8, 2, {batch_first = true})
  local function seq(batch) return tensor.randn(batch, 5, 8) end
  check("MultiheadAttention", function(x) return (attention(x, x, x)) end, seq(2), {seq(3), seq(1)})
  local layer = nn.TransformerEncoderLayer(8, 2, {dim_feedforward = 16, batch_first = true, dropout = 0})
  layer:eval()
  check("TransformerEncoderLayer", layer, seq(2), {seq(4)})
  os.remove(path)
  h.still_works()
end)

h.test("doc_strings name files relative to the exporting script's folder", function()
  local relative = require("lazylua.onnx_export").relative_path
  h.eq(relative("train.lua", "."), "train.lua")
  h.eq(relative("./a/b/models/net.lua", "a/b"), "models/net.lua")
  h.eq(relative("a/lib/x.lua", "a/b"), "../lib/x.lua")
  h.eq(relative("/home/u/p/models/../net.lua", "/home/u/p"), "net.lua")
  h.eq(relative("/srv/x.lua", "/home/u/p"), "../../../srv/x.lua")
  -- a script in a folder of its own, exporting a function defined in a module of a subfolder
  local folder = tmp .. "_doc"
  assert(os.execute("mkdir -p '" .. folder .. "/models'"))
  local function write(path, text)
    local f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
  end
  write(folder .. "/models/net.lua", "return function(x)\n  return (x * 2):relu()\nend\n")
  write(folder .. "/script.lua", table.concat({
    "local module_path, out = ...",
    "local net = dofile(module_path)",
    "require('onnx').export(net, tensor.rand(2, 3), out)",
  }, "\n"))
  local path = temp_path("doc_strings")
  assert(loadfile(folder .. "/script.lua"))(folder .. "/models/net.lua", path)
  local m = decode(path)
  local docs = {}
  for _, node in ipairs(m.graph.nodes) do docs[#docs + 1] = node.doc_string end
  assert(#docs >= 2, #docs)  -- Mul, Relu, ...
  for _, doc in ipairs(docs) do h.eq(doc, "models/net.lua:2") end
  os.remove(path)
  os.remove(folder .. "/script.lua")
  os.remove(folder .. "/models/net.lua")
  os.remove(folder .. "/models")
  os.remove(folder)
  h.still_works()
end)

h.done("test_onnx_export")
