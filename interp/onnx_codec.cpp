// onnx_codec.cpp - ONNX files as plain Lua tables: ModelProto and
// TensorProto bytes to tables and tensors, and back (the shape of the
// tables: docs/onnx.md). stdlib/onnx.lua builds on these, in the
// stdlib.native table:
//
//   onnx_decode_model(bytes) -> model          onnx_encode_model(model) -> bytes
//   onnx_decode_tensor(bytes) -> tensor, name, onnx_type
//   onnx_encode_tensor(tensor [, name]) -> bytes
//   onnx_eager_call(fn, ...) -> fn(...) run in eager mode, with no barrier
//
// The messages come from Debian's onnx.proto (libonnx-dev), compiled at
// build time under the package lazylua.onnx, so that they never clash with
// libonnx's own onnx:: classes in a host that links both.
#include <lua.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/io/coded_stream.h>

#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "interp/npy_format.h"
#include "interp/stdlib_native.h"
#include "onnx/onnx.pb.h"
#include "tensor/checked.h"
#include "tensor/memory_budget.h"

namespace lazylua {
namespace {

using binding::check_tensor;
using binding::guarded;
using binding::type_error;
namespace proto = lazylua::onnx;

// The data of the tensor at arg (a sync if it is pending).
Array tensor_data(lua_State* L, int arg, const char* function) {
  return observe(check_tensor(L, arg, function), SyncCause::host_read);
}

// The string at the stack top (no Lua error: this runs in guarded code).
std::string top_string(lua_State* L, const char* what) {
  if (lua_type(L, -1) != LUA_TSTRING) fail("onnx: {} must be a string", what);
  size_t length = 0;
  const char* text = lua_tolstring(L, -1, &length);
  return std::string(text, length);
}

// Subgraphs (If, Loop, Scan bodies) nest at most this deep.
constexpr int kMaxGraphDepth = 64;
// Each subgraph level is three protobuf messages deep (AttributeProto,
// GraphProto, NodeProto); protobuf's default limit of 100 would stop a
// parse at about 33 levels, before kMaxGraphDepth could say why. Deeper
// than this, the parse fails and the message says it may be the nesting.
constexpr int kParseRecursionLimit = 3 * kMaxGraphDepth + 64;

void check_stack(lua_State* L, int slots) {
  if (!lua_checkstack(L, slots)) fail("onnx: graphs or attributes nested too deeply");
}

// ---- Tensors ----

// ONNX element types (TensorProto.DataType).
enum OnnxType : int {
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kBfloat16 = 16,
};

const char* onnx_type_name(int type) {
  static const char* const names[] = {"UNDEFINED",  "FLOAT",   "UINT8",  "INT8",   "UINT16",
                                      "INT16",      "INT32",   "INT64",  "STRING", "BOOL",
                                      "FLOAT16",    "DOUBLE",  "UINT32", "UINT64", "COMPLEX64",
                                      "COMPLEX128", "BFLOAT16"};
  return type >= 0 && type < static_cast<int>(std::size(names)) ? names[type] : "unknown";
}

// The lazylua dtype an ONNX element type is read as (docs/onnx.md), or
// nothing for a type lazylua cannot hold.
std::optional<DType> dtype_for(int type) {
  switch (type) {
    case kFloat:
    case kFloat16:
    case kBfloat16:
      return DType::f32;
    case kDouble:
      return DType::f64;
    case kUint8:
    case kInt8:
    case kUint16:
    case kInt16:
    case kInt32:
      return DType::i32;
    case kInt64:
    case kUint32:
      return DType::i64;
    case kBool:
      return DType::boolean;
    default:
      return std::nullopt;
  }
}

int onnx_type_for(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return kFloat;
    case DType::f64:
      return kDouble;
    case DType::i32:
      return kInt32;
    case DType::i64:
      return kInt64;
    case DType::boolean:
      return kBool;
  }
  return 0;
}

// Bytes of one element in raw_data.
int raw_size(int type) {
  switch (type) {
    case kUint8:
    case kInt8:
    case kBool:
      return 1;
    case kUint16:
    case kInt16:
    case kFloat16:
    case kBfloat16:
      return 2;
    case kFloat:
    case kInt32:
    case kUint32:
      return 4;
    default:
      return 8;  // kInt64, kDouble
  }
}

// Element i of raw_data (little-endian) as a double or an int64.
template <typename T>
T load_raw(const std::string& raw, int64_t i, int type) {
  const char* p = raw.data() + i * raw_size(type);
  auto read = [p]<typename U>(U zero) {
    std::memcpy(&zero, p, sizeof zero);
    return zero;
  };
  switch (type) {
    case kFloat:
      return static_cast<T>(read(0.0f));
    case kDouble:
      return static_cast<T>(read(0.0));
    case kFloat16:
      return static_cast<T>(npy::half_to_float(read(uint16_t{0})));
    case kBfloat16:
      return static_cast<T>(std::bit_cast<float>(static_cast<uint32_t>(read(uint16_t{0})) << 16));
    case kUint8:
    case kBool:
      return static_cast<T>(read(uint8_t{0}));
    case kInt8:
      return static_cast<T>(read(int8_t{0}));
    case kUint16:
      return static_cast<T>(read(uint16_t{0}));
    case kInt16:
      return static_cast<T>(read(int16_t{0}));
    case kInt32:
      return static_cast<T>(read(int32_t{0}));
    case kUint32:
      return static_cast<T>(read(uint32_t{0}));
    default:
      return static_cast<T>(read(int64_t{0}));
  }
}

// Element i of the typed repeated field the type uses.
template <typename T>
T load_field(const proto::TensorProto& t, int64_t i, int type) {
  switch (type) {
    case kFloat:
      return static_cast<T>(t.float_data(static_cast<int>(i)));
    case kDouble:
      return static_cast<T>(t.double_data(static_cast<int>(i)));
    case kInt64:
      return static_cast<T>(t.int64_data(static_cast<int>(i)));
    case kUint32:
      return static_cast<T>(t.uint64_data(static_cast<int>(i)));
    case kFloat16:
      return static_cast<T>(npy::half_to_float(static_cast<uint16_t>(t.int32_data(i))));
    case kBfloat16:
      return static_cast<T>(
          std::bit_cast<float>(static_cast<uint32_t>(t.int32_data(static_cast<int>(i))) << 16));
    default:  // the int32_data types
      return static_cast<T>(t.int32_data(static_cast<int>(i)));
  }
}

int64_t field_count(const proto::TensorProto& t, int type) {
  switch (type) {
    case kFloat:
      return t.float_data_size();
    case kDouble:
      return t.double_data_size();
    case kInt64:
      return t.int64_data_size();
    case kUint32:
      return t.uint64_data_size();
    default:
      return t.int32_data_size();
  }
}

// int32_data holds the values of the narrower integer types and bools
// (onnx.proto): a value outside the type's range is not one of its values,
// and the spec defines no wrapping, so the tensor is refused.
void check_int32_data_range(const proto::TensorProto& t, int type, const char* function,
                            const std::string& name) {
  int64_t low = 0;
  int64_t high = 0;
  switch (type) {
    case kInt8:
      low = -128, high = 127;
      break;
    case kUint8:
      high = 255;
      break;
    case kInt16:
      low = -32768, high = 32767;
      break;
    case kUint16:
      high = 65535;
      break;
    case kBool:
      high = 1;
      break;
    default:
      return;
  }
  for (int i = 0; i < t.int32_data_size(); i++) {
    const int64_t value = t.int32_data(i);
    if (value < low || value > high) {
      fail("{}: {} ({}) holds {} at element {} of int32_data, outside {}..{}", function, name,
           onnx_type_name(type), value, i + 1, low, high);
    }
  }
}

Array decode_tensor(const proto::TensorProto& t, const char* function) {
  const int type = t.data_type();
  const std::optional<DType> dtype = dtype_for(type);
  const std::string name = t.name().empty() ? "a tensor" : "tensor '" + t.name() + "'";
  if (!dtype) {
    fail("{}: {} has element type {} ({}), which lazylua cannot hold", function, name,
         onnx_type_name(type), type);
  }
  if (t.data_location() == proto::TensorProto::EXTERNAL || t.external_data_size() > 0) {
    fail("{}: {} keeps its data in an external file, which is not supported", function, name);
  }
  if (t.dims_size() > kMaxDims) {
    fail("{}: {} has {} dims; lazylua tensors have at most {}", function, name, t.dims_size(),
         kMaxDims);
  }
  Shape shape;
  int64_t count = 1;
  for (int64_t extent : t.dims()) {
    if (extent < 0) fail("{}: {} has a negative dim ({})", function, name, extent);
    count = checked_mul(count, extent, function);
    shape.push_back(extent);
  }
  const bool raw = t.has_raw_data();
  const int64_t stored =
      raw ? static_cast<int64_t>(t.raw_data().size()) / raw_size(type) : field_count(t, type);
  if (raw && static_cast<int64_t>(t.raw_data().size()) % raw_size(type) != 0) {
    fail("{}: {}'s raw data is {} bytes, not a whole number of {} elements", function, name,
         t.raw_data().size(), onnx_type_name(type));
  }
  if (stored != count) {
    fail("{}: {} of shape {} holds {} elements, not {}", function, name, shape_string(shape),
         stored, count);
  }
  if (!raw) check_int32_data_range(t, type, function, name);
  Array out = Array::empty(shape, *dtype, function);
  char* data = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < count; i++) {
    switch (*dtype) {
      case DType::f32: {
        const float v =
            raw ? load_raw<float>(t.raw_data(), i, type) : load_field<float>(t, i, type);
        std::memcpy(data + 4 * i, &v, 4);
        break;
      }
      case DType::f64: {
        const double v =
            raw ? load_raw<double>(t.raw_data(), i, type) : load_field<double>(t, i, type);
        std::memcpy(data + 8 * i, &v, 8);
        break;
      }
      case DType::i32: {
        const int32_t v =
            raw ? load_raw<int32_t>(t.raw_data(), i, type) : load_field<int32_t>(t, i, type);
        std::memcpy(data + 4 * i, &v, 4);
        break;
      }
      case DType::i64: {
        const int64_t v =
            raw ? load_raw<int64_t>(t.raw_data(), i, type) : load_field<int64_t>(t, i, type);
        std::memcpy(data + 8 * i, &v, 8);
        break;
      }
      case DType::boolean: {
        const int64_t v =
            raw ? load_raw<int64_t>(t.raw_data(), i, type) : load_field<int64_t>(t, i, type);
        data[i] = v != 0;
        break;
      }
    }
  }
  return out;
}

