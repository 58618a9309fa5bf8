// toolchain.cpp - running the system C compiler and loading what it builds.
#include "compiler/toolchain.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>

#include <fmt/format.h>

#include "compiler/disk_cache.h"
#include "tensor/interrupt.h"
#include "tensor/thread_pool.h"

extern char** environ;

namespace lazylua::compiler {

namespace {

// -O2 vectorizes (GCC 12 enables the cheap vectorizer cost model at -O2) and
// keeps a 100-kernel graph well under 0.5 s; -O3 took 2.5 s on the same file.
// -fno-math-errno lets sqrtf and friends inline and vectorize;
// -fno-semantic-interposition lets calls between generated functions inline;
// -pipe saves the assembler's temporary file. No -g: debug info slows the build.
// -mprefer-vector-width=512: on CPUs with AVX-512, GCC 12 tunes for 256-bit
// vectors, and then leaves every loop that calls a kernel_math.h function
// (an AVX-512 simd clone) scalar: W1 ran 16x slower than with this flag.
// Elsewhere the flag changes nothing.
// -ffp-contract=off: GCC's GNU C mode fuses a*b + c into one FMA (one
// rounding), and the eager kernels (built with -ffp-contract=off too) do
// not: the same graph gave other bits once its native code was ready.
// kernel_math.h asks for its FMAs explicitly.
const char* const kDefaultFlags[] = {"-O2",
                                     "-march=native",
#if defined(__x86_64__)
                                     "-mprefer-vector-width=512",
#endif
                                     "-ffp-contract=off",
                                     "-fPIC",
                                     "-shared",
                                     "-fno-math-errno",
                                     "-fno-semantic-interposition",
                                     "-pipe"};

// How much of a compiler's output we keep for an error message.
constexpr size_t kMaxMessageBytes = 2048;

std::vector<std::string> split_blanks(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream stream(text);
  for (std::string word; stream >> word;) words.push_back(word);
  return words;
}

std::string join(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words) {
    if (!text.empty()) text += ' ';
    text += word;
  }
  return text;
}

std::string first_line(const std::string& text) {
  size_t end = text.find('\n');
  return text.substr(0, end == std::string::npos ? text.size() : end);
}

// What a child process did: started or not, and how it ended.
struct ProcessOutcome {
  bool succeeded = false;    // ran and exited with status 0
  bool interrupted = false;  // stopped for an interrupt (see run_process)
  std::string output;        // its stdout and stderr, first kMaxMessageBytes
  std::string failure;       // when it did not start or did not exit 0
};

// The process groups of running compilers: killed when lazylua exits, so
// no compiler outlives the interpreter that started it (and a killed
// lazylua's direct child dies by PR_SET_PDEATHSIG).
std::mutex running_mutex;
std::vector<pid_t>* running_groups = new std::vector<pid_t>();  // never freed: used at exit

void kill_running_compilers() {
  std::lock_guard lock(running_mutex);
  for (pid_t group : *running_groups) kill(-group, SIGKILL);
}

}  // namespace

int compile_timeout_seconds() {
  static const int seconds = [] {
    const char* text = std::getenv("LAZYLUA_CC_TIMEOUT");
    const int value = text ? std::atoi(text) : 0;
    return value > 0 ? value : 60;
  }();
  return seconds;
}

void kill_compilers_at_exit() {
  static std::once_flag installed;
  std::call_once(installed, [] { std::atexit(kill_running_compilers); });
}

