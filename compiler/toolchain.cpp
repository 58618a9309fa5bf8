// toolchain.cpp - running the system C compiler and loading what it builds.
#include "compiler/toolchain.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <type_traits>

#include "compiler/disk_cache.h"

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
// rounding), and the eager kernels (ISO C++) do not: the same graph gave
// other bits once its native code was ready. kernel_math.h asks for its
// FMAs explicitly.
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
  bool succeeded = false;  // ran and exited with status 0
  std::string output;      // its stdout and stderr, first kMaxMessageBytes
  std::string failure;     // when it did not start or did not exit 0
};

// Runs argv with stdin from stdin_path ("" = /dev/null) and stdout + stderr
// into a pipe we drain (so a chatty compiler never blocks on a full pipe).
// The pipe is close-on-exec in this process, so children that other threads
// spawn meanwhile do not hold its write end open and delay our EOF.
ProcessOutcome run_process(const std::vector<std::string>& argv, const std::string& stdin_path) {
  ProcessOutcome outcome;
  int pipe_ends[2];
  if (pipe2(pipe_ends, O_CLOEXEC) != 0) {
    outcome.failure = "cannot create a pipe: " + errno_text(errno);
    return outcome;
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attributes);
  const char* input = stdin_path.empty() ? "/dev/null" : stdin_path.c_str();
  posix_spawn_file_actions_addopen(&actions, 0, input, O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], 2);
  // Own process group: a Ctrl-C meant for the interpreter must not kill a
  // build half-way. A clean signal mask and default SIGPIPE: the host may
  // block or ignore signals, and the compiler should not inherit that.
  sigset_t no_signals, default_signals;
  sigemptyset(&no_signals);
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setsigmask(&attributes, &no_signals);
  posix_spawnattr_setsigdefault(&attributes, &default_signals);

  std::vector<char*> arguments;
  for (const std::string& word : argv) arguments.push_back(const_cast<char*>(word.c_str()));
  arguments.push_back(nullptr);
  pid_t child = -1;
  // A bare name is looked up in PATH, like a shell would.
  bool search_path = argv[0].find('/') == std::string::npos;
  int spawn_error =
      search_path
          ? posix_spawnp(&child, arguments[0], &actions, &attributes, arguments.data(), environ)
          : posix_spawn(&child, arguments[0], &actions, &attributes, arguments.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(pipe_ends[1]);
  if (spawn_error != 0) {
    close(pipe_ends[0]);
    outcome.failure = "cannot run '" + argv[0] + "': " + errno_text(spawn_error);
    return outcome;
  }

  char buffer[4096];
  for (;;) {
    ssize_t count = read(pipe_ends[0], buffer, sizeof buffer);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) break;  // EOF, or an error we can only stop reading on
    size_t room = kMaxMessageBytes - std::min(kMaxMessageBytes, outcome.output.size());
    outcome.output.append(buffer, std::min(room, static_cast<size_t>(count)));
  }
  close(pipe_ends[0]);

  int status = 0;
  pid_t waited;
  do {
    waited = waitpid(child, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited < 0) {
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

Toolchain find_toolchain(const std::string& command_line, const std::string& extra_flags,
                         const std::string& verdict_directory) {
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
    std::string verdict_file;
    if (!verdict_directory.empty()) {
      verdict_file = verdict_path(verdict_directory, tool.identity);
      if (read_file(verdict_file, &remembered, &ignored) && remembered == tool.identity) {
        tool.works = true;
        return tool;
      }
    }
    tool.works = check_builds(tool, &tool.why_not);
    if (tool.works && !verdict_file.empty()) {
      write_file_atomically(verdict_file, tool.identity, &ignored);  // best effort
    }
  } catch (const std::exception& error) {  // only std::bad_alloc can get here
    tool.works = false;
    tool.why_not = std::string("cannot set up the C compiler: ") + error.what();
  }
  return tool;
}

const Toolchain& toolchain() {
  // Never destroyed: the compile thread may still be using it at exit.
  static const Toolchain* instance = [] {
    const char* command = std::getenv("LAZYLUA_CC");
    const char* extra_flags = std::getenv("LAZYLUA_CFLAGS");
    DiskCache& cache = DiskCache::instance();
    return new Toolchain(find_toolchain(command && *command ? command : "cc",
                                        extra_flags ? extra_flags : "",
                                        cache.enabled() ? cache.directory() : ""));
  }();
  return *instance;
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

bool compile_shared_object(const Toolchain& tool, const std::string& source_path,
                           const std::string& output_path, std::string* error) {
  try {
    std::vector<std::string> argv = tool.command;
    argv.insert(argv.end(), tool.flags.begin(), tool.flags.end());
    // "-x c -": the source comes on stdin, so its file name does not end up
    // in the object (GCC records it in the symbol table).
    for (const char* word : {"-x", "c", "-", "-o"}) argv.push_back(word);
    argv.push_back(output_path);
    argv.push_back("-lm");
    // LAZYLUA_DEBUG=3 shows the generated C (native_executor.cpp) and how
    // it is compiled, so a user can rerun the command by hand.
    static const int debug_level = [] {
      const char* level = std::getenv("LAZYLUA_DEBUG");
      return level ? std::atoi(level) : 0;
    }();
    if (debug_level >= 3) {
      std::string line = "[lazylua] compile:";
      for (const std::string& word : argv) line += " " + word;
      std::fprintf(stderr, "%s < %s\n", line.c_str(), source_path.c_str());
    }
    ProcessOutcome outcome = run_process(argv, source_path);
    if (outcome.succeeded) return true;
    *error = outcome.failure;
    if (!outcome.output.empty()) *error += ":\n" + outcome.output;
    return false;
  } catch (const std::exception& exception) {
    *error = exception.what();
    return false;
  }
}

std::shared_ptr<Library> build_and_load(const std::string& source, const std::string& so_path,
                                        std::string* error) {
  try {
    const Toolchain& tool = toolchain();
    if (!tool.works) {
      *error = tool.why_not;
      return nullptr;
    }
    std::string object = unique_temp_path(so_path);
    std::string source_file = object + ".c";
    if (!write_new_file(source_file, source, error)) return nullptr;
    bool compiled = compile_shared_object(tool, source_file, object, error);
    unlink(source_file.c_str());
    std::shared_ptr<Library> library = compiled ? load(object, error) : nullptr;
    // Loaded from the temporary name before the rename: the mapping is the
    // inode we built, whatever happens to so_path afterwards.
    if (!library || rename(object.c_str(), so_path.c_str()) != 0) unlink(object.c_str());
    return library;
  } catch (const std::exception& exception) {
    *error = exception.what();
    return nullptr;
  }
}

std::shared_ptr<Library> build_in_private_directory(const Toolchain& tool,
                                                    const std::string& source, std::string* error) {
  try {
    const char* temporary = std::getenv("TMPDIR");
    std::string pattern =
        std::string(temporary && *temporary ? temporary : "/tmp") + "/lazylua-XXXXXX";
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