// The bytes the encoder holds outside Lua and the tensor allocator (the
// protobuf copies of tensors, the serialized model), charged to the
// interpreter's memory budget while they live: an encode larger than an
// embedding's memory_limit is refused before each copy is made, rather
// than after the host has run out of memory.
class EncoderCharge {
 public:
  EncoderCharge() : budget_(current_memory_budget()) {}
  ~EncoderCharge() {
    if (budget_) budget_->give_back(charged_);
  }
  EncoderCharge(const EncoderCharge&) = delete;
  EncoderCharge& operator=(const EncoderCharge&) = delete;

  void add(int64_t bytes, const char* what) {
    if (!budget_) return;
    if (!budget_->try_charge(bytes)) {
      fail(
          "onnx: not enough memory to encode the model ({} takes {:.1f} MiB more, past the "
          "interpreter's memory limit of {:.1f} MiB)",
          what, static_cast<double>(bytes) / (1 << 20),
          static_cast<double>(budget_->limit()) / (1 << 20));
    }
    charged_ += bytes;
  }

 private:
  MemoryBudget* budget_;
  int64_t charged_ = 0;
};

void encode_tensor(const Array& value, const std::string& name, proto::TensorProto* t,
                   EncoderCharge& charge) {
  const Array data = contiguous(value);
  const auto bytes = static_cast<size_t>(data.numel() * dtype_size(data.dtype));
  charge.add(static_cast<int64_t>(bytes), "a tensor");
  t->set_name(name);
  t->set_data_type(onnx_type_for(data.dtype));
  for (int64_t extent : data.shape) t->add_dims(extent);
  // raw_data is little-endian, as this machine.
  t->set_raw_data(static_cast<const char*>(data.raw_data()), bytes);
}

