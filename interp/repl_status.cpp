// repl_status.cpp - the REPL's status line and % shortcuts (repl_status.h).
#include "interp/repl_status.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "interp/lua_tensor.h"

namespace lazylua {
namespace {

constexpr double kSlowCommandSeconds = 0.05;

bool status_from_environment() {
  const char* value = std::getenv("LAZYLUA_REPL_STATUS");
  return !value || !(std::strcmp(value, "0") == 0 || std::strcmp(value, "off") == 0 ||
                     std::strcmp(value, "false") == 0 || std::strcmp(value, "no") == 0);
}
bool status_enabled = status_from_environment();

std::string seconds_text(double seconds) {
  return seconds >= 0.1 ? fmt::format("{:.2f} s", seconds)
                        : fmt::format("{:.1f} ms", seconds * 1000);
}

const char* plural(int64_t n, const char* one, const char* many) {
  return n == 1 ? one : many;
}

// At most this many rows; tensor.pending() has them all.
constexpr int kPendingRowsShown = 40;

void print_pending(lua_State* L) {
  Context* context = tensor_context(L);
  const Graph graph = context->extract(context->pending_tensors());
  int count = 0;
  for (size_t i = 0; i < graph.nodes.size(); i++) {
    if (graph.is_leaf(static_cast<int>(i))) continue;
    if (++count > kPendingRowsShown) continue;
    const Node& node = *graph.nodes[i];
    std::string shape;
    for (int d = 0; d < node.shape.rank(); d++) {
      shape += fmt::format("{}{}", d ? "x" : "", node.shape[d]);
    }
    std::fputs(fmt::format("  {:<14} {}[{}]  {}\n", node.name(), dtype_name(node.dtype), shape,
                           location_string(node.location))
                   .c_str(),
               stdout);
  }
  if (count > kPendingRowsShown) {
    std::fputs(fmt::format("  ... and {} more (tensor.pending() lists them all)\n",
                           count - kPendingRowsShown)
                   .c_str(),
               stdout);
  }
  std::fputs(fmt::format("{} pending {}\n", count, plural(count, "op", "ops")).c_str(), stdout);
}

const char kShortcutHelp[] =
    "%pending      the ops a mark_step would run now, with their lines\n"
    "%explain      why the last graphs were new (tensor.explain)\n"
    "%report       sites that recompile, lines that sync often (tensor.report)\n"
    "%status on    the timing line after slow commands (off: never)\n"
    "%help         this list\n";

}  // namespace

CommandStart start_command(lua_State* L) {
  CommandStart start;
  start.time = std::chrono::steady_clock::now();
  if (has_tensor_context(L)) start.metrics = tensor_context(L)->metrics;
  return start;
}

std::string command_status(lua_State* L, const CommandStart& start, bool colour) {
  if (!status_enabled || !has_tensor_context(L)) return "";
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start.time).count();
  const Metrics& now = tensor_context(L)->metrics;
  const Metrics& before = start.metrics;
  const int64_t ops = now.ops_recorded - before.ops_recorded;
  const int64_t syncs = now.syncs - before.syncs;
  if (wall < kSlowCommandSeconds || (ops == 0 && syncs == 0)) return "";
  const double in_syncs = now.sync_seconds - before.sync_seconds;
  const int64_t disk = now.disk_cache_hits - before.disk_cache_hits;
  const int64_t built = now.memory_cache_misses - before.memory_cache_misses - disk;
  const int64_t cached = now.memory_cache_hits - before.memory_cache_hits;
  std::string line = fmt::format(
      "[{}: record {} ({} {}); compile {} ({} new, {} cached, {} from disk); run {}; {} {}]",
      seconds_text(wall), seconds_text(wall - in_syncs), ops, plural(ops, "op", "ops"),
      seconds_text(now.compile_seconds - before.compile_seconds), built, cached, disk,
      seconds_text(now.execute_seconds - before.execute_seconds), syncs,
      plural(syncs, "sync", "syncs"));
  return colour ? "\033[2m" + line + "\033[0m" : line;
}

void run_shortcut(lua_State* L, const char* line) {
  std::string text(line + 1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.pop_back();
  auto call_tensor_function = [L](const char* name) {
    lua_getglobal(L, "tensor");
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
    if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
      std::fprintf(stderr, "%s\n", lua_tostring(L, -1));
      lua_pop(L, 1);
      return false;
    }
    return true;
  };
  if (text == "pending") {
    print_pending(L);
  } else if (text == "report") {
    if (!call_tensor_function("report")) return;
    const char* report = lua_tostring(L, -1);
    std::fputs(report && *report ? report : "nothing to report\n", stdout);
    lua_pop(L, 1);
  } else if (text == "explain") {
    if (!call_tensor_function("explain")) return;
    const lua_Integer count = luaL_len(L, -1);
    if (count == 0) std::fputs("no graph was new after its site's first\n", stdout);
    for (lua_Integer k = 1; k <= count; k++) {
      lua_geti(L, -1, k);
      lua_getfield(L, -1, "text");
      std::fprintf(stdout, "%s\n", lua_tostring(L, -1));
      lua_pop(L, 2);
    }
    lua_pop(L, 1);
  } else if (text == "status on" || text == "status off") {
    status_enabled = text == "status on";
  } else if (text == "status") {
    std::fprintf(stdout, "the status line is %s\n", status_enabled ? "on" : "off");
  } else if (text == "help" || text.empty()) {
    std::fputs(kShortcutHelp, stdout);
  } else {
    std::fprintf(stderr, "unknown shortcut %%%s; %%help lists them\n", text.c_str());
  }
  std::fflush(stdout);
}

}  // namespace lazylua
