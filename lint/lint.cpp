// lint.cpp - the checks of lint.h over the instructions of each function.
#include "lint/lint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string_view>

namespace lazylua::lint {
namespace {

// What a register is known to hold. Inferred in instruction order, without
// following jumps: a register keeps what its last write put there.
struct Value {
  enum class Kind {
    unknown,
    tensor_module,   // require "tensor", the global `tensor`
    tensor,          // a Tensor
    module_table,    // nn, optim: their functions make callable objects
    callable,        // an nn module or loss: calling it gives a tensor
    library,         // a function of Lua's standard library
    tensor_function  // a field of the tensor module
  } kind = Kind::unknown;
  // A function's name, a string constant's text, or for a tensor the local
  // it was copied from (for messages).
  std::string name;
  int pc = -1;  // where a function was loaded (its line for messages)
};
using Kind = Value::Kind;

bool is_tensor(const Value& v) {
  return v.kind == Kind::tensor;
}

// The tensor module's functions that make no tensor (and do not record).
const std::set<std::string_view> kTensorModuleMeta = {
    "mark_step", "sync", "metrics", "reset_metrics", "manual_seed", "config", "ir", "dot", "code",
    "save", "load", "no_grad", "is_tensor", "explain", "report", "profile", "pending", "graph",
    "profile_report",
    // Results that are Lua values or tables of tensors, not one tensor.
    "get_rng_state", "set_rng_state", "save_npy", "save_npz", "load_npz", "allclose", "chunk",
    "split", "unbind", "meshgrid", "register_backward_hook"};
// Tensor methods that read a value into Lua: each is a sync.
const std::set<std::string_view> kSyncMethods = {"item", "tolist", "allclose"};
// Tensor methods that read only metadata (no sync, no record).
const std::set<std::string_view> kMetadataMethods = {"size",  "dim",  "numel",         "nelement",
                                                     "dtype", "type", "is_contiguous", "stride"};
// Lua's standard library: calling it with a tensor makes no tensor.
const std::set<std::string_view> kLibraryGlobals = {
    "assert",    "collectgarbage", "dofile",  "error",  "getmetatable", "ipairs",   "load",
    "loadfile",  "next",           "pairs",   "pcall",  "print",        "rawequal", "rawget",
    "rawlen",    "rawset",         "require", "select", "setmetatable", "tonumber", "tostring",
    "type",      "xpcall",         "string",  "math",   "table",        "io",       "os",
    "coroutine", "utf8",           "debug"};
// Library functions that turn a tensor argument into text: a sync.
const std::set<std::string_view> kPrinting = {"print", "tostring", "string.format", "io.write"};

struct Loop {
  int start = 0;   // the first instruction of the body
  int end = 0;     // the jump back
  int header = 0;  // the instruction whose line is the loop's first
  const char* keyword = "for";
  bool contains(int pc) const { return pc >= start && pc <= end; }
};

// A sync found at `pc`, reported if it runs on every iteration of its loop.
struct Read {
  int pc = 0;
  int line = 0;
  std::string needle;       // the text to find on the line, for the column
  bool needle_is_operator;  // needle is `..`, `<` ...: not a name
  std::string what;         // e.g. "loss:item()"
  std::string advice;
};

// The instructions that can follow `pc` (lopcodes.h, lvm.c).
std::vector<int> successors(const Proto& proto, int pc) {
  const uint32_t i = proto.code[pc];
  switch (opcode(i)) {
    case Opcode::JMP:
      return {pc + 1 + arg_sj(i)};
    case Opcode::FORLOOP:
    case Opcode::TFORLOOP:
      return {pc + 1, pc + 1 - arg_bx(i)};
    case Opcode::FORPREP:
      return {pc + 1, pc + 2 + arg_bx(i)};
    case Opcode::TFORPREP:
      return {pc + 1 + arg_bx(i)};
    case Opcode::EQ:
    case Opcode::LT:
    case Opcode::LE:
    case Opcode::EQK:
    case Opcode::EQI:
    case Opcode::LTI:
    case Opcode::LEI:
    case Opcode::GTI:
    case Opcode::GEI:
    case Opcode::TEST:
    case Opcode::TESTSET:
      return {pc + 1, pc + 2};
    case Opcode::LFALSESKIP:
      return {pc + 2};
    case Opcode::RETURN:
    case Opcode::RETURN0:
    case Opcode::RETURN1:
    case Opcode::TAILCALL:
      return {};
    default:
      return {pc + 1};
  }
}

// Every backward jump closes a loop; jumps back to one target (a `goto
// continue`) are one loop.
std::vector<Loop> find_loops(const Proto& proto) {
  std::map<int, Loop> by_start;
  for (int pc = 0; pc < static_cast<int>(proto.code.size()); pc++) {
    const uint32_t i = proto.code[pc];
    const Opcode op = opcode(i);
    int target = pc + 1;
    if (op == Opcode::JMP) target = pc + 1 + arg_sj(i);
    if (op == Opcode::FORLOOP || op == Opcode::TFORLOOP) target = pc + 1 - arg_bx(i);
    if (target > pc || target < 0) continue;
    Loop& loop = by_start[target];
    loop.start = target;
    loop.end = std::max(loop.end, pc);
    if (op == Opcode::JMP) {
      // while: the condition starts the body; repeat: its first statement.
      loop.header = target;
      if (loop.keyword == std::string_view("for")) loop.keyword = "while";
    } else {
      loop.header = std::max(target - 1, 0);  // FORPREP / TFORPREP, on the `for` line
      loop.keyword = "for";
    }
  }
  std::vector<Loop> loops;
  for (auto& [start, loop] : by_start) loops.push_back(loop);
  return loops;
}

// Whether every pass through `loop` runs `pc`: no path from the body's
// start to the jump back avoids it.
bool on_every_iteration(const Proto& proto, const Loop& loop, int pc) {
  if (pc == loop.start) return true;
  std::vector<bool> seen(loop.end - loop.start + 1, false);
  std::vector<int> stack = {loop.start};
  seen[0] = true;
  while (!stack.empty()) {
    const int at = stack.back();
    stack.pop_back();
    if (at == loop.end) return false;
    for (int next : successors(proto, at)) {
      if (!loop.contains(next) || next == pc || seen[next - loop.start]) continue;
      seen[next - loop.start] = true;
      stack.push_back(next);
    }
  }
  return true;
}

// The innermost loop around `pc`, or null.
const Loop* innermost(const std::vector<Loop>& loops, int pc) {
  const Loop* best = nullptr;
  for (const Loop& loop : loops) {
    if (loop.contains(pc) && (!best || loop.end - loop.start < best->end - best->start)) {
      best = &loop;
    }
  }
  return best;
}

// The name of the local variable in `reg` at `pc` (ldebug.c's rule: the
// n-th active local lives in register n - 1), or "".
std::string local_name(const Proto& proto, int reg, int pc) {
  int active = 0;
  for (const LocalVariable& local : proto.locals) {
    if (local.start_pc > pc) break;
    if (pc < local.end_pc && active++ == reg) return local.name;
  }
  return "";
}

class FunctionChecker {
 public:
  FunctionChecker(const Proto& proto, std::vector<Value> upvalues)
      : proto_(proto), upvalues_(std::move(upvalues)), registers_(256) {}