// ---- Decoding into Lua tables ----

// Every push below goes through lua_safe (the protobuf messages are alive).
void set_string(lua_State* L, const char* key, const std::string& value) {
  lua_safe::push_string(L, value);
  lua_safe::set_field(L, -2, key);
}

void set_integer(lua_State* L, const char* key, int64_t value) {
  lua_pushinteger(L, value);
  lua_safe::set_field(L, -2, key);
}

// `consumed` (the same graph, or null): its initializers' bytes are freed
// as each becomes a tensor, so a large model is not held twice over.
void push_graph(lua_State* L, const proto::GraphProto& graph, int depth,
                proto::GraphProto* consumed = nullptr);

// "f32", ... for the types lazylua holds, else the ONNX type number.
void push_elem_type(lua_State* L, int type) {
  const std::optional<DType> dtype = dtype_for(type);
  if (dtype && (type == onnx_type_for(*dtype))) {
    lua_safe::push_string(L, dtype_name(*dtype));
  } else {
    lua_pushinteger(L, type);
  }
}

void push_value_info(lua_State* L, const proto::ValueInfoProto& info) {
  lua_safe::create_table(L, 0, 3);
  set_string(L, "name", info.name());
  if (info.type().has_tensor_type()) {
    const auto& tensor_type = info.type().tensor_type();
    push_elem_type(L, tensor_type.elem_type());
    lua_safe::set_field(L, -2, "elem_type");
    if (tensor_type.has_shape()) {
      lua_safe::create_table(L, tensor_type.shape().dim_size(), 0);
      int k = 1;
      for (const auto& dim : tensor_type.shape().dim()) {
        if (dim.has_dim_value()) {
          lua_pushinteger(L, dim.dim_value());
        } else if (dim.has_dim_param()) {
          lua_safe::push_string(L, dim.dim_param());
        } else {
          lua_pushboolean(L, false);
        }
        lua_rawseti(L, -2, k++);
      }
      lua_safe::set_field(L, -2, "shape");
    }
  } else if (info.has_type()) {
    // Sequences, maps, optionals: named, so that a model using them is
    // refused by name (lazylua values are tensors).
    const auto& type = info.type();
    lua_safe::push_string(L, type.has_sequence_type()   ? "sequence"
                             : type.has_map_type()      ? "map"
                             : type.has_optional_type() ? "optional"
                                                        : "other");
    lua_safe::set_field(L, -2, "kind");
  }
  if (!info.doc_string().empty()) set_string(L, "doc_string", info.doc_string());
}