namespace {

void track(pid_t group, bool running) {
  kill_compilers_at_exit();
  std::lock_guard lock(running_mutex);
  if (running) {
    running_groups->push_back(group);
  } else {
    running_groups->erase(std::remove(running_groups->begin(), running_groups->end(), group),
                          running_groups->end());
  }
}

// Starts argv in its own process group (a Ctrl-C meant for the interpreter
// must not kill a build half-way) with a clean signal mask, default SIGPIPE
// (the host may block or ignore signals), stdin from `input` and stdout and
// stderr into write_end, and a parent-death signal. vfork rather than
// posix_spawn for that signal (posix_spawn cannot set it); like posix_spawn's
// own vfork, the child only makes system calls until exec, and shares no
// signal handlers with us.
pid_t start_child(const std::vector<std::string>& argv, const char* input, int write_end,
                  int* spawn_error) {
  std::vector<char*> arguments;
  for (const std::string& word : argv) arguments.push_back(const_cast<char*>(word.c_str()));
  arguments.push_back(nullptr);
  // A bare name is looked up in PATH, like a shell would.
  const bool search_path = argv[0].find('/') == std::string::npos;
  const pid_t parent = getpid();
  int error_pipe[2];  // the child reports a failed exec through it
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    *spawn_error = errno;
    return -1;
  }
  const pid_t child = vfork();
  if (child < 0) {
    *spawn_error = errno;
    close(error_pipe[0]);
    close(error_pipe[1]);
    return -1;
  }
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    const int in = open(input, O_RDONLY);
    if (in >= 0) dup2(in, 0);
    dup2(write_end, 1);
    dup2(write_end, 2);
    search_path ? execvp(arguments[0], arguments.data()) : execv(arguments[0], arguments.data());
    const int failure = errno;
    ssize_t ignored = write(error_pipe[1], &failure, sizeof failure);
    (void)ignored;
    _exit(127);
  }
  close(error_pipe[1]);
  int failure = 0;
  ssize_t count;
  do {
    count = read(error_pipe[0], &failure, sizeof failure);
  } while (count < 0 && errno == EINTR);
  close(error_pipe[0]);
  if (count == static_cast<ssize_t>(sizeof failure)) {  // exec failed
    waitpid(child, nullptr, 0);
    *spawn_error = failure;
    return -1;
  }
  setpgid(child, child);  // also here: no race with the kill of the group
  return child;
}

// Ends a compiler that must not finish: SIGTERM to its process group first,
// which gcc's driver catches to delete its own temporary files (/tmp/cc*.o),
// then SIGKILL if the driver has not exited within 50 ms. Then waits (at
// most 50 ms more) for the rest of the group (cc1, as, ld) to be gone, so
// none of them still writes a file the caller is about to remove. Returns
// waitpid's result for the driver, its status in *status.
pid_t stop_process_group(pid_t child, int* status) {
  constexpr auto kGrace = std::chrono::milliseconds(50);
  kill(-child, SIGTERM);
  auto until = std::chrono::steady_clock::now() + kGrace;
  pid_t waited = 0;
  while (waited == 0 && std::chrono::steady_clock::now() < until) {
    waited = waitpid(child, status, WNOHANG);
    if (waited == 0) usleep(1000);
  }
  kill(-child, SIGKILL);
  while (waited == 0 || (waited < 0 && errno == EINTR)) waited = waitpid(child, status, 0);
  until = std::chrono::steady_clock::now() + kGrace;
  while (kill(-child, 0) == 0 && std::chrono::steady_clock::now() < until) usleep(1000);
  return waited;
}

