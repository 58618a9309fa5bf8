// repl.cpp - the interactive read-eval-print loop of the `lazylua` program.
//
// The loop is lua.c's: read a line, try it as `return <line>` so that
// expressions print their values, otherwise compile it as statements and keep
// reading continuation lines while the syntax error ends in "<eof>"; run the
// chunk through call_with_traceback; print the results with the global
// `print`. On a terminal, lines come from GNU readline (editing, a history
// file, Tab completion of globals, fields and methods) and Ctrl-C at the
// prompt discards the line instead of killing the program. Otherwise lines
// are read plainly and echoed after their prompt, as lua5.4 (whose readline
// echoes input that is not a terminal) prints them.
//
// Lua errors are longjmps (liblua is C), so functions that call raising Lua
// APIs hold no C++ objects with destructors, and readline callbacks (which
// must never be jumped over) reach Lua only through lua_pcall.
#include "interp/repl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <readline/history.h>
#include <readline/readline.h>
#include <lua.hpp>

#include "interp/cli.h"
#include "interp/repl_status.h"
#include "interp/runtime.h"

namespace lazylua {
namespace {

constexpr const char* kFirstPrompt = "> ";
constexpr const char* kContinuationPrompt = ">> ";
constexpr int kHistoryLength = 1000;

// Results of load_line besides the Lua statuses (which are all >= 0).
constexpr int kNoMoreInput = -1;
constexpr int kDiscarded = -2;  // Ctrl-C at the prompt

enum class LineResult { kLine, kEndOfInput, kInterrupted };

// True when stdin is a terminal and lines come from readline.
bool line_editing = false;

// ---------------------------------------------------------------------------
// Plain input (stdin is a file or a pipe).

char* plain_buffer = nullptr;
size_t plain_capacity = 0;

// Prints the prompt, reads one line (any length) and echoes it.
LineResult read_plain_line(const char* prompt, char** line) {
  fputs(prompt, stdout);
  fflush(stdout);
  ssize_t length = getline(&plain_buffer, &plain_capacity, stdin);
  if (length < 0) return LineResult::kEndOfInput;
  fputs(plain_buffer, stdout);
  if (plain_buffer[length - 1] != '\n') fputs("\n", stdout);
  fflush(stdout);
  *line = plain_buffer;
  return LineResult::kLine;
}

// ---------------------------------------------------------------------------
// Readline input. readline's callback interface is driven from a pselect()
// loop so that Ctrl-C at the prompt is seen between keystrokes and never
// interrupts readline in the middle of an update: the signal handlers only
// set a flag and write a byte to a pipe that pselect watches (the pipe, not
// EINTR, because the handler may run on another thread, e.g. a worker of
// the tensor thread pool), and this thread blocks the signals except inside
// pselect.

volatile sig_atomic_t prompt_interrupted = 0;
volatile sig_atomic_t window_resized = 0;
volatile sig_atomic_t suspend_requested = 0;
int wakeup_pipe[2] = {-1, -1};

void wake_reader() {
  int saved_errno = errno;
  char byte = 0;
  if (write(wakeup_pipe[1], &byte, 1) < 0) {
    // Full pipe: a wake-up is already pending.
  }
  errno = saved_errno;
}

void on_interrupt_at_prompt(int) {
  prompt_interrupted = 1;
  wake_reader();
}

void on_window_resized(int) {
  window_resized = 1;
  wake_reader();
}

void on_suspend_at_prompt(int) {
  suspend_requested = 1;
  wake_reader();
}

// Ctrl-Z at the prompt: give the terminal back in its normal mode, stop,
// and when continued (fg) take it again and redraw the line.
void suspend_at_prompt() {
  rl_cleanup_after_signal();
  signal(SIGTSTP, SIG_DFL);
  raise(SIGTSTP);
  signal(SIGTSTP, on_suspend_at_prompt);
  rl_reset_after_signal();
  rl_resize_terminal();
  rl_forced_update_display();
}

void drain_wakeup_pipe() {
  char bytes[64];
  while (read(wakeup_pipe[0], bytes, sizeof bytes) > 0) {
  }
}

char* accepted_line = nullptr;
bool line_finished = false;

void on_line_accepted(char* line) {
  accepted_line = line;
  line_finished = true;
  rl_callback_handler_remove();
}

// Leaves readline's half-typed line behind and restores the terminal.
void abandon_line() {
  rl_echo_signal_char(SIGINT);
  rl_free_line_state();
  rl_callback_sigcleanup();
  rl_cleanup_after_signal();
  rl_callback_handler_remove();
  fputs("\n", rl_outstream);
  fflush(rl_outstream);
}

LineResult read_edited_line(const char* prompt, char** line) {
  sigset_t watched, wait_mask, previous_mask;
  sigemptyset(&watched);
  sigaddset(&watched, SIGINT);
  sigaddset(&watched, SIGWINCH);
  pthread_sigmask(SIG_BLOCK, &watched, &previous_mask);
  wait_mask = previous_mask;
  sigdelset(&wait_mask, SIGINT);
  sigdelset(&wait_mask, SIGWINCH);
  // A Ctrl-C that arrived after the last chunk ended has nothing to stop.
  drain_wakeup_pipe();
  prompt_interrupted = 0;
  line_finished = false;
  accepted_line = nullptr;
  suspend_requested = 0;
  // Only while reading: Ctrl-Z during a chunk stops the program at once.
  // A shell without job control ignores SIGTSTP for us: then so do we.
  struct sigaction previous_suspend;
  sigaction(SIGTSTP, nullptr, &previous_suspend);
  bool may_suspend = previous_suspend.sa_handler != SIG_IGN;
  if (may_suspend) signal(SIGTSTP, on_suspend_at_prompt);
  rl_callback_handler_install(prompt, on_line_accepted);
  LineResult result = LineResult::kLine;
  int input_fd = fileno(rl_instream);
  while (!line_finished) {
    if (window_resized) {
      window_resized = 0;
      rl_resize_terminal();
    }
    if (suspend_requested) {
      suspend_requested = 0;
      suspend_at_prompt();
    }
    if (prompt_interrupted) {
      prompt_interrupted = 0;
      abandon_line();
      result = LineResult::kInterrupted;
      break;
    }
    fd_set readable;
    FD_ZERO(&readable);
    FD_SET(input_fd, &readable);
    if (wakeup_pipe[0] >= 0) FD_SET(wakeup_pipe[0], &readable);
    int highest_fd = input_fd > wakeup_pipe[0] ? input_fd : wakeup_pipe[0];
    if (pselect(highest_fd + 1, &readable, nullptr, nullptr, nullptr, &wait_mask) < 0) {
      if (errno == EINTR) continue;
      rl_callback_handler_remove();  // the terminal is gone: treat as end of input
      break;
    }
    if (wakeup_pipe[0] >= 0 && FD_ISSET(wakeup_pipe[0], &readable)) drain_wakeup_pipe();
    if (FD_ISSET(input_fd, &readable)) rl_callback_read_char();
  }
  if (may_suspend) sigaction(SIGTSTP, &previous_suspend, nullptr);
  pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  if (result != LineResult::kLine) return result;
  if (accepted_line == nullptr) return LineResult::kEndOfInput;
  *line = accepted_line;
  return LineResult::kLine;
}

// ---------------------------------------------------------------------------
// History: kept in memory by readline and appended to the history file
// after every entry, so it survives os.exit() and crashes. Multi-line
// chunks stay one entry (readline delimits entries by timestamp lines).

std::string history_path;  // empty: no history file

void start_history() {
  history_comment_char = '#';
  history_write_timestamps = 1;
  history_multiline_entries = 1;
  stifle_history(kHistoryLength);
  const char* configured = getenv("LAZYLUA_HISTORY");
  const char* home = getenv("HOME");
  if (configured != nullptr)
    history_path = configured;
  else if (home != nullptr && home[0] != '\0')
    history_path = std::string(home) + "/.lazylua_history";
  if (history_path.empty()) return;
  int error = read_history(history_path.c_str());
  if (error == ENOENT) {
    // append_history() does not create the file.
    int fd = open(history_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0)
      close(fd);
    else
      history_path.clear();
  } else if (error != 0) {
    history_path.clear();  // unreadable (or a directory): leave it alone
  } else {
    history_truncate_file(history_path.c_str(), kHistoryLength);
  }
  using_history();
}

void save_history_line(const char* line) {
  if (!line_editing) return;
  // Repeating a line (Up, Enter) should not fill the history with copies.
  HIST_ENTRY* last = history_length > 0 ? history_get(history_base + history_length - 1) : nullptr;
  if (last != nullptr && strcmp(last->line, line) == 0) return;
  add_history(line);
  using_history();
  if (!history_path.empty())
    append_history(1, history_path.c_str());  // errors: no history, no fuss
}

// ---------------------------------------------------------------------------
// Tab completion. The word under the cursor is a path such as `string.fo`,
// `a.b.c`, `t:ma` or `pri`; candidates are computed by a protected Lua C
// function (which only reads tables raw and never calls Lua code, so
// completing cannot run user code), collected into `completion_candidates`,
// and handed to readline.

lua_State* completion_state = nullptr;
std::vector<std::string> completion_candidates;

const char* const kLuaKeywords[] = {"and",   "break", "do",       "else", "elseif", "end",
                                    "false", "for",   "function", "goto", "if",     "in",
                                    "local", "nil",   "not",      "or",   "repeat", "return",
                                    "then",  "true",  "until",    "while"};

bool is_identifier(const char* text, size_t length) {
  if (length == 0 || (text[0] >= '0' && text[0] <= '9')) return false;
  for (size_t i = 0; i < length; i++) {
    char c = text[i];
    bool ok =
        c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!ok) return false;
  }
  for (const char* keyword : kLuaKeywords)
    if (strlen(keyword) == length && memcmp(keyword, text, length) == 0) return false;
  return true;
}

// Pushes the table where the value at `index` finds its methods and
// inherited fields: its metatable's `__index` when that is a table, or for a
// tensor (whose __index is a function, since numbers index elements) the
// binding's method table. Returns false, pushing nothing, if there is none.
bool push_index_table(lua_State* L, int index) {
  if (!lua_getmetatable(L, index)) return false;
  lua_pushliteral(L, "__index");
  lua_rawget(L, -2);
  if (lua_istable(L, -1)) {
    lua_remove(L, -2);
    return true;
  }
  lua_pop(L, 1);
  // The Tensor metatable keeps its method table in `methods`.
  lua_pushliteral(L, "methods");
  lua_rawget(L, -2);
  push_tensor_methods(L);
  bool is_tensor = lua_istable(L, -1) && lua_rawequal(L, -1, -2);
  lua_rotate(L, -3, 1);  // tensor methods, metatable, metatable.methods
  lua_pop(L, 2);
  if (is_tensor) return true;
  lua_pop(L, 1);
  return false;
}

// Looks up `name` in the value at the top, raw and through __index tables
// (never calling functions); replaces the value by the result (or nil).
void replace_by_field(lua_State* L, const char* name, size_t length) {
  for (int depth = 0; depth < 16; depth++) {
    if (lua_istable(L, -1)) {
      lua_pushlstring(L, name, length);
      lua_rawget(L, -2);
      if (!lua_isnil(L, -1)) {
        lua_remove(L, -2);
        return;
      }
      lua_pop(L, 1);
    }
    if (!push_index_table(L, -1)) break;
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  lua_pushnil(L);
}

// Adds to the result table every string key of the table at `table_index`
// that starts with `partial` (and names a function, when `methods_only`),
// as `prefix .. key`, with "(" after functions.
void add_matching_keys(lua_State* L, int table_index, const char* prefix, size_t prefix_length,
                       const char* partial, bool methods_only, int results_index) {
  size_t partial_length = strlen(partial);
  lua_pushnil(L);
  while (lua_next(L, table_index) != 0) {
    size_t key_length = 0;
    const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &key_length) : nullptr;
    bool is_function = lua_type(L, -1) == LUA_TFUNCTION;
    if (key != nullptr && key_length >= partial_length &&
        memcmp(key, partial, partial_length) == 0 && is_identifier(key, key_length) &&
        (is_function || !methods_only)) {
      luaL_Buffer candidate;
      luaL_buffinit(L, &candidate);
      luaL_addlstring(&candidate, prefix, prefix_length);
      luaL_addlstring(&candidate, key, key_length);
      if (is_function) luaL_addchar(&candidate, '(');
      luaL_pushresult(&candidate);
      lua_rawseti(L, results_index, lua_Integer(lua_rawlen(L, results_index)) + 1);
    }
    lua_pop(L, 1);
  }
}

// Adds the fields of the value at the top (if a table) and of its chain of
// __index tables. Pops the value.
void add_fields_of_value(lua_State* L, const char* prefix, size_t prefix_length,
                         const char* partial, bool methods_only, int results_index) {
  for (int depth = 0; depth < 16; depth++) {
    if (lua_istable(L, -1))
      add_matching_keys(L, lua_gettop(L), prefix, prefix_length, partial, methods_only,
                        results_index);
    if (!push_index_table(L, -1)) break;
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
}

// Protected: argument 1 is the word (a light userdata char*); returns a
// table of candidate completions.
int collect_completions(lua_State* L) {
  const char* word = static_cast<const char*>(lua_touserdata(L, 1));
  lua_newtable(L);
  int results_index = lua_gettop(L);
  const char* last_dot = strrchr(word, '.');
  const char* last_colon = strrchr(word, ':');
  const char* separator = last_dot > last_colon ? last_dot : last_colon;
  if (separator == nullptr) {
    lua_pushglobaltable(L);
    add_fields_of_value(L, "", 0, word, false, results_index);
    size_t word_length = strlen(word);
    for (const char* keyword : kLuaKeywords) {
      if (strncmp(keyword, word, word_length) == 0) {
        lua_pushstring(L, keyword);
        lua_rawseti(L, results_index, lua_Integer(lua_rawlen(L, results_index)) + 1);
      }
    }
    return 1;
  }
  // Walk the path before the separator: names joined by dots only.
  lua_pushglobaltable(L);
  const char* segment = word;
  while (segment < separator) {
    const char* end = segment;
    while (end < separator && *end != '.' && *end != ':') end++;
    if (*end == ':' && end != separator) return 1;  // `a:b.c` is not a path
    if (!is_identifier(segment, size_t(end - segment))) return 1;
    replace_by_field(L, segment, size_t(end - segment));
    segment = end + 1;
  }
  bool is_method = *separator == ':';
  if (is_method && lua_type(L, -1) == LUA_TSTRING) {
    // s:up<Tab>: strings share the string table through their metatable.
    if (!push_index_table(L, -1)) return 1;
    lua_remove(L, -2);
  }
  add_fields_of_value(L, word, size_t(separator - word) + 1, separator + 1, is_method,
                      results_index);
  return 1;
}

char* next_candidate(const char* /*text*/, int state) {
  static size_t next_index;
  if (state == 0) next_index = 0;
  if (next_index >= completion_candidates.size()) return nullptr;
  return strdup(completion_candidates[next_index++].c_str());
}

char** complete_word(const char* text, int /*start*/, int /*end*/) {
  rl_completion_append_character = '\0';
  if (rl_completion_quote_character != 0) return nullptr;  // inside a string: file names
  rl_attempted_completion_over = 1;
  completion_candidates.clear();
  lua_State* L = completion_state;
  int top = lua_gettop(L);
  // Nothing that can raise before the pcall: no allocation, no metamethods.
  if (!lua_checkstack(L, 4)) return nullptr;
  lua_pushcfunction(L, collect_completions);
  lua_pushlightuserdata(L, const_cast<char*>(text));
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
    lua_Unsigned count = lua_rawlen(L, -1);
    for (lua_Unsigned i = 1; i <= count; i++) {
      lua_rawgeti(L, -1, lua_Integer(i));
      if (const char* candidate = lua_tostring(L, -1))
        completion_candidates.emplace_back(candidate);
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
  if (completion_candidates.empty()) return nullptr;
  return rl_completion_matches(text, next_candidate);
}

void start_line_editing(lua_State* L) {
  rl_readline_name = "lazylua";
  // We handle SIGINT and SIGWINCH ourselves (see read_edited_line).
  rl_catch_signals = 0;
  rl_catch_sigwinch = 0;
  completion_state = L;
  rl_attempted_completion_function = complete_word;
  // Not '.' and ':': `string.fo` and `t:ma` are one word to complete.
  rl_completer_word_break_characters = " \t\n\"'`<>=;+-*/%^#~&|,{}()[]";
  rl_completer_quote_characters = "\"'";
  start_history();
  if (wakeup_pipe[0] < 0 && pipe2(wakeup_pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
    // Without the pipe a Ctrl-C at the prompt still wakes pselect (EINTR)
    // when it is delivered to this thread.
    wakeup_pipe[0] = wakeup_pipe[1] = -1;
  }
  struct sigaction handler = {};
  sigemptyset(&handler.sa_mask);
  handler.sa_handler = on_interrupt_at_prompt;  // no SA_RESTART: pselect must wake up
  sigaction(SIGINT, &handler, nullptr);
  handler.sa_handler = on_window_resized;
  sigaction(SIGWINCH, &handler, nullptr);
}

void stop_line_editing() {
  signal(SIGINT, SIG_DFL);
  signal(SIGWINCH, SIG_DFL);
  completion_state = nullptr;
}

// ---------------------------------------------------------------------------
// The loop (lua.c's pushline, addreturn, multiline, loadline, l_print).

// Pushes the prompt: _PROMPT / _PROMPT2 through tostring, or the default.
const char* push_prompt(lua_State* L, bool first_line) {
  if (lua_getglobal(L, first_line ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushstring(L, first_line ? kFirstPrompt : kContinuationPrompt);
    return lua_tostring(L, -1);
  }
  const char* prompt = luaL_tolstring(L, -1, nullptr);
  lua_remove(L, -2);
  return prompt;
}

// Reads a line and pushes it (without its newline). A first line starting
// with '=' becomes `return ...`, for compatibility with Lua 5.2.
LineResult push_line(lua_State* L, bool first_line) {
  const char* prompt = push_prompt(L, first_line);
  char* line = nullptr;
  LineResult result =
      line_editing ? read_edited_line(prompt, &line) : read_plain_line(prompt, &line);
  lua_pop(L, 1);  // the prompt
  if (result != LineResult::kLine) return result;
  size_t length = strlen(line);
  if (length > 0 && line[length - 1] == '\n') line[--length] = '\0';
  if (first_line && line[0] == '=')
    lua_pushfstring(L, "return %s", line + 1);
  else
    lua_pushlstring(L, line, length);
  if (line_editing) free(line);
  return LineResult::kLine;
}

// Tries to compile the line on top as `return <line>;` (so that expressions
// print). On success replaces the line by the function.
int compile_as_expression(lua_State* L) {
  const char* line = lua_tostring(L, -1);
  const char* with_return = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbuffer(L, with_return, strlen(with_return), "=stdin");
  if (status == LUA_OK) {
    lua_remove(L, -2);
    if (line[0] != '\0') save_history_line(line);
  } else {
    lua_pop(L, 2);
  }
  return status;
}

// True (and the message popped) when a compile error only says that the
// chunk ended too early, so more lines may complete it.
bool is_incomplete(lua_State* L, int status) {
  if (status != LUA_ERRSYNTAX) return false;
  size_t length;
  const char* message = lua_tolstring(L, -1, &length);
  const size_t mark_length = sizeof("<eof>") - 1;
  if (length >= mark_length && strcmp(message + length - mark_length, "<eof>") == 0) {
    lua_pop(L, 1);
    return true;
  }
  return false;
}

// Compiles the lines at index 1 as statements, reading continuation lines
// while the chunk is incomplete. Leaves the function or the error message
// on top and returns the status, or kDiscarded after Ctrl-C.
int compile_as_statements(lua_State* L) {
  for (;;) {
    size_t length;
    const char* chunk = lua_tolstring(L, 1, &length);
    int status = luaL_loadbuffer(L, chunk, length, "=stdin");
    if (!is_incomplete(L, status)) {
      save_history_line(chunk);
      return status;
    }
    LineResult result = push_line(L, false);
    if (result == LineResult::kInterrupted) return kDiscarded;
    if (result == LineResult::kEndOfInput) {
      save_history_line(chunk);
      // lua5.4 (5.4.4) reports a message that is not there and prints
      // "(null)"; a nil message prints the same.
      lua_pushnil(L);
      return status;
    }
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
}

// Reads and compiles one chunk; leaves only the function (or the error
// message) on the stack. Returns a Lua status, kNoMoreInput or kDiscarded.
int load_line(lua_State* L) {
  lua_settop(L, 0);
  LineResult result = push_line(L, true);
  if (result == LineResult::kEndOfInput) return kNoMoreInput;
  if (result == LineResult::kInterrupted) return kDiscarded;
  // No Lua chunk starts with '%': the line is a shortcut (repl_status.h).
  if (const char* line = lua_tostring(L, -1); line[0] == '%') {
    save_history_line(line);
    run_shortcut(L, line);
    lua_settop(L, 0);
    return kDiscarded;
  }
  int status = compile_as_expression(L);
  if (status != LUA_OK) status = compile_as_statements(L);
  if (status == kDiscarded) {
    lua_settop(L, 0);
    return kDiscarded;
  }
  lua_remove(L, 1);
  return status;
}

// Prints the values left on the stack with the global `print`.
void print_results(lua_State* L) {
  int count = lua_gettop(L);
  if (count == 0) return;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  lua_getglobal(L, "print");
  lua_insert(L, 1);
  if (lua_pcall(L, count, 0, 0) != LUA_OK)
    print_message(nullptr, lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
}

}  // namespace

void run_repl(lua_State* L) {
  line_editing = isatty(STDIN_FILENO);
  if (line_editing) start_line_editing(L);
  const char* term = getenv("TERM");
  const bool colour = isatty(STDOUT_FILENO) && term && strcmp(term, "dumb") != 0;
  int status;
  while ((status = load_line(L)) != kNoMoreInput) {
    if (status == kDiscarded) continue;
    const CommandStart start = start_command(L);
    if (status == LUA_OK) status = call_with_traceback(L, 0, LUA_MULTRET, /*from_repl=*/true);
    if (status == LUA_OK) {
      print_results(L);
    } else {
      report_status(L, status, nullptr);  // no program name in interactive mode
      // A failed or interrupted chunk leaves its temporaries unreachable. An
      // interrupted sync leaves its tensors pending (tensor/interrupt.h):
      // those the session still refers to are computed by the next sync;
      // the others (a loop's locals) go now, not whenever the collector
      // gets to them, so %pending and the next sync see only what is left.
      lua_gc(L, LUA_GCCOLLECT);
    }
    // At a terminal only: piped sessions print what lua5.4 prints.
    if (line_editing) {
      const std::string line = command_status(L, start, colour);
      if (!line.empty()) printf("%s\n", line.c_str());
      fflush(stdout);
    }
  }
  lua_settop(L, 0);
  fputs("\n", stdout);
  fflush(stdout);
  if (line_editing) stop_line_editing();
}

}  // namespace lazylua