void push_attribute_value(lua_State* L, const proto::AttributeProto& a, int depth) {
  using A = proto::AttributeProto;
  switch (a.type()) {
    case A::FLOAT:
      lua_pushnumber(L, a.f());
      return;
    case A::INT:
      lua_pushinteger(L, a.i());
      return;
    case A::STRING:
      lua_safe::push_string(L, a.s());
      return;
    case A::TENSOR:
      push_tensor(L, decode_tensor(a.t(), "onnx"));
      return;
    case A::GRAPH:
      push_graph(L, a.g(), depth + 1);
      return;
    case A::FLOATS:
      lua_safe::create_table(L, a.floats_size(), 0);
      for (int k = 0; k < a.floats_size(); k++) {
        lua_pushnumber(L, a.floats(k));
        lua_rawseti(L, -2, k + 1);
      }
      return;
    case A::INTS:
      lua_safe::create_table(L, a.ints_size(), 0);
      for (int k = 0; k < a.ints_size(); k++) {
        lua_pushinteger(L, a.ints(k));
        lua_rawseti(L, -2, k + 1);
      }
      return;
    case A::STRINGS:
      lua_safe::create_table(L, a.strings_size(), 0);
      for (int k = 0; k < a.strings_size(); k++) {
        lua_safe::push_string(L, a.strings(k));
        lua_rawseti(L, -2, k + 1);
      }
      return;
    case A::TENSORS:
      lua_safe::create_table(L, a.tensors_size(), 0);
      for (int k = 0; k < a.tensors_size(); k++) {
        push_tensor(L, decode_tensor(a.tensors(k), "onnx"));
        lua_rawseti(L, -2, k + 1);
      }
      return;
    case A::GRAPHS:
      lua_safe::create_table(L, a.graphs_size(), 0);
      for (int k = 0; k < a.graphs_size(); k++) {
        push_graph(L, a.graphs(k), depth + 1);
        lua_rawseti(L, -2, k + 1);
      }
      return;
    default:
      // Sparse tensors and type protos: kept as their kind, so an op that
      // needs one says what it got.
      lua_safe::push_string(
          L, fmt::format("<unsupported attribute type {}>", static_cast<int>(a.type())));
      return;
  }
}

void push_node(lua_State* L, const proto::NodeProto& node, int depth) {
  lua_safe::create_table(L, 0, 7);
  set_string(L, "op_type", node.op_type());
  set_string(L, "domain", node.domain());
  set_string(L, "name", node.name());
  if (!node.doc_string().empty()) set_string(L, "doc_string", node.doc_string());
  lua_safe::create_table(L, node.input_size(), 0);
  for (int k = 0; k < node.input_size(); k++) {
    lua_safe::push_string(L, node.input(k));
    lua_rawseti(L, -2, k + 1);
  }
  lua_safe::set_field(L, -2, "inputs");
  lua_safe::create_table(L, node.output_size(), 0);
  for (int k = 0; k < node.output_size(); k++) {
    lua_safe::push_string(L, node.output(k));
    lua_rawseti(L, -2, k + 1);
  }
  lua_safe::set_field(L, -2, "outputs");
  lua_safe::create_table(L, 0, node.attribute_size());
  for (const proto::AttributeProto& attribute : node.attribute()) {
    check_stack(L, 8);
    push_attribute_value(L, attribute, depth);
    lua_safe::set_field(L, -2, attribute.name().c_str());
  }
  lua_safe::set_field(L, -2, "attributes");
}

