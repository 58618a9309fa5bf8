// toolchain.h - the system C compiler: turns generated C into a shared object
// and loads it with dlopen (docs/architecture.md §5, stage 6).
//
// Example:
//   const Toolchain& cc = toolchain();
//   if (!cc.works) { say_once(cc.why_not); run_on_reference_kernels(); }
//   std::string error;
//   auto library = build_in_private_directory(cc, "int add(int a, int b) { return a + b; }",
//                                             &error);
//   auto add = reinterpret_cast<int (*)(int, int)>(library->symbol("add"));
//
// Nothing here throws: failures come back as a null result plus a message.
// Most callers want DiskCache (disk_cache.h), which builds through this file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lazylua::compiler {

// The C compiler and the flags every generated object is built with.
struct Toolchain {
  std::vector<std::string> command;  // argv prefix, e.g. {"cc"} or {"ccache", "gcc"}
  std::vector<std::string> flags;    // e.g. {"-O2", "-march=native", "-fPIC", "-shared", ...}
  // "<command>: <first line of --version> | cpu: <model, feature hash> | <flags>".
  // Part of every disk cache key: a different compiler, version, CPU (the flags
  // say -march=native) or flag set never reuses an object.
  std::string identity;
  bool works = false;   // it ran, and built and loaded a trivial shared object
  std::string why_not;  // when !works: what failed, in words for the user
  // Where a passed check is remembered ("" = nowhere), read before the trial
  // build: a compile that succeeded elsewhere may write it too (disk_cache.cpp).
  std::string verdict_file;
};

// The process's toolchain: LAZYLUA_CC (default "cc") with the default flags
// plus LAZYLUA_CFLAGS. Found on first use and then fixed for the process.
// The first use runs `cc --version` (a few ms); the build-and-load check runs
// only when no earlier process left a verdict for this identity in the disk
// cache directory, so a process whose graphs all hit the disk cache compiles
// nothing. Thread-safe; never throws.
const Toolchain& toolchain();

// toolchain() without its trial build: the command, flags and identity
// after one `cc --version` (identity "" and why_not set if that fails);
// works only if a remembered verdict says so. Enough to name and load disk
// cache entries, whose objects are checked when loaded: a disk hit never
// waits for the trial build. Thread-safe; never throws.
const Toolchain& identified_toolchain();

// For code at exit, which must not wait for toolchain()'s `cc --version` or
// its trial build: the toolchain as far as it is known. nullptr until its
// identity is; *checked says whether `works` is final (the trial build, or
// a remembered verdict, has run). Unchecked, works is false.
const Toolchain* toolchain_if_identified(bool* checked);

// The identity of the lazylua code that is running, part of every disk cache
// entry's name and record, so that a lazylua with other passes or codegen
// never runs a plan another build stored: "build-id:<hex>", the GNU build-id
// note of the ELF object holding this code (the lazylua executable,
// liblazylua.so, or a host that links lazylua statically), found through
// dl_iterate_phdr. The linker computes it from the object's contents, so any
// change to lazylua's code changes it (CMakeLists.txt asks for it, and most
// distributions' linkers add it anyway). Without the note: the object's path,
// size, inode and modification time, or, if even those are unknown, a value
// new in each process (nothing is shared, nothing stale is run). Found once.
const std::string& lazylua_build_identity();

// What toolchain() does, for an explicit compiler. command_line is split on
// blanks (like make's CC) unless it names an executable file as a whole.
// verdict_directory: where a passed check is remembered ("" = always check).
// check false: no trial build (works is true only from a remembered verdict).
Toolchain find_toolchain(const std::string& command_line, const std::string& extra_flags,
                         const std::string& verdict_directory, bool check = true);

