// repl_pty_test.cpp - drives the `lazylua` REPL through a pseudo-terminal,
// as a person at a terminal would: auto-print, multi-line input, Ctrl-C
// while a chunk runs and at the prompt, Tab completion, the history file and
// Ctrl-D. Every wait is bounded (poll with a deadline), so a hang fails the
// test instead of hanging the run.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kWaitLimit{10};

// Makes control characters visible in failure messages.
std::string printable(const std::string& text) {
  std::string shown;
  for (unsigned char c : text) {
    if (c == '\n') {
      shown += "\\n\n";
    } else if (c == '\r') {
      shown += "\\r";
    } else if (c < 32 || c == 127) {
      char code[8];
      snprintf(code, sizeof code, "\\x%02x", c);
      shown += code;
    } else {
      shown += char(c);
    }
  }
  return shown;
}

// A private HOME (and history file) for one test.
class TemporaryHome {
 public:
  TemporaryHome() {
    char pattern[] = "/tmp/lazylua_repl_test_XXXXXX";
    const char* made = mkdtemp(pattern);
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TemporaryHome() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string history_file() const { return path_ + "/history"; }

 private:
  std::string path_;
};

// One run of lazylua on a pty. The session reads the pty into `output_`;
// expect() searches for text after what earlier expect() calls consumed.
class ReplSession {
 public:
  // `history_variable`: the value of LAZYLUA_HISTORY; kHomeHistory for the
  // test's own file, nullopt to leave the variable unset.
  static constexpr const char* kHomeHistory = "<home>/history";
  // `extra_environment`: more NAME=value settings, e.g. LAZYLUA_COMPILE=sync.
  explicit ReplSession(const TemporaryHome& home, std::vector<std::string> arguments = {},
                       std::optional<std::string> history_variable = kHomeHistory,
                       std::vector<std::string> extra_environment = {}) {
    // Build everything the child needs before fork: after fork it only execs.
    std::vector<std::string> environment = {
        "HOME=" + home.path(),
        "TERM=dumb",
        "PATH=/usr/bin:/bin",
        "LAZYLUA_CACHE_DIR=" + home.path() + "/cache",
    };
    if (history_variable == kHomeHistory) history_variable = home.history_file();
    if (history_variable) environment.push_back("LAZYLUA_HISTORY=" + *history_variable);
    environment.insert(environment.end(), extra_environment.begin(), extra_environment.end());
    std::vector<std::string> argv_strings = {LAZYLUA_BINARY};
    argv_strings.insert(argv_strings.end(), arguments.begin(), arguments.end());
    std::vector<char*> argv;
    for (auto& argument : argv_strings) argv.push_back(argument.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& setting : environment) envp.push_back(setting.data());
    envp.push_back(nullptr);

    struct winsize size = {};
    size.ws_row = 24;
    size.ws_col = 80;
    pid_ = forkpty(&master_fd_, nullptr, nullptr, &size);
    if (pid_ < 0) throw std::runtime_error("forkpty failed");
    if (pid_ == 0) {
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    fcntl(master_fd_, F_SETFL, fcntl(master_fd_, F_GETFL) | O_NONBLOCK);
  }

  ~ReplSession() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_fd_ >= 0) close(master_fd_);
  }

