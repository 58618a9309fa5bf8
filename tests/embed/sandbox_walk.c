/* sandbox_walk.c - proves that a sandboxed interpreter (lazylua_options
 * .sandbox = 1) lets its scripts reach no function that touches the file
 * system, and that nothing they can call reads or writes a host file.
 *
 *   sandbox_walk STDLIB_DIR      (the source stdlib/, to list its modules)
 *
 * 1. In an interpreter without the sandbox, the file-touching functions are
 *    looked up by name (io.*, the FILE* methods, os.remove ..., loadfile,
 *    package.loadlib and the file searchers, tensor.save/load, the native
 *    readers and writers, data.read_*, plot.line_chart, debug.*): C
 *    functions are known by their address, Lua ones by chunk and line.
 * 2. In a sandboxed interpreter, every embedded stdlib module is required,
 *    some objects are made (a tensor, a DataLoader and its iterator, nn and
 *    optim objects, a progress bar, a coroutine), and everything reachable
 *    from the globals, the modules and those objects is walked: table keys
 *    and values, metatables, userdata values and the upvalues of every
 *    function (code reaches those even where scripts cannot). None of the
 *    functions of step 1 may turn up. The same walk of the unsandboxed
 *    interpreter must find them (so the walk does look everywhere).
 * 3. Every function the walk found is called with a host file's path (and
 *    options such as {header = true, delimiter = "\1"}): no result and no
 *    error message may hold any of the file's bytes, a file it names must
 *    not be created, and an existing one must not change.
 * Prints each violation and exits 1 if there is any. */
#include <dirent.h>
#include <lauxlib.h>
#include <lazylua.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;

static void failure(const char* format, const char* detail) {
  fprintf(stderr, "FAIL: ");
  fprintf(stderr, format, detail);
  fprintf(stderr, "\n");
  failures++;
}

/* ---- Step 1: the forbidden functions ---------------------------------- */

#define MAX_FORBIDDEN 256
static lua_CFunction forbidden_c[MAX_FORBIDDEN];
static char forbidden_c_name[MAX_FORBIDDEN][64];
static int forbidden_c_count = 0;
static char forbidden_lua_source[MAX_FORBIDDEN][128];
static int forbidden_lua_line[MAX_FORBIDDEN];
static char forbidden_lua_name[MAX_FORBIDDEN][64];
static int forbidden_lua_count = 0;

/* Returns {name = function, ...} of everything that touches files. */
static const char* const forbidden_script =
    "local list = {}\n"
    "local function add(name, f) if type(f) == 'function' then list[name] = f end end\n"
    "local function add_all(prefix, t)\n"
    "  for k, f in pairs(t or {}) do add(prefix .. tostring(k), f) end\n"
    "end\n"
    "add_all('io.', io)\n"
    "add_all('FILE*:', getmetatable(io.stdout).__index)\n"
    "add_all('FILE*.', getmetatable(io.stdout))\n"
    "add_all('debug.', debug)\n"
    "for _, name in ipairs({'remove', 'rename', 'tmpname', 'execute', 'exit', 'getenv'}) do\n"
    "  add('os.' .. name, os[name])\n"
    "end\n"
    "add('loadfile', loadfile) add('dofile', dofile)\n"
    "add('package.loadlib', package.loadlib) add('package.searchpath', package.searchpath)\n"
    "for i = 3, #package.searchers do add('package.searchers[' .. i .. ']', package.searchers[i]) "
    "end\n"
    "add('tensor.save', tensor.save) add('tensor.load', tensor.load)\n"
    "local native = require 'stdlib.native'\n"
    "add('native.read_idx', native.read_idx) add('native.read_csv', native.read_csv)\n"
    "add('native.write_gzip', native.write_gzip)\n"
    "add('native.read_file', native.read_file) add('native.write_file', native.write_file)\n"
    "local data, plot = require 'lazylua.data', require 'lazylua.plot'\n"
    "add('data.read_idx', data.read_idx) add('data.read_csv', data.read_csv)\n"
    "add('plot.line_chart', plot.line_chart)\n"
    "local onnx = require 'lazylua.onnx'\n"
    "add('onnx.load', onnx.load) add('onnx.read_tensor', onnx.read_tensor)\n"
    "add('onnx.export', onnx.export)\n"
    "add('onnx_export.export', require('lazylua.onnx_export').export)\n"
    "for _, name in ipairs({'io.open', 'os.remove', 'tensor.save', 'native.write_gzip',\n"
    "                       'native.read_file', 'native.write_file', 'onnx.load',\n"
    "                       'onnx.read_tensor', 'onnx.export', 'onnx_export.export',\n"
    "                       'data.read_csv', 'plot.line_chart', 'package.searchpath'}) do\n"
    "  assert(list[name], name .. ' not found')\n"
    "end\n"
    "return list\n";

