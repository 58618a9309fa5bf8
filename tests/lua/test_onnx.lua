-- test_onnx.lua - the ONNX codec (interp/onnx_codec.cpp) and the import
-- runtime (stdlib/onnx.lua), apart from the op library: models built here
-- as tables, encoded, written, loaded and run; tensors of every element
-- type against their bytes as the ONNX spec lays them out; bad files and
-- bad models give clear errors and leave the interpreter usable. (The op
-- library is measured by tools/onnx_conformance.lua on the ONNX backend
-- test suites; the op files have their own tests.)
local h = dofile("helpers.lua")
local onnx = require "onnx"
local native = require "stdlib.native"

local temp, remove_temporaries = h.temp_paths()

-- TensorProto bytes by hand (h.varint, h.pb_field, h.pb_bytes): field k
-- with a varint payload, and a length-delimited one.
local varint = h.varint
local function field(number, wire, payload) return h.pb_field(number, wire) .. payload end
local length_delimited = h.pb_bytes

h.test("a TensorProto written by hand decodes (raw_data, typed fields, element types)", function()
  -- dims = 1 (int64), data_type = 2, raw_data = 9, name = 8
  local raw = field(1, 0, varint(2)) .. field(1, 0, varint(3)) .. field(2, 0, varint(1))
      .. length_delimited(8, "w") .. length_delimited(9, string.pack("<ffffff", 1, 2, 3, 4, 5, 6.5))
  local t, name, onnx_type = native.onnx_decode_tensor(raw)
  h.check(t, "f32", {{1, 2, 3}, {4, 5, 6.5}})
  assert(name == "w" and onnx_type == 1, tostring(name) .. " " .. tostring(onnx_type))
  -- INT8 in int32_data (field 5, packed): -3, 7 become i32
  local packed = varint(-3 & 0xffffffffffffffff) .. varint(7)
  local int8 = field(1, 0, varint(2)) .. field(2, 0, varint(3)) .. length_delimited(5, packed)
  h.check((native.onnx_decode_tensor(int8)), "i32", {-3, 7})
  -- UINT8 raw bytes 200, 1
  local uint8 = field(1, 0, varint(2)) .. field(2, 0, varint(2)) .. length_delimited(9, "\200\1")
  h.check((native.onnx_decode_tensor(uint8)), "i32", {200, 1})
  -- FLOAT16 raw: 0x3c00 = 1, 0xc000 = -2, 0x3555 ~ 0.333251953125
  local half = field(1, 0, varint(3)) .. field(2, 0, varint(10)) .. length_delimited(9, string.pack("<I2I2I2", 0x3c00, 0xc000, 0x3555))
  h.check((native.onnx_decode_tensor(half)), "f32", {1, -2, 0.333251953125})
  -- BOOL, DOUBLE, INT64 (negative), a 0-d tensor (no dims)
  h.check((native.onnx_decode_tensor(field(2, 0, varint(9)) .. length_delimited(9, "\1"))), "bool", true)
  h.check((native.onnx_decode_tensor(field(2, 0, varint(11)) .. length_delimited(9, string.pack("<d", -0.1)))), "f64", -0.1)
  h.check((native.onnx_decode_tensor(field(1, 0, varint(1)) .. field(2, 0, varint(7))
    .. length_delimited(9, string.pack("<i8", -5)))), "i64", {-5})
end)

h.test("tensors round-trip through encode and decode in every dtype", function()
  for _, case in ipairs({
    {"f32", {{1.5, -2}, {0, 3}}}, {"f64", {0.1, -0.2}}, {"i32", {-7, 8}},
    {"i64", {{9007199254740993}}}, {"bool", {true, false, true}},
  }) do
    local t = tensor.new(case[2], {dtype = case[1]})
    local bytes = native.onnx_encode_tensor(t, "x")
    local back, name = native.onnx_decode_tensor(bytes)
    h.check(back, case[1], case[2])
    assert(name == "x")
  end
  -- a lazy, pending value and a view encode their current values
  local lazy = tensor.new({1, 2, 3}, {dtype = "f32"}) * 2
  h.check((native.onnx_decode_tensor(native.onnx_encode_tensor(lazy:narrow(1, 2, 2)))), "f32", {4, 6})
end)

-- A model table with one node of the given op.
local function one_node_model(op_type, attributes, opset)
  return {
    ir_version = 8, producer_name = "test_onnx", opset = {[""] = opset or 13},
    graph = {
      name = "g",
      nodes = {{op_type = op_type, domain = "", name = "the_node", inputs = {"x", "w"}, outputs = {"y"},
        attributes = attributes or {}}},
      initializers = {{name = "w", tensor = tensor.new({10, 20, 30}, {dtype = "f32"})}},
      inputs = {{name = "x", elem_type = "f32", shape = {"batch", 3}}},
      outputs = {{name = "y", elem_type = "f32", shape = {"batch", 3}}},
    },
  }
end