void push_value_infos(lua_State* L, const char* key,
                      const google::protobuf::RepeatedPtrField<proto::ValueInfoProto>& infos) {
  lua_safe::create_table(L, infos.size(), 0);
  int k = 1;
  for (const auto& info : infos) {
    push_value_info(L, info);
    lua_rawseti(L, -2, k++);
  }
  lua_safe::set_field(L, -2, key);
}

void push_graph(lua_State* L, const proto::GraphProto& graph, int depth,
                proto::GraphProto* consumed) {
  if (depth > kMaxGraphDepth) {
    fail("onnx: subgraphs nested too deeply (more than {} levels)", kMaxGraphDepth);
  }
  check_stack(L, 16);
  lua_safe::create_table(L, 0, 7);
  set_string(L, "name", graph.name());
  if (!graph.doc_string().empty()) set_string(L, "doc_string", graph.doc_string());
  lua_safe::create_table(L, graph.node_size(), 0);
  for (int k = 0; k < graph.node_size(); k++) {
    push_node(L, graph.node(k), depth);
    lua_rawseti(L, -2, k + 1);
  }
  lua_safe::set_field(L, -2, "nodes");
  lua_safe::create_table(L, graph.initializer_size(), 0);
  for (int k = 0; k < graph.initializer_size(); k++) {
    const proto::TensorProto& t = graph.initializer(k);
    lua_safe::create_table(L, 0, 3);
    set_string(L, "name", t.name());
    set_integer(L, "onnx_type", t.data_type());
    push_tensor(L, decode_tensor(t, "onnx"));
    lua_safe::set_field(L, -2, "tensor");
    lua_rawseti(L, -2, k + 1);
    if (consumed) {
      // release_, not clear_: a cleared string keeps its capacity.
      std::unique_ptr<std::string> bytes(consumed->mutable_initializer(k)->release_raw_data());
    }
  }
  lua_safe::set_field(L, -2, "initializers");
  if (graph.sparse_initializer_size() > 0) {
    fail("onnx: graph '{}' has sparse initializers, which are not supported", graph.name());
  }
  push_value_infos(L, "inputs", graph.input());
  push_value_infos(L, "outputs", graph.output());
  push_value_infos(L, "value_info", graph.value_info());
}

std::string check_bytes(lua_State* L, int arg, const char* function) {
  if (lua_type(L, arg) != LUA_TSTRING) type_error(L, arg, function, "string");
  size_t length = 0;
  const char* bytes = lua_tolstring(L, arg, &length);
  return std::string(bytes, length);
}

int decode_model(lua_State* L) {
  proto::ModelProto model;
  {
    // Parsed from the Lua string itself (argument 1 keeps it alive), not a
    // copy: a 330 MB model would otherwise be in memory three times at once.
    if (lua_type(L, 1) != LUA_TSTRING) type_error(L, 1, "onnx.load", "string");
    size_t size = 0;
    const char* bytes = lua_tolstring(L, 1, &size);
    if (size == 0) fail("onnx.load: the file is empty, not an ONNX model");
    if (size > static_cast<size_t>(INT32_MAX)) {
      fail("onnx.load: the model is larger than 2 GiB, which protobuf cannot parse");
    }
    google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(bytes),
                                                 static_cast<int>(size));
    input.SetRecursionLimit(kParseRecursionLimit);
    if (!model.ParseFromCodedStream(&input) || !input.ConsumedEntireMessage()) {
      fail(
          "onnx.load: not an ONNX model (the bytes do not parse as a ModelProto, or its "
          "messages are nested too deeply: more than {} subgraph levels)",
          kMaxGraphDepth);
    }
  }
  if (!model.has_graph()) fail("onnx.load: the model has no graph");
  lua_safe::create_table(L, 0, 9);
  set_integer(L, "ir_version", model.ir_version());
  set_string(L, "producer_name", model.producer_name());
  set_string(L, "producer_version", model.producer_version());
  set_string(L, "domain", model.domain());
  set_integer(L, "model_version", model.model_version());
  set_string(L, "doc_string", model.doc_string());
  lua_safe::create_table(L, 0, model.opset_import_size());
  for (const auto& opset : model.opset_import()) {
    // "ai.onnx" is the default domain's other name.
    const std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
    set_integer(L, domain.c_str(), opset.version());
  }
  lua_safe::set_field(L, -2, "opset");
  push_graph(L, model.graph(), 0, model.mutable_graph());
  lua_safe::set_field(L, -2, "graph");
  return 1;
}