static void collect_forbidden(lua_State* L) {
  if (luaL_loadstring(L, forbidden_script) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
    failure("listing the file functions failed: %s", lua_tostring(L, -1));
    exit(1);
  }
  lua_pushnil(L);
  while (lua_next(L, -2) != 0) {
    const char* name = lua_tostring(L, -2);
    if (lua_iscfunction(L, -1)) {
      if (forbidden_c_count < MAX_FORBIDDEN) {
        forbidden_c[forbidden_c_count] = lua_tocfunction(L, -1);
        snprintf(forbidden_c_name[forbidden_c_count], 64, "%s", name);
        forbidden_c_count++;
      }
    } else {
      lua_Debug info;
      lua_pushvalue(L, -1);
      lua_getinfo(L, ">S", &info);
      if (forbidden_lua_count < MAX_FORBIDDEN) {
        snprintf(forbidden_lua_source[forbidden_lua_count], 128, "%s", info.source);
        forbidden_lua_line[forbidden_lua_count] = info.linedefined;
        snprintf(forbidden_lua_name[forbidden_lua_count], 64, "%s", name);
        forbidden_lua_count++;
      }
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* The forbidden function at `index`, by name, or NULL. */
static const char* forbidden_name(lua_State* L, int index) {
  if (lua_iscfunction(L, index)) {
    lua_CFunction f = lua_tocfunction(L, index);
    for (int i = 0; i < forbidden_c_count; i++) {
      if (forbidden_c[i] == f) return forbidden_c_name[i];
    }
    return NULL;
  }
  lua_Debug info;
  lua_pushvalue(L, index);
  lua_getinfo(L, ">S", &info);
  for (int i = 0; i < forbidden_lua_count; i++) {
    if (forbidden_lua_line[i] == info.linedefined &&
        strcmp(forbidden_lua_source[i], info.source) == 0) {
      return forbidden_lua_name[i];
    }
  }
  return NULL;
}

/* ---- Step 2: the walk -------------------------------------------------- */

typedef struct {
  int seen;      /* registry ref of a table: object -> true */
  int functions; /* registry ref of a list of the functions found */
  int paths;     /* registry ref of their paths */
  int function_count;
  int table_count;
  int violations;
  int report; /* report each forbidden function found */
} Walk;

static void walk_value(lua_State* L, Walk* walk, int index, const char* path, int depth);

static void walk_child(lua_State* L, Walk* walk, const char* path, const char* step, int depth) {
  char child[512];
  snprintf(child, sizeof child, "%s%s", path, step);
  walk_value(L, walk, lua_gettop(L), child, depth + 1);
}

static void key_step(lua_State* L, int key, char* step, size_t size) {
  if (lua_type(L, key) == LUA_TSTRING) {
    snprintf(step, size, ".%s", lua_tostring(L, key));
  } else if (lua_isinteger(L, key)) {
    /* Not lua_tostring: it would turn the key being iterated into a string. */
    snprintf(step, size, "[%lld]", (long long)lua_tointeger(L, key));
  } else if (lua_type(L, key) == LUA_TNUMBER) {
    snprintf(step, size, "[%g]", (double)lua_tonumber(L, key));
  } else {
    snprintf(step, size, "[<%s key>]", luaL_typename(L, key));
  }
}

static void walk_value(lua_State* L, Walk* walk, int index, const char* path, int depth) {
  const int type = lua_type(L, index);
  if (type != LUA_TTABLE && type != LUA_TFUNCTION && type != LUA_TUSERDATA) return;
  if (depth > 200 || !lua_checkstack(L, 8)) return;
  index = lua_absindex(L, index);
  lua_rawgeti(L, LUA_REGISTRYINDEX, walk->seen);
  lua_pushvalue(L, index);
  if (lua_rawget(L, -2) != LUA_TNIL) {
    lua_pop(L, 2);
    return;
  }
  lua_pop(L, 1);
  lua_pushvalue(L, index);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);

  if (type == LUA_TFUNCTION) {
    walk->function_count++;
    const char* name = forbidden_name(L, index);
    if (name) {
      walk->violations++;
      if (walk->report) {
        char detail[1024];
        snprintf(detail, sizeof detail, "%s (which is %s)", path, name);
        failure("the sandbox reaches a file function: %s", detail);
      }
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, walk->functions);
    lua_pushvalue(L, index);
    lua_rawseti(L, -2, walk->function_count);
    lua_pop(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, walk->paths);
    lua_pushstring(L, path);
    lua_rawseti(L, -2, walk->function_count);
    lua_pop(L, 1);
    for (int i = 1;; i++) {
      const char* upvalue = lua_getupvalue(L, index, i);
      if (!upvalue) break;
      char step[160];
      snprintf(step, sizeof step, "<upvalue %s>", *upvalue ? upvalue : "?");
      walk_child(L, walk, path, step, depth);
      lua_pop(L, 1);
    }
    return;
  }
  if (lua_getmetatable(L, index)) {
    walk_child(L, walk, path, "<metatable>", depth);
    lua_pop(L, 1);
  }
  if (type == LUA_TUSERDATA) {
    for (int n = 1; lua_getiuservalue(L, index, n) != LUA_TNONE; n++) {
      walk_child(L, walk, path, "<user value>", depth);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return;
  }
  walk->table_count++;
  lua_pushnil(L);
  while (lua_next(L, index) != 0) {
    char step[160];
    key_step(L, -2, step, sizeof step);
    walk_child(L, walk, path, step, depth);
    lua_pushvalue(L, -2);
    walk_child(L, walk, path, "<key>", depth);
    lua_pop(L, 2);
  }
}

/* The roots: the globals, every module (required by name), the string
 * metatable and some objects the modules make. */
static const char* const roots_script =
    "local names = ...\n"
    "local roots = {globals = _G, string_metatable = getmetatable('')}\n"
    "for _, name in ipairs(names) do\n"
    "  local ok, module = pcall(require, name)\n"
    "  if not ok then error('require ' .. name .. ': ' .. tostring(module)) end\n"
    "  roots['module ' .. name] = module\n"
    "end\n"
    "local nn, optim = require 'lazylua.nn', require 'lazylua.optim'\n"
    "local data, progress = require 'lazylua.data', require 'lazylua.progress'\n"
    "local t = tensor.ones(4, 2)\n"
    "roots.tensor_value = t\n"
    "roots.tensor_metatable = getmetatable(t)\n"
    "local loader = data.DataLoader({t}, {batch_size = 2, progress = false})\n"
    "roots.loader = loader\n"
    "roots.loader_iterator = loader:iter()\n"
    "local model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())\n"
    "roots.model = model\n"
    "roots.optimizer = optim.SGD(model:parameters(), {lr = 0.1})\n"
    "roots.bar = progress.new(10)\n"
    "roots.coroutine = coroutine.wrap(function() end)\n"
    "return roots\n";

/* Walks the interpreter; returns how many forbidden functions it reached.
 * Leaves the walk's function list in the registry (walk->functions). */
static int walk_interpreter(lua_State* L, const char* stdlib_dir, Walk* walk, int report) {
  memset(walk, 0, sizeof *walk);
  walk->report = report;
  lua_newtable(L);
  walk->seen = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_newtable(L);
  walk->functions = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_newtable(L);
  walk->paths = luaL_ref(L, LUA_REGISTRYINDEX);

  /* The module names: every stdlib/NAME.lua, the native helpers, tensor. */
  if (luaL_loadstring(L, roots_script) != LUA_OK) {
    failure("roots script: %s", lua_tostring(L, -1));
    exit(1);
  }
  lua_newtable(L);
  int count = 0;
  DIR* dir = opendir(stdlib_dir);
  if (!dir) {
    failure("cannot list %s", stdlib_dir);
    exit(1);
  }
  for (struct dirent* entry; (entry = readdir(dir)) != NULL;) {
    const size_t length = strlen(entry->d_name);
    if (length > 4 && strcmp(entry->d_name + length - 4, ".lua") == 0) {
      lua_pushfstring(L, "lazylua.%s", entry->d_name);
      lua_pushlstring(L, lua_tostring(L, -1), strlen(lua_tostring(L, -1)) - 4);
      lua_remove(L, -2);
      lua_rawseti(L, -2, ++count);
    }
  }
  closedir(dir);
  const char* extra[] = {"stdlib.native", "tensor", "lazylua"};
  for (int i = 0; i < 3; i++) {
    lua_pushstring(L, extra[i]);
    lua_rawseti(L, -2, ++count);
  }
  if (count < 8) failure("only %s modules found in the stdlib directory", "a few");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    failure("making the roots: %s", lua_tostring(L, -1));
    exit(1);
  }
  const int roots = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, roots) != 0) {
    walk_value(L, walk, lua_gettop(L), lua_tostring(L, -2), 0);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return walk->violations;
}

/* ---- Step 3: calling everything with a host file's path ---------------- */

static const char secret[] = "SECRET-7f3a9c-host-file-contents-must-not-leak";

/* Whether the text holds the secret, or its first bytes in hex (a reader's
 * "bad magic number 53454352" quotes them that way). */
static int leaks(const char* text, size_t length) {
  (void)length;
  return text &&
         (strstr(text, "SECRET-7f3a9c") || strstr(text, "53454352") || strstr(text, "7f3a9c-host"));
}

static int file_equals(const char* path, const char* expected) {
  FILE* file = fopen(path, "rb");
  if (!file) return 0;
  char buffer[256] = {0};
  const size_t got = fread(buffer, 1, sizeof buffer - 1, file);
  fclose(file);
  return got == strlen(expected) && memcmp(buffer, expected, got) == 0;
}

/* Checks the values on the stack from `first` to the top (and one level
 * into tables) for the secret. */
static void check_results(lua_State* L, int first, const char* path) {
  const int top = lua_gettop(L);
  for (int i = first; i <= top; i++) {
    if (lua_type(L, i) == LUA_TTABLE) {
      lua_pushnil(L);
      while (lua_next(L, i) != 0) {
        size_t length;
        const char* text = luaL_tolstring(L, -1, &length);
        if (leaks(text, length)) failure("%s returned the host file's contents", path);
        lua_pop(L, 2);
      }
    }
    size_t length;
    const char* text = luaL_tolstring(L, i, &length);
    if (leaks(text, length)) failure("%s leaked the host file's contents", path);
    lua_pop(L, 1);
  }
}

static void write_file(const char* path, const char* text) {
  FILE* file = fopen(path, "wb");
  if (!file || fputs(text, file) < 0 || fclose(file) != 0) {
    failure("cannot write %s", path);
    exit(1);
  }
}

static void call_everything(lua_State* L, const Walk* walk, const char* secret_path,
                            const char* victim_path, const char* absent_path) {
  static const char* const argument_scripts[] = {
      "local path = ... return path",
      "local path = ... return path, 'r'",
      "local path = ... return path, {header = true, delimiter = '\\1'}",
      "local path = ... return path, {dtype = 'f32'}",
      "local path = ... return path, 'overwritten'",
      "local path = ... return path, 'w'",
      "local path = ... return path, {1, 2, 3}",
  };
  const char* targets[] = {secret_path, victim_path, absent_path};
  int calls = 0;
  for (int f = 1; f <= walk->function_count; f++) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, walk->paths);
    lua_rawgeti(L, -1, f);
    char path[512];
    snprintf(path, sizeof path, "%s", lua_tostring(L, -1));
    lua_pop(L, 2);
    for (size_t a = 0; a < sizeof argument_scripts / sizeof *argument_scripts; a++) {
      for (int t = 0; t < 3; t++) {
        const int base = lua_gettop(L);
        lua_rawgeti(L, LUA_REGISTRYINDEX, walk->functions);
        lua_rawgeti(L, -1, f);
        lua_remove(L, -2);
        if (luaL_loadstring(L, argument_scripts[a]) != LUA_OK) exit(1);
        lua_pushstring(L, targets[t]);
        lua_call(L, 1, LUA_MULTRET);
        const int argument_count = lua_gettop(L) - base - 1;
        lua_pcall(L, argument_count, LUA_MULTRET, 0); /* results or the message */
        calls++;
        check_results(L, base + 1, path);
        lua_settop(L, base);
      }
    }
    if (access(absent_path, F_OK) == 0) {
      failure("%s created a host file", path);
      remove(absent_path);
    }
    /* Each function gets intact files: a writer must not hide a reader. */
    if (!file_equals(victim_path, "victim")) {
      failure("%s changed a host file", path);
      write_file(victim_path, "victim");
    }
    if (!file_equals(secret_path, secret)) {
      failure("%s changed a host file", path);
      write_file(secret_path, secret);
    }
  }
  printf("called %d reachable functions %d times with host paths\n", walk->function_count, calls);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s STDLIB_DIR\n", argv[0]);
    return 2;
  }
  alarm(300); /* a call that hangs fails the test instead of blocking it */

  lazylua_interpreter* full;
  if (lazylua_open(NULL, &full) != LAZYLUA_OK) return 1;
  lua_State* full_state = lazylua_lua_state(full);
  collect_forbidden(full_state);
  printf("file functions: %d C, %d Lua\n", forbidden_c_count, forbidden_lua_count);

  /* The walk must see the file functions where they exist. */
  Walk walk;
  const int reached = walk_interpreter(full_state, argv[1], &walk, 0);
  if (reached < 20) {
    char detail[64];
    snprintf(detail, sizeof detail, "%d", reached);
    failure("the walk of an interpreter without the sandbox found only %s file functions", detail);
  }
  lazylua_close(full);

  lazylua_options options;
  lazylua_options_init(&options);
  options.sandbox = 1;
  lazylua_interpreter* sandboxed;
  if (lazylua_open(&options, &sandboxed) != LAZYLUA_OK) return 1;
  lua_State* L = lazylua_lua_state(sandboxed);
  walk_interpreter(L, argv[1], &walk, 1);
  printf("sandbox: walked %d functions and %d tables\n", walk.function_count, walk.table_count);
  if (walk.function_count < 300 || walk.table_count < 30) {
    failure("the walk of the sandbox saw too little (%s)", "fewer than 300 functions");
  }

  char secret_path[] = "/tmp/lazylua_sandbox_secret_XXXXXX";
  char victim_path[] = "/tmp/lazylua_sandbox_victim_XXXXXX";
  const int secret_fd = mkstemp(secret_path);
  const int victim_fd = mkstemp(victim_path);
  if (secret_fd < 0 || victim_fd < 0) return 1;
  close(secret_fd);
  close(victim_fd);
  write_file(secret_path, secret);
  write_file(victim_path, "victim");
  char absent_path[64];
  snprintf(absent_path, sizeof absent_path, "%s.absent", victim_path);
  call_everything(L, &walk, secret_path, victim_path, absent_path);
  remove(secret_path);
  remove(victim_path);
  remove(absent_path);

  /* The sandbox still works after all that. */
  if (lazylua_run_string(sandboxed, "assert(tensor.arange(4):sum():item() == 6)", NULL) !=
      LAZYLUA_OK) {
    failure("the sandbox stopped working: %s", lazylua_error_message(sandboxed));
  }
  lazylua_close(sandboxed);
  if (failures == 0) printf("ok: the sandbox reaches no file function\n");
  return failures == 0 ? 0 : 1;
}