  // Walks the instructions; then `reads`, `records` and `marks` hold what
  // was found. Nested functions are checked with what their upvalues hold
  // where they are created.
  void run(std::vector<FunctionChecker>& nested) {
    const int count = static_cast<int>(proto_.code.size());
    records_.assign(count, false);
    marks_.assign(count, false);
    computes_.assign(count, false);
    for (int pc = 0; pc < count; pc++) step(pc, nested);
  }

  const Proto& proto() const { return proto_; }
  const std::vector<Read>& reads() const { return reads_; }
  bool records(int pc) const { return records_[pc]; }
  bool marks(int pc) const { return marks_[pc]; }
  // A mark_step, an optimizer's step() or a tensor.sync(...): values read
  // after it in the same iteration are already computed.
  bool computes(int pc) const { return computes_[pc]; }

 private:
  Value& reg(int index) { return registers_[index & 0xFF]; }
  const std::string* constant(int index) const { return string_constant(proto_, index); }
  std::string name_of(int r, int pc) {
    if (is_tensor(reg(r)) && !reg(r).name.empty()) return reg(r).name;
    std::string name = local_name(proto_, r, pc);
    return name.empty() ? "a tensor" : name;
  }

  void step(int pc, std::vector<FunctionChecker>& nested) {
    const uint32_t i = proto_.code[pc];
    const int a = arg_a(i), b = arg_b(i), c = arg_c(i);
    switch (opcode(i)) {
      case Opcode::MOVE:
        reg(a) = reg(b);
        // A copy of a local for a call names the local in messages.
        if (is_tensor(reg(a)) && !local_name(proto_, b, pc).empty()) {
          reg(a).name = local_name(proto_, b, pc);
        }
        return;
      case Opcode::LOADK:
        reg(a) = {};
        if (const std::string* text = constant(arg_bx(i))) reg(a).name = *text;
        return;
      case Opcode::GETUPVAL:
        reg(a) = b < static_cast<int>(upvalues_.size()) ? upvalues_[b] : Value{};
        return;
      case Opcode::GETTABUP: {
        const std::string* key = constant(c);  // always a constant (lopcodes.h)
        const bool env =
            b < static_cast<int>(proto_.upvalue_names.size()) && proto_.upvalue_names[b] == "_ENV";
        reg(a) = env && key ? global(*key, pc) : Value{};
        return;
      }
      case Opcode::GETFIELD: {
        const std::string* key = constant(c);
        reg(a) = key ? field(reg(b), *key, pc) : Value{};
        return;
      }
      case Opcode::SELF:
        self(pc, a, b, arg_k(i) ? constant(c) : nullptr);
        return;
      case Opcode::CALL:
      case Opcode::TAILCALL:
        call(pc, a, b, c);
        return;
      case Opcode::ADDI:
      case Opcode::ADDK:
      case Opcode::SUBK:
      case Opcode::MULK:
      case Opcode::MODK:
      case Opcode::POWK:
      case Opcode::DIVK:
      case Opcode::IDIVK:
      case Opcode::SHRI:
      case Opcode::SHLI:
      case Opcode::UNM:
      case Opcode::BNOT:
        arithmetic(pc, a, is_tensor(reg(b)));
        return;
      case Opcode::ADD:
      case Opcode::SUB:
      case Opcode::MUL:
      case Opcode::MOD:
      case Opcode::POW:
      case Opcode::DIV:
      case Opcode::IDIV:
      case Opcode::BAND:
      case Opcode::BOR:
      case Opcode::BXOR:
      case Opcode::SHL:
      case Opcode::SHR:
        arithmetic(pc, a, is_tensor(reg(b)) || is_tensor(reg(c)));
        return;
      case Opcode::CONCAT:
        for (int k = a; k < a + b; k++) {
          if (is_tensor(reg(k))) {
            add_read(pc, "..", true, fmt::format("`..` of {} (tostring)", name_of(k, pc)),
                     "format it every N steps, or after mark_step");
            break;
          }
        }
        reg(a) = {};
        return;
      case Opcode::LT:
      case Opcode::LE:
        if (is_tensor(reg(a)) || is_tensor(reg(b))) compare(pc, is_tensor(reg(a)) ? a : b);
        return;
      case Opcode::EQ:
        // `t == u` compares whole tensors (a sync); `t == 0` and `t == nil`
        // compare a userdata with a non-object and call no metamethod.
        if (is_tensor(reg(a)) && is_tensor(reg(b))) compare(pc, a);
        return;
      case Opcode::LTI:
      case Opcode::LEI:
      case Opcode::GTI:
      case Opcode::GEI:
        if (is_tensor(reg(a))) compare(pc, a);
        return;
      case Opcode::CLOSURE:
        nested.push_back(FunctionChecker(proto_.protos.at(arg_bx(i)), captures(arg_bx(i))));
        reg(a) = {};
        return;
      case Opcode::VARARG:
      case Opcode::LOADNIL:
        for (int k = a; k < a + std::max(c - 1, 1) + (opcode(i) == Opcode::LOADNIL ? b : 0); k++) {
          reg(k) = {};
        }
        return;
      case Opcode::TFORCALL:
        for (int k = a + 4; k < a + 4 + c; k++) reg(k) = {};
        return;
      case Opcode::FORPREP:
      case Opcode::FORLOOP:
      case Opcode::TFORPREP:
        for (int k = a; k < a + 4; k++) reg(k) = {};
        return;
      case Opcode::SETTABUP:
      case Opcode::SETTABLE:
      case Opcode::SETI:
      case Opcode::SETFIELD:
      case Opcode::SETUPVAL:
      case Opcode::SETLIST:
      case Opcode::MMBIN:
      case Opcode::MMBINI:
      case Opcode::MMBINK:
      case Opcode::JMP:
      case Opcode::EQK:
      case Opcode::EQI:
      case Opcode::TEST:
      case Opcode::CLOSE:
      case Opcode::TBC:
      case Opcode::RETURN:
      case Opcode::RETURN0:
      case Opcode::RETURN1:
      case Opcode::TFORLOOP:
      case Opcode::EXTRAARG:
      case Opcode::VARARGPREP:
        return;  // write no register the checks track
      default:
        reg(a) = {};  // LOADI, GETTABLE, NEWTABLE, NOT, LEN, TESTSET ...
        return;
    }
  }

