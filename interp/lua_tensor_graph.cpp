// lua_tensor_graph.cpp - tensor.graph(t1, t2, ...): the IR that computes
// these tensors, as Lua tables (read-only), for tools written in Lua that
// translate lazylua's graphs: onnx.export (stdlib/onnx_export.lua) maps each
// node to ONNX. tensor.ir gives the same graph as text.
#include <cstdint>

#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"

namespace lazylua::binding {
namespace {

// The pushes go through lua_safe: the graph and the tensors are alive.
void set_string(lua_State* L, const char* key, const char* value) {
  if (value) {
    lua_safe::push_string(L, value);
  } else {
    lua_pushnil(L);
  }
  lua_safe::set_field(L, -2, key);
}

void set_integer(lua_State* L, const char* key, int64_t value) {
  lua_pushinteger(L, static_cast<lua_Integer>(value));
  lua_safe::set_field(L, -2, key);
}

void set_integer_list(lua_State* L, const char* key, const int64_t* values, int count) {
  lua_safe::create_table(L, count, 0);
  for (int k = 0; k < count; k++) {
    lua_pushinteger(L, static_cast<lua_Integer>(values[k]));
    lua_rawseti(L, -2, k + 1);
  }
  lua_safe::set_field(L, -2, key);
}

// What a leaf is: "parameter" (data), "placeholder" (a scan body's input),
// "computed" (an earlier sync's result, read as data), "scalar" (a Lua
// number fed to the graph), "constant" (0 or 1 baked into it); nil for an
// op node.
const char* leaf_kind(const Node& node) {
  if (node.op == Op::constant) return "constant";
  if (node.op == Op::scalar) return "scalar";
  if (node.is_placeholder()) return "placeholder";
  if (node.op == Op::parameter) return "parameter";
  if (node.result.defined()) return "computed";
  return nullptr;
}

// The data leaf's value as a tensor sharing its memory, and where that
// memory is: `storage` (the buffer's identity, equal for views of one
// buffer), `offset` and `strides` in elements.
void set_leaf_data(lua_State* L, const Array& data) {
  push_tensor(L, data);
  lua_safe::set_field(L, -2, "data");
  set_integer(L, "storage", static_cast<int64_t>(reinterpret_cast<intptr_t>(data.buffer.get())));
  set_integer(L, "offset", data.offset);
  set_integer_list(L, "strides", data.strides.begin(), data.rank());
  lua_pushboolean(L, data.is_contiguous());
  lua_safe::set_field(L, -2, "contiguous");
}

void push_node(lua_State* L, const Graph& graph, int position) {
  const Node& node = *graph.nodes[static_cast<size_t>(position)];
  lua_safe::create_table(L, 0, 16);
  set_string(L, "op", op_name(node.op));
  set_string(L, "name", node.name());
  set_integer(L, "sub_op", node.sub_op);
  set_string(L, "dtype", dtype_name(node.dtype));
  set_integer_list(L, "shape", node.shape.begin(), node.shape.rank());
  set_string(L, "chunk", node.location.chunk);
  set_integer(L, "line", node.location.line);
  set_string(L, "location", location_string(node.location).c_str());
  if (const char* file =
          node.location.chunk ? tensor_context(L)->chunk_file(node.location.chunk) : nullptr) {
    set_string(L, "file", file);
  }
  // The node's identity: equal in two graphs that share the node (a
  // tensor's pending value and a later graph that reads it).
  set_integer(L, "id", static_cast<int64_t>(reinterpret_cast<intptr_t>(&node)));
  const int first = graph.input_offsets[static_cast<size_t>(position)];
  const int last = graph.input_offsets[static_cast<size_t>(position) + 1];
  lua_safe::create_table(L, last - first, 0);
  for (int k = first; k < last; k++) {
    lua_pushinteger(L, graph.input_positions[static_cast<size_t>(k)] + 1);
    lua_rawseti(L, -2, k - first + 1);
  }
  lua_safe::set_field(L, -2, "inputs");
  if (const char* kind = leaf_kind(node)) {
    set_string(L, "kind", kind);
    set_integer_list(L, "attrs", node.attrs, 0);
    if (node.op == Op::scalar || node.op == Op::constant) {
      if (node.scalar.is_integer) {
        lua_pushinteger(L, static_cast<lua_Integer>(node.scalar.integer));
      } else {
        lua_pushnumber(L, node.scalar.value);
      }
      lua_safe::set_field(L, -2, "value");
    } else if (node.op == Op::parameter && node.data.defined()) {
      set_leaf_data(L, node.data);
    } else if (node.result.defined()) {
      set_leaf_data(L, node.result);
    }
    return;
  }
  const int input_rank = node.inputs.empty() ? 0 : node.inputs[0]->shape.rank();
  set_integer_list(L, "attrs", node.attrs, attr_count(node.op, input_rank));
  if (node.op == Op::binary) {
    // The dtype the op computes in (its inputs may differ: ops::binary
    // promotes), for consumers whose ops take one dtype.
    const DType promoted = promote(node.inputs[0]->dtype, node.inputs[1]->dtype);
    set_string(L, "compute_dtype",
               dtype_name(ops::binary_compute_dtype(static_cast<BinaryOp>(node.sub_op), promoted)));
  }
}

// tensor.graph(t1, t2, ...) or tensor.graph({t1, t2, ...}): {nodes = {...},
// outputs = {...}}; see docs/tensor_api.md.
int graph(lua_State* L) {
  const std::vector<Tensor> tensors = tensor_arguments(L, 1, "graph");
  if (tensors.empty()) argument_error(1, "graph", "expected at least one tensor");
  std::vector<Tensor> keep;
  const Graph extracted = values_graph(tensor_context(L), tensors, keep);
  lua_safe::create_table(L, 0, 2);
  lua_safe::create_table(L, static_cast<int64_t>(extracted.nodes.size()), 0);
  for (size_t i = 0; i < extracted.nodes.size(); i++) {
    push_node(L, extracted, static_cast<int>(i));
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_safe::set_field(L, -2, "nodes");
  lua_safe::create_table(L, static_cast<int64_t>(extracted.outputs.size()), 0);
  for (size_t i = 0; i < extracted.outputs.size(); i++) {
    lua_pushinteger(L, extracted.outputs[i] + 1);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_safe::set_field(L, -2, "outputs");
  return 1;
}

}  // namespace

void register_graph_functions(lua_State* L) {
  static const luaL_Reg functions[] = {
      {"graph", guarded<graph>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
}

}  // namespace lazylua::binding
