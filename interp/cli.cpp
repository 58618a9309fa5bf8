// cli.cpp - the `lazylua` program's command line: the options, LUA_INIT,
// the `arg` table, exit statuses and error reports of the stock lua5.4.
//
// Everything a script or a shell pipeline can observe must match lua5.4
// except the program name (and the extra lazylua line of -v), so the
// structure follows lua.c: main creates the state and runs all the work in
// one protected call; every chunk runs through call_with_traceback.
//
// Lua errors are longjmps here (Debian builds liblua as C), so the functions
// that call raising Lua APIs hold no C++ objects with destructors.
#include "interp/cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <exception>

#include <lua.hpp>

#include "interp/config.h"
#include "interp/coroutines.h"
#include "interp/lua_tensor.h"
#include "interp/repl.h"
#include "interp/runtime.h"
#include "tensor/collectives.h"

namespace lazylua {
namespace {

// argv[0], used to prefix messages; lua.c's fallback when argv[0] is empty.
const char* program_name = "lazylua";

// ---------------------------------------------------------------------------
// Ctrl-C while a chunk runs. A signal handler may not touch the Lua state
// beyond lua_sethook (which is async-signal-safe), so it only installs a
// hook; the hook runs at the next Lua instruction and raises the error there.
// It also sets an atomic flag (arm_interrupt) that stops tensor work inside
// a long C++ call (tensor/interrupt.h); whichever delivers "interrupted!"
// first clears it, so the interrupt stops the chunk once, as in lua.c.

lua_State* volatile interruptible_state = nullptr;

void raise_interrupted(lua_State* L, lua_Debug* /*activation*/) {
  interrupt_delivered(L);
  lua_sethook(L, nullptr, 0, 0);
  luaL_error(L, "interrupted!");
}

void on_interrupt_while_running(int signal_number) {
  // A second Ctrl-C kills the program, in case the hook never gets to run
  // (a chunk stuck inside a long C function).
  signal(signal_number, SIG_DFL);
  // The main thread's hook, and the running coroutine's (a busy loop in a
  // coroutine never runs an instruction of the main thread).
  arm_interrupt(interruptible_state, raise_interrupted);
}

// The REPL's: the handler stays, so a second Ctrl-C only asks again (the
// tensor work it would stop checks its flag every few milliseconds).
void on_interrupt_while_running_in_repl(int /*signal_number*/) {
  arm_interrupt(interruptible_state, raise_interrupted);
}

// Message handler of every chunk: turns the error object into a message and
// appends the traceback. An error object with __tostring gives its own
// message (without traceback); other non-strings are described by type.
int add_traceback(lua_State* L) {
  const char* message = lua_tostring(L, 1);
  if (message == nullptr) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    message = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, message, 1);
  return 1;
}

// ---------------------------------------------------------------------------
// Options. They are scanned once before anything runs (so -E and -v act
// first), then run in order by run_options.

enum OptionFlags {
  kBadOption = 1,
  kInteractive = 2,     // -i
  kShowVersion = 4,     // -v (and -i)
  kExecute = 8,         // -e
  kNoEnvironment = 16,  // -E
};

// Returns the flags of the options; sets *script_index to the index of the
// script name (argc when there is none) or, on kBadOption, of the bad option.
int scan_options(char** argv, int* script_index) {
  int flags = 0;
  *script_index = 0;
  if (argv[0] == nullptr) return 0;  // no program name, hence no arguments
  int i;
  for (i = 1; argv[i] != nullptr; i++) {
    *script_index = i;
    const char* option = argv[i];
    if (option[0] != '-') return flags;  // the script name
    switch (option[1]) {
      case '-':  // "--": stop handling options
        if (option[2] != '\0') return kBadOption;
        *script_index = i + 1;
        return flags;
      case '\0':  // "-": the script is stdin
        return flags;
      case 'E':
        if (option[2] != '\0') return kBadOption;
        flags |= kNoEnvironment;
        break;
      case 'W':
        if (option[2] != '\0') return kBadOption;
        break;
      case 'i':
        flags |= kInteractive;
        [[fallthrough]];  // -i implies -v
      case 'v':
        if (option[2] != '\0') return kBadOption;
        flags |= kShowVersion;
        break;
      case 'e':
        flags |= kExecute;
        [[fallthrough]];
      case 'l':  // both need an argument, in the same word or the next one
        if (option[2] == '\0') {
          i++;
          if (argv[i] == nullptr || argv[i][0] == '-') return kBadOption;
        }
        break;
      default:
        return kBadOption;
    }
  }
  *script_index = i;
  return flags;
}

void print_usage(const char* bad_option) {
  if (bad_option[1] == 'e' || bad_option[1] == 'l')
    fprintf(stderr, "%s: '%s' needs argument\n", program_name, bad_option);
  else
    fprintf(stderr, "%s: unrecognized option '%s'\n", program_name, bad_option);
  fprintf(stderr,
          "usage: %s [options] [script [args]]\n"
          "Available options are:\n"
          "  -e stat   execute string 'stat'\n"
          "  -i        enter interactive mode after executing 'script'\n"
          "  -l mod    require library 'mod' into global 'mod'\n"
          "  -l g=mod  require library 'mod' into global 'g'\n"
          "  -v        show version information\n"
          "  -E        ignore environment variables\n"
          "  -W        turn warnings on\n"
          "  --        stop handling options\n"
          "  -         stop handling options and execute stdin\n",
          program_name);
  fflush(stderr);
}

// Our own lines first (the version, then what the tensors run on: threads,
// kernel ISA, BLAS and its core); Lua's line stays last and unchanged, since
// tools parse the last line of `lua -v`.
void print_version() {
  printf("lazylua %s (lazy tensors for Lua)\n", version());
  try {
    printf("%s\n", runtime_config_line().c_str());
  } catch (const std::exception&) {  // std::bad_alloc: the line is only informative
  }
  fputs(LUA_COPYRIGHT "\n", stdout);
  fflush(stdout);
}

// arg[0] is the script, positive indices its arguments, negative indices
// the interpreter and the options. With no script, arg[0] is the program.
void create_arg_table(lua_State* L, char** argv, int argc, int script_index) {
  if (script_index == argc) script_index = 0;
  lua_createtable(L, argc - (script_index + 1), script_index + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script_index);
  }
  lua_setglobal(L, "arg");
}