  void send(const std::string& keys) {
    size_t written = 0;
    auto deadline = Clock::now() + kWaitLimit;
    while (written < keys.size() && Clock::now() < deadline) {
      ssize_t count = write(master_fd_, keys.data() + written, keys.size() - written);
      if (count > 0) {
        written += size_t(count);
      } else if (count < 0 && errno != EAGAIN && errno != EINTR) {
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }

  // Waits until `text` appears after the consumed part of the output; on
  // success consumes up to the end of the match.
  ::testing::AssertionResult expect(const std::string& text) {
    auto deadline = Clock::now() + kWaitLimit;
    for (;;) {
      size_t found = output_.find(text, consumed_);
      if (found != std::string::npos) {
        consumed_ = found + text.size();
        return ::testing::AssertionSuccess();
      }
      if (!read_some(deadline)) {
        return ::testing::AssertionFailure()
               << "waited for \"" << printable(text) << "\"; output after the consumed part:\n"
               << printable(output_.substr(consumed_)) << "\nwhole output:\n"
               << printable(output_);
      }
    }
  }

  // Reads whatever arrives for `duration` (to check that something did not).
  std::string collect_for(std::chrono::milliseconds duration) {
    size_t start = output_.size();
    auto deadline = Clock::now() + duration;
    while (read_some(deadline)) {
    }
    return output_.substr(start);
  }

  // Waits for the program to end; returns its wait status, or -1 on timeout.
  int wait_exit() {
    auto deadline = Clock::now() + kWaitLimit;
    while (Clock::now() < deadline) {
      read_some(Clock::now() + std::chrono::milliseconds(50));
      int status = 0;
      pid_t done = waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        exited_ = true;
        return status;
      }
    }
    return -1;
  }

  const std::string& output() const { return output_; }
  std::string unconsumed() const { return output_.substr(consumed_); }

 private:
  // Appends output read before `deadline`; false if nothing more came.
  bool read_some(Clock::time_point deadline) {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      struct pollfd ready = {master_fd_, POLLIN, 0};
      int polled = poll(&ready, 1, int(left.count()));
      if (polled < 0 && errno == EINTR) continue;
      if (polled <= 0) return false;
      char buffer[4096];
      ssize_t count = read(master_fd_, buffer, sizeof buffer);
      if (count > 0) {
        output_.append(buffer, size_t(count));
        return true;
      }
      if (count < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      // EIO: the child closed the terminal. Do not spin until the deadline.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return false;
    }
  }

  int master_fd_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string output_;
  size_t consumed_ = 0;
};

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

bool exited_with(int status, int code) {
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == code;
}

TEST(ReplPty, ShowsVersionAndPrompt) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("lazylua "));
  ASSERT_TRUE(repl.expect("Lua 5.4"));
  ASSERT_TRUE(repl.expect("> "));
}

TEST(ReplPty, PrintsExpressionValues) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  repl.send("1+1\r");
  ASSERT_TRUE(repl.expect("1+1\r\n2\r\n> "));
  repl.send("=6*7\r");
  ASSERT_TRUE(repl.expect("\r\n42\r\n> "));
  repl.send("'a', nil, 3\r");
  ASSERT_TRUE(repl.expect("\r\na\tnil\t3\r\n> "));
  repl.send("x = 5\r");  // a statement prints nothing
  ASSERT_TRUE(repl.expect("x = 5\r\n> "));
}

TEST(ReplPty, ContinuesIncompleteChunks) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  repl.send("function f()\r");
  ASSERT_TRUE(repl.expect(">> "));
  repl.send("return 7 end\r");
  ASSERT_TRUE(repl.expect("\r\n> "));
  repl.send("f()\r");
  ASSERT_TRUE(repl.expect("\r\n7\r\n> "));
}

TEST(ReplPty, ErrorsPrintMessageAndTracebackWithoutProgramName) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  repl.send("error('boom')\r");
  ASSERT_TRUE(repl.expect("\r\nstdin:1: boom\r\nstack traceback:"));
  ASSERT_TRUE(repl.expect("> "));
  EXPECT_EQ(repl.output().find("lazylua: stdin"), std::string::npos) << printable(repl.output());
}

TEST(ReplPty, CtrlCInterruptsRunningChunk) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  // The chunk says when it runs, so Ctrl-C surely reaches the running loop.
  repl.send("io.write('spin', 'ning\\n') while true do end\r");
  ASSERT_TRUE(repl.expect("spinning\r\n"));
  repl.send("\x03");
  ASSERT_TRUE(repl.expect("interrupted!"));
  ASSERT_TRUE(repl.expect("stack traceback:"));
  ASSERT_TRUE(repl.expect("> "));
  repl.send("print(40+2)\r");
  ASSERT_TRUE(repl.expect("\r\n42\r\n> "));
  // Interrupting again works too (the handler is reinstalled per chunk),
  // also inside a function called from the chunk.
  repl.send("function spin() io.write('spin', 'ning\\n') for i = 1, math.huge do end end\r");
  ASSERT_TRUE(repl.expect("> "));
  repl.send("spin()\r");
  ASSERT_TRUE(repl.expect("spinning\r\n"));
  repl.send("\x03");
  ASSERT_TRUE(repl.expect("interrupted!"));
  ASSERT_TRUE(repl.expect("in function 'spin'"));
  ASSERT_TRUE(repl.expect("> "));
  repl.send("print('alive')\r");
  ASSERT_TRUE(repl.expect("\r\nalive\r\n> "));
}