  Value global(const std::string& name, int pc) {
    if (name == "tensor") return {Kind::tensor_module, name, pc};
    if (name == "nn" || name == "optim") return {Kind::module_table, name, pc};
    if (kLibraryGlobals.count(name)) return {Kind::library, name, pc};
    return {Kind::unknown, name, pc};
  }

  Value field(const Value& table, const std::string& key, int pc) {
    if (key == "mark_step") marks_[pc] = true;
    if (key == "mark_step" || key == "sync") computes_[pc] = true;
    switch (table.kind) {
      case Kind::tensor_module:
        return {Kind::tensor_function, key, pc};
      case Kind::module_table:
        return {Kind::module_table, key, pc};  // nn.Linear: calling it makes a module
      case Kind::library:
        return {Kind::library, table.name + "." + key, pc};  // string.format
      default:
        return {};
    }
  }

  void self(int pc, int a, int b, const std::string* method) {
    const Value receiver = reg(b);
    reg(a + 1) = receiver;
    reg(a) = {Kind::unknown, method ? *method : "", pc};
    if (!method) return;
    // optim's step() ends with tensor.mark_step() (docs/architecture.md §1).
    if (*method == "step" || *method == "mark_step") marks_[pc] = computes_[pc] = true;
    if (kSyncMethods.count(*method) || kMetadataMethods.count(*method)) {
      // Their results are Lua values, never tensors.
      reg(a) = {Kind::library, *method, pc};
      if (kSyncMethods.count(*method)) {
        const int occurrence = method_occurrences_[{proto_.lines[pc], *method}]++;
        add_read(pc, *method, false,
                 fmt::format("{}:{}()", receiver_text(pc, *method, occurrence), *method),
                 "log every N steps, or read it after mark_step");
      }
      return;
    }
    if (*method == "backward") records_[pc] = true;
    if (is_tensor(receiver)) {
      reg(a) = {Kind::tensor_function, *method, pc};  // a tensor method: gives a tensor
    } else if (receiver.kind == Kind::callable && *method == "forward") {
      reg(a) = {Kind::callable, *method, pc};
    }
  }