// Runs argv with stdin from stdin_path ("" = /dev/null) and stdout + stderr
// into a pipe we drain (so a chatty compiler never blocks on a full pipe),
// for at most compile_timeout_seconds(). On a thread with an interrupt flag
// (a sync compile on the interpreter's thread, tensor/interrupt.h) it looks
// at the flag every 10 ms and stops the compiler when it is set.
// The pipe is close-on-exec in this process, so children that other threads
// spawn meanwhile do not hold its write end open and delay our EOF.
ProcessOutcome run_process(const std::vector<std::string>& argv, const std::string& stdin_path) {
  ProcessOutcome outcome;
  int pipe_ends[2];
  if (pipe2(pipe_ends, O_CLOEXEC) != 0) {
    outcome.failure = "cannot create a pipe: " + errno_text(errno);
    return outcome;
  }
  const char* input = stdin_path.empty() ? "/dev/null" : stdin_path.c_str();
  int spawn_error = 0;
  const pid_t child = start_child(argv, input, pipe_ends[1], &spawn_error);
  close(pipe_ends[1]);
  if (child < 0) {
    close(pipe_ends[0]);
    outcome.failure = "cannot run '" + argv[0] + "': " + errno_text(spawn_error);
    return outcome;
  }
  track(child, true);

  char buffer[4096];
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(compile_timeout_seconds());
  bool timed_out = false;
  const int64_t poll_milliseconds = current_interrupt_flag() ? 10 : 1000;
  for (;;) {
    if (interrupt_requested()) {
      outcome.interrupted = true;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd readable{pipe_ends[0], POLLIN, 0};
    const int ready =
        poll(&readable, 1, static_cast<int>(std::min<int64_t>(left.count(), poll_milliseconds)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;
    ssize_t count = read(pipe_ends[0], buffer, sizeof buffer);
    if (count < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (count <= 0) break;  // EOF, or an error we can only stop reading on
    size_t room = kMaxMessageBytes - std::min(kMaxMessageBytes, outcome.output.size());
    outcome.output.append(buffer, std::min(room, static_cast<size_t>(count)));
  }
  close(pipe_ends[0]);

  int status = 0;
  pid_t waited;
  if (timed_out || outcome.interrupted) {
    waited = stop_process_group(child, &status);  // the driver and its cc1, as, ld
  } else {
    do {
      waited = waitpid(child, &status, 0);
    } while (waited < 0 && errno == EINTR);
  }
  track(child, false);
  if (outcome.interrupted) {
    outcome.failure = "interrupted";
  } else if (timed_out) {
    outcome.failure = "'" + argv[0] + "' took longer than " +
                      std::to_string(compile_timeout_seconds()) + " s (LAZYLUA_CC_TIMEOUT)";
  } else if (waited < 0) {
    // ECHILD: the host set SIGCHLD to SIG_IGN and the status is lost; we
    // cannot tell success from failure, so we call it a failure.
    outcome.failure = "cannot wait for '" + argv[0] + "': " + errno_text(errno);
  } else if (WIFSIGNALED(status)) {
    outcome.failure = "'" + argv[0] + "' was killed by signal " + std::to_string(WTERMSIG(status));
  } else if (WEXITSTATUS(status) != 0) {
    outcome.failure = "'" + argv[0] + "' exited with status " + std::to_string(WEXITSTATUS(status));
  } else {
    outcome.succeeded = true;
  }
  return outcome;
}

// The CPU part of the identity: objects built with -march=native use the build
// machine's instructions, and a cache directory may be shared (NFS home) with
// a machine that lacks them.
std::string cpu_description() {
  std::string cpuinfo;
  std::string ignored;
  if (!read_file("/proc/cpuinfo", &cpuinfo, &ignored)) return "unknown";
  std::string model = "unknown", features;
  std::istringstream lines(cpuinfo);
  for (std::string line; std::getline(lines, line);) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, line.find_first_of(" \t"));
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (name == "model" && line.rfind("model name", 0) == 0 && model == "unknown") model = value;
    if ((name == "flags" || name == "Features") && features.empty()) features = value;
    if (model != "unknown" && !features.empty()) break;
  }
  char hash[24];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(fnv1a_64(features.data(), features.size())));
  return model + " " + hash;
}

// Builds and loads a one-function object and calls the function: the only
// sure sign that compiler, assembler, linker and dlopen all work here.
bool check_builds(const Toolchain& tool, std::string* why_not) {
  static const char kProbe[] = "int lazylua_probe(int x) { return x + 1; }\n";
  std::string error;
  std::shared_ptr<Library> library = build_in_private_directory(tool, kProbe, &error);
  if (!library) {
    *why_not = "the C compiler '" + join(tool.command) + "' cannot build a shared object: " + error;
    return false;
  }
  auto probe = reinterpret_cast<int (*)(int)>(library->symbol("lazylua_probe"));
  if (!probe || probe(41) != 42) {
    *why_not = "a shared object built by '" + join(tool.command) + "' does not work";
    return false;
  }
  return true;
}

std::string verdict_path(const std::string& directory, const std::string& identity) {
  char name[40];
  std::snprintf(name, sizeof name, "/toolchain-%016llx.ok",
                static_cast<unsigned long long>(fnv1a_64(identity.data(), identity.size())));
  return directory + name;
}

}  // namespace

