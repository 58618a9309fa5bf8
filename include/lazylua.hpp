// lazylua.hpp - a thin C++ wrapper (RAII, exceptions on the host side) over
// the C API in lazylua.h. Header-only; link with -llazylua.
//
//   lazylua::api::Interpreter lua;              // throws lazylua::api::Error
//   lua.run("function scale(x, k) return x * k end");
//   std::vector<float> data = {1, 2, 3};
//   lazylua::api::Tensor x = lua.tensor_from(data.data(), {3});
//   auto results = lua.call("scale", {x, 10.0});
//   std::vector<float> out = results[0].tensor().read<float>();   // {10, 20, 30}
//
// Errors: every failing C call becomes a lazylua::api::Error carrying the
// status and the interpreter's message (with the Lua traceback). The
// wrapper's exceptions stay on the host's side: the C API never sees them.
// (The namespace is lazylua::api because the library's own C++ code lives
// in lazylua::, and a host's classes must not share their names.)
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "lazylua.h"

namespace lazylua::api {

class Error : public std::runtime_error {
 public:
  Error(lazylua_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  lazylua_status status() const { return status_; }

 private:
  lazylua_status status_;
};

template <typename T>
constexpr lazylua_dtype dtype_of();
template <>
constexpr lazylua_dtype dtype_of<float>() {
  return LAZYLUA_F32;
}
template <>
constexpr lazylua_dtype dtype_of<double>() {
  return LAZYLUA_F64;
}
template <>
constexpr lazylua_dtype dtype_of<int32_t>() {
  return LAZYLUA_I32;
}
template <>
constexpr lazylua_dtype dtype_of<int64_t>() {
  return LAZYLUA_I64;
}

// An owned handle to a tensor of one interpreter. Must not outlive it.
class Tensor {
 public:
  Tensor() = default;
  Tensor(lazylua_interpreter* owner, lazylua_tensor* handle) : owner_(owner), handle_(handle) {}
  Tensor(const Tensor& other)
      : owner_(other.owner_),
        handle_(other.handle_ ? lazylua_tensor_retain(other.handle_) : nullptr) {}
  Tensor(Tensor&& other) noexcept
      : owner_(other.owner_), handle_(std::exchange(other.handle_, nullptr)) {}
  Tensor& operator=(Tensor other) noexcept {
    std::swap(owner_, other.owner_);
    std::swap(handle_, other.handle_);
    return *this;
  }
  ~Tensor() { lazylua_tensor_free(handle_); }

  lazylua_tensor* get() const { return handle_; }
  explicit operator bool() const { return handle_ != nullptr; }

  std::vector<int64_t> shape() const {
    int rank = 0;
    int64_t extents[8] = {};
    lazylua_tensor_info(handle_, nullptr, &rank, extents, 8);
    return std::vector<int64_t>(extents, extents + rank);
  }
  int64_t numel() const { return lazylua_tensor_numel(handle_); }

  // The values as T (converted if the tensor's dtype differs); syncs.
  template <typename T>
  std::vector<T> read() const {
    std::vector<T> values(static_cast<size_t>(numel()));
    const lazylua_status status = lazylua_tensor_read(owner_, handle_, dtype_of<T>(), values.data(),
                                                      values.size() * sizeof(T));
    if (status != LAZYLUA_OK) throw Error(status, lazylua_error_message(owner_));
    return values;
  }

 private:
  lazylua_interpreter* owner_ = nullptr;
  lazylua_tensor* handle_ = nullptr;
};

// A Lua value on the host side.
class Value {
 public:
  using Data = std::variant<std::monostate, bool, long long, double, std::string, Tensor>;
  Value() = default;
  Value(bool boolean) : data_(boolean) {}                         // NOLINT: implicit by design
  Value(int integer) : data_(static_cast<long long>(integer)) {}  // NOLINT
  Value(long long integer) : data_(integer) {}                    // NOLINT
  Value(double number) : data_(number) {}                         // NOLINT
  Value(const char* text) : data_(std::string(text)) {}           // NOLINT
  Value(std::string text) : data_(std::move(text)) {}             // NOLINT
  Value(Tensor tensor) : data_(std::move(tensor)) {}              // NOLINT