  void call(int pc, int a, int b, int c) {
    const Value callee = reg(a);
    // With B = 0 the arguments run to the top that the last open call left.
    const int last = b > 0 ? a + b - 1 : std::max(open_top_, a);
    bool tensor_argument = false;
    int tensor_register = -1;
    for (int k = a + 1; k <= last; k++) {
      if (is_tensor(reg(k))) {
        tensor_argument = true;
        if (tensor_register < 0) tensor_register = k;
      }
    }
    Value result;
    switch (callee.kind) {
      case Kind::tensor_function:
        if (!kTensorModuleMeta.count(callee.name)) result.kind = Kind::tensor;
        break;
      case Kind::library:
        // The stdlib's names: "nn" in the lazylua program, "lazylua.nn"
        // everywhere; "lazylua" is the tensor module as loaded by stock Lua.
        if (callee.name == "require" && b == 2 &&
            (reg(a + 1).name == "tensor" || reg(a + 1).name == "lazylua")) {
          result.kind = Kind::tensor_module;
        } else if (callee.name == "require" && b == 2 &&
                   (reg(a + 1).name == "nn" || reg(a + 1).name == "optim" ||
                    reg(a + 1).name == "lazylua.nn" || reg(a + 1).name == "lazylua.optim")) {
          result.kind = Kind::module_table;
        } else if (kPrinting.count(callee.name) && tensor_argument) {
          // The column of the function's own name: `format` of string.format.
          add_read(callee.pc, callee.name.substr(callee.name.rfind('.') + 1), false,
                   fmt::format("{}({})", callee.name, name_of(tensor_register, pc)),
                   "print it every N steps, or after mark_step");
        }
        break;
      case Kind::module_table:
        result.kind = Kind::callable;  // nn.Linear(...), optim.SGD(...)
        break;
      case Kind::callable:
        result.kind = Kind::tensor;  // model(x), criterion(y, t), model:forward(x)
        break;
      case Kind::unknown:
      case Kind::tensor:
      case Kind::tensor_module:
        // A function of the script given a tensor most likely returns one.
        if (tensor_argument) result.kind = Kind::tensor;
        break;
    }
    if (result.kind == Kind::tensor) records_[pc] = true;
    const int results = c == 0 ? 1 : c - 1;
    for (int k = a; k < a + std::max(results, 1); k++) reg(k) = result;
    open_top_ = c == 0 ? a : -1;
  }