// Runs the chunk that luaL_load* left (or reports its load error).
int run_loaded_chunk(lua_State* L, int load_status) {
  int status = load_status;
  if (status == LUA_OK) status = call_with_traceback(L, 0, 0);
  return report_status(L, status, program_name);
}

int run_file(lua_State* L, const char* file_name) {
  return run_loaded_chunk(L, luaL_loadfile(L, file_name));
}

int run_string(lua_State* L, const char* source, const char* chunk_name) {
  return run_loaded_chunk(L, luaL_loadbuffer(L, source, strlen(source), chunk_name));
}

// -l mod or -l global=mod: global = require(mod).
int require_library(lua_State* L, const char* spec) {
  const char* equals = strchr(spec, '=');
  const char* module_name = equals ? equals + 1 : spec;
  size_t global_length = equals ? size_t(equals - spec) : strlen(spec);
  lua_getglobal(L, "require");
  lua_pushstring(L, module_name);
  int status = call_with_traceback(L, 1, 1);
  if (status == LUA_OK) {
    lua_pushglobaltable(L);
    lua_pushlstring(L, spec, global_length);
    lua_rotate(L, -3, -1);  // globals, name, module
    lua_settable(L, -3);
    lua_pop(L, 1);
  }
  return report_status(L, status, program_name);
}

// The script's arguments (arg[1..n]) become the main chunk's `...`.
int push_script_arguments(lua_State* L) {
  if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
  int count = int(luaL_len(L, -1));
  luaL_checkstack(L, count + 3, "too many arguments to script");
  int i;
  for (i = 1; i <= count; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -i);
  return count;
}

// argv[0] is the script name; "-" means stdin unless it came after "--".
int run_script(lua_State* L, char** argv) {
  const char* file_name = argv[0];
  if (strcmp(file_name, "-") == 0 && strcmp(argv[-1], "--") != 0) file_name = nullptr;
  int status = luaL_loadfile(L, file_name);
  if (status == LUA_OK) {
    int count = push_script_arguments(L);
    status = call_with_traceback(L, count, LUA_MULTRET);
  }
  return report_status(L, status, program_name);
}

// LUA_INIT_5_4 (or else LUA_INIT): a chunk, or @file to run a file.
int run_lua_init(lua_State* L) {
  const char* chunk_name = "=LUA_INIT_" LUA_VERSION_MAJOR "_" LUA_VERSION_MINOR;
  const char* init = getenv(chunk_name + 1);
  if (init == nullptr) {
    chunk_name = "=LUA_INIT";
    init = getenv(chunk_name + 1);
  }
  if (init == nullptr) return LUA_OK;
  if (init[0] == '@') return run_file(L, init + 1);
  return run_string(L, init, chunk_name);
}

// Runs -e, -l and -W in command-line order, up to the script name. Returns
// false when one of them failed (already reported).
bool run_options(lua_State* L, char** argv, int option_limit) {
  for (int i = 1; i < option_limit; i++) {
    int option = argv[i][1];
    if (option == 'e' || option == 'l') {
      const char* argument = argv[i] + 2;
      if (*argument == '\0') argument = argv[++i];
      int status =
          option == 'e' ? run_string(L, argument, "=(command line)") : require_library(L, argument);
      if (status != LUA_OK) return false;
    } else if (option == 'W') {
      lua_warning(L, "@on", 0);
    }
  }
  return true;
}