// Ctrl-C inside long tensor work (issue 14): the time from the key to the
// prompt after "interrupted!". The goal is 0.2 s; the assertion allows 1 s
// because the machines that run the tests are shared and a loaded one can
// delay any process by a few hundred milliseconds. The measured figure is
// printed so a slow interrupt shows in the log before it fails anything.
constexpr double kInterruptGoalSeconds = 0.2;
constexpr double kInterruptBoundSeconds = 1.0;

// Sends Ctrl-C and waits for "interrupted!" and the prompt after its
// traceback; returns the seconds that took (a large number on failure).
double seconds_to_interrupt(ReplSession& repl, const char* what) {
  const auto sent = Clock::now();
  repl.send("\x03");
  const bool interrupted = repl.expect("interrupted!");
  EXPECT_TRUE(interrupted) << what;
  const bool prompt = interrupted && repl.expect("\r\n> ");
  EXPECT_TRUE(prompt) << what;
  if (!prompt) return 1e9;
  const double seconds = std::chrono::duration<double>(Clock::now() - sent).count();
  std::cout << "[ measured ] Ctrl-C during " << what << ": " << seconds * 1000
            << " ms to the prompt"
            << " (goal " << kInterruptGoalSeconds * 1000 << " ms)" << std::endl;
  return seconds;
}

// After an interrupt: the variables set before are there, nothing is left
// pending (the interrupted graph's temporaries are gone), and new work runs.
void expect_intact_after_interrupt(ReplSession& repl) {
  repl.send("=keep + 1\r");
  ASSERT_TRUE(repl.expect("\r\n42\r\n> "));
  repl.send("=#tensor.pending()\r");
  ASSERT_TRUE(repl.expect("\r\n0\r\n"));
  ASSERT_TRUE(repl.expect("> "));  // after a status line if it took long
  repl.send("=(tensor.ones(3, 3):matmul(tensor.ones(3, 3)) + 1):sum():item()\r");
  ASSERT_TRUE(repl.expect("\r\n36.0\r\n"));
  ASSERT_TRUE(repl.expect("> "));  // after a status line if it took long
}

// Compiled code (LAZYLUA_COMPILE=sync) running one fused elementwise graph of
// 72 ops over 16M floats, a second or more per sync here. The first sync
// compiles it; the loop prints a marker before it syncs the same graph again.
TEST(ReplPty, CtrlCStopsCompiledGraphQuickly) {
  TemporaryHome home;
  ReplSession repl(home, {}, ReplSession::kHomeHistory, {"LAZYLUA_COMPILE=sync"});
  ASSERT_TRUE(repl.expect("> "));
  repl.send("keep = 41; x = tensor.randn(16777216)\r");
  ASSERT_TRUE(repl.expect("\r\n> "));
  repl.send(
      "function f(v) for i = 1, 24 do v = (v * 1.0001 + 0.5):tanh():sin() end return v end\r");
  ASSERT_TRUE(repl.expect("\r\n> "));
  repl.send("y = f(x); tensor.mark_step(); io.write('comp', 'iled\\n')\r");
  ASSERT_TRUE(repl.expect("compiled\r\n"));
  ASSERT_TRUE(repl.expect("\r\n> "));
  repl.send("io.write('run', 'ning\\n') for i = 1, 100 do y = f(x); tensor.mark_step() end\r");
  ASSERT_TRUE(repl.expect("running\r\n"));
  repl.collect_for(std::chrono::milliseconds(300));  // well inside the first sync
  EXPECT_LT(seconds_to_interrupt(repl, "a compiled graph"), kInterruptBoundSeconds);
  // The interrupted sync's value of y stays pending (its 96 ops); the next
  // sync computes it.
  repl.send("=#tensor.pending()\r");
  ASSERT_TRUE(repl.expect("\r\n96\r\n"));
  ASSERT_TRUE(repl.expect("> "));  // after a status line if it took long
  repl.send("tensor.mark_step(); print(#tensor.pending(), y:numel())\r");
  ASSERT_TRUE(repl.expect("\r\n0\t16777216\r\n"));
  expect_intact_after_interrupt(repl);
}