// --- Finding the toolchain ----------------------------------------------------

namespace {
std::atomic<const Toolchain*> identified{nullptr};  // identified_toolchain(), once known
std::atomic<const Toolchain*> checked{nullptr};     // toolchain(), once known
}  // namespace

namespace {

// The trial build (unless a remembered verdict said it works), remembering
// a pass.
void check_toolchain(Toolchain& tool) {
  if (tool.works || tool.identity.empty()) return;
  tool.works = check_builds(tool, &tool.why_not);
  std::string ignored;
  if (tool.works && !tool.verdict_file.empty()) {
    write_file_atomically(tool.verdict_file, tool.identity, &ignored);  // best effort
  }
}

}  // namespace

Toolchain find_toolchain(const std::string& command_line, const std::string& extra_flags,
                         const std::string& verdict_directory, bool check) {
  Toolchain tool;
  try {
    // A path with blanks in it is one word if it names an executable.
    if (access(command_line.c_str(), X_OK) == 0) {
      tool.command = {command_line};
    } else {
      tool.command = split_blanks(command_line);
    }
    if (tool.command.empty()) {
      tool.why_not = "LAZYLUA_CC names no C compiler";
      return tool;
    }
    tool.flags.assign(std::begin(kDefaultFlags), std::end(kDefaultFlags));
    for (std::string& flag : split_blanks(extra_flags)) tool.flags.push_back(std::move(flag));

    std::vector<std::string> version_command = tool.command;
    version_command.push_back("--version");
    ProcessOutcome version = run_process(version_command, "");
    std::string version_line = first_line(version.output);
    if (!version.succeeded || version_line.empty()) {
      tool.why_not = "the C compiler '" + command_line + "' does not work (" +
                     (version.failure.empty() ? "it printed no version" : version.failure) + ")";
      return tool;
    }
    tool.identity = join(tool.command) + ": " + version_line + " | cpu: " + cpu_description() +
                    " | " + join(tool.flags);

    // A passed check is remembered per identity, so later processes skip the
    // ~25 ms trial build. A failed one is not: the user may fix the compiler.
    std::string remembered, ignored;
    if (!verdict_directory.empty()) {
      tool.verdict_file = verdict_path(verdict_directory, tool.identity);
      if (read_file(tool.verdict_file, &remembered, &ignored) && remembered == tool.identity) {
        tool.works = true;
        return tool;
      }
    }
    if (check) check_toolchain(tool);
  } catch (const std::exception& error) {  // only std::bad_alloc can get here
    tool.works = false;
    tool.why_not = std::string("cannot set up the C compiler: ") + error.what();
  }
  return tool;
}

const Toolchain* toolchain_if_identified(bool* is_checked) {
  if (const Toolchain* found = checked.load(std::memory_order_acquire)) {
    *is_checked = true;
    return found;
  }
  const Toolchain* found = identified.load(std::memory_order_acquire);
  *is_checked = found && found->works;  // a remembered verdict
  return found;
}

const Toolchain& identified_toolchain() {
  // Never destroyed: the compile thread may still be using it at exit.
  static const Toolchain* instance = [] {
    InterruptScope not_interruptible(nullptr);  // as in toolchain()
    const char* command = std::getenv("LAZYLUA_CC");
    const char* extra_flags = std::getenv("LAZYLUA_CFLAGS");
    DiskCache& cache = DiskCache::instance();
    auto* found = new Toolchain(find_toolchain(command && *command ? command : "cc",
                                               extra_flags ? extra_flags : "",
                                               cache.enabled() ? cache.directory() : "", false));
    identified.store(found, std::memory_order_release);
    return found;
  }();
  return *instance;
}

const Toolchain& toolchain() {
  static const Toolchain* instance = [] {
    // The verdict is kept for the whole process: an interrupt during the
    // first sync compile must not make it "no working compiler".
    InterruptScope not_interruptible(nullptr);
    auto* found = new Toolchain(identified_toolchain());
    check_toolchain(*found);
    checked.store(found, std::memory_order_release);
    return found;
  }();
  return *instance;
}

