// lua_npy.cpp - the Lua side of NumPy's file formats:
//   tensor.save_npy(path, t)              tensor.load_npy(path) -> t
//   tensor.save_npz(path, {name = t, ...}, {compressed = bool})
//   tensor.load_npz(path) -> {name = t, ...}
// Pending tensors are synced together (one graph) before their data is
// written; a view is written in its own row-major order.
#include "interp/lua_npy.h"

#include <algorithm>
#include <string>
#include <vector>

#include "interp/file_bytes.h"
#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "interp/npy_format.h"
#include "interp/runtime.h"
#include "interp/zip_archive.h"
#include "tensor/array.h"

namespace lazylua::binding {
namespace {

constexpr std::string_view kNpySuffix = ".npy";

bool is_npy_name(const std::string& name) {
  return name.size() > kNpySuffix.size() && std::string_view(name).ends_with(kNpySuffix);
}

std::string check_path(lua_State* L, int arg, const char* function) {
  if (lua_type(L, arg) != LUA_TSTRING) type_error(L, arg, function, "string (a file path)");
  size_t length = 0;
  const char* text = lua_tolstring(L, arg, &length);
  return std::string(text, length);
}

// The data of these tensors, synced in one go, in row-major order.
std::vector<Array> tensor_data(lua_State* L, const std::vector<Tensor>& tensors) {
  std::vector<TensorImpl*> targets;
  for (const Tensor& tensor : tensors) targets.push_back(tensor.get());
  if (!targets.empty()) tensor_context(L)->sync(targets, SyncCause::host_read);
  std::vector<Array> arrays;
  for (const Tensor& tensor : tensors) {
    arrays.push_back(contiguous(observe(tensor, SyncCause::host_read)));
  }
  return arrays;
}

int save_npy(lua_State* L) {
  const char* function = "tensor.save_npy";
  const std::string path = check_path(L, 1, function);
  const Tensor& tensor = check_tensor(L, 2, function);
  const std::vector<Array> data = tensor_data(L, {tensor});
  write_file(path, npy::encode(data[0]), function);
  return 0;
}

int load_npy(lua_State* L) {
  const char* function = "tensor.load_npy";
  const std::string path = check_path(L, 1, function);
  const std::string source = "'" + path + "'";
  // A .npy.gz file decompresses to no more than its header announces: a
  // gzip bomb is refused before it fills the memory.
  const HostBytes bytes = read_file_bytes(path, function, [&](const uint8_t* prefix, size_t size) {
    return npy::announced_length(prefix, size, function, source);
  });
  push_tensor(L, npy::decode(bytes.data(), bytes.size(), function, source));
  return 1;
}

int save_npz(lua_State* L) {
  const char* function = "tensor.save_npz";
  const std::string path = check_path(L, 1, function);
  if (lua_type(L, 2) != LUA_TTABLE) type_error(L, 2, function, "table (name -> tensor)");
  bool compressed = false;
  if (!lua_isnoneornil(L, 3)) {
    if (lua_type(L, 3) != LUA_TTABLE) type_error(L, 3, function, "table (options)");
    check_option_keys(L, 3, function, {"compressed"});
    lua_safe::read_field(L, 3, "compressed");
    const int type = lua_type(L, -1);
    compressed = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (type != LUA_TNIL && type != LUA_TBOOLEAN) {
      argument_error(3, function, "option 'compressed' must be a boolean");
    }
  }
  // Names in sorted order: the archive is a function of the table's contents.
  std::vector<std::pair<std::string, Tensor>> named;
  lua_pushnil(L);
  while (lua_next(L, 2) != 0) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      const char* type = luaL_typename(L, -2);
      lua_pop(L, 2);
      argument_error(2, function, fmt::format("a {} key; entries are named by strings", type));
    }
    std::string name = lua_tostring(L, -2);
    const Tensor* tensor = to_tensor(L, -1);
    if (!tensor || !*tensor) {
      const char* type = tensor ? "closed tensor" : luaL_typename(L, -1);
      lua_pop(L, 2);
      argument_error(2, function, fmt::format("'{}' is a {}, not a tensor", name, type));
    }
    if (name.empty() || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      lua_pop(L, 2);
      argument_error(2, function, fmt::format("'{}' is not a valid entry name", name));
    }
    named.emplace_back(std::move(name), *tensor);
    lua_pop(L, 1);
  }
  std::sort(named.begin(), named.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Tensor> tensors;
  for (const auto& [name, tensor] : named) tensors.push_back(tensor);
  const std::vector<Array> data = tensor_data(L, tensors);
  std::vector<zip::Entry> entries;
  for (size_t i = 0; i < named.size(); i++) {
    entries.push_back(zip::Entry{named[i].first + std::string(kNpySuffix), npy::encode(data[i])});
  }
  write_file(path, zip::write_archive(entries, compressed, function), function);
  return 0;
}

int load_npz(lua_State* L) {
  const char* function = "tensor.load_npz";
  const std::string path = check_path(L, 1, function);
  std::vector<zip::Entry> entries;
  {
    const HostBytes bytes = read_file_bytes(path, function);
    // Each entry inflates to no more than its .npy header announces: a
    // deflate bomb is refused before it fills the memory.
    entries = zip::read_archive(
        bytes.data(), bytes.size(), function, path,
        [&](const std::string& name, const uint8_t* prefix, size_t size) {
          const std::string source = fmt::format("'{}' entry '{}'", path, name);
          if (!is_npy_name(name)) {
            fail("{}: {} is not a .npy file (its name does not end in .npy)", function, source);
          }
          return npy::announced_length(prefix, size, function, source);
        });
  }
  // Every array is decoded before the table is pushed: a bad entry leaves
  // nothing half-built on the stack.
  std::vector<std::pair<std::string, Array>> arrays;
  for (zip::Entry& entry : entries) {
    const std::string source = fmt::format("'{}' entry '{}'", path, entry.name);
    Array array = npy::decode(reinterpret_cast<const uint8_t*>(entry.bytes.data()),
                              entry.bytes.size(), function, source);
    std::string().swap(entry.bytes);
    arrays.emplace_back(entry.name.substr(0, entry.name.size() - kNpySuffix.size()),
                        std::move(array));
  }
  lua_safe::create_table(L, 0, static_cast<int>(arrays.size()));
  for (auto& [name, array] : arrays) {
    lua_safe::push_string(L, name);
    push_tensor(L, std::move(array));
    lua_safe::set_raw(L, -3);
  }
  return 1;
}

}  // namespace

void register_npy_functions(lua_State* L) {
  if (is_sandboxed(L)) return;
  const luaL_Reg functions[] = {
      {"save_npy", guarded<save_npy>},
      {"load_npy", guarded<load_npy>},
      {"save_npz", guarded<save_npz>},
      {"load_npz", guarded<load_npz>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
}

}  // namespace lazylua::binding
