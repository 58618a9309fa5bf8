// blas.cpp - OpenBLAS through dlopen: the core chosen before its constructor
// runs, the few entry points lazylua calls, and what was loaded.
//
// Why dlopen and not re-exec: OpenBLAS reads OPENBLAS_CORETYPE once, when it
// is loaded. Linked as a DT_NEEDED library its constructor runs before any
// of our code, and the only fix would be to set the variable and re-exec the
// program, which a host program or `lua5.4` loading lazylua.so does not
// allow. Loaded on first use, its constructor runs when we say.
#include "blas.h"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <optional>
#include <vector>

#include "error.h"
#include "profiler.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace lazylua::blas {
namespace {

// The Debian package's soname first; the development link as a fallback.
// LAZYLUA_BLAS (a file name or path) replaces both: another OpenBLAS build.
const char* const kLibraryNames[] = {"libopenblas.so.0", "libopenblas.so"};
const char kLibraryVariable[] = "LAZYLUA_BLAS";
const char kCoreVariable[] = "OPENBLAS_CORETYPE";

using SgemmFunction = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint,
                               blasint, float, const float*, blasint, const float*, blasint, float,
                               float*, blasint);
using DgemmFunction = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint,
                               blasint, double, const double*, blasint, const double*, blasint,
                               double, double*, blasint);
using SetThreadsFunction = void (*)(int);
using GetIntFunction = int (*)();
using GetTextFunction = char* (*)();

struct Library {
  std::string error;  // empty when loaded
  SgemmFunction sgemm = nullptr;
  DgemmFunction dgemm = nullptr;
  // Optional: other BLAS builds behind the same soname may lack them.
  SetThreadsFunction set_num_threads = nullptr;
  GetIntFunction get_num_threads = nullptr;
  GetTextFunction get_corename = nullptr;
  GetTextFunction get_config = nullptr;
  std::string core_source = "openblas";
};

bool same_name(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// dlopen of the first name that works; RTLD_NOLOAD finds a copy already in
// the process without loading one. *error gets dlerror's text on failure.
void* open_library(int mode, std::string* error) {
  std::vector<const char*> names(std::begin(kLibraryNames), std::end(kLibraryNames));
  if (const char* chosen = std::getenv(kLibraryVariable); chosen && *chosen) names = {chosen};
  for (const char* name : names) {
    if (void* handle = dlopen(name, mode)) return handle;
    if (const char* message = dlerror()) {
      if (error->empty()) *error = message;
    }
  }
  return nullptr;
}

// Loads OpenBLAS with OPENBLAS_CORETYPE set to our choice unless the user
// set one, then restores the environment, so os.getenv and child processes
// see only what the user set. Called early (see load() in blas.h): no other
// thread of ours reads the environment meanwhile.
Library open_openblas() {
  Library library;
  std::string ignored;
  void* handle = open_library(RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, &ignored);
  const bool already_loaded = handle != nullptr;
  const char* wanted = nullptr;
  const char* user_value = std::getenv(kCoreVariable);
  const std::optional<std::string> saved =
      user_value ? std::optional<std::string>(user_value) : std::nullopt;
  if (!already_loaded) {
    if (!user_value || !*user_value) {
      wanted = preferred_core();
      if (wanted) setenv(kCoreVariable, wanted, 1);
    }
    std::string error;
    handle = open_library(RTLD_NOW | RTLD_LOCAL, &error);
    if (wanted) {
      if (saved) {
        setenv(kCoreVariable, saved->c_str(), 1);
      } else {
        unsetenv(kCoreVariable);
      }
    }
    if (!handle) {
      const char* chosen = std::getenv(kLibraryVariable);
      library.error = "cannot load OpenBLAS (" + error + "); " +
                      (chosen && *chosen ? "LAZYLUA_BLAS names that file"
                                         : "install Debian's libopenblas0 package");
      return library;
    }
  }
  library.sgemm = reinterpret_cast<SgemmFunction>(dlsym(handle, "cblas_sgemm"));
  library.dgemm = reinterpret_cast<DgemmFunction>(dlsym(handle, "cblas_dgemm"));
  if (!library.sgemm || !library.dgemm) {
    library.error = "the loaded libopenblas has no cblas_sgemm/cblas_dgemm";
    return library;
  }
  library.set_num_threads =
      reinterpret_cast<SetThreadsFunction>(dlsym(handle, "openblas_set_num_threads"));
  library.get_num_threads =
      reinterpret_cast<GetIntFunction>(dlsym(handle, "openblas_get_num_threads"));
  library.get_corename = reinterpret_cast<GetTextFunction>(dlsym(handle, "openblas_get_corename"));
  library.get_config = reinterpret_cast<GetTextFunction>(dlsym(handle, "openblas_get_config"));
  // Products are split on lazylua's pool, one single-threaded call per
  // thread: OpenBLAS's threads spin on sched_yield while waiting and would
  // starve the pool on small machines (kernels/matmul.cpp).
  if (library.set_num_threads) library.set_num_threads(1);

  // Who chose the core that runs: OpenBLAS ignores an OPENBLAS_CORETYPE it
  // does not know, and falls back when the OS lacks AVX state support.
  const std::string running = library.get_corename ? library.get_corename() : "";
  if (wanted && same_name(running, wanted)) {
    library.core_source = "lazylua";
  } else if (saved && !saved->empty() && same_name(running, *saved)) {
    library.core_source = kCoreVariable;
  }
  return library;
}

const Library& library() {
  // Never destroyed: pool threads may run a product during static destruction.
  static const Library* instance = new Library(open_openblas());
  return *instance;
}

const Library& loaded_library(const char* what) {
  const Library& loaded = library();
  if (!loaded.error.empty()) fail("{}: {}", what, loaded.error);
  return loaded;
}

CBLAS_TRANSPOSE transpose_flag(bool transpose) {
  return transpose ? CblasTrans : CblasNoTrans;
}

#if defined(__x86_64__) || defined(__i386__)
bool has_avx512_core() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
#endif

}  // namespace