  bool is_nil() const { return data_.index() == 0; }
  bool boolean() const { return std::get<bool>(data_); }
  long long integer() const { return std::get<long long>(data_); }
  // A number, also from an integer.
  double number() const {
    if (auto* integer_value = std::get_if<long long>(&data_))
      return static_cast<double>(*integer_value);
    return std::get<double>(data_);
  }
  const std::string& string() const { return std::get<std::string>(data_); }
  const Tensor& tensor() const { return std::get<Tensor>(data_); }
  const Data& data() const { return data_; }

  // The C view of this value (valid while this Value lives).
  lazylua_value to_c() const {
    switch (data_.index()) {
      case 1:
        return lazylua_boolean(std::get<bool>(data_));
      case 2:
        return lazylua_integer(std::get<long long>(data_));
      case 3:
        return lazylua_number(std::get<double>(data_));
      case 4: {
        lazylua_value value = lazylua_string("");
        value.as.string.data = std::get<std::string>(data_).data();
        value.as.string.length = std::get<std::string>(data_).size();
        return value;
      }
      case 5:
        return lazylua_tensor_value(std::get<Tensor>(data_).get());
      default:
        return lazylua_nil();
    }
  }

  // Takes a value the C API returned (a tensor handle becomes owned).
  static Value from_c(lazylua_interpreter* owner, const lazylua_value& value) {
    switch (value.type) {
      case LAZYLUA_TYPE_BOOLEAN:
        return Value(value.as.boolean != 0);
      case LAZYLUA_TYPE_INTEGER:
        return Value(value.as.integer);
      case LAZYLUA_TYPE_NUMBER:
        return Value(value.as.number);
      case LAZYLUA_TYPE_STRING:
        return Value(std::string(value.as.string.data, value.as.string.length));
      case LAZYLUA_TYPE_TENSOR:
        return Value(Tensor(owner, value.as.tensor));
      default:
        return Value();
    }
  }

 private:
  Data data_;
};

struct Options {
  bool sandbox = false;
  size_t memory_limit = 0;
  int threads = 0;
  std::string cache_directory;  // empty: the default
};

// NonDeduced<X>::type is X, in a context where template arguments are not
// deduced (std::type_identity is C++20; this header asks only for C++17).
template <typename X>
struct NonDeduced {
  using type = X;
};

class Interpreter {
 public:
  // Host functions see their arguments as Values and return Values; a
  // thrown std::exception becomes a Lua error.
  using Function = std::function<std::vector<Value>(Interpreter&, const std::vector<Value>&)>;

  explicit Interpreter(const Options& options = {}) {
    lazylua_options c_options;
    lazylua_options_init(&c_options);
    c_options.sandbox = options.sandbox;
    c_options.memory_limit = options.memory_limit;
    c_options.threads = options.threads;
    c_options.cache_directory =
        options.cache_directory.empty() ? nullptr : options.cache_directory.c_str();
    const lazylua_status status = lazylua_open(&c_options, &interpreter_);
    if (status != LAZYLUA_OK) {
      throw Error(status, std::string("lazylua_open: ") + lazylua_status_name(status));
    }
  }
  ~Interpreter() { lazylua_close(interpreter_); }
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  lazylua_interpreter* get() const { return interpreter_; }

  void run(const std::string& source, const char* chunk_name = nullptr) {
    check(lazylua_run_string(interpreter_, source.c_str(), chunk_name));
  }
  void run_file(const std::string& path) { check(lazylua_run_file(interpreter_, path.c_str())); }

  std::vector<Value> call(const std::string& function, const std::vector<Value>& arguments = {},
                          int result_count = 1) {
    std::vector<lazylua_value> c_arguments;
    for (const Value& argument : arguments) c_arguments.push_back(argument.to_c());
    std::vector<lazylua_value> c_results(static_cast<size_t>(result_count));
    check(lazylua_call(interpreter_, function.c_str(), c_arguments.data(),
                       static_cast<int>(c_arguments.size()), c_results.data(), result_count));
    std::vector<Value> results;
    for (const lazylua_value& result : c_results)
      results.push_back(Value::from_c(interpreter_, result));
    return results;
  }

