// lua_npy.cpp - the Lua side of NumPy's file formats:
//   tensor.save_npy(path, t)              tensor.load_npy(path) -> t
//   tensor.save_npz(path, {name = t, ...}, {compressed = bool})
//   tensor.load_npz(path) -> {name = t, ...}
// Pending tensors are synced together (one graph) before their data is
// written; a view is written in its own row-major order.
#include "interp/lua_npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
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

// Writes `bytes` to a temporary file next to `path`, then renames it over
// `path`: a failed save never leaves half a file. An existing `path` must
// be a regular file (a symlink to one is followed).
void write_file(const std::string& path, const std::string& bytes, const char* function) {
  std::string target = path;
  struct stat info {};
  if (stat(path.c_str(), &info) == 0) {
    if (!S_ISREG(info.st_mode)) {
      fail("{}: '{}' exists and is not a regular file; it was left alone", function, path);
    }
    char resolved[PATH_MAX];
    if (realpath(path.c_str(), resolved)) target = resolved;
  }
  std::string temporary = target + ".tmp-XXXXXX";
  const int fd = mkstemp(temporary.data());
  if (fd < 0) fail("{}: cannot create a file next to '{}': {}", function, path, strerror(errno));
  std::string error;
  size_t written = 0;
  while (written < bytes.size() && error.empty()) {
    const ssize_t count = write(fd, bytes.data() + written, bytes.size() - written);
    if (count < 0 && errno != EINTR) error = strerror(errno);
    if (count > 0) written += static_cast<size_t>(count);
  }
  if (error.empty() && fchmod(fd, 0644) != 0) error = strerror(errno);
  if (close(fd) != 0 && error.empty()) error = strerror(errno);
  if (error.empty() && rename(temporary.c_str(), target.c_str()) != 0) error = strerror(errno);
  if (!error.empty()) {
    unlink(temporary.c_str());
    fail("{}: cannot write '{}': {}", function, path, error);
  }
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
  const HostBytes bytes = read_file_bytes(path, function);
  push_tensor(L, npy::decode(bytes.data(), bytes.size(), function, "'" + path + "'"));
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
    entries = zip::read_archive(bytes.data(), bytes.size(), function, path);
  }
  // Every array is decoded before the table is pushed: a bad entry leaves
  // nothing half-built on the stack.
  std::vector<std::pair<std::string, Array>> arrays;
  for (zip::Entry& entry : entries) {
    const std::string source = fmt::format("'{}' entry '{}'", path, entry.name);
    const bool npy_entry =
        entry.name.size() > kNpySuffix.size() && std::string_view(entry.name).ends_with(kNpySuffix);
    if (!npy_entry)
      fail("{}: {} is not a .npy file (its name does not end in .npy)", function, source);
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
