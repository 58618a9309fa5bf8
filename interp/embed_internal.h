// embed_internal.h - the structures behind the C API's opaque handles
// (include/lazylua.h), shared by the files that implement it.
//
// Every API function catches C++ exceptions and runs whatever may raise a
// Lua error inside lua_pcall, so neither ever reaches the host. Code that
// runs under lua_pcall keeps no object with a destructor alive across a
// Lua call that may raise (a longjmp would skip it).
#pragma once

#include <lua.hpp>

#include <deque>
#include <mutex>
#include <string>
#include <unordered_set>

#include "include/lazylua.h"
#include "interp/state_data.h"
#include "tensor/interrupt.h"
#include "tensor/memory_budget.h"
#include "tensor/tensor.h"

struct lazylua_interpreter {
  lua_State* L = nullptr;
  lazylua::Ref<lazylua::MemoryBudget> budget;  // null: no limit
  bool sandbox = false;
  std::string error_message;
  // Set by lazylua_raise inside a host function, raised when it returns.
  std::string raised_message;
  bool raised = false;
  // Strings handed back to the host, kept until the next call that returns
  // values (a deque: pointers stay valid while it grows).
  std::deque<std::string> result_strings;
  // Handles the host owns; lazylua_close frees those left.
  std::unordered_set<lazylua_tensor*> tensors;

  // Interrupts: lazylua_interrupt (any thread) arms Lua's hook only while a
  // call runs; the calling thread disarms it when the outermost call ends.
  std::mutex interrupt_mutex;
  int running_depth = 0;             // nested calls (host functions calling back)
  bool interrupt_requested = false;  // both under interrupt_mutex
};

struct lazylua_tensor {
  lazylua::Tensor tensor;
  lazylua_interpreter* owner = nullptr;
  bool borrowed = false;  // an argument of a host function: not in owner->tensors
};

namespace lazylua::embed {

// Records the message of a failed call (never throws) and returns status.
lazylua_status fail_with(lazylua_interpreter* interpreter, lazylua_status status,
                         const char* message);

// Brackets every API call that runs Lua or allocates tensors: charges
// tensor buffers to the interpreter's budget, lets lazylua_interrupt reach
// it, restores the Lua stack, and tells what a failed Lua status means.
class CallScope {
 public:
  explicit CallScope(lazylua_interpreter* interpreter);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

  // The API status for a Lua status; on error takes the message (with its
  // traceback) from the top of the stack into error_message.
  lazylua_status finish(int lua_status);
  // Whether the memory limit refused an allocation since the scope began.
  bool memory_refused() const;

 private:
  lazylua_interpreter* interpreter_;
  int top_;
  int64_t refusals_at_start_;
  MemoryBudgetScope budget_scope_;
  // Tensor work in the call obeys this interpreter's flag, which
  // lazylua_interrupt sets with the hook (arm_interrupt): a sync stops with
  // LAZYLUA_ERROR_INTERRUPTED, and other interpreters' work goes on.
  InterruptScope interrupt_scope_;
};

// Runs body(L, data) under lua_pcall with the traceback message handler.
// The body's results (result_count of them, adjusted) are left on the stack
// when the status is LUA_OK.
int protected_call(lua_State* L, int (*body)(lua_State* L, void* data), void* data,
                   int result_count);

// Converting values. to_value fills `value` from the Lua value at `index`:
// strings point into Lua (copy them before popping), tensors become new
// handles (owned by the interpreter's list unless `borrowed`). Returns false
// when out of memory.
bool to_value(lazylua_interpreter* interpreter, int index, lazylua_value* value, bool borrowed);
// Checks a host value before it is pushed: a known type, a non-null string,
// a tensor of this interpreter. Returns an error message or nullptr.
const char* check_value(const lazylua_interpreter* interpreter, const lazylua_value& value);
// Pushes a checked value; may raise a Lua memory error (call under pcall).
void push_value(lua_State* L, const lazylua_value& value);
// Copies string results into interpreter storage so they outlive the stack.
bool keep_string(lazylua_interpreter* interpreter, lazylua_value* value);

}  // namespace lazylua::embed