// OpenBLAS: products of 3000 x 3000 floats, 54 GFLOP each.
TEST(ReplPty, CtrlCStopsMatrixProductsQuickly) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  repl.send("keep = 41; a = tensor.randn(3000, 3000); tensor.mark_step()\r");
  ASSERT_TRUE(repl.expect("\r\n> "));
  repl.send(
      "io.write('multi', 'plying\\n') for i = 1, 100 do local p = a:matmul(a):matmul(a); "
      "tensor.mark_step() end\r");
  ASSERT_TRUE(repl.expect("multiplying\r\n"));
  repl.collect_for(std::chrono::milliseconds(300));
  EXPECT_LT(seconds_to_interrupt(repl, "matrix products"), kInterruptBoundSeconds);
  expect_intact_after_interrupt(repl);
}

// Ctrl-C pressed three times in quick succession while tensor work runs:
// the REPL stops the chunk once and lives (lua.c would exit on the second).
TEST(ReplPty, RepeatedCtrlCNeverKillsRepl) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  repl.send("keep = 41; a = tensor.randn(2000, 2000); tensor.mark_step()\r");
  ASSERT_TRUE(repl.expect("\r\n> "));
  for (int round = 0; round < 2; round++) {
    repl.send(
        "io.write('multi', 'plying\\n') for i = 1, 1000 do local p = a:matmul(a):tanh(); "
        "tensor.mark_step() end\r");
    ASSERT_TRUE(repl.expect("multiplying\r\n"));
    repl.collect_for(std::chrono::milliseconds(200));
    const auto sent = Clock::now();
    repl.send("\x03");
    std::this_thread::sleep_for(std::chrono::milliseconds(round == 0 ? 20 : 1));
    repl.send("\x03");
    std::this_thread::sleep_for(std::chrono::milliseconds(round == 0 ? 20 : 1));
    repl.send("\x03");
    ASSERT_TRUE(repl.expect("interrupted!"));
    ASSERT_TRUE(repl.expect("\r\n> "));
    std::cout << "[ measured ] three Ctrl-C: "
              << std::chrono::duration<double>(Clock::now() - sent).count() * 1000
              << " ms to the prompt" << std::endl;
    // Ctrl-C that arrived after the chunk stopped only clears the line.
    repl.collect_for(std::chrono::milliseconds(200));
    expect_intact_after_interrupt(repl);
  }
  repl.send("\x04");
  EXPECT_TRUE(exited_with(repl.wait_exit(), 0));
}

TEST(ReplPty, CtrlCInterruptsBusyCoroutine) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  // The hook lua.c sets is the main thread's; a loop inside a coroutine
  // never runs an instruction there.
  repl.send("coroutine.wrap(function() io.write('spin', 'ning\\n') while true do end end)()\r");
  ASSERT_TRUE(repl.expect("spinning\r\n"));
  repl.send("\x03");
  ASSERT_TRUE(repl.expect("interrupted!"));
  ASSERT_TRUE(repl.expect("> "));
  // Nested, with the inner error caught by its resumer.
  repl.send(
      "coroutine.wrap(function() io.write('spin', 'ning\\n') while true do "
      "coroutine.resume(coroutine.create(function() while true do end end)) end end)()\r");
  ASSERT_TRUE(repl.expect("spinning\r\n"));
  repl.send("\x03");
  ASSERT_TRUE(repl.expect("interrupted!"));
  ASSERT_TRUE(repl.expect("> "));
  repl.send("print(coroutine.wrap(function() return 40 + 2 end)())\r");
  ASSERT_TRUE(repl.expect("\r\n42\r\n> "));
}