int decode_tensor_bytes(lua_State* L) {
  proto::TensorProto t;
  if (!t.ParseFromString(check_bytes(L, 1, "onnx.read_tensor"))) {
    fail("onnx.read_tensor: not an ONNX tensor (the bytes do not parse as a TensorProto)");
  }
  push_tensor(L, decode_tensor(t, "onnx.read_tensor"));
  lua_safe::push_string(L, t.name());
  lua_pushinteger(L, t.data_type());
  return 3;
}

// ---- Encoding from Lua tables ----

// The string at key of the table at index, or "" when absent.
std::string field_string(lua_State* L, int index, const char* key) {
  lua_safe::read_field(L, index, key);
  std::string value;
  if (lua_type(L, -1) == LUA_TSTRING) {
    size_t length = 0;
    const char* text = lua_tolstring(L, -1, &length);
    value.assign(text, length);
  } else if (!lua_isnil(L, -1)) {
    lua_pop(L, 1);
    fail("onnx: field '{}' must be a string", key);
  }
  lua_pop(L, 1);
  return value;
}

int64_t field_integer(lua_State* L, int index, const char* key, int64_t fallback) {
  lua_safe::read_field(L, index, key);
  int64_t value = fallback;
  if (lua_isinteger(L, -1)) {
    value = lua_tointeger(L, -1);
  } else if (!lua_isnil(L, -1)) {
    lua_pop(L, 1);
    fail("onnx: field '{}' must be an integer", key);
  }
  lua_pop(L, 1);
  return value;
}

// Calls each(k) with element k of the list at key on the stack top, for
// k = 1..n (nothing when the key is absent).
template <typename Each>
void for_each_in(lua_State* L, int index, const char* key, Each&& each) {
  lua_safe::read_field(L, index, key);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    fail("onnx: field '{}' must be a list", key);
  }
  const int list = lua_gettop(L);
  const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, list));
  for (lua_Integer k = 1; k <= n; k++) {
    lua_rawgeti(L, list, k);
    each(k);
    lua_settop(L, list);
  }
  lua_pop(L, 1);
}

void encode_graph(lua_State* L, int index, proto::GraphProto* graph, int depth,
                  EncoderCharge& charge);

void encode_value_info(lua_State* L, int index, proto::ValueInfoProto* info) {
  info->set_name(field_string(L, index, "name"));
  const std::string doc = field_string(L, index, "doc_string");
  if (!doc.empty()) info->set_doc_string(doc);
  auto* tensor_type = info->mutable_type()->mutable_tensor_type();
  lua_safe::read_field(L, index, "elem_type");
  if (lua_type(L, -1) == LUA_TSTRING) {
    tensor_type->set_elem_type(onnx_type_for(parse_dtype(lua_tostring(L, -1))));
  } else if (lua_isinteger(L, -1)) {
    tensor_type->set_elem_type(static_cast<int>(lua_tointeger(L, -1)));
  }
  lua_pop(L, 1);
  lua_safe::read_field(L, index, "shape");
  const bool has_shape = lua_istable(L, -1);
  lua_pop(L, 1);
  if (!has_shape) return;
  auto* shape = tensor_type->mutable_shape();
  for_each_in(L, index, "shape", [&](lua_Integer) {
    auto* dim = shape->add_dim();
    if (lua_isinteger(L, -1)) {
      dim->set_dim_value(lua_tointeger(L, -1));
    } else if (lua_type(L, -1) == LUA_TSTRING) {
      dim->set_dim_param(lua_tostring(L, -1));
    }
  });
}