// --- The identity of this build -------------------------------------------------

namespace {

struct BuildIdSearch {
  uintptr_t address;  // of code in the object we look for
  std::string build_id;
  bool found_object = false;
};

// dl_iterate_phdr's callback: in the object whose loaded segments hold
// search->address, the NT_GNU_BUILD_ID note as hex.
int find_build_id(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<BuildIdSearch*>(data);
  bool holds_address = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD && search->address >= start &&
        search->address < start + segment.p_memsz) {
      holds_address = true;
    }
  }
  if (!holds_address) return 0;
  search->found_object = true;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    const char* note = reinterpret_cast<const char*>(info->dlpi_addr + segment.p_vaddr);
    const char* end = note + segment.p_memsz;
    while (note + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) header;
      std::memcpy(&header, note, sizeof header);
      const char* name = note + sizeof header;
      const char* description = name + ((header.n_namesz + 3) & ~3u);
      const char* next = description + ((header.n_descsz + 3) & ~3u);
      if (next > end) break;
      if (header.n_type == NT_GNU_BUILD_ID && header.n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0 && header.n_descsz > 0) {
        static const char kHex[] = "0123456789abcdef";
        for (size_t k = 0; k < header.n_descsz; k++) {
          const auto byte = static_cast<unsigned char>(description[k]);
          search->build_id += kHex[byte >> 4];
          search->build_id += kHex[byte & 15];
        }
        return 1;
      }
      note = next;
    }
  }
  return 1;
}

}  // namespace

const std::string& lazylua_build_identity() {
  static const std::string* identity = [] {
    BuildIdSearch search{reinterpret_cast<uintptr_t>(&lazylua_build_identity), "", false};
    dl_iterate_phdr(find_build_id, &search);
    if (!search.build_id.empty()) return new std::string("build-id:" + search.build_id);
    Dl_info where{};
    struct stat info;
    if (dladdr(reinterpret_cast<void*>(&lazylua_build_identity), &where) && where.dli_fname &&
        stat(where.dli_fname, &info) == 0) {
      return new std::string(fmt::format("file:{}:{}:{}:{}.{}", where.dli_fname, info.st_size,
                                         info.st_ino, info.st_mtim.tv_sec, info.st_mtim.tv_nsec));
    }
    return new std::string(fmt::format("process:{}:{:08x}", getpid(), std::random_device{}()));
  }();
  return *identity;
}

// --- Loading --------------------------------------------------------------------

Library::~Library() {
  if (handle_) dlclose(handle_);
}

void* Library::symbol(const char* name) const noexcept {
  return dlsym(handle_, name);
}

std::shared_ptr<Library> load(const std::string& so_path, std::string* error) {
  try {
    void* handle = dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* message = dlerror();
      *error = message ? message : "dlopen failed on " + so_path;
      return nullptr;
    }
    try {
      return std::make_shared<Library>(handle, so_path);
    } catch (...) {
      dlclose(handle);
      throw;
    }
  } catch (const std::exception& exception) {
    *error = exception.what();
    return nullptr;
  }
}

// --- Building -------------------------------------------------------------------

namespace {

// Below this many kernels per part, a part's common text (~0.2 s of CPU
// for the includes and kernel math) costs more than its share of the
// kernels saves: a kernel costs ~25 ms at -O2 (resnet18's 36 took 0.9 s).
constexpr size_t kMinimumKernelsPerPart = 8;

}  // namespace

int compiler_debug_level() {
  static const int level = [] {
    const char* text = std::getenv("LAZYLUA_DEBUG");
    return text ? std::atoi(text) : 0;
  }();
  return level;
}