  void arithmetic(int pc, int a, bool on_tensor) {
    reg(a) = {};
    if (!on_tensor) return;
    reg(a).kind = Kind::tensor;
    records_[pc] = true;
  }

  void compare(int pc, int tensor_register) {
    static const char* const operators[] = {"<=", ">=", "==", "~=", "<", ">"};
    const std::string line = source_line(proto_.lines[pc]);
    std::string needle = "<";
    size_t best = std::string::npos;
    for (const char* op : operators) {
      const size_t at = line.find(op);
      if (at < best) best = at, needle = op;
    }
    add_read(pc, needle, true,
             fmt::format("{} in a comparison (`{}`)", name_of(tensor_register, pc), needle),
             "compare after mark_step, or keep the test in tensors (tensor.where)");
  }

  // The values that a function created at `pc` captures.
  std::vector<Value> captures(int index) {
    std::vector<Value> values;
    for (const Proto::Upvalue& upvalue : proto_.protos.at(index).upvalues) {
      if (upvalue.in_stack) {
        values.push_back(reg(upvalue.index));
      } else {
        values.push_back(upvalue.index < static_cast<int>(upvalues_.size())
                             ? upvalues_[upvalue.index]
                             : Value{});
      }
    }
    return values;
  }

  // The source text of the receiver of the `occurrence`-th `:method` on
  // the line: names, fields, calls and indexing, back to what starts it.
  std::string receiver_text(int pc, const std::string& method, int occurrence) {
    const std::string line = source_line(proto_.lines[pc]);
    size_t at = line.find(":" + method);
    for (int k = 0; k < occurrence && at != std::string::npos; k++) {
      at = line.find(":" + method, at + 1);
    }
    if (at == std::string::npos) return "a tensor";
    size_t begin = at;
    int depth = 0;
    while (begin > 0) {
      const char ch = line[begin - 1];
      if (ch == ')' || ch == ']') {
        depth++;
      } else if (ch == '(' || ch == '[') {
        if (depth == 0) break;
        depth--;
      } else if (depth == 0 && !(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ||
                                 ch == '.' || ch == ':')) {
        break;
      }
      begin--;
    }
    return begin < at ? line.substr(begin, at - begin) : "a tensor";
  }

  void add_read(int pc, std::string needle, bool is_operator, std::string what,
                std::string advice) {
    reads_.push_back(Read{pc, proto_.lines[pc], std::move(needle), is_operator, std::move(what),
                          std::move(advice)});
  }

 public:
  // Set by lint_chunk: the script's lines, for columns and receivers.
  const std::vector<std::string>* source_lines = nullptr;
  std::string source_line(int line) const {
    return source_lines && line >= 1 && line <= static_cast<int>(source_lines->size())
               ? (*source_lines)[line - 1]
               : std::string();
  }