// The whole program, run inside one protected call (arguments: argc, argv).
// Returns true on the stack when everything went well.
int protected_main(lua_State* L) {
  int argc = int(lua_tointeger(L, 1));
  char** argv = static_cast<char**>(lua_touserdata(L, 2));
  int script_index;
  int flags = scan_options(argv, &script_index);
  luaL_checkversion(L);
  if (argv[0] != nullptr && argv[0][0] != '\0') program_name = argv[0];
  if (flags == kBadOption) {
    print_usage(argv[script_index]);
    return 0;
  }
  if (flags & kShowVersion) print_version();
  if (flags & kNoEnvironment) {
    // Tells the package library to ignore LUA_PATH and LUA_CPATH.
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  open_lazylua(L);
  create_arg_table(L, argv, argc, script_index);
  lua_gc(L, LUA_GCGEN, 0, 0);  // lua5.4 runs its collector in generational mode
  if (!(flags & kNoEnvironment) && run_lua_init(L) != LUA_OK) return 0;
  int option_limit = script_index > 0 ? script_index : argc;
  if (!run_options(L, argv, option_limit)) return 0;
  bool has_script = script_index > 0 && script_index < argc;
  if (has_script && run_script(L, argv + script_index) != LUA_OK) return 0;
  if (flags & kInteractive) {
    run_repl(L);
  } else if (!has_script && !(flags & (kExecute | kShowVersion))) {
    if (isatty(STDIN_FILENO)) {
      print_version();
      run_repl(L);
    } else {
      run_file(L, nullptr);  // stdin as one chunk
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

}  // namespace

int call_with_traceback(lua_State* L, int nargs, int nresults, bool from_repl) {
  int handler_index = lua_gettop(L) - nargs;
  lua_pushcfunction(L, add_traceback);
  lua_insert(L, handler_index);
  interruptible_state = L;
  struct sigaction on_interrupt = {};
  struct sigaction before;
  on_interrupt.sa_handler =
      from_repl ? on_interrupt_while_running_in_repl : on_interrupt_while_running;
  on_interrupt.sa_flags = SA_RESTART;
  sigemptyset(&on_interrupt.sa_mask);
  sigaction(SIGINT, &on_interrupt, &before);
  int status;
  {
    // Tensor work of this chunk, on this thread and the pool's, obeys L's flag.
    InterruptScope interrupt_scope(interrupt_flag(L));
    status = lua_pcall(L, nargs, nresults, handler_index);
  }
  // Back to whatever was there (the default, or the REPL's own handler).
  sigaction(SIGINT, &before, nullptr);
  lua_remove(L, handler_index);
  // A Ctrl-C that came too late to stop this chunk must not stop the next.
  disarm_interrupt(L, raise_interrupted);
  return status;
}

void print_message(const char* progname, const char* message) {
  if (progname != nullptr) fprintf(stderr, "%s: ", progname);
  // glibc prints a null string as "(null)"; lua5.4 relies on that in one
  // corner of its REPL (end of input inside an unfinished chunk), and we
  // print the same thing without relying on the library.
  fprintf(stderr, "%s\n", message != nullptr ? message : "(null)");
  fflush(stderr);
}

int report_status(lua_State* L, int status, const char* progname) {
  if (status != LUA_OK) {
    print_message(progname, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  return status;
}

int run_cli(int argc, char** argv) {
  lua_State* L = luaL_newstate();
  if (L == nullptr) {
    print_message(argv[0], "cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
  lua_pushcfunction(L, protected_main);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = lua_pcall(L, 2, 1, 0);
  bool succeeded = lua_toboolean(L, -1);
  report_status(L, status, program_name);
  // A rank that ends normally first runs the collectives it recorded and
  // never synced: another rank may wait in them (it read their result).
  if (succeeded && status == LUA_OK && dist_size() > 1 && has_tensor_context(L)) {
    try {
      tensor_context(L)->run_pending_collectives();
    } catch (const std::exception& error) {
      print_message(program_name, error.what());
      succeeded = false;
    }
  }
  // A rank of an MPI job that failed ends the job: the other ranks would
  // wait for it in their next collective (tensor/collectives.h).
  if (!(succeeded && status == LUA_OK)) dist_abort_job(EXIT_FAILURE);
  lua_close(L);
  return succeeded && status == LUA_OK ? EXIT_SUCCESS : EXIT_FAILURE;
}

}  // namespace lazylua
