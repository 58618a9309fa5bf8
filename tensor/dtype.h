// dtype.h - element types of tensors and the promotion rules between them.
#pragma once

#include <cstdint>
#include <string_view>

namespace lazylua {

// The element types, in promotion order: a binary op between two dtypes
// computes in the later one (bool < i32 < i64 < f32 < f64).
enum class DType : uint8_t { boolean, i32, i64, f32, f64 };
constexpr int kDTypeCount = 5;

constexpr DType kDefaultFloat = DType::f32;

constexpr int dtype_size(DType t) {
  switch (t) {
    case DType::boolean:
      return 1;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
  }
  return 0;
}

constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64;
}
constexpr bool is_integral(DType t) {
  return t == DType::i32 || t == DType::i64;
}

// "f32", "f64", "i32", "i64", "bool": the names of docs/tensor_api.md.
const char* dtype_name(DType t);
// Accepts the names above and the aliases "float", "double", "int", "long",
// "float32", "float64", "int32", "int64", "boolean". Throws Error otherwise.
DType parse_dtype(std::string_view name);

// The dtype two tensors of types a and b compute in (PyTorch's result_type
// for tensors of equal rank).
constexpr DType promote(DType a, DType b) {
  return a < b ? b : a;
}

// A Lua number taking part in an op is "weak", as a Python scalar is in
// PyTorch: it never widens a tensor of the same kind. An integer scalar keeps
// an integer tensor's type (bool becomes i64); a float scalar turns an
// integer or bool tensor into the default float type and keeps f32/f64.
constexpr DType promote_with_scalar(DType tensor_type, bool scalar_is_integer) {
  if (scalar_is_integer) return tensor_type == DType::boolean ? DType::i64 : tensor_type;
  return is_floating(tensor_type) ? tensor_type : kDefaultFloat;
}

// Calls f(T{}) with the C++ type of dtype t.
template <typename F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::boolean:
      return f(bool{});
    case DType::i32:
      return f(int32_t{});
    case DType::i64:
      return f(int64_t{});
    case DType::f32:
      return f(float{});
    case DType::f64:
      break;
  }
  return f(double{});
}

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<bool>() {
  return DType::boolean;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}

}  // namespace lazylua