h.test("a model table round-trips: attributes of every kind, shapes, opsets", function()
  local model = one_node_model("TestScaledAdd", {
    alpha = 0.5, count = 3, mode = "reflect", sizes = {1, -2}, scales = {0.25, 4.0},
    names = {"a", "b"}, value = tensor.new({1, 2}, {dtype = "i64"}),
    body = {name = "sub", nodes = {}, initializers = {}, inputs = {}, outputs = {}},
  })
  model.opset["ai.onnx.ml"] = 2
  local back = native.onnx_decode_model(native.onnx_encode_model(model))
  assert(back.ir_version == 8 and back.producer_name == "test_onnx")
  assert(back.opset[""] == 13 and back.opset["ai.onnx.ml"] == 2)
  local node = back.graph.nodes[1]
  assert(node.op_type == "TestScaledAdd" and node.name == "the_node")
  assert(h.same_list(node.inputs, {"x", "w"}) and h.same_list(node.outputs, {"y"}))
  local a = node.attributes
  assert(a.alpha == 0.5 and math.type(a.alpha) == "float")
  assert(a.count == 3 and math.type(a.count) == "integer")
  assert(a.mode == "reflect")
  assert(h.same_list(a.sizes, {1, -2}) and math.type(a.sizes[1]) == "integer")
  assert(h.same_list(a.scales, {0.25, 4.0}) and math.type(a.scales[2]) == "float")
  assert(h.same_list(a.names, {"a", "b"}))
  h.check(a.value, "i64", {1, 2})
  assert(a.body.name == "sub" and #a.body.nodes == 0)
  h.check(back.graph.initializers[1].tensor, "f32", {10, 20, 30})
  assert(back.graph.initializers[1].name == "w")
  local input = back.graph.inputs[1]
  assert(input.name == "x" and input.elem_type == "f32" and h.same_list(input.shape, {"batch", 3}))
  -- an empty list needs its type
  local empty = one_node_model("TestScaledAdd", {axes = {}})
  h.err(function() native.onnx_encode_model(empty) end, "attribute 'axes' is an empty list")
  empty.graph.nodes[1].attributes_types = {axes = "ints"}
  assert(#native.onnx_decode_model(native.onnx_encode_model(empty)).graph.nodes[1].attributes.axes == 0)
end)

h.test("onnx.load runs the graph through the op registry, lazily, with trainable initializers", function()
  local seen = {}
  onnx.ops.TestScaledAdd = function(ctx, inputs, attrs)
    seen.opset, seen.node = ctx.opset, ctx.node.name
    return inputs[1] * attrs.alpha + inputs[2]
  end
  local path = temp("scaled.onnx")
  h.write_bytes(path, native.onnx_encode_model(one_node_model("TestScaledAdd", {alpha = 2.0}, 11)))
  local model = onnx.load(path)
  assert(tostring(model):find("1 nodes", 1, true))
  local params = model:parameters()
  assert(#params == 1 and params[1]:requires_grad())
  local before = tensor.metrics().ops_recorded
  local y = model(tensor.new({{1, 2, 3}, {4, 5, 6}}))
  if not tensor.is_eager() then
    assert(tensor.metrics().ops_recorded > before, "the graph was recorded")
  end
  h.check(y, "f32", {{12, 24, 36}, {18, 30, 42}})
  assert(seen.opset == 11 and seen.node == "the_node")
  -- by name too, and differentiable through the initializer
  local z = model({x = tensor.ones(2, 3)})
  z:sum():backward()
  h.check(params[1]:grad(), "f32", {2, 2, 2})
  onnx.ops.TestScaledAdd = nil
end)

h.test("an op lazylua lacks is an error at load naming the op, its domain, opset and node", function()
  local path = temp("unknown.onnx")
  local model = one_node_model("NoSuchOp", {}, 12)
  model.graph.nodes[1].domain = "com.example"
  model.opset["com.example"] = 3
  h.write_bytes(path, native.onnx_encode_model(model))
  h.err(function() onnx.load(path) end, "onnx.load", "node 'the_node'", "com.example.NoSuchOp", "opset 3",
    "unsupported")
  h.still_works()
end)

h.test("bad files and bad calls are clear errors", function()
  h.err(function() onnx.load(temp("missing.onnx")) end, "onnx.load: cannot open")
  h.err(function() onnx.load(42) end, "onnx.load: expected a file path")
  local empty = temp("empty.onnx")
  h.write_bytes(empty, "")
  h.err(function() onnx.load(empty) end, "is empty")
  local junk = temp("junk.onnx")
  h.write_bytes(junk, "\255\255\255\255 not a protobuf")
  h.err(function() onnx.load(junk) end, "not an ONNX model")
  -- a tensor whose data disagrees with its dims, or is of a type lazylua lacks
  h.err(function() native.onnx_decode_tensor(field(1, 0, varint(4)) .. field(2, 0, varint(1))
    .. length_delimited(9, string.pack("<f", 1))) end, "holds 1 elements, not 4")
  h.err(function() native.onnx_decode_tensor(field(2, 0, varint(8))) end, "STRING", "cannot hold")
  h.err(function() native.onnx_decode_tensor(field(1, 0, varint(1 << 40)) .. field(1, 0, varint(1 << 40))
    .. field(2, 0, varint(1))) end, "onnx.read_tensor")
  -- calling a model with the wrong inputs
  local path = temp("scaled2.onnx")
  onnx.ops.TestScaledAdd = function(_, inputs, attrs) return inputs[1] * attrs.alpha + inputs[2] end
  h.write_bytes(path, native.onnx_encode_model(one_node_model("TestScaledAdd", {alpha = 1.0})))
  local model = onnx.load(path)
  h.err(function() model() end, "expected 1 inputs (x), got 0")
  h.err(function() model("x") end, "input 1 ('x') must be a tensor")
  h.err(function() model({y = tensor.ones(3)}) end, "input 'x' is missing")
  onnx.ops.TestScaledAdd = nil
  -- opsets newer than lazylua's, and models with no default domain
  local newer = one_node_model("Relu", {}, 99)
  h.write_bytes(path, native.onnx_encode_model(newer))
  h.err(function() onnx.load(path) end, "opset 99", "supports up to 17")
  h.still_works()
end)

remove_temporaries()
h.done("test_onnx")
