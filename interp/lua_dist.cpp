// lua_dist.cpp - the native half of stdlib/dist.lua (data-parallel
// training over MPI, tensor/collectives.h), in the stdlib.native table:
//
//   dist_initialize()                  joins the job when launched by mpirun
//   dist_rank() -> integer             0-based
//   dist_size() -> integer
//   dist_initialized() -> boolean
//   dist_collective(t, op, root) -> tensor   op: "sum", "max", "min", "broadcast"
//   dist_barrier()
//   dist_abort(code)                   ends every rank at once (MPI_Abort)
//   dist_stats() -> {calls, bytes, seconds}   this process's collectives so far
#include <cstring>

#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "interp/stdlib_native.h"
#include "tensor/collectives.h"

namespace lazylua {
namespace {

using binding::check_integer;
using binding::check_tensor;
using binding::guarded;

int initialize(lua_State*) {
  dist_initialize();
  return 0;
}

int rank(lua_State* L) {
  lua_pushinteger(L, dist_rank());
  return 1;
}

int size(lua_State* L) {
  lua_pushinteger(L, dist_size());
  return 1;
}

int initialized(lua_State* L) {
  lua_pushboolean(L, dist_initialized());
  return 1;
}

CollectiveOp check_op(lua_State* L, int arg) {
  // Only a string: lua_tostring would convert a number in place (allocating).
  const char* name = lua_type(L, arg) == LUA_TSTRING ? lua_tostring(L, arg) : nullptr;
  const struct {
    const char* name;
    CollectiveOp op;
  } known[] = {{"sum", CollectiveOp::sum},
               {"max", CollectiveOp::max},
               {"min", CollectiveOp::min},
               {"broadcast", CollectiveOp::broadcast}};
  for (const auto& entry : known) {
    if (name && std::strcmp(name, entry.name) == 0) return entry.op;
  }
  fail("dist: unknown collective '{}'", name ? name : "?");
}

int collective(lua_State* L) {
  const Tensor& t = check_tensor(L, 1, "dist.all_reduce");
  const CollectiveOp op = check_op(L, 2);
  // Checked before narrowing: 2^32 + 1 must not become rank 1.
  const int64_t root = check_integer(L, 3, "dist.broadcast");
  if (root < 0 || root >= dist_size()) {
    fail("dist.broadcast: root {} is not a rank of this job (ranks 0 to {})", root,
         dist_size() - 1);
  }
  push_tensor(L, lazylua::collective(t, op, static_cast<int>(root)));
  return 1;
}

int barrier(lua_State* L) {
  dist_barrier(tensor_context(L));
  return 0;
}

int stats(lua_State* L) {
  const CollectiveStats now = dist_stats();
  lua_safe::create_table(L, 0, 3);
  lua_pushinteger(L, now.calls);
  lua_safe::set_field(L, -2, "calls");
  lua_pushinteger(L, now.bytes);
  lua_safe::set_field(L, -2, "bytes");
  lua_pushnumber(L, now.seconds);
  lua_safe::set_field(L, -2, "seconds");
  return 1;
}

int abort_job(lua_State* L) {
  dist_abort_job(static_cast<int>(check_integer(L, 1, "dist.abort")));
  return 0;
}

}  // namespace

void add_dist_functions(lua_State* L) {
  const luaL_Reg functions[] = {
      {"dist_initialize", guarded<initialize>},
      {"dist_rank", guarded<rank>},
      {"dist_size", guarded<size>},
      {"dist_initialized", guarded<initialized>},
      {"dist_collective", guarded<collective>},
      {"dist_barrier", guarded<barrier>},
      {"dist_abort", guarded<abort_job>},
      {"dist_stats", guarded<stats>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
}

}  // namespace lazylua