// The attribute whose value is on the stack top; `hint` names its type
// when the value alone cannot ("ints" for an empty list).
void encode_attribute(lua_State* L, const std::string& name, const std::string& hint,
                      proto::AttributeProto* a, int depth, EncoderCharge& charge) {
  using A = proto::AttributeProto;
  a->set_name(name);
  const int value = lua_gettop(L);
  switch (lua_type(L, value)) {
    case LUA_TNUMBER:
      if (lua_isinteger(L, value)) {
        a->set_type(A::INT);
        a->set_i(lua_tointeger(L, value));
      } else {
        a->set_type(A::FLOAT);
        a->set_f(static_cast<float>(lua_tonumber(L, value)));
      }
      return;
    case LUA_TSTRING: {
      size_t length = 0;
      const char* text = lua_tolstring(L, value, &length);
      a->set_type(A::STRING);
      a->set_s(std::string(text, length));
      return;
    }
    case LUA_TUSERDATA:
      a->set_type(A::TENSOR);
      encode_tensor(tensor_data(L, value, "onnx.export"), "", a->mutable_t(), charge);
      return;
    case LUA_TTABLE:
      break;
    default:
      fail("onnx: attribute '{}' has a {} value", name, luaL_typename(L, value));
  }
  lua_safe::read_field(L, value, "nodes");
  const bool is_graph = lua_istable(L, -1);
  lua_pop(L, 1);
  if (is_graph) {
    a->set_type(A::GRAPH);
    encode_graph(L, value, a->mutable_g(), depth + 1, charge);
    return;
  }
  const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, value));
  if (n == 0) {
    if (hint == "ints")
      a->set_type(A::INTS);
    else if (hint == "floats")
      a->set_type(A::FLOATS);
    else if (hint == "strings")
      a->set_type(A::STRINGS);
    else
      fail("onnx: attribute '{}' is an empty list: give its type in attributes_types", name);
    return;
  }
  lua_rawgeti(L, value, 1);
  const int first_type = lua_type(L, -1);
  const bool integers = lua_isinteger(L, -1);
  lua_pop(L, 1);
  for (lua_Integer k = 1; k <= n; k++) {
    lua_rawgeti(L, value, k);
    if (first_type == LUA_TNUMBER && integers && hint != "floats" && lua_isinteger(L, -1)) {
      a->set_type(A::INTS);
      a->add_ints(lua_tointeger(L, -1));
    } else if (first_type == LUA_TNUMBER && lua_type(L, -1) == LUA_TNUMBER) {
      a->set_type(A::FLOATS);
      a->add_floats(static_cast<float>(lua_tonumber(L, -1)));
    } else if (first_type == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING) {
      a->set_type(A::STRINGS);
      a->add_strings(top_string(L, "a string attribute"));
    } else if (first_type == LUA_TUSERDATA) {
      a->set_type(A::TENSORS);
      encode_tensor(tensor_data(L, lua_gettop(L), "onnx.export"), "", a->add_tensors(), charge);
    } else {
      fail("onnx: attribute '{}' mixes element types", name);
    }
    lua_pop(L, 1);
  }
  if (a->type() == A::FLOATS && a->ints_size() > 0) {
    // A list that began with integers and then had a float: all floats.
    for (int64_t v : a->ints()) a->add_floats(static_cast<float>(v));
    a->clear_ints();
  }
}

void encode_node(lua_State* L, int index, proto::NodeProto* node, int depth,
                 EncoderCharge& charge) {
  node->set_op_type(field_string(L, index, "op_type"));
  const std::string domain = field_string(L, index, "domain");
  if (!domain.empty()) node->set_domain(domain);
  node->set_name(field_string(L, index, "name"));
  const std::string doc = field_string(L, index, "doc_string");
  if (!doc.empty()) node->set_doc_string(doc);
  for_each_in(L, index, "inputs", [&](lua_Integer) { node->add_input(top_string(L, "an input")); });
  for_each_in(L, index, "outputs",
              [&](lua_Integer) { node->add_output(top_string(L, "an output")); });
  lua_safe::read_field(L, index, "attributes_types");
  const int hints = lua_gettop(L);
  lua_safe::read_field(L, index, "attributes");
  const int attributes = lua_gettop(L);
  if (lua_istable(L, attributes)) {
    // Sorted by name: the same model encodes to the same bytes.
    std::vector<std::string> names;
    lua_pushnil(L);
    while (lua_next(L, attributes) != 0) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING) fail("onnx: an attribute name must be a string");
      names.emplace_back(lua_tostring(L, -1));
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      std::string hint;
      if (lua_istable(L, hints)) {
        lua_safe::read_field(L, hints, name.c_str());
        if (lua_type(L, -1) == LUA_TSTRING) hint = lua_tostring(L, -1);
        lua_pop(L, 1);
      }
      lua_safe::read_field(L, attributes, name.c_str());
      encode_attribute(L, name, hint, node->add_attribute(), depth, charge);
      lua_settop(L, attributes);
    }
  }
  lua_settop(L, hints - 1);
}