 private:
  const Proto& proto_;
  std::vector<Value> upvalues_;
  std::vector<Value> registers_;
  std::vector<Read> reads_;
  std::vector<bool> records_;
  std::vector<bool> marks_;
  std::vector<bool> computes_;
  int open_top_ = -1;
  std::map<std::pair<int, std::string>, int> method_occurrences_;  // (line, method) -> seen
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

bool is_name_char(char ch) {
  return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
}

// The 1-based column of the `occurrence`-th `needle` on `line` (a whole
// word unless it is an operator), or of the line's first non-blank.
int column_of(const std::string& line, const std::string& needle, bool is_operator,
              int occurrence) {
  size_t at = 0;
  int seen = 0;
  while ((at = line.find(needle, at)) != std::string::npos) {
    const bool word =
        is_operator ||
        ((at == 0 || !is_name_char(line[at - 1])) &&
         (at + needle.size() >= line.size() || !is_name_char(line[at + needle.size()])));
    if (word && seen++ == occurrence) return static_cast<int>(at) + 1;
    at += needle.size();
  }
  const size_t first = line.find_first_not_of(" \t");
  return first == std::string::npos ? 1 : static_cast<int>(first) + 1;
}

}  // namespace

std::vector<Finding> lint_chunk(const Proto& main, const std::string& text) {
  const std::vector<std::string> lines = split_lines(text);
  auto line_text = [&](int line) {
    return line >= 1 && line <= static_cast<int>(lines.size()) ? lines[line - 1] : std::string();
  };
  std::vector<Finding> findings;
  std::map<std::pair<int, std::string>, int> occurrences;  // (line, needle) -> seen
  std::vector<FunctionChecker> pending = {FunctionChecker(main, {})};
  while (!pending.empty()) {
    FunctionChecker checker = std::move(pending.back());
    pending.pop_back();
    checker.source_lines = &lines;
    std::vector<FunctionChecker> nested;
    checker.run(nested);
    for (FunctionChecker& inner : nested) pending.push_back(std::move(inner));
    const Proto& proto = checker.proto();
    const std::vector<Loop> loops = find_loops(proto);

    std::vector<bool> loop_syncs(loops.size(), false);
    for (const Read& read : checker.reads()) {
      const int column = column_of(line_text(read.line), read.needle, read.needle_is_operator,
                                   occurrences[{read.line, read.needle}]++);
      const Loop* loop = innermost(loops, read.pc);
      if (!loop || !on_every_iteration(proto, *loop, read.pc)) continue;
      // A read after a barrier or tensor.sync earlier in the iteration (an
      // inner loop's optimizer step included) most likely finds the value
      // computed: no sync of its own.
      bool computed_before = false;
      for (int pc = loop->start; pc < read.pc && !computed_before; pc++) {
        computed_before = checker.computes(pc);
      }
      if (computed_before) continue;
      loop_syncs[loop - loops.data()] = true;
      findings.push_back({read.line, column,
                          fmt::format("{} syncs on every iteration of the loop at line {}: {}",
                                      read.what, proto.lines[loop->header], read.advice)});
    }
    // A loop that records ops and never ends the step grows one graph. Only
    // the outermost such loop is named; a sync in it every iteration (said
    // above) cuts the graph already.
    for (size_t k = 0; k < loops.size(); k++) {
      const Loop& loop = loops[k];
      const bool nested_loop = std::any_of(loops.begin(), loops.end(), [&](const Loop& outer) {
        return &outer != &loop && outer.contains(loop.start) && outer.contains(loop.end);
      });
      if (nested_loop || loop_syncs[k]) continue;
      bool records = false, marks = false;
      for (int pc = loop.start; pc <= loop.end; pc++) {
        records |= checker.records(pc);
        marks |= checker.marks(pc) || checker.computes(pc);  // tensor.sync cuts it too
      }
      if (!records || marks) continue;
      const int line = proto.lines[loop.header];
      findings.push_back(
          {line, column_of(line_text(line), loop.keyword, false, 0),
           "this loop records tensor ops but never calls tensor.mark_step() (or an optimizer's "
           "step()): its graph grows every iteration"});
    }
  }
  std::sort(findings.begin(), findings.end(), [](const Finding& x, const Finding& y) {
    return std::tie(x.line, x.column, x.message) < std::tie(y.line, y.column, y.message);
  });
  return findings;
}

}  // namespace lazylua::lint