  Value global(const std::string& name) {
    lazylua_value value;
    check(lazylua_get_global(interpreter_, name.c_str(), &value));
    return Value::from_c(interpreter_, value);
  }
  void set_global(const std::string& name, const Value& value) {
    const lazylua_value c_value = value.to_c();
    check(lazylua_set_global(interpreter_, name.c_str(), &c_value));
  }

  template <typename T>
  Tensor tensor_from(const T* data, const std::vector<int64_t>& shape) {
    lazylua_tensor* handle = nullptr;
    check(lazylua_tensor_from_buffer(interpreter_, dtype_of<T>(), data, shape.data(),
                                     static_cast<int>(shape.size()), &handle));
    return Tensor(interpreter_, handle);
  }

  // Zero-copy: `release` runs once when lazylua no longer uses `data`. T
  // comes from `data` alone (the release parameter is a non-deduced
  // context), so a lambda, a function pointer or nullptr can be passed
  // without naming T: lua.wrap(buffer, {n}, [](float* p) { delete[] p; }).
  template <typename T>
  Tensor wrap(T* data, const std::vector<int64_t>& shape,
              typename NonDeduced<std::function<void(T*)>>::type release) {
    auto* callback = new std::function<void(T*)>(std::move(release));
    lazylua_tensor* handle = nullptr;
    check(lazylua_tensor_wrap_buffer(
        interpreter_, dtype_of<T>(), data, shape.data(), static_cast<int>(shape.size()),
        [](void* memory, void* user) {
          auto* function = static_cast<std::function<void(T*)>*>(user);
          if (*function) (*function)(static_cast<T*>(memory));
          delete function;
        },
        callback, &handle));
    return Tensor(interpreter_, handle);
  }

  // Makes `function` the global `name`. The Interpreter must stay where it
  // is (not moved) while Lua may call it.
  void register_function(const std::string& name, Function function) {
    functions_.push_back(std::make_unique<Registered>(Registered{this, std::move(function), {}}));
    check(lazylua_register_function(interpreter_, name.c_str(), &Interpreter::trampoline,
                                    functions_.back().get()));
  }

  // Callable from any thread.
  void interrupt() { lazylua_interrupt(interpreter_); }

 private:
  struct Registered {
    Interpreter* interpreter;
    Function function;
    std::vector<Value> last_results;  // alive until Lua has copied them
  };

  static int trampoline(lazylua_interpreter* c_interpreter, void* user,
                        const lazylua_value* arguments, int argument_count, lazylua_value* results,
                        int result_capacity) {
    auto* registered = static_cast<Registered*>(user);
    try {
      std::vector<Value> values;
      for (int i = 0; i < argument_count; i++) {
        lazylua_value argument = arguments[i];
        // Arguments are borrowed: keep a handle of our own.
        if (argument.type == LAZYLUA_TYPE_TENSOR) {
          argument.as.tensor = lazylua_tensor_retain(argument.as.tensor);
        }
        values.push_back(Value::from_c(c_interpreter, argument));
      }
      registered->last_results = registered->function(*registered->interpreter, values);
      if (static_cast<int>(registered->last_results.size()) > result_capacity) {
        return lazylua_raise(c_interpreter, "too many results from a host function");
      }
      for (size_t i = 0; i < registered->last_results.size(); i++) {
        results[i] = registered->last_results[i].to_c();
      }
      return static_cast<int>(registered->last_results.size());
    } catch (const std::exception& error) {
      return lazylua_raise(c_interpreter, error.what());
    }
  }

  void check(lazylua_status status) {
    if (status != LAZYLUA_OK) throw Error(status, lazylua_error_message(interpreter_));
  }

  lazylua_interpreter* interpreter_ = nullptr;
  std::vector<std::unique_ptr<Registered>> functions_;
};

}  // namespace lazylua::api