bool run_compiler(const Toolchain& tool, const std::vector<std::string>& arguments,
                  const std::string& stdin_path, std::string* error) {
  std::vector<std::string> argv = tool.command;
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  // LAZYLUA_DEBUG=3 shows the generated C (native_executor.cpp) and how
  // it is compiled, so a user can rerun the command by hand.
  if (compiler_debug_level() >= 3) {
    std::string line = "[lazylua] compile:";
    for (const std::string& word : argv) line += " " + word;
    std::fprintf(stderr, "%s < %s\n", line.c_str(),
                 stdin_path.empty() ? "/dev/null" : stdin_path.c_str());
  }
  ProcessOutcome outcome = run_process(argv, stdin_path);
  if (outcome.succeeded) return true;
  *error = outcome.failure;
  if (!outcome.output.empty()) *error += ":\n" + outcome.output;
  return false;
}

namespace {

// One run of the compiler: `source_path` to a shared object, or with
// object_only to an object file for a later link.
bool compile_one(const Toolchain& tool, const std::string& source_path,
                 const std::string& output_path, bool object_only,
                 const std::string& include_header, std::string* error) {
  std::vector<std::string> arguments = tool.flags;
  if (object_only) arguments.push_back("-c");
  if (!include_header.empty()) {
    arguments.insert(arguments.end(), {"-Werror=invalid-pch", "-include", include_header});
  }
  // "-x c -": the source comes on stdin, so its file name does not end up
  // in the object (GCC records it in the symbol table).
  arguments.insert(arguments.end(), {"-x", "c", "-", "-o", output_path});
  if (!object_only) arguments.push_back("-lm");
  return run_compiler(tool, arguments, source_path, error);
}

// The parts of a split source: each compiled to an object at once (part 0
// on this thread, the others on threads that carry this thread's interrupt
// flag, so an interrupt stops every compiler), then linked into output_path.
// The part files sit next to source_path and output_path (temporaries,
// removed here whatever happens).
bool compile_parts(const Toolchain& tool, const std::vector<std::string>& parts,
                   const std::string& source_path, const std::string& output_path,
                   const std::string& include_header, std::string* error) {
  const size_t count = parts.size();
  std::vector<std::string> sources(count), objects(count), errors(count);
  std::vector<char> compiled(count, 0);
  for (size_t k = 0; k < count; k++) {
    sources[k] = fmt::format("{}.part{}.c", source_path, k);
    objects[k] = fmt::format("{}.part{}.o", output_path, k);
  }
  auto remove_parts = [&] {
    for (size_t k = 0; k < count; k++) {
      unlink(sources[k].c_str());
      unlink(objects[k].c_str());
    }
  };
  bool written = true;
  for (size_t k = 0; k < count && written; k++) {
    written = write_new_file(sources[k], parts[k], error);
  }
  if (!written) {
    remove_parts();
    return false;
  }
  const InterruptFlag* flag = current_interrupt_flag();
  auto compile_part = [&](size_t k) noexcept {
    try {
      InterruptScope scope(flag);
      compiled[k] = compile_one(tool, sources[k], objects[k], true, include_header, &errors[k]);
    } catch (const std::exception& exception) {
      errors[k] = exception.what();
    }
  };
  std::vector<std::thread> helpers;
  try {
    for (size_t k = 1; k < count; k++) helpers.emplace_back(compile_part, k);
  } catch (const std::system_error&) {  // no thread: the rest compile here, one by one
    for (size_t k = helpers.size() + 1; k < count; k++) compile_part(k);
  }
  compile_part(0);
  for (std::thread& helper : helpers) helper.join();
  for (size_t k = 0; k < count; k++) {
    if (!compiled[k]) {
      *error = errors[k];
      remove_parts();
      return false;
    }
  }
  std::vector<std::string> arguments = tool.flags;
  arguments.insert(arguments.end(), objects.begin(), objects.end());
  arguments.insert(arguments.end(), {"-o", output_path, "-lm"});
  const bool linked = run_compiler(tool, arguments, "", error);
  remove_parts();
  return linked;
}

}  // namespace

namespace {

// Where each kernel's text starts in a generated source.
std::vector<size_t> kernel_starts(const std::string& source) {
  const std::string_view mark(kSourcePartMark);
  std::vector<size_t> starts;
  for (size_t at = source.find(mark); at != std::string::npos;
       at = source.find(mark, at + mark.size())) {
    starts.push_back(at);
  }
  return starts;
}

size_t part_count(size_t kernels, int parallelism) {
  return std::max<size_t>(
      1, std::min<size_t>(std::max(parallelism, 1), kernels / kMinimumKernelsPerPart));
}

}  // namespace

