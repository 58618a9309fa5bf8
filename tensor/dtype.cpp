// dtype.cpp - dtype names.
#include "dtype.h"

#include "error.h"

namespace lazylua {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::boolean:
      return "bool";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"f32", DType::f32},      {"float", DType::f32},       {"float32", DType::f32},
      {"f64", DType::f64},      {"double", DType::f64},      {"float64", DType::f64},
      {"i32", DType::i32},      {"int", DType::i32},         {"int32", DType::i32},
      {"i64", DType::i64},      {"long", DType::i64},        {"int64", DType::i64},
      {"bool", DType::boolean}, {"boolean", DType::boolean},
  };
  for (const Alias& alias : kAliases) {
    if (alias.name == name) return alias.dtype;
  }
  fail("unknown dtype '{}' (expected f32, f64, i32, i64 or bool)", name);
}

}  // namespace lazylua