void load() noexcept {
  try {
    library();
  } catch (const std::exception&) {  // std::bad_alloc: require() tries again and reports
  }
}

void require(const char* what) {
  loaded_library(what);
}

void name_product_span(profiler::Span& span, const char* name, int64_t m, int64_t n, int64_t k,
                       int64_t element_size) {
  if (!span.on()) return;
  const std::string& label = profiler::current_label();
  span.set_name(fmt::format("{} {}x{}x{}{}{}", name, m, n, k, label.empty() ? "" : " ", label));
  span.set_work((m * k + k * n + m * n) * element_size, 2 * m * n * k);
}

// One product through cblas_?gemm, in a profiler span named by its shape and
// the Lua line of the op (profiler::Label), with its work.
template <typename T, typename Gemm>
void gemm(Gemm routine, const char* name, bool transpose_a, bool transpose_b, int m, int n, int k,
          T alpha, const T* a, int lda, const T* b, int ldb, T beta, T* c, int ldc) {
  profiler::Span span("blas");
  name_product_span(span, name, m, n, k, sizeof(T));
  routine(CblasRowMajor, transpose_flag(transpose_a), transpose_flag(transpose_b), m, n, k, alpha,
          a, lda, b, ldb, beta, c, ldc);
}

void sgemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a,
           int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  gemm(loaded_library("matmul").sgemm, "sgemm", transpose_a, transpose_b, m, n, k, alpha, a, lda, b,
       ldb, beta, c, ldc);
}

void dgemm(bool transpose_a, bool transpose_b, int m, int n, int k, double alpha, const double* a,
           int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  gemm(loaded_library("matmul").dgemm, "dgemm", transpose_a, transpose_b, m, n, k, alpha, a, lda, b,
       ldb, beta, c, ldc);
}

void set_threads(int n) {
  const Library& loaded = loaded_library("BLAS threads");
  if (loaded.set_num_threads) loaded.set_num_threads(std::max(1, n));
}

int threads() {
  const Library& loaded = loaded_library("BLAS threads");
  return loaded.get_num_threads ? loaded.get_num_threads() : 1;
}

Info info() {
  const Library& loaded = library();
  Info result;
  result.loaded = loaded.error.empty();
  result.error = loaded.error;
  if (!result.loaded) return result;
  result.config = loaded.get_config ? loaded.get_config() : "";
  // The config starts "OpenBLAS 0.3.21 ...": the first two words name it.
  const size_t first_blank = result.config.find(' ');
  const size_t second_blank = first_blank == std::string::npos
                                  ? std::string::npos
                                  : result.config.find(' ', first_blank + 1);
  result.name = result.config.empty() ? "OpenBLAS" : result.config.substr(0, second_blank);
  result.core = loaded.get_corename ? loaded.get_corename() : "unknown";
  result.core_source = loaded.core_source;
  result.threads = loaded.get_num_threads ? loaded.get_num_threads() : 1;
  return result;
}

const char* preferred_core() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // Measured (sgemm GFLOP/s, 1 and 2 OpenBLAS threads, 1024^3 and the MLP
  // products 128x784x256, 128x256x256 and their transposed backward ones):
  // on an AMD Zen 5 VM (AVX-512 with BF16) SkylakeX ran 1.6-1.9x Haswell
  // (1024^3: ~245 vs ~130 at 1 thread, ~480 vs ~260 at 2); Cooperlake was
  // the same as SkylakeX within noise (its extra kernels are bf16 ones), and
  // Zen 2-5% slower than Haswell. On an AVX-512 Xeon VM OpenBLAS's own pick
  // (Prescott) ran 44 GFLOP/s, SkylakeX 225.
  if (has_avx512_core()) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  if (__builtin_cpu_supports("avx")) return "Sandybridge";
#endif
  return nullptr;
}

std::string cpu_model() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned int highest = __get_cpuid_max(0x80000000u, nullptr);
  if (highest >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned int leaf = 0; leaf < 3; leaf++) {
      unsigned int registers[4];
      __get_cpuid(0x80000002u + leaf, &registers[0], &registers[1], &registers[2], &registers[3]);
      std::memcpy(brand + 16 * leaf, registers, sizeof registers);
    }
    std::string model(brand);
    const size_t first = model.find_first_not_of(' ');
    const size_t last = model.find_last_not_of(' ');
    if (first != std::string::npos) return model.substr(first, last - first + 1);
  }
#endif
  return "unknown";
}

const char* cpu_vector_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (has_avx512_core()) return "avx512";
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2")) return "avx2";
  if (__builtin_cpu_supports("avx")) return "avx";
  if (__builtin_cpu_supports("sse4.2")) return "sse4.2";
  return "sse2";
#else
  return "unknown";
#endif
}

}  // namespace lazylua::blas