size_t split_source_part_count(const std::string& source, int parallelism) {
  return part_count(kernel_starts(source).size(), parallelism);
}

std::vector<std::string> split_source(const std::string& source, int parallelism) {
  const std::vector<size_t> starts = kernel_starts(source);
  const size_t wanted = part_count(starts.size(), parallelism);
  if (wanted <= 1) return {source};
  const std::string common = source.substr(0, starts[0]);
  const size_t kernel_bytes = source.size() - starts[0];
  std::vector<std::string> parts;
  size_t begin = starts[0];
  for (size_t p = 0; p < wanted && begin < source.size(); p++) {
    size_t end = source.size();
    if (p + 1 < wanted) {
      // The first kernel that starts past this part's share of the bytes.
      const size_t target = std::max(starts[0] + kernel_bytes * (p + 1) / wanted, begin + 1);
      const auto next = std::lower_bound(starts.begin(), starts.end(), target);
      if (next != starts.end()) end = *next;
    }
    parts.push_back(common + source.substr(begin, end - begin));
    begin = end;
  }
  return parts;
}

bool compile_shared_object(const Toolchain& tool, const std::string& source_path,
                           const std::string& output_path, std::string* error,
                           const std::string& include_header) {
  try {
    std::string source, ignored;
    std::vector<std::string> parts;
    if (read_file(source_path, &source, &ignored)) parts = split_source(source, thread_count());
    if (parts.size() > 1) {
      return compile_parts(tool, parts, source_path, output_path, include_header, error);
    }
    return compile_one(tool, source_path, output_path, false, include_header, error);
  } catch (const std::exception& exception) {
    *error = exception.what();
    return false;
  }
}

namespace {

// Private build directories that a killed lazylua left behind (ours, an
// hour old): removed on the first private build of a process.
void remove_stale_private_directories(const std::string& parent) {
  DIR* listing = opendir(parent.c_str());
  if (!listing) return;
  const time_t now = time(nullptr);
  while (const dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (name.size() != 14 || name.compare(0, 8, "lazylua-") != 0) continue;
    const std::string path = parent + "/" + name;
    struct stat info;
    if (lstat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != geteuid() ||
        now - info.st_mtime < 3600) {
      continue;
    }
    for (const char* file : {"/graph.c", "/graph.so"}) unlink((path + file).c_str());
    rmdir(path.c_str());
  }
  closedir(listing);
}

}  // namespace

std::shared_ptr<Library> build_in_private_directory(const Toolchain& tool,
                                                    const std::string& source, std::string* error) {
  try {
    const char* temporary = std::getenv("TMPDIR");
    const std::string parent = temporary && *temporary ? temporary : "/tmp";
    static std::once_flag cleaned;
    std::call_once(cleaned, [&] { remove_stale_private_directories(parent); });
    std::string pattern = parent + "/lazylua-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      *error = "cannot create a temporary directory " + pattern + ": " + errno_text(errno);
      return nullptr;
    }
    std::string source_file = pattern + "/graph.c";
    std::string object = pattern + "/graph.so";
    std::shared_ptr<Library> library;
    if (write_new_file(source_file, source, error) &&
        compile_shared_object(tool, source_file, object, error)) {
      library = load(object, error);
    }
    // The mapping outlives the file, so everything goes right away.
    unlink(source_file.c_str());
    unlink(object.c_str());
    rmdir(pattern.c_str());
    return library;
  } catch (const std::exception& exception) {
    *error = exception.what();
    return nullptr;
  }
}

// --- Compilers that outlive us -------------------------------------------------