// A loaded shared object. dlclose runs when the last reference goes, so keep
// the Library alive while any function pointer from it may still be called.
class Library {
 public:
  // Takes ownership of a dlopen handle; path is for messages only.
  Library(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  // The address of an exported symbol, or nullptr if there is none.
  void* symbol(const char* name) const noexcept;
  // The file it was loaded from (it may have been renamed or removed since).
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  std::string path_;
};

// dlopen(so_path) with RTLD_NOW, so a missing symbol fails here rather than
// at the first call. nullptr + *error (dlerror's text) on failure.
std::shared_ptr<Library> load(const std::string& so_path, std::string* error);

// Compiles the C file source_path into the shared object output_path with
// toolchain `tool`. The compiler runs via posix_spawn (no shell: paths may hold
// blanks) in its own process group (Ctrl-C at the terminal does not reach it),
// reads the source on stdin, so the object's bytes do not depend on the file's
// name and two builds of one source are identical. On failure returns false
// and *error holds the compiler's output (its first ~2 KB) or why it did not
// run; output_path may then hold a partial file: callers write to private
// temporary names only. It does not look at tool.works (the check that sets
// works builds through here); callers do.
// A source that split_source cuts into several parts is compiled as that
// many objects at once (a thread waits on each compiler, carrying the
// caller's interrupt flag), then linked: on two cores a large graph builds
// in about half the time, and each function's code is the same as from
// one file (the same flags; nothing is inlined across kernels).
// On a thread whose interrupt flag (tensor/interrupt.h) gets set, the
// compiler's process group is stopped within ~10 ms and this fails with the
// error "interrupted"; the callers below then remove their files as after
// any other failure.
// include_header (a path, or ""): each compiler gets `-include` it, and
// -Werror=invalid-pch, so that a precompiled header beside it (.gch) that GCC
// finds but cannot use fails the compile rather than being parsed as text
// (precompiled_header.h, whose callers then compile the whole text).
bool compile_shared_object(const Toolchain& tool, const std::string& source_path,
                           const std::string& output_path, std::string* error,
                           const std::string& include_header = "");

// Runs tool.command followed by `arguments` (which hold the flags), stdin
// from stdin_path ("" = /dev/null), as compile_shared_object runs each
// compiler (bounded, interruptible, shown at LAZYLUA_DEBUG=3). False +
// *error (the failure and the compiler's first ~2 KB of output) on failure.
bool run_compiler(const Toolchain& tool, const std::vector<std::string>& arguments,
                  const std::string& stdin_path, std::string* error);

// Generated sources put this line before each kernel's functions; the text
// before the first one (includes, kernel math) is what every kernel needs.
// compile_shared_object cuts a large source there into parts that compile
// in parallel (a kernel uses nothing another kernel defines).
inline constexpr const char* kSourcePartMark = "\n/* lazylua: kernel */\n";

// How compile_shared_object would cut `source` for `parallelism` compilers:
// each part is the common text plus a run of whole kernels, split by bytes;
// one part (the source unchanged) when there are too few kernels for the
// common text's cost (~0.2 s of CPU per compiler) to pay off.
std::vector<std::string> split_source(const std::string& source, int parallelism);
// How many parts split_source(source, parallelism) makes, without making them.
size_t split_source_part_count(const std::string& source, int parallelism);

// Seconds a compiler may run before it is killed (and the graph runs
// interpreted): LAZYLUA_CC_TIMEOUT, default 60. Detached ones too.
int compile_timeout_seconds();

// LAZYLUA_DEBUG's level (0 when unset), read once: 1 says why a build was
// slow or failed, 3 shows every compiler command.
int compiler_debug_level();

// Makes sure the compilers this process runs (compile_shared_object) are
// killed at exit, by an atexit handler registered now if it is not yet:
// handlers registered after this call run before the kill (atexit runs
// them in reverse), so they may still hand a running build off
// (native_executor.cpp). Compiles register it anyway. Thread-safe.
void kill_compilers_at_exit();

// Starts argv (argv[0] a path) as a process that outlives us: its own
// session (no terminal signal reaches it), no parent-death signal, default
// signal handling, stdin/stdout/stderr on /dev/null and no other descriptor
// of ours; not waited for. False + *error if it could not be started.
bool start_detached(const std::vector<std::string>& argv, std::string* error);

// Builds and loads `source` in a fresh private directory under $TMPDIR (or
// /tmp) and removes the files right after dlopen: for when there is no cache
// directory to build in.
std::shared_ptr<Library> build_in_private_directory(const Toolchain& tool,
                                                    const std::string& source, std::string* error);

// --- File helpers shared with disk_cache.cpp ---------------------------------

// 64-bit FNV-1a: the checksum of cached objects and the identity hash.
uint64_t fnv1a_64(const void* data, size_t size);

// A name next to final_path ("<dir>/.<name>.<pid>-<nonce>-<n>.tmp") that no
// other process or thread uses: the step before an atomic rename.
std::string unique_temp_path(const std::string& final_path);
// True if `name` (no directory) is one unique_temp_path made.
bool is_temp_name(const std::string& name);

// Reads a whole regular file into *bytes; false + *error (with errno text)
// on failure, and *missing set when the file does not exist. A symlink, a
// FIFO or device, or a file over max_bytes is a failure (never a hang).
constexpr size_t kMaxReadBytes = size_t{256} << 20;
bool read_file(const std::string& path, std::string* bytes, std::string* error,
               bool* missing = nullptr, size_t max_bytes = kMaxReadBytes);
// Creates `path` exclusively (O_EXCL) and writes `bytes` to it.
bool write_new_file(const std::string& path, const std::string& bytes, std::string* error);
// Writes `bytes` to a unique temporary file and renames it onto `path`, so a
// reader sees the old file or the whole new one, never a mix. No fsync: after
// a power loss a cache entry may be empty, which the checksum then catches.
bool write_file_atomically(const std::string& path, const std::string& bytes, std::string* error);

// strerror for errno values, thread-safe.
std::string errno_text(int error_number);

}  // namespace lazylua::compiler
