-- onnx_export.lua - onnx.export: traces one call of a function or module in
-- lazy mode, reads the recorded IR with tensor.graph, maps each IR node to
-- ONNX nodes (opset 17, or 13 to 16) and writes the model with native.onnx_encode_model.
--
--   onnx.export(model, {x}, "model.onnx", {dynamic_batch = true})
--
-- Names: example inputs are the graph inputs "input", "input_1", ...; the
-- outputs "output", "output_1", ...; a module's parameters are initializers
-- named as model:named_parameters() names them ("0.weight"); other data and
-- Lua numbers become initializers too. Each node's doc_string is the Lua
-- line that recorded it, its file named relative to the folder of the script
-- that called onnx.export ("train.lua:12", "models/net.lua:30"): a file
-- shared with others carries no path of the machine it was made on.
local native = require "stdlib.native"
local options_problem = require("lazylua.options").problem
local tensor = require "tensor"

local M = {}

-- The opsets of the default domain a file can declare: the ops used
-- read the same from 13 on (ScatterElements' reduction needs 16).
local MIN_OPSET, MAX_OPSET = 13, 17
local onnx_type = {f32 = 1, i32 = 6, i64 = 7, bool = 9, f64 = 11}
local float_dtypes = {f32 = true, f64 = true}

-- An exporter for one traced graph: the model table being built.
local Exporter = {}
Exporter.__index = Exporter

local function export_error(fmt, ...)
  error("onnx.export: " .. string.format(fmt, ...), 0)
end

function Exporter:fail(node, fmt, ...)
  export_error("%s (IR op '%s', recorded at %s)", string.format(fmt, ...), node.name, node.location)
end

-- A fresh value name with this prefix.
function Exporter:fresh(prefix)
  self.counter = self.counter + 1
  return string.format("%s_%d", prefix, self.counter)
end

-- An initializer holding `t` (a tensor); returns its name.
function Exporter:initializer(name, t)
  self.graph.initializers[#self.graph.initializers + 1] = {name = name, tensor = t}
  return name
end

-- A constant initializer from a Lua list (i64, 1-d) or number (0-d).
function Exporter:constant(prefix, values, dtype)
  local t
  if type(values) == "table" then
    t = tensor.new(values):to(dtype or "i64")
  else
    t = tensor.full({}, values, {dtype = dtype or "i64"})
  end
  return self:initializer(self:fresh(prefix), t)
end

-- A path's parts, "." dropped and "x/.." folded; an absolute path's first
-- part is "".
local function path_parts(path)
  local parts = {}
  if path:sub(1, 1) == "/" then parts[1] = "" end
  for part in path:gmatch("[^/]+") do
    local last = parts[#parts]
    if part == ".." and last and last ~= ".." and last ~= "" then
      parts[#parts] = nil
    elseif part ~= "." then
      parts[#parts + 1] = part
    end
  end
  return parts
end

local function absolute_path(path)
  if path:sub(1, 1) == "/" then return path end
  local cwd = os.getenv("PWD")
  return cwd and cwd:sub(1, 1) == "/" and (cwd .. "/" .. path) or nil
end

-- `file` relative to `folder` ("models/net.lua", "../lib/x.lua"); the
-- file's base name when only one is absolute and the other cannot be made so.
function M.relative_path(file, folder)
  if (file:sub(1, 1) == "/") ~= (folder:sub(1, 1) == "/") then
    local absolute_file, absolute_folder = absolute_path(file), absolute_path(folder)
    if not (absolute_file and absolute_folder) then return file:match("[^/]*$") end
    file, folder = absolute_file, absolute_folder
  end
  local f, d = path_parts(file), path_parts(folder)
  local common = 0
  while common < #d and common < #f - 1 and f[common + 1] == d[common + 1] do common = common + 1 end
  local parts = {}
  for _ = common + 1, #d do parts[#parts + 1] = ".." end
  for k = common + 1, #f do parts[#parts + 1] = f[k] end
  return table.concat(parts, "/")
end

-- The folder of the nearest calling Lua file outside lazylua's own library
-- ("." for a file named without one), or nil (a string chunk, the REPL).
local function calling_script_folder()
  for level = 2, 64 do
    local info = debug.getinfo(level, "S")
    if not info then return nil end
    local source = info.source
    if source:sub(1, 1) == "@" and source:sub(1, 8) ~= "@stdlib/" then
      return source:sub(2):match("^(.*)/[^/]*$") or "."
    end
  end
end

-- A node's doc_string: where it was recorded, a file relative to the
-- exporting script's folder.
function Exporter:doc_string(node)
  if not (node.file and self.script_folder) then return node.location end
  return M.relative_path(node.file, self.script_folder) .. ":" .. node.line
end

-- Appends an ONNX node for IR node `node`; returns its (first) output name.
function Exporter:emit(node, op_type, inputs, attributes, output)
  output = output or self:fresh(op_type)
  local entry = {op_type = op_type, domain = "", name = self:fresh("n" .. op_type), inputs = inputs,
    outputs = {output}, attributes = attributes or {}, doc_string = self:doc_string(node)}
  self.graph.nodes[#self.graph.nodes + 1] = entry
  return output
end

-- The value `name` (of dtype `from`) as dtype `to` (a Cast when they differ).
function Exporter:cast(node, name, from, to)
  if from == to then return name end
  return self:emit(node, "Cast", {name}, {to = onnx_type[to]})
end

-- The value of input k of node i, cast to `dtype` if given.
function Exporter:input(i, k, dtype)
  local node = self.nodes[i]
  local position = node.inputs[k]
  local name = self.names[position]
  if dtype then name = self:cast(node, name, self.nodes[position].dtype, dtype) end
  return name
end

-- ---- the op mapping ----

-- Unary ops with one ONNX op of the same meaning.
local unary_direct = {
  neg = "Neg", abs = "Abs", sign = "Sign", exp = "Exp", log = "Log", sqrt = "Sqrt",
  reciprocal = "Reciprocal", sin = "Sin", cos = "Cos", tan = "Tan", tanh = "Tanh",
  sigmoid = "Sigmoid", relu = "Relu", erf = "Erf", asin = "Asin", acos = "Acos", atan = "Atan",
  sinh = "Sinh", cosh = "Cosh", asinh = "Asinh", acosh = "Acosh", atanh = "Atanh",
  logical_not = "Not", isnan = "IsNaN", isinf = "IsInf", round = "Round", floor = "Floor",
  ceil = "Ceil",
}

function Exporter:unary(i, node)
  local op = node.name
  local dtype = node.dtype
  if op == "logical_not" then return self:emit(node, "Not", {self:input(i, 1, "bool")}) end
  if op == "isnan" or op == "isinf" or op == "isfinite" then
    local x_dtype = self.nodes[node.inputs[1]].dtype
    if not float_dtypes[x_dtype] then  -- integers and bools are finite
      local all = tensor.full(node.shape, op == "isfinite", {dtype = "bool"})
      return self:initializer(self:fresh(op), all)
    end
    local x = self:input(i, 1)
    if op ~= "isfinite" then return self:emit(node, unary_direct[op], {x}) end
    local bad = self:emit(node, "Or", {self:emit(node, "IsNaN", {x}), self:emit(node, "IsInf", {x})})
    return self:emit(node, "Not", {bad})
  end
  local x = self:input(i, 1, dtype)
  if (op == "floor" or op == "ceil" or op == "round") and not float_dtypes[dtype] then
    return self:emit(node, "Identity", {x})
  end
  if op == "relu" and self.opset < 14 and not float_dtypes[dtype] then  -- integer Relu came in 14
    return self:emit(node, "Max", {x, self:constant("zero", 0, dtype)})
  end
  if unary_direct[op] then return self:emit(node, unary_direct[op], {x}) end
  local function scalar(value) return self:constant("c", value, dtype) end
  if op == "square" then return self:emit(node, "Mul", {x, x}) end
  if op == "rsqrt" then return self:emit(node, "Reciprocal", {self:emit(node, "Sqrt", {x})}) end
  if op == "expm1" then return self:emit(node, "Sub", {self:emit(node, "Exp", {x}), scalar(1)}) end
  if op == "log1p" then return self:emit(node, "Log", {self:emit(node, "Add", {x, scalar(1)})}) end
  if op == "log2" then return self:emit(node, "Div", {self:emit(node, "Log", {x}), scalar(math.log(2))}) end
  if op == "log10" then return self:emit(node, "Div", {self:emit(node, "Log", {x}), scalar(math.log(10))}) end
  if op == "exp2" then return self:emit(node, "Pow", {scalar(2), x}) end
  if op == "erfc" then return self:emit(node, "Sub", {scalar(1), self:emit(node, "Erf", {x})}) end
  if op == "gelu" then  -- x/2 (1 + erf(x / sqrt 2)), the exact form (no Gelu before opset 20)
    local e = self:emit(node, "Erf", {self:emit(node, "Mul", {x, scalar(1 / math.sqrt(2))})})
    local half_x = self:emit(node, "Mul", {x, scalar(0.5)})
    return self:emit(node, "Mul", {half_x, self:emit(node, "Add", {e, scalar(1)})})
  end
  self:fail(node, "'%s' has no ONNX form", op)
end

local binary_direct = {
  add = "Add", sub = "Sub", mul = "Mul", div = "Div", pow = "Pow", maximum = "Max", minimum = "Min",
  eq = "Equal", lt = "Less", le = "LessOrEqual", gt = "Greater", ge = "GreaterOrEqual",
}
local logical = {logical_and = "And", logical_or = "Or", logical_xor = "Xor"}

function Exporter:binary(i, node)
  local op = node.name
  if logical[op] then
    return self:emit(node, logical[op], {self:input(i, 1, "bool"), self:input(i, 2, "bool")})
  end
  local compute = node.compute_dtype
  if compute == "bool" then
    self:fail(node, "'%s' between booleans has no ONNX form", op)
  end
  local a, b = self:input(i, 1, compute), self:input(i, 2, compute)
  if binary_direct[op] then return self:emit(node, binary_direct[op], {a, b}) end
  if op == "ne" then return self:emit(node, "Not", {self:emit(node, "Equal", {a, b})}) end
  if op == "floordiv" then
    if float_dtypes[compute] then return self:emit(node, "Floor", {self:emit(node, "Div", {a, b})}) end
    -- integers: (a - a mod b) / b divides exactly, so truncating and
    -- flooring division agree (ONNX's integer Div does not say which it is)
    local rest = self:emit(node, "Mod", {a, b}, {fmod = 0})
    return self:emit(node, "Div", {self:emit(node, "Sub", {a, rest}), b})
  end
  if op == "mod" then
    if not float_dtypes[compute] then return self:emit(node, "Mod", {a, b}, {fmod = 0}) end
    -- a - floor(a / b) * b: the sign of b, as lazylua's %
    local q = self:emit(node, "Floor", {self:emit(node, "Div", {a, b})})
    return self:emit(node, "Sub", {a, self:emit(node, "Mul", {q, b})})
  end
  self:fail(node, "'%s' on %s has no ONNX form", op, compute)
end

-- Axis lists for the ONNX reduce ops: nil (all dims) or {dim}.
local function reduce_axes(node)
  local dim = node.attrs[1]
  if dim < 0 then return nil end
  return {dim}
end

local reduce_ops = {sum = "ReduceSum", mean = "ReduceMean", max = "ReduceMax", min = "ReduceMin",
  prod = "ReduceProd"}

function Exporter:reduce(i, node)
  local op, keepdims = node.name, node.attrs[2]
  local axes = reduce_axes(node)
  local function reduce(op_type, x)
    local attributes = {keepdims = keepdims}
    local inputs = {x}
    if axes then
      if op_type == "ReduceSum" then
        inputs[2] = self:constant("axes", axes)
      else
        attributes.axes = axes
      end
    end
    return self:emit(node, op_type, inputs, attributes)
  end
  if op == "any" or op == "all" then
    local as_int = self:cast(node, self:input(i, 1, "bool"), "bool", "i32")
    local r = reduce(op == "any" and "ReduceMax" or "ReduceMin", as_int)
    return self:cast(node, r, "i32", "bool")
  end
  if not reduce_ops[op] then self:fail(node, "reduction '%s' has no ONNX form", op) end
  return reduce(reduce_ops[op], self:input(i, 1, node.dtype))
end

function Exporter:arg_reduce(i, node)
  local x = self:input(i, 1)
  local dim, keepdim = node.attrs[1], node.attrs[2]
  local op_type = node.sub_op == 1 and "ArgMax" or "ArgMin"
  local r
  if dim < 0 then
    local flat = self:emit(node, "Reshape", {x, self:constant("shape", {-1})})
    r = self:emit(node, op_type, {flat}, {axis = 0, keepdims = 0})
    if keepdim ~= 0 then r = self:emit(node, "Reshape", {r, self:constant("shape", node.shape)}) end
  else
    r = self:emit(node, op_type, {x}, {axis = dim, keepdims = keepdim})
  end
  -- lazylua's indices are 1-based
  return self:emit(node, "Add", {r, self:constant("one", 1)})
end

-- An i64 index input k of node i, made 0-based.
function Exporter:index_input(i, k)
  return self:emit(self.nodes[i], "Sub", {self:input(i, k, "i64"), self:constant("one", 1)})
end

-- The shape `node` has, for a Reshape or Expand target: dim 1 is 0 (copy
-- the input's) or 1 (keep it) when it is the dynamic batch dim, and -1
-- (what the rest leaves) when a reshape changes the batch's factor.
function Exporter:target_shape(i, node, batch_extent)
  local shape = {}
  for d, extent in ipairs(node.shape) do shape[d] = extent end
  if self.batched[i] then
    shape[1] = self.batched[i] == self.batched[node.inputs[1]] and batch_extent or -1
  end
  return self:constant("shape", shape)
end

function Exporter:conv_attributes(node, window)
  local kh, kw, sh, sw, ph, pw = table.unpack(window)
  return {kernel_shape = {kh, kw}, strides = {sh, sw}, pads = {ph, pw, ph, pw}}
end

local handlers = {}

function handlers.unary(self, i, node) return self:unary(i, node) end
function handlers.binary(self, i, node) return self:binary(i, node) end
function handlers.reduce(self, i, node) return self:reduce(i, node) end
function handlers.arg_reduce(self, i, node) return self:arg_reduce(i, node) end

function handlers.where(self, i, node)
  return self:emit(node, "Where", {self:input(i, 1, "bool"), self:input(i, 2, node.dtype),
    self:input(i, 3, node.dtype)})
end

function handlers.cast(self, i, node)
  return self:emit(node, "Cast", {self:input(i, 1)}, {to = onnx_type[node.dtype]})
end

function handlers.clamp(self, i, node)
  local inputs = {self:input(i, 1)}
  -- sub_op: 1 has a low bound, 2 a high one; the bounds are the node's
  -- 2nd and 3rd inputs (scalar leaves, of the node's dtype in ONNX)
  for k, bit in ipairs({1, 2}) do
    if node.sub_op & bit ~= 0 then
      inputs[k + 1] = self:constant("bound", self.nodes[node.inputs[k + 1]].value, node.dtype)
    else
      inputs[k + 1] = ""
    end
  end
  return self:emit(node, "Clip", inputs)
end

function handlers.softmax(self, i, node)
  local op_type = node.attrs[2] ~= 0 and "LogSoftmax" or "Softmax"
  return self:emit(node, op_type, {self:input(i, 1)}, {axis = node.attrs[1]})
end

function handlers.cumsum(self, i, node)
  return self:emit(node, "CumSum", {self:input(i, 1, node.dtype), self:constant("axis", node.attrs[1])})
end

function handlers.matmul(self, i, node)
  return self:emit(node, "MatMul", {self:input(i, 1), self:input(i, 2)})
end

function handlers.reshape(self, i, node)
  return self:emit(node, "Reshape", {self:input(i, 1), self:target_shape(i, node, 0)})
end

function handlers.expand(self, i, node)
  return self:emit(node, "Expand", {self:input(i, 1), self:target_shape(i, node, 1)})
end

function handlers.permute(self, i, node)
  return self:emit(node, "Transpose", {self:input(i, 1)}, {perm = node.attrs})
end

function handlers.slice(self, i, node)
  local dim, start, length = table.unpack(node.attrs)
  return self:emit(node, "Slice", {self:input(i, 1), self:constant("starts", {start}),
    self:constant("ends", {start + length}), self:constant("axes", {dim})})
end

function handlers.select(self, i, node)
  local dim, index = node.attrs[1], node.attrs[2]
  return self:emit(node, "Gather", {self:input(i, 1), self:constant("index", index)}, {axis = dim})
end

function handlers.cat(self, i, node)
  local inputs = {}
  for k = 1, #node.inputs do inputs[k] = self:input(i, k, node.dtype) end
  return self:emit(node, "Concat", inputs, {axis = node.attrs[1]})
end

function handlers.gather(self, i, node)
  return self:emit(node, "GatherElements", {self:input(i, 1), self:index_input(i, 2)},
    {axis = node.attrs[1]})
end

function handlers.index_select(self, i, node)
  return self:emit(node, "Gather", {self:input(i, 1), self:index_input(i, 2)}, {axis = node.attrs[1]})
end

function handlers.scatter_add(self, i, node)
  if self.opset < 16 then self:fail(node, "scatter_add needs opset 16 or later (ScatterElements' reduction)") end
  return self:emit(node, "ScatterElements", {self:input(i, 1), self:index_input(i, 2),
    self:input(i, 3, node.dtype)}, {axis = node.attrs[1], reduction = "add"})
end

-- A convolution node's window: sub_op is the spatial rank; attrs are the
-- groups, then per spatial dim stride, dilation, pad before and pad after
-- packed 16 bits each (tensor/eager_ops_conv.cpp).
local function conv_window(node, kernel)
  local window = {group = node.attrs[1], kernel_shape = kernel, strides = {}, dilations = {},
    pads = {}}
  local rank = node.sub_op
  for d = 1, rank do
    local packed = node.attrs[d + 1]
    window.strides[d] = packed & 0xFFFF
    window.dilations[d] = (packed >> 16) & 0xFFFF
    window.pads[d] = (packed >> 32) & 0xFFFF
    window.pads[rank + d] = (packed >> 48) & 0xFFFF
  end
  return window
end

local function conv_inputs(self, i, node)
  local inputs = {self:input(i, 1), self:input(i, 2)}
  if node.inputs[3] then inputs[3] = self:input(i, 3) end
  return inputs
end

function handlers.conv(self, i, node)
  local w = self.nodes[node.inputs[2]]
  return self:emit(node, "Conv", conv_inputs(self, i, node),
    conv_window(node, {table.unpack(w.shape, 3)}))
end

-- conv_grad_input is the transposed convolution; its output_padding is
-- what the node's extents have beyond the window's.
function handlers.conv_grad_input(self, i, node)
  local x, w = self.nodes[node.inputs[1]], self.nodes[node.inputs[2]]
  local window = conv_window(node, {table.unpack(w.shape, 3)})
  local rank = node.sub_op
  window.output_padding = {}
  for d = 1, rank do
    local reach = window.dilations[d] * (window.kernel_shape[d] - 1) + 1
    window.output_padding[d] = node.shape[d + 2] - ((x.shape[d + 2] - 1) * window.strides[d]
      - window.pads[d] - window.pads[rank + d] + reach)
  end
  return self:emit(node, "ConvTranspose", conv_inputs(self, i, node), window)
end

function handlers.max_pool2d(self, i, node)
  return self:emit(node, "MaxPool", {self:input(i, 1)}, self:conv_attributes(node, node.attrs))
end

-- ---- dynamic batch ----

-- Ops whose output's dim 1 is its first input's dim 1 when that one is the
-- batch (the value's extent there is checked too).
local keeps_batch = {unary = true, binary = true, where = true, cast = true, clamp = true,
  matmul = true, conv = true, conv_grad_input = true, max_pool2d = true}

-- Whether node i's dim 1 is the dynamic batch dim: false when no input
-- has it, else the factor of the batch in dim 1 (a value's dim 1 is B * factor,
-- batch-major: 1 for a [B, ...] value, T when a reshape flattened [B, T] into
-- [B*T], as nn.Embedding does). An op that would bake the batch extent into
-- the model, or move the batch dim elsewhere, is an error.
function Exporter:mark_batch(i, node)
  local any_batched = false
  for _, position in ipairs(node.inputs) do any_batched = any_batched or self.batched[position] end
  if not any_batched then return false end
  local first = node.inputs[1]
  local factor = self.batched[first]
  local same_leading = factor and #node.shape > 0 and node.shape[1] == self.nodes[first].shape[1]
  local op, attrs = node.op, node.attrs
  if keeps_batch[op] then
    if op == "binary" or op == "where" then
      -- broadcasting: batched when every batched operand has the output's
      -- rank (its dim 1 is the output's dim 1) and the same factor
      local common = nil
      for _, position in ipairs(node.inputs) do
        local f = self.batched[position]
        if f and #self.nodes[position].shape ~= #node.shape then common = false break end
        if f then
          if common ~= nil and common ~= f then common = false break end
          common = f
        end
      end
      if common then return common end
    end
    if same_leading then return factor end
  elseif op == "reduce" or op == "arg_reduce" or op == "softmax" or op == "cumsum" or op == "slice"
      or op == "select" or op == "cat" or op == "permute" or op == "index_select" then
    local dim = attrs[1]
    local index_factor = op == "index_select" and self.batched[node.inputs[2]]
    if op == "permute" then
      if attrs[1] == 0 then return factor end
    elseif index_factor then
      -- rows picked by a batched index: the index's batch (its dim 1)
      if dim == 0 and not factor then return index_factor end
    elseif dim > 0 and same_leading then
      return factor
    elseif op == "softmax" or op == "cumsum" or (op == "cat" and dim ~= 0) then
      return factor
    end
  elseif op == "expand" then
    if same_leading then return factor end
  elseif op == "reshape" then
    -- Row-major order keeps the batch outermost: any dim 1 that is a whole
    -- number of batches is the batch times a factor.
    local extent = node.shape[1]
    if factor and extent and extent > 0 and extent % self.batch == 0 then return extent // self.batch end
  end
  self:fail(node, "dynamic_batch: this op mixes the batch dim (dim 1, extent %d) into others; " ..
    "export with a static batch", self.batch)
end

-- ---- leaves ----

-- Where a data tensor's memory is: the key of a leaf that is exactly it.
local function leaf_key(n)
  return string.format("%d:%d:%s:%s", n.storage, n.offset, table.concat(n.shape, ","),
    table.concat(n.strides, ","))
end

-- The single leaf tensor.graph gives for a data tensor.
local function data_leaf(t)
  local g = tensor.graph(t)
  return g.nodes[#g.nodes]
end

function Exporter:leaf(i, node)
  local kind = node.kind
  if kind == "scalar" or kind == "constant" then
    return self:initializer(self:fresh("scalar"), tensor.full({}, node.value, {dtype = node.dtype}))
  end
  if kind == "placeholder" then self:fail(node, "a scan body's input has no ONNX form") end
  local key = leaf_key(node)
  local param = self.param_keys[key]
  if param then return self:use_parameter(param) end
  -- Lazy mode reads a contiguous block of a data tensor (a reshape, the
  -- rows a narrow or select keeps) as a leaf of its own: for a parameter,
  -- that block is computed from it in the model.
  local base = self.param_storage[node.storage]
  if base and node.contiguous and base.leaf.contiguous then
    return self:block_of(node, self:use_parameter(base), base)
  end
  self.data_count = self.data_count + 1
  local name = self.data_count == 1 and "data" or ("data_" .. (self.data_count - 1))
  return self:initializer(name, node.data:contiguous())
end

function Exporter:use_parameter(param)
  if not self.param_used[param.name] then
    self.param_used[param.name] = true
    self:initializer(param.name, param.tensor)
  end
  return param.name
end

-- A leaf that is a contiguous block of the contiguous parameter `base`
-- (named base_name): a Reshape when it is all of it, else the elements sliced out
-- of the flattened base.
function Exporter:block_of(node, base_name, base)
  local numel, base_numel = 1, 1
  for _, extent in ipairs(node.shape) do numel = numel * extent end
  for _, extent in ipairs(base.leaf.shape) do base_numel = base_numel * extent end
  local start = node.offset - base.leaf.offset
  if start == 0 and numel == base_numel then
    return self:emit(node, "Reshape", {base_name, self:constant("shape", node.shape)})
  end
  local flat = self:emit(node, "Reshape", {base_name, self:constant("shape", {-1})})
  local part = self:emit(node, "Slice", {flat, self:constant("starts", {start}),
    self:constant("ends", {start + numel}), self:constant("axes", {0})})
  return self:emit(node, "Reshape", {part, self:constant("shape", node.shape)})
end

local function value_info(name, dtype, shape, batched)
  local dims = {}
  for d, extent in ipairs(shape) do dims[d] = extent end
  if batched then dims[1] = batched == 1 and "batch" or ("batch*" .. batched) end
  return {name = name, elem_type = dtype, shape = dims}
end

-- Gives node i its ONNX value: an input's name, a leaf's initializer, or
-- the output of the ONNX nodes its op maps to.
function Exporter:translate(i, node)
  if self.input_of_id[node.id] then
    self.names[i] = self.input_of_id[node.id]
    self.batched[i] = self.dynamic and 1
  elseif node.kind then
    self.names[i] = self:leaf(i, node)
    self.batched[i] = false
  else
    local handler = handlers[node.op]
    if not handler then self:fail(node, "'%s' has no ONNX form", node.name) end
    if self.dynamic then self.batched[i] = self:mark_batch(i, node) end
    self.names[i] = handler(self, i, node)
    local info = self.graph.value_info
    info[#info + 1] = value_info(self.names[i], node.dtype, node.shape, self.batched[i])
  end
end

-- ---- nn.GRU and nn.LSTM ----
-- Their recurrence is an IR `scan` (stdlib/nn_rnn.lua), which has no ONNX
-- form in general; a call of the module is exported whole instead, as one
-- ONNX GRU or LSTM node per layer. During the trace each call is recorded
-- (the module, the ids of its inputs and outputs); the exporter then stops
-- at its outputs and emits the nodes from the module's parameters, with
-- PyTorch's gate order (GRU r z n, LSTM i f g o) put in ONNX's (z r h,
-- i o f c). PyTorch's GRU is ONNX's with linear_before_reset = 1.

local function node_id(t)
  local g = tensor.graph(t)
  return g.nodes[g.outputs[1]].id
end

-- The node a module output is a view of: lazy views of views fold into one
-- view of the base, so a later op on the output reads the base (the last
-- layer's scan_output, the cat of the states), not the output's own node.
-- The id of that base if it has the shape `want`, else nil.
local view_ops = {permute = true, reshape = true, slice = true, select = true, expand = true}
local function base_id(t, want)
  local g = tensor.graph(t)
  local node = g.nodes[g.outputs[1]]
  while view_ops[node.op] do node = g.nodes[node.inputs[1]] end
  if (node.op ~= "scan_output" and node.op ~= "cat") or table.concat(node.shape, ",") ~= table.concat(want, ",") then
    return nil
  end
  return node.id
end

-- Wraps the forward of nn.GRU and nn.LSTM to record each call in
-- `records`; returns the function that puts them back.
local function record_rnn_calls(records)
  local nn = package.loaded.nn
  if nn == nil then return function() end end
  local originals = {}
  for _, kind in ipairs({"GRU", "LSTM"}) do
    local class = nn[kind]
    local forward = class.forward
    originals[kind] = forward
    class.forward = function(module, x, h0, c0, ...)
      local results = table.pack(forward(module, x, h0, c0, ...))
      local record = {module = module, kind = kind, rank = x:dim(), x = node_id(x),
        h0 = tensor.is_tensor(h0) and node_id(h0) or nil, c0 = tensor.is_tensor(c0) and node_id(c0) or nil,
        outputs = {}}
      -- the bases: y as [T, N, H] and the states as [layers, N, H] (N = 1 unbatched)
      local steps = (x:dim() == 2 or not module.batch_first) and x:size(1) or x:size(2)
      local batch = x:dim() == 2 and 1 or (module.batch_first and x:size(1) or x:size(2))
      local complete = true
      for k = 1, results.n do
        local want = k == 1 and {steps, batch, module.hidden_size} or {module.num_layers, batch, module.hidden_size}
        record.outputs[k] = base_id(results[k], want)
        complete = complete and record.outputs[k] ~= nil
      end
      -- (otherwise the export meets the scan and says it has no ONNX form)
      if complete then records[#records + 1] = record end
      return table.unpack(results, 1, results.n)
    end
  end
  return function()
    for kind, forward in pairs(originals) do nn[kind].forward = forward end
  end
end

-- A node with several outputs (emit makes one).
function Exporter:emit_multi(node, op_type, inputs, attributes, count)
  local outputs = {}
  for k = 1, count do outputs[k] = self:fresh(op_type .. "_out") end
  self.graph.nodes[#self.graph.nodes + 1] = {op_type = op_type, domain = "", name = self:fresh("n" .. op_type),
    inputs = inputs, outputs = outputs, attributes = attributes, doc_string = self:doc_string(node)}
  return table.unpack(outputs)
end

-- The rows of a [G*H, ...] weight or [G*H] bias, blocks of H taken in `order`.
local function reorder_gates(t, hidden, order)
  local blocks = {}
  for k, block in ipairs(order) do blocks[k] = t:narrow(1, (block - 1) * hidden + 1, hidden) end
  return tensor.cat(blocks, 1)
end
local onnx_gate_order = {GRU = {2, 1, 3}, LSTM = {1, 4, 2, 3}}

-- The ONNX nodes of one recorded call; `node` (the IR node of its first
-- needed output) gives the doc_string. Returns the names of the bases of
-- y, h_n (and c_n).
function Exporter:rnn_call(record, node)
  local m, kind = record.module, record.kind
  local hidden, layers = m.hidden_size, m.num_layers
  local prefix = self.rnn_prefix[m]
  if prefix == nil then
    self.rnn_count = self.rnn_count + 1
    prefix = string.format("%s_%d.", kind:lower(), self.rnn_count)
    for _, pair in ipairs(self.named) do
      if rawequal(pair[2], m.weight_ih_l0) then prefix = pair[1]:gsub("weight_ih_l0$", "") end
    end
    self.rnn_prefix[m] = prefix
  end
  local function axes(list) return self:constant("axes", list) end
  local x = self.names[self.position_of_id[record.x]]
  local h0 = record.h0 and self.names[self.position_of_id[record.h0]]
  local c0 = record.c0 and self.names[self.position_of_id[record.c0]]
  if record.rank == 2 then
    x = self:emit(node, "Unsqueeze", {x, axes({1})})
    h0 = h0 and self:emit(node, "Unsqueeze", {h0, axes({1})})
    c0 = c0 and self:emit(node, "Unsqueeze", {c0, axes({1})})
  elseif m.batch_first then
    x = self:emit(node, "Transpose", {x}, {perm = {1, 0, 2}})
  end
  local function layer_state(state, k)
    if state == nil then return "" end
    if layers == 1 then return state end
    return self:emit(node, "Slice", {state, self:constant("starts", {k}), self:constant("ends", {k + 1}), axes({0})})
  end
  local order = onnx_gate_order[kind]
  local hs, cs = {}, {}
  for k = 0, layers - 1 do
    local names = {}
    if not self.rnn_done[prefix .. k] then
      tensor.no_grad(function()
        local w = reorder_gates(m["weight_ih_l" .. k], hidden, order)
        local r = reorder_gates(m["weight_hh_l" .. k], hidden, order)
        self:initializer(prefix .. "W_l" .. k, w:reshape(1, w:size(1), w:size(2)):contiguous())
        self:initializer(prefix .. "R_l" .. k, r:reshape(1, r:size(1), r:size(2)):contiguous())
        if m.bias then
          local b = tensor.cat({reorder_gates(m["bias_ih_l" .. k], hidden, order),
            reorder_gates(m["bias_hh_l" .. k], hidden, order)}, 1)
          self:initializer(prefix .. "B_l" .. k, b:reshape(1, b:size(1)):contiguous())
        end
      end)
      self.rnn_done[prefix .. k] = true
    end
    names = {x, prefix .. "W_l" .. k, prefix .. "R_l" .. k, m.bias and prefix .. "B_l" .. k or "", "",
      layer_state(h0, k)}
    local attributes = {hidden_size = hidden}
    if kind == "GRU" then
      attributes.linear_before_reset = 1
    else
      names[7] = layer_state(c0, k)
    end
    while names[#names] == "" do names[#names] = nil end
    local y, y_h, y_c = self:emit_multi(node, kind, names, attributes, kind == "LSTM" and 3 or 2)
    x = self:emit(node, "Squeeze", {y, axes({1})})    -- [T, 1, N, H] -> [T, N, H]
    hs[#hs + 1], cs[#cs + 1] = y_h, y_c
  end
  local function stacked(list) return #list == 1 and list[1] or self:emit(node, "Concat", list, {axis = 0}) end
  -- the bases: y [T, N, H], the states [layers, N, H]; the views the module
  -- returns (a transpose when batch_first, a squeeze unbatched) are IR
  -- nodes above them, exported as any view
  return {x, stacked(hs), kind == "LSTM" and stacked(cs) or nil}
end

-- Gives the output positions of a recorded call their ONNX names, emitting
-- the call's nodes at its first needed output.
function Exporter:rnn_output(i, node, entry)
  local record = entry.record
  if record.names == nil then record.names = self:rnn_call(record, node) end
  self.names[i] = record.names[entry.output]
  if self.dynamic then
    -- the bases are [T, N, H] and [layers, N, H]: a batch_first input's
    -- batch (its dim 1) lands in dim 2, which dynamic_batch cannot mark
    local x_batched = self.batched[self.position_of_id[record.x]]
    if x_batched and record.rank == 3 and record.module.batch_first then
      self:fail(node, "dynamic_batch: a batch_first nn.%s holds the batch in dim 2 inside; export " ..
        "with a static batch", record.kind)
    end
    self.batched[i] = entry.output == 1 and x_batched or false  -- y's dim 1 is T, as x's
  end
  local info = self.graph.value_info
  info[#info + 1] = value_info(self.names[i], node.dtype, node.shape, self.batched[i])
end

-- ---- the entry point ----

local function is_module(value)
  return type(value) == "table" and type(value.forward) == "function"
end

-- Each module of the tree and its training flag, to put back after the
-- trace (a child may be in another mode than its parent).
local function training_flags(module, list)
  list = list or {}
  list[#list + 1] = {module, module.training}
  if type(module.children) == "function" then
    for _, child in ipairs(module:children()) do training_flags(child, list) end
  end
  return list
end

function M.export(fn_or_module, example_inputs, path, opts)
  local problem = options_problem("onnx.export", opts, {"dynamic_batch", "doc_string", "graph_name", "opset"})
  if problem then error(problem, 0) end
  opts = opts or {}
  local opset = opts.opset or MAX_OPSET
  if math.type(opset) ~= "integer" or opset < MIN_OPSET or opset > MAX_OPSET then
    export_error("opts.opset must be an integer from %d to %d, got %s", MIN_OPSET, MAX_OPSET, tostring(opset))
  end
  local callable
  if is_module(fn_or_module) then
    callable = function(...) return fn_or_module(...) end
  elseif type(fn_or_module) == "function" then
    callable = fn_or_module
  else
    export_error("expected a function or an nn module to export, got %s", type(fn_or_module))
  end
  if tensor.is_tensor(example_inputs) then example_inputs = {example_inputs} end
  if type(example_inputs) ~= "table" or #example_inputs == 0 then
    export_error("example_inputs must be a tensor or a list of tensors")
  end
  for k, x in ipairs(example_inputs) do
    if not tensor.is_tensor(x) then export_error("example input %d is a %s, not a tensor", k, type(x)) end
  end
  if type(path) ~= "string" then export_error("path must be a string, got %s", type(path)) end

  local named = is_module(fn_or_module) and fn_or_module:named_parameters() or {}
  local to_sync = {}
  for _, x in ipairs(example_inputs) do to_sync[#to_sync + 1] = x end
  for _, pair in ipairs(named) do to_sync[#to_sync + 1] = pair[2] end
  tensor.sync(to_sync)

  -- The trace: lazy mode, no gradients, a module in evaluation mode.
  local was_eager = tensor.is_eager()
  local flags = is_module(fn_or_module) and training_flags(fn_or_module) or {}
  if is_module(fn_or_module) and fn_or_module.eval then fn_or_module:eval() end
  tensor.set_eager(false)
  local rnn_records = {}
  local restore_rnn = record_rnn_calls(rnn_records)
  -- The call gets lazy copies of the inputs: the graph input is the copy's
  -- node, which every op and view on the input reads (a view of a data
  -- tensor would be a leaf of its own, read from its base's memory).
  local inputs, input_ids = {}, {}
  -- The graph is read before eager mode comes back (switching to it syncs).
  local ok, traced = pcall(function()
    for k, x in ipairs(example_inputs) do
      inputs[k] = tensor.no_grad(function() return x:clone() end)
      local copy = tensor.graph(inputs[k])
      local id = copy.nodes[copy.outputs[1]].id
      for j = 1, k - 1 do
        if input_ids[j] == id then export_error("example inputs %d and %d are the same tensor", j, k) end
      end
      input_ids[k] = id
    end
    local results = table.pack(tensor.no_grad(function() return callable(table.unpack(inputs)) end))
    if results.n == 1 and type(results[1]) == "table" and not tensor.is_tensor(results[1]) then
      results = results[1]
    end
    local outputs = {}
    for k, y in ipairs(results) do
      if not tensor.is_tensor(y) then
        export_error("output %d of the traced call is a %s, not a tensor", k, type(y))
      end
      outputs[k] = y
    end
    if #outputs == 0 then export_error("the traced call returned no tensor") end
    return tensor.graph(outputs)
  end)
  restore_rnn()
  tensor.set_eager(was_eager)
  for _, entry in ipairs(flags) do rawset(entry[1], "training", entry[2]) end
  if not ok then error(traced, 0) end
  local self = setmetatable({
    nodes = traced.nodes, names = {}, batched = {}, counter = 0, data_count = 0,
    input_of_id = {}, dynamic = opts.dynamic_batch == true, opset = opset,
    param_keys = {}, param_storage = {}, param_used = {},
    named = named, script_folder = calling_script_folder(), position_of_id = {},
    rnn_of_id = {}, rnn_prefix = {}, rnn_done = {}, rnn_count = 0,
    graph = {name = opts.graph_name or "main_graph", doc_string = "", nodes = {}, initializers = {},
      inputs = {}, outputs = {}, value_info = {}},
  }, Exporter)
  local dynamic = opts.dynamic_batch == true
  for k, x in ipairs(example_inputs) do
    local name = k == 1 and "input" or ("input_" .. (k - 1))
    self.input_of_id[input_ids[k]] = name
    if dynamic then
      if x:dim() == 0 then export_error("dynamic_batch: example input %d has no dims", k) end
      self.batch = self.batch or x:size(1)
      if self.batch < 2 then
        -- the batch dim is told apart from others by its extent
        export_error("dynamic_batch: example inputs need a batch of 2 or more (dim 1 of input %d is %d)",
          k, x:size(1))
      end
      if x:size(1) ~= self.batch then
        export_error("dynamic_batch: example input %d has %d in dim 1, input 1 has %d", k, x:size(1),
          self.batch)
      end
    end
    self.graph.inputs[k] = value_info(name, x:dtype(), x:size(), dynamic and 1)
  end
  for _, pair in ipairs(named) do
    local leaf = data_leaf(pair[2])
    local entry = {name = pair[1], tensor = pair[2], leaf = leaf}
    self.param_keys[leaf_key(leaf)] = self.param_keys[leaf_key(leaf)] or entry
    self.param_storage[leaf.storage] = self.param_storage[leaf.storage] or entry
  end

  -- The nodes the outputs need: the walk stops at the inputs' nodes (their
  -- copies' history is not part of the model).
  -- A recorded nn.GRU/nn.LSTM call's output stands for the call: the walk
  -- goes on from the call's inputs instead.
  for i, node in ipairs(self.nodes) do self.position_of_id[node.id] = self.position_of_id[node.id] or i end
  for _, record in ipairs(rnn_records) do
    for k, id in ipairs(record.outputs) do self.rnn_of_id[id] = {record = record, output = k} end
  end
  local needed = {}
  for _, position in ipairs(traced.outputs) do needed[position] = true end
  for i = #self.nodes, 1, -1 do
    local node = self.nodes[i]
    local call = self.rnn_of_id[node.id]
    if needed[i] and call then
      for _, id in ipairs({call.record.x, call.record.h0 or false, call.record.c0 or false}) do
        if id then
          local position = self.position_of_id[id]
          if position == nil or position >= i then
            self:fail(node, "the input of nn.%s is not in the traced graph", call.record.kind)
          end
          needed[position] = true
        end
      end
    elseif needed[i] and not self.input_of_id[node.id] then
      for _, position in ipairs(node.inputs) do needed[position] = true end
    end
  end
  for i, node in ipairs(self.nodes) do
    if needed[i] then
      local call = self.rnn_of_id[node.id]
      if call and not self.input_of_id[node.id] then
        self:rnn_output(i, node, call)
      else
        self:translate(i, node)
      end
    end
  end

  -- Graph outputs: an Identity renames each (a value may be output twice,
  -- or be an input or initializer itself).
  for k, position in ipairs(traced.outputs) do
    local node = self.nodes[position]
    local name = k == 1 and "output" or ("output_" .. (k - 1))
    self:emit(node, "Identity", {self.names[position]}, nil, name)
    self.graph.outputs[k] = value_info(name, node.dtype, node.shape, self.batched[position])
  end
  local model = {
    ir_version = 8, producer_name = "lazylua", producer_version = "", domain = "",
    model_version = 0, doc_string = opts.doc_string or "", opset = {[""] = opset}, graph = self.graph,
  }
  -- The safe writer (interp/file_bytes.h): a FIFO or a device is refused
  -- and left alone, and the model is written whole or not at all.
  native.write_file(path, native.onnx_encode_model(model), "onnx.export")
  return model
end

-- An embedding sandbox writes no files: there is no export there.
if not native.write_file then M.export = nil end

return M