TEST(ReplPty, CtrlCAtPromptDiscardsLine) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  repl.send("print('half' .. 'typed')");
  ASSERT_TRUE(repl.expect("'typed')"));
  repl.send("\x03");
  ASSERT_TRUE(repl.expect("\r\n> "));
  repl.send("print(1+2)\r");
  ASSERT_TRUE(repl.expect("\r\n3\r\n> "));
  EXPECT_EQ(repl.output().find("halftyped"), std::string::npos) << printable(repl.output());

  // A pending multi-line chunk is discarded as well.
  repl.send("if true then\r");
  ASSERT_TRUE(repl.expect(">> "));
  repl.send("print('inside')\r");
  ASSERT_TRUE(repl.expect(">> "));
  repl.send("\x03");
  ASSERT_TRUE(repl.expect("\r\n> "));
  repl.send("print(5)\r");  // would be a continuation line if not discarded
  ASSERT_TRUE(repl.expect("\r\n5\r\n> "));
  EXPECT_EQ(repl.output().find("inside\r\n"), std::string::npos) << printable(repl.output());

  // Ctrl-C on an empty line just shows a new prompt, and the program lives.
  repl.send("\x03");
  ASSERT_TRUE(repl.expect("\r\n> "));
  repl.send("=1\r");
  ASSERT_TRUE(repl.expect("\r\n1\r\n> "));
}

TEST(ReplPty, TabCompletesGlobalsFieldsAndMethods) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  // string.for<Tab> becomes string.format( (a function gets its parenthesis).
  repl.send("string.for\t");
  ASSERT_TRUE(repl.expect("mat("));
  repl.send("'%d', 5)\r");
  ASSERT_TRUE(repl.expect("\r\n5\r\n> "));

  // A field of a library table, then a global name.
  repl.send("=type(coroutine.runn\t))\r");
  ASSERT_TRUE(repl.expect("coroutine.running())\r\nthread\r\n> "));
  repl.send("=tostri\t42)\r");
  ASSERT_TRUE(repl.expect("\r\n42\r\n> "));

  // Fields through nested tables.
  repl.send("a = {b = {c = {value_of_c = 99}}}\r");
  ASSERT_TRUE(repl.expect("> "));
  repl.send("=a.b.c.valu\t\r");
  ASSERT_TRUE(repl.expect("\r\n99\r\n> "));

  // Methods through the metatable's __index table.
  repl.send("obj = setmetatable({}, {__index = {greet = function(self) return 'hi' end}})\r");
  ASSERT_TRUE(repl.expect("> "));
  repl.send("=obj:gr\t)\r");
  ASSERT_TRUE(repl.expect("\r\nhi\r\n> "));

  // Methods of a string value come from the string table.
  repl.send("s = 'abc'\r");
  ASSERT_TRUE(repl.expect("> "));
  repl.send("=s:upp\t)\r");
  ASSERT_TRUE(repl.expect("\r\nABC\r\n> "));
}

TEST(ReplPty, TabCompletesTensorMethods) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  repl.send("t = tensor.zeros(2, 2)\r");
  ASSERT_TRUE(repl.expect("> "));
  repl.send("=type(t:matm\tt))\r");
  ASSERT_TRUE(repl.expect("t:matmul(t))\r\nuserdata\r\n> "));
}

TEST(ReplPty, HistoryIsSavedAndRecalled) {
  TemporaryHome home;
  {
    ReplSession repl(home);
    ASSERT_TRUE(repl.expect("> "));
    repl.send("history_marker = 31\r");
    ASSERT_TRUE(repl.expect("> "));
    repl.send("function g()\r");
    ASSERT_TRUE(repl.expect(">> "));
    repl.send("return 8 end\r");
    ASSERT_TRUE(repl.expect("\r\n> "));
    repl.send("\x04");
    EXPECT_TRUE(exited_with(repl.wait_exit(), 0));
  }
  std::string history = read_file(home.history_file());
  EXPECT_NE(history.find("history_marker = 31"), std::string::npos) << history;
  EXPECT_NE(history.find("function g()\nreturn 8 end"), std::string::npos) << history;

  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  repl.send("\x1b[A");  // Up: the multi-line chunk, as one entry
  ASSERT_TRUE(repl.expect("return 8 end"));
  repl.send("\x1b[A");  // Up again: the line before it
  ASSERT_TRUE(repl.expect("history_marker = 31"));
  repl.send("\r");
  ASSERT_TRUE(repl.expect("\r\n> "));
  repl.send("=history_marker\r");
  ASSERT_TRUE(repl.expect("\r\n31\r\n> "));
}

TEST(ReplPty, UnusableHistoryPathIsIgnored) {
  TemporaryHome home;
  ReplSession repl(home, {}, home.path() + "/no/such/dir/history");
  ASSERT_TRUE(repl.expect("> "));
  repl.send("=10+1\r");
  ASSERT_TRUE(repl.expect("\r\n11\r\n> "));
  repl.send("\x04");
  EXPECT_TRUE(exited_with(repl.wait_exit(), 0));
  EXPECT_FALSE(fs::exists(home.path() + "/no"));
}