void encode_graph(lua_State* L, int index, proto::GraphProto* graph, int depth,
                  EncoderCharge& charge) {
  if (depth > kMaxGraphDepth) {
    fail("onnx: subgraphs nested too deeply (more than {} levels)", kMaxGraphDepth);
  }
  check_stack(L, 16);
  index = lua_absindex(L, index);
  graph->set_name(field_string(L, index, "name"));
  const std::string doc = field_string(L, index, "doc_string");
  if (!doc.empty()) graph->set_doc_string(doc);
  for_each_in(L, index, "nodes", [&](lua_Integer) {
    encode_node(L, lua_gettop(L), graph->add_node(), depth, charge);
  });
  for_each_in(L, index, "initializers", [&](lua_Integer) {
    const int entry = lua_gettop(L);
    const std::string name = field_string(L, entry, "name");
    lua_safe::read_field(L, entry, "tensor");
    encode_tensor(tensor_data(L, lua_gettop(L), "onnx.export"), name, graph->add_initializer(),
                  charge);
  });
  for_each_in(L, index, "inputs",
              [&](lua_Integer) { encode_value_info(L, lua_gettop(L), graph->add_input()); });
  for_each_in(L, index, "outputs",
              [&](lua_Integer) { encode_value_info(L, lua_gettop(L), graph->add_output()); });
  for_each_in(L, index, "value_info",
              [&](lua_Integer) { encode_value_info(L, lua_gettop(L), graph->add_value_info()); });
}

// The model table at 1 as ModelProto bytes, charged to `bytes_charge`;
// the ModelProto and its charge are gone when this returns.
std::string encode_model_bytes(lua_State* L, EncoderCharge& bytes_charge) {
  EncoderCharge charge;
  proto::ModelProto model;
  model.set_ir_version(field_integer(L, 1, "ir_version", 8));
  model.set_producer_name(field_string(L, 1, "producer_name"));
  model.set_producer_version(field_string(L, 1, "producer_version"));
  const std::string domain = field_string(L, 1, "domain");
  if (!domain.empty()) model.set_domain(domain);
  model.set_model_version(field_integer(L, 1, "model_version", 0));
  const std::string doc = field_string(L, 1, "doc_string");
  if (!doc.empty()) model.set_doc_string(doc);
  lua_safe::read_field(L, 1, "opset");
  if (lua_istable(L, -1)) {
    std::vector<std::pair<std::string, int64_t>> opsets;
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {
      if (lua_type(L, -2) != LUA_TSTRING || !lua_isinteger(L, -1)) {
        fail("onnx: opset must map domain names to integer versions");
      }
      opsets.emplace_back(lua_tostring(L, -2), lua_tointeger(L, -1));
      lua_pop(L, 1);
    }
    std::sort(opsets.begin(), opsets.end());
    for (const auto& [name, version] : opsets) {
      auto* opset = model.add_opset_import();
      opset->set_domain(name);
      opset->set_version(version);
    }
  }
  lua_pop(L, 1);
  lua_safe::read_field(L, 1, "graph");
  if (!lua_istable(L, -1)) fail("onnx: the model has no graph table");
  encode_graph(L, lua_gettop(L), model.mutable_graph(), 0, charge);
  lua_pop(L, 1);
  bytes_charge.add(static_cast<int64_t>(model.ByteSizeLong()), "the serialized model");
  std::string bytes;
  if (!model.SerializeToString(&bytes)) fail("onnx: the model does not serialize");
  return bytes;
}

int encode_model(lua_State* L) {
  if (!lua_istable(L, 1)) type_error(L, 1, "onnx.encode", "table (a model)");
  EncoderCharge charge;
  const std::string bytes = encode_model_bytes(L, charge);
  lua_safe::push_string(L, bytes);
  return 1;
}

int encode_tensor_bytes(lua_State* L) {
  const Array value = tensor_data(L, 1, "onnx.write_tensor");
  proto::TensorProto t;
  std::string name;
  if (!lua_isnoneornil(L, 2)) {
    lua_pushvalue(L, 2);
    name = top_string(L, "a tensor name");
    lua_pop(L, 1);
  }
  EncoderCharge charge;
  encode_tensor(value, name, &t, charge);
  std::string bytes;
  charge.add(static_cast<int64_t>(t.ByteSizeLong()), "the serialized tensor");
  t.SerializeToString(&bytes);
  lua_safe::push_string(L, bytes);
  return 1;
}

// onnx_eager_call(fn, ...): fn(...) with eager mode on and no barrier
// (tensor.set_eager would mark a step): for the ops of a graph that compute
// shapes from data tensors (stdlib/onnx.lua's host ops), whose outputs must
// be data. Plain C: fn's error propagates as it is.
int eager_call(lua_State* L) {
  Context* context = tensor_context(L);
  const bool previous = context->eager;
  context->eager = true;
  const int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  context->eager = previous;
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

}  // namespace

void add_onnx_functions(lua_State* L) {
  const luaL_Reg functions[] = {
      {"onnx_decode_model", guarded<decode_model>},
      {"onnx_encode_model", guarded<encode_model>},
      {"onnx_decode_tensor", guarded<decode_tensor_bytes>},
      {"onnx_encode_tensor", guarded<encode_tensor_bytes>},
      {"onnx_eager_call", eager_call},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
}

}  // namespace lazylua