bool start_detached(const std::vector<std::string>& argv, std::string* error) {
  std::vector<char*> arguments;
  for (const std::string& word : argv) arguments.push_back(const_cast<char*>(word.c_str()));
  arguments.push_back(nullptr);
  posix_spawnattr_t attributes;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_init(&attributes);
  posix_spawn_file_actions_init(&actions);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int signal_number : {SIGINT, SIGPIPE, SIGHUP, SIGTERM, SIGQUIT, SIGCHLD}) {
    sigaddset(&defaults, signal_number);
  }
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // A pipe the host holds open (a make jobserver, a test harness's) must not
  // stay open for as long as the compiler runs.
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
  pid_t child = 0;
  const int failure =
      posix_spawn(&child, arguments[0], &actions, &attributes, arguments.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (failure != 0) {
    *error = "cannot start " + argv[0] + ": " + errno_text(failure);
    return false;
  }
  return true;
}

// --- File helpers ---------------------------------------------------------------

uint64_t fnv1a_64(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string unique_temp_path(const std::string& final_path) {
  // pid alone is not enough: a dead process's leftover may carry our pid, and
  // several threads build at once. A per-process random nonce and a counter.
  static const uint32_t nonce = std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  size_t slash = final_path.rfind('/');
  std::string directory = slash == std::string::npos ? "" : final_path.substr(0, slash + 1);
  std::string name = slash == std::string::npos ? final_path : final_path.substr(slash + 1);
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".%ld-%08x-%llu.tmp", static_cast<long>(getpid()), nonce,
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return directory + "." + name + suffix;
}

bool is_temp_name(const std::string& name) {
  return !name.empty() && name[0] == '.' && name.find(".tmp") != std::string::npos;
}

bool read_file(const std::string& path, std::string* bytes, std::string* error, bool* missing,
               size_t max_bytes) {
  if (missing) *missing = false;
  // Not through a symlink, and without blocking on a FIFO: whatever sits
  // in a cache directory must be a regular file of a sane size.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (missing) *missing = errno == ENOENT;
    *error = "cannot open " + path + ": " + errno_text(errno);
    return false;
  }
  bytes->clear();
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    *error = path + " is not a regular file";
    close(fd);
    return false;
  }
  if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    *error = path + " is larger than " + std::to_string(max_bytes) + " bytes";
    close(fd);
    return false;
  }
  if (info.st_size > 0) bytes->reserve(static_cast<size_t>(info.st_size));
  char buffer[65536];
  for (;;) {
    ssize_t count = read(fd, buffer, sizeof buffer);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) {
      *error = "cannot read " + path + ": " + errno_text(errno);
      close(fd);
      return false;
    }
    if (count == 0) break;
    bytes->append(buffer, static_cast<size_t>(count));
    if (bytes->size() > max_bytes) {  // a file that grows while read
      *error = path + " is larger than " + std::to_string(max_bytes) + " bytes";
      close(fd);
      return false;
    }
  }
  close(fd);
  return true;
}

bool write_new_file(const std::string& path, const std::string& bytes, std::string* error) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = "cannot create " + path + ": " + errno_text(errno);
    return false;
  }
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t count = write(fd, bytes.data() + written, bytes.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      *error = "cannot write " + path + ": " + errno_text(count < 0 ? errno : ENOSPC);
      close(fd);
      unlink(path.c_str());
      return false;
    }
    written += static_cast<size_t>(count);
  }
  if (close(fd) != 0) {  // NFS reports some write errors only here
    *error = "cannot write " + path + ": " + errno_text(errno);
    unlink(path.c_str());
    return false;
  }
  return true;
}

bool write_file_atomically(const std::string& path, const std::string& bytes, std::string* error) {
  std::string temporary = unique_temp_path(path);
  if (!write_new_file(temporary, bytes, error)) return false;
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    *error = "cannot rename " + temporary + " to " + path + ": " + errno_text(errno);
    unlink(temporary.c_str());
    return false;
  }
  return true;
}

std::string errno_text(int error_number) {
  char buffer[256];
  // GNU strerror_r returns the message (maybe not in buffer); XSI returns int.
  auto result = strerror_r(error_number, buffer, sizeof buffer);
  if constexpr (std::is_same_v<decltype(result), char*>) {
    return result;
  } else {
    return result == 0 ? buffer : "error " + std::to_string(error_number);
  }
}

}  // namespace lazylua::compiler