TEST(ReplPty, EmptyHistoryVariableMeansNoHistoryFile) {
  TemporaryHome home;
  ReplSession repl(home, {}, std::string());
  ASSERT_TRUE(repl.expect("> "));
  repl.send("=2+3\r");
  ASSERT_TRUE(repl.expect("\r\n5\r\n> "));
  repl.send("\x04");
  EXPECT_TRUE(exited_with(repl.wait_exit(), 0));
  EXPECT_FALSE(fs::exists(home.path() + "/.lazylua_history"));
  EXPECT_FALSE(fs::exists(home.history_file()));
}

TEST(ReplPty, DefaultHistoryFileIsInHome) {
  TemporaryHome home;
  {
    ReplSession repl(home, {}, std::nullopt);
    ASSERT_TRUE(repl.expect("> "));
    repl.send("default_history_line = 1\r");
    ASSERT_TRUE(repl.expect("\r\n> "));
    repl.send("\x04");
    EXPECT_TRUE(exited_with(repl.wait_exit(), 0));
  }
  std::string history = read_file(home.path() + "/.lazylua_history");
  EXPECT_NE(history.find("default_history_line = 1"), std::string::npos) << history;
}

TEST(ReplPty, CtrlDExitsWithStatusZero) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  repl.send("\x04");
  int status = repl.wait_exit();
  EXPECT_TRUE(exited_with(status, 0)) << "wait status " << status << "\n"
                                      << printable(repl.output());
}

TEST(ReplPty, InteractiveAfterScriptWithDashI) {
  TemporaryHome home;
  ReplSession repl(home, {"-i", "-e", "preset = 'from -e'"});
  ASSERT_TRUE(repl.expect("> "));
  repl.send("preset\r");
  ASSERT_TRUE(repl.expect("\r\nfrom -e\r\n> "));
  repl.send("os.exit(4)\r");
  EXPECT_TRUE(exited_with(repl.wait_exit(), 4));
}

}  // namespace

// After a slow command that touched tensors, a status line splits its time;
// fast commands and commands without tensors get none; `%status off` turns
// it off; `%pending` lists the ops waiting for a sync, with their lines.
TEST(ReplPty, StatusLineAndShortcuts) {
  TemporaryHome home;
  ReplSession repl(home);
  ASSERT_TRUE(repl.expect("> "));
  repl.send("x = tensor.randn(400, 400)\r");
  ASSERT_TRUE(repl.expect("> "));
  // 30 products of 400 x 400 (3.8 GFLOP) and a sync: well over 50 ms here.
  repl.send("for i = 1, 30 do x = (x:matmul(x) * 0.01):tanh() end; tensor.mark_step()\r");
  ASSERT_TRUE(repl.expect("\r\n["));
  ASSERT_TRUE(repl.expect(" (90 ops); compile "));
  ASSERT_TRUE(repl.expect("; run "));
  ASSERT_TRUE(repl.expect("; 1 sync]\r\n> "));
  repl.send("1 + 1\r");
  ASSERT_TRUE(repl.expect("\r\n2\r\n> "));
  repl.send("y = x * 2\r");
  ASSERT_TRUE(repl.expect("y = x * 2\r\n> "));
  repl.send("%pending\r");
  ASSERT_TRUE(repl.expect("  mul            f32[400x400]  stdin:1\r\n1 pending op\r\n> "));
  repl.send("%status off\r");
  ASSERT_TRUE(repl.expect("> "));
  repl.send("for i = 1, 30 do x = (x:matmul(x) * 0.01):tanh() end; tensor.mark_step()\r");
  ASSERT_TRUE(repl.expect("\r\n> "));
  repl.send("'after'\r");
  ASSERT_TRUE(repl.expect("\r\nafter\r\n> "));
  EXPECT_EQ(repl.output().find("; 1 sync]", repl.output().find("%status off")), std::string::npos)
      << printable(repl.output());
  repl.send("%nonsense\r");
  ASSERT_TRUE(repl.expect("unknown shortcut %nonsense; %help lists them"));
}
